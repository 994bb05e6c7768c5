//! What a baseline compares in one profile: the whole run's cost (the program's stacks),
//! each benchmark's cost per iteration, each test's cost, and, where allocations were
//! recorded, the bytes each of those allocated.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::harness;
use crate::meta::Metric;
use crate::profile::Profile;

/// The name of the row of a profile's whole run.
const WHOLE_RUN: &str = "the whole run";
/// The name of the row of the bytes a profile's whole run allocated.
const ALLOCATED: &str = "bytes allocated in the whole run";

/// What a row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A profile's whole run.
    Run,
    /// A benchmark: the cost of one iteration of the routine its harness loop measured.
    Bench,
    /// A test: the test function with everything it calls.
    Test,
    /// The bytes a profile's whole run allocated, where allocations were recorded: exact,
    /// shown beside the metric's rows (`--fail-above` gates on those).
    Allocated,
    /// The bytes one iteration of a benchmark's routine allocated, with all it calls.
    #[serde(rename = "bench-bytes")]
    BenchBytes,
    /// The bytes a test allocated: the test function with all it calls.
    #[serde(rename = "test-bytes")]
    TestBytes,
}

impl Kind {
    /// The kind in words.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Run => "run",
            Kind::Bench => "bench",
            Kind::Test => "test",
            Kind::Allocated => "allocated",
            Kind::BenchBytes => "bench bytes",
            Kind::TestBytes => "test bytes",
        }
    }

    /// Whether the row's figures are bytes allocated (exact, shown, not gated on) rather
    /// than the metric's.
    pub(super) fn is_bytes(self) -> bool {
        self == Kind::Allocated || self.is_bytes_of_one()
    }

    /// Whether the row's figures are the bytes of one benchmark or test (beside its row of
    /// the metric).
    pub(super) fn is_bytes_of_one(self) -> bool {
        matches!(self, Kind::BenchBytes | Kind::TestBytes)
    }
}

/// A row's figure in one profile, and the whole cost it is a share of (a benchmark's
/// iterations together: what its samples stand for).
#[derive(Debug, Clone, Copy)]
pub(super) struct Figure {
    /// The figure.
    pub(super) value: f64,
    /// The whole cost it is a share of.
    pub(super) whole: f64,
}

/// Each benchmark's cost per iteration (named as its harness named it, else by its
/// routine), each test's inclusive cost and the whole run's cost (the program's stacks') in
/// `p` (a benchmark with a harness of its own has no loop to divide by: its binary's whole
/// run is its figure), by kind and name.
/// Where allocations were recorded, the bytes allocated too: in the whole run, per
/// iteration of each benchmark, by each test.
pub(super) fn figures(p: &Profile, metric: Metric) -> BTreeMap<(Kind, String), Figure> {
    let mut found = BTreeMap::new();
    found.insert(
        (Kind::Run, WHOLE_RUN.to_string()),
        alone(program_cost(p, metric) as f64),
    );
    if p.records_allocations() {
        let bytes = p.total_allocs().alloc_bytes as f64;
        found.insert((Kind::Allocated, ALLOCATED.to_string()), alone(bytes));
        byte_figures(p, &mut found);
    }
    for (name, iterations, per_iteration) in benchmark_figures(p, metric) {
        let figure = match per_iteration {
            Some(cost) => Figure {
                value: cost,
                whole: cost * iterations as f64,
            },
            None => alone(iterations as f64),
        };
        found.insert((Kind::Bench, name), figure);
    }
    for test in harness::test_functions(p) {
        let cost = match metric.has_cost() {
            true => test.cost.get(metric).1 as f64,
            false => test.calls as f64,
        };
        found.insert((Kind::Test, test.name.clone()), alone(cost));
    }
    found
}

