//! The benchmarks a harness named as it ran them (criterion's ids), from the profiles of
//! one run at the moments the harness said a benchmark starts, or that its measured
//! iterations start or end (the marks a host took), and at its end: each benchmark's figures
//! are what its routine added in its measured iterations, or, where the harness did not say
//! when it measured, between the benchmark's start and the next benchmark's.

use std::collections::HashMap;

use super::{measured_routines, Routine};
use crate::meta::Metric;
use crate::profile::{Benchmark, Costs, Profile, RoutineFunction};

/// What a harness said of a benchmark when a host took a mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// The benchmark starts (criterion's `Benchmarking ID`, before its warm-up).
    Starts,
    /// Its measured iterations start (criterion's `Collecting ...`).
    Measures,
    /// Its measured iterations are over (criterion's `Analyzing`).
    Measured,
}

/// The benchmarks a harness named as it ran them, from the profiles of one run at the
/// moments it said something of one (`marks`, in order, with the harness's names) and at
/// its `end`. Each benchmark's figures are what the routine measured in its stretch of the
/// run added (the routine whose iterations cost the most then; a stretch where no routine
/// ran, as one inlined into its loop, is a benchmark of no iterations and no routine): its
/// measured iterations, from [`Moment::Measures`] to [`Moment::Measured`] (or the next
/// benchmark, or the end, where the run stopped before); else from its first mark to the
/// next benchmark's.
pub fn benchmarks(
    marks: impl IntoIterator<Item = anyhow::Result<(String, Moment, Profile)>>,
    end: &Profile,
) -> anyhow::Result<Vec<Benchmark>> {
    let mut said: Vec<(String, Moment)> = Vec::new();
    let mut tallies = Vec::new();
    for mark in marks {
        let (id, moment, p) = mark?;
        said.push((id, moment));
        tallies.push(Tally::of(&p));
    }
    tallies.push(Tally::of(end));
    let metric = end.metric;
    let mut found = Vec::new();
    let mut first = 0;
    while first < said.len() {
        let id = &said[first].0;
        let next = (first..said.len())
            .find(|&i| said[i].0 != *id)
            .unwrap_or(said.len());
        let at = |moment| (first..next).find(|&i| said[i].1 == moment);
        let measures = at(Moment::Measures);
        let from = measures.unwrap_or(first);
        let to = at(Moment::Measured).filter(|&i| i > from).unwrap_or(next);
        let stretch = Stretch {
            id: id.clone(),
            measured: measures.is_some(),
        };
        found.push(stretch.of(&tallies[from], &tallies[to], metric));
        first = next;
    }
    Ok(found)
}

/// A benchmark's stretch of the run.
struct Stretch {
    /// The harness's name for the benchmark.
    id: String,
    /// Whether it is the benchmark's measured iterations alone.
    measured: bool,
}

impl Stretch {
    /// The benchmark, from where its routines stood at its stretch's start (`before`) and
    /// end (`after`).
    fn of(self, before: &Tally, after: &Tally, metric: Metric) -> Benchmark {
        let grown = after.routines.iter().map(|(key, a)| {
            let b = before.routines.get(key).cloned().unwrap_or_default();
            (key, a.since(&b, metric))
        });
        let ((harness, routine), stretch) = grown
            .filter(|(_, t)| t.iterations > 0)
            .max_by_key(|(key, t)| (t.cost.get(metric).1, t.iterations, std::cmp::Reverse(*key)))
            .map(|(key, t)| (key.clone(), t))
            .unwrap_or_default();
        let mut functions: Vec<RoutineFunction> = stretch.functions.into_values().collect();
        functions.retain(|f| f.calls > 0 || f.self_cost > 0);
        functions.sort_by(|a, b| b.self_cost.cmp(&a.self_cost).then(a.name.cmp(&b.name)));
        Benchmark {
            id: self.id,
            harness,
            routine,
            iterations: stretch.iterations,
            measured: self.measured,
            cost: stretch.cost,
            total_samples: stretch.total_samples,
            probe_samples: added(after.probe_samples, before.probe_samples),
            alloc_bytes: stretch.alloc_bytes,
            functions,
        }
    }
}

/// Where each harness loop's routine stood at one moment of a run, by (loop, routine), and
/// how many samples had found the probes running by then (with the word sampler, which
/// counts them in the profiler's memory).
#[derive(Debug, Default)]
struct Tally {
    routines: HashMap<(String, String), RoutineTally>,
    probe_samples: Option<u64>,
}

/// What a routine had cost so far: its iterations, their cost, the bytes they allocated,
/// and each function's calls and self cost in them.
#[derive(Debug, Clone, Default)]
struct RoutineTally {
    iterations: u64,
    cost: Costs,
    total_samples: Option<u64>,
    alloc_bytes: Option<u64>,
    functions: HashMap<String, RoutineFunction>,
}

impl Tally {
    /// Where the routines of `p` stand.
    fn of(p: &Profile) -> Tally {
        let recorded = p.records_allocations();
        let routines = measured_routines(p).into_iter().map(|routine| {
            let under = routine.under(p);
            let tally = RoutineTally {
                iterations: routine.iterations(),
                cost: routine.arc.cost,
                total_samples: Routine::total_samples_in(p, &under),
                alloc_bytes: recorded.then(|| Routine::alloc_bytes_in(p, &under)),
                functions: Routine::functions_in(p, &under),
            };
            let key = (routine.harness.name.clone(), routine.arc.callee.clone());
            (key, tally)
        });
        Tally {
            routines: routines.collect(),
            probe_samples: p.sampling.as_ref().map(|s| s.in_probes),
        }
    }
}

impl RoutineTally {
    /// What the routine added since it stood at `earlier`, in `metric`.
    fn since(&self, earlier: &RoutineTally, metric: Metric) -> RoutineTally {
        let ((self_, total), (self_0, total_0)) = (self.cost.get(metric), earlier.cost.get(metric));
        let samples = added(self.cost.self_samples, earlier.cost.self_samples);
        RoutineTally {
            iterations: self.iterations.saturating_sub(earlier.iterations),
            cost: Costs::in_unit(
                metric,
                self_.saturating_sub(self_0),
                total.saturating_sub(total_0),
                samples,
            ),
            total_samples: added(self.total_samples, earlier.total_samples),
            alloc_bytes: added(self.alloc_bytes, earlier.alloc_bytes),
            functions: self
                .functions
                .iter()
                .map(|(name, f)| {
                    let before = earlier.functions.get(name).cloned().unwrap_or_default();
                    let grown = RoutineFunction {
                        name: name.clone(),
                        calls: f.calls.saturating_sub(before.calls),
                        self_cost: f.self_cost.saturating_sub(before.self_cost),
                    };
                    (name.clone(), grown)
                })
                .collect(),
        }
    }
}

/// What a count kept only with some metrics (`None` without) added from `then` to `now`.
fn added(now: Option<u64>, then: Option<u64>) -> Option<u64> {
    now.map(|n| n.saturating_sub(then.unwrap_or(0)))
}