/// Each benchmark of `p` by name, with its iterations and its cost per iteration in
/// `metric`: those its harness named (criterion's ids), or, where it named none, the routine
/// each harness loop measured.
fn benchmark_figures(p: &Profile, metric: Metric) -> Vec<(String, u64, Option<f64>)> {
    if !p.benchmarks.is_empty() {
        // A benchmark whose routine was inlined into its loop has no iterations to compare.
        let named = p.benchmarks.iter().filter(|b| b.iterations > 0);
        return named
            .map(|b| (b.id.clone(), b.iterations, b.per_iteration(metric)))
            .collect();
    }
    let routines = harness::measured_routines(p).into_iter();
    routines
        .map(|r| {
            (
                r.arc.callee.clone(),
                r.iterations(),
                r.per_iteration(metric),
            )
        })
        .collect()
}

/// The functions that ran under benchmark `name` in `p` (the one its harness named so, else
/// the routine of that name), with their calls and self cost per iteration, by name: `None`
/// where `p` has no such benchmark or it has no iterations.
pub(super) fn per_iteration_functions(
    p: &Profile,
    name: &str,
) -> Option<BTreeMap<String, (f64, f64)>> {
    let (iterations, functions) = match p.benchmarks.iter().find(|b| b.id == name) {
        Some(b) => (b.iterations, b.functions.clone()),
        None => {
            let routines = harness::measured_routines(p);
            let routine = routines.iter().find(|r| r.arc.callee == name)?;
            (
                routine.iterations(),
                routine.functions(p).into_values().collect(),
            )
        }
    };
    let n = (iterations > 0).then_some(iterations as f64)?;
    let per_iteration = functions
        .into_iter()
        .map(|f| (f.name, (f.calls as f64 / n, f.self_cost as f64 / n)));
    Some(per_iteration.collect())
}

/// The cost of the program's own stacks in `p` ([`harness::program_view`]): the harness's
/// own work left out, such as libtest formatting the time the run took, whose instructions
/// change with that time; 0 where none of the program's functions ran.
fn program_cost(p: &Profile, metric: Metric) -> u64 {
    if !harness::program_functions(p).contains(&true) {
        return 0;
    }
    let program = harness::program_view(p);
    let q = program.as_ref().unwrap_or(p);
    q.functions.iter().map(|f| f.own_weight(metric)).sum()
}

/// A figure that is its own whole.
fn alone(value: f64) -> Figure {
    Figure {
        value,
        whole: value,
    }
}

/// The bytes allocated per iteration of each benchmark's routine (its contexts under the
/// harness loop, with all they call, over the iterations) and by each test (with all it
/// calls, once per outermost activation), into `found`.
fn byte_figures(p: &Profile, found: &mut BTreeMap<(Kind, String), Figure>) {
    let per_iteration = |bytes: u64, iterations: u64| bytes as f64 / iterations.max(1) as f64;
    for b in &p.benchmarks {
        if let Some(bytes) = b.alloc_bytes {
            let figure = alone(per_iteration(bytes, b.iterations));
            found.insert((Kind::BenchBytes, b.id.clone()), figure);
        }
    }
    for routine in harness::measured_routines(p)
        .into_iter()
        .filter(|_| p.benchmarks.is_empty())
    {
        let figure = alone(per_iteration(routine.alloc_bytes(p), routine.iterations()));
        found.insert((Kind::BenchBytes, routine.arc.callee.clone()), figure);
    }
    let by_function = p.function_alloc_bytes();
    for test in harness::test_functions(p) {
        let bytes = by_function[test.id as usize] as f64;
        found.insert((Kind::TestBytes, test.name.clone()), alone(bytes));
    }
}

/// The relative noise, in percent, of a sampled figure of `ns` nanoseconds in `p`: about
/// 2/sqrt(n) for the n samples behind it.
pub(super) fn sampled_noise(p: &Profile, ns: f64) -> Option<f64> {
    let s = p.sampling.as_ref()?;
    if s.samples == 0 || s.sampled_ns == 0 {
        return Some(f64::INFINITY);
    }
    let samples = ns * s.samples as f64 / s.sampled_ns as f64;
    Some(200.0 / samples.max(1.0).sqrt())
}
