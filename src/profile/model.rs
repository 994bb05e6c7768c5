//! The profile's data model: functions, arcs, the calling-context tree and how each run
//! ended. Every report and output format is a view of a [`Profile`].

use serde::{Deserialize, Serialize};

use super::Sampling;
use crate::meta::{Metric, Unit};
use crate::symbols::SourcePos;

/// The `format` field of every profile file.
pub const FORMAT: &str = "wasmprof-profile";
/// Version of the profile file format.
pub const FORMAT_VERSION: u32 = 1;
/// The caller name of arcs that enter the module from the host.
pub const HOST: &str = "<host>";

/// A whole profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// What was profiled: the module (or, merged, the modules).
    pub modules: Vec<String>,
    /// Whether every activation ended (false after a trap or an exit from deep inside).
    pub complete: bool,
    /// How each module's run ended.
    pub runs: Vec<RunInfo>,
    /// What was measured besides calls: `time` (the `*_ns` fields, wall-clock
    /// nanoseconds), `instructions` (the `*_instructions` fields) or `calls` (neither).
    pub metric: Metric,
    /// Functions that were called at least once.
    pub functions: Vec<Function>,
    /// Caller -> callee arcs, with counts and times.
    pub arcs: Vec<Arc>,
    /// The calling-context tree: node 0 is the host, every other node one call path.
    pub contexts: Vec<Context>,
    /// The calling contexts are the stack sampler's, each with its time but no count of
    /// calls: the probes counted per function and per arc alone (`--contexts`: per context).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sampled_contexts: bool,
    /// Function entries that went to a per-function fold node because the context tree
    /// was full (their paths are lost; counts and times are not).
    pub folded_entries: u64,
    /// Arcs that could not be recorded because the arc table was full.
    pub arcs_dropped: u64,
    /// The probes' own cost, when it was subtracted from the times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation: Option<ProbeCost>,
    /// With the exact-time metric, why the probes' own cost is still in the times (it is
    /// subtracted otherwise, and `compensation` says how much).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncompensated: Option<String>,
    /// With the sampled time metric: how the times were sampled (they are estimates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
    /// Executed instructions per source line of each function (the instructions metric,
    /// with the profiler's state in a memory of its own): exact, from the runs of each
    /// straight-line segment and the lines of its instructions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<LineCost>,
    /// When this is a view of a profile (`--focus`, `--ignore`, `--by`): what it kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<super::View>,
    /// A threaded program's threads, each with its own profile, of which this one is the
    /// merge (empty for a program of one thread).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<super::Thread>,
    /// What the profile records of the program's allocations (each context's figures are
    /// in `contexts`); absent where the module said nothing of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocations: Option<super::Allocations>,
    /// The benchmarks a harness named as it ran them (criterion's ids), in the order they
    /// ran, each with its own iterations and their cost; empty where the host saw no names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub benchmarks: Vec<Benchmark>,
    /// A server's requests, route by route, where `serve` profiled one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<super::Requests>,
    /// The functions, by name, that an unoptimized build left of the standard library's
    /// small generic and `#[inline]` functions ([`crate::symbols::Symbol::inlinable`]):
    /// an optimized build inlines them, and the text report folds them into their callers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub helpers: Vec<String>,
}

/// One benchmark as its harness named it: the routine its measuring loop called, and what
/// that routine cost in this benchmark's iterations alone (a routine measured with several
/// inputs, as criterion's `bench_with_input`, is one benchmark per input).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Benchmark {
    /// The harness's name for it (criterion's `group/function/parameter`).
    pub id: String,
    /// The harness loop that ran it.
    pub harness: String,
    /// The routine the loop measured; empty where the loop called none (the routine was
    /// inlined into it), and so for `harness`.
    pub routine: String,
    /// The routine's calls from the loop during this benchmark: those the harness measured,
    /// where it said when it measured (`measured`), else all of them, its warm-up's too.
    pub iterations: u64,
    /// Whether `iterations` are those the harness measured alone (criterion's, from
    /// `Collecting` to `Analyzing`), its warm-up left out.
    #[serde(default)]
    pub measured: bool,
    /// The routine's self and inclusive cost in those calls.
    #[serde(flatten)]
    pub cost: Costs,
    /// With the sampled time metric: the samples that found the routine, or a function it
    /// called, running in those calls; its inclusive time estimates from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_samples: Option<u64>,
    /// With the word sampler: the samples in the benchmark's stretch of the run that found
    /// the probes running (and were left out of the times); beside `total_samples`, how
    /// short the routine's calls are against the probes' (`Benchmark::probe_share`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_samples: Option<u64>,
    /// The bytes the routine (with all it calls) allocated in those calls, where
    /// allocations were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc_bytes: Option<u64>,
    /// Each function that ran in those calls (the routine and all it calls), with its calls
    /// and its self cost there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<RoutineFunction>,
}

/// A function as it ran under a benchmark's routine: its calls there and its self cost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineFunction {
    /// The function's name.
    pub name: String,
    /// Its calls under the routine.
    pub calls: u64,
    /// Its self cost under the routine, in the profile's metric's unit (nanoseconds or
    /// instructions; 0 with the calls metric).
    pub self_cost: u64,
}

/// What the probes cost per call, as measured at start-up (see the `calibrate` module).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbeCost {
    /// Probe time that falls inside an activation's own window: added to the callee's self
    /// time by every call (ns).
    pub in_callee_ns: f64,
    /// Probe time that falls outside the callee's window: added to the caller's self time
    /// by every call it makes (ns).
    pub in_caller_ns: f64,
}

/// How a JS host's [`RunInfo::trap`] begins where no trap but a JS exception (an import's
/// error, thrown through the program and caught by nothing) ended the run.
pub const UNCAUGHT_JS_EXCEPTION: &str = "uncaught JS exception: ";

/// The clock the JS runtime names in a dump it saves under node: `process.hrtime`.
pub const NODE_CLOCK: &str = "hrtime";
/// The clock the JS runtime names in a dump it saves in a browser: `performance.now`, which
/// browsers coarsen.
pub const BROWSER_CLOCK: &str = "performance.now";

/// How one run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The module that ran.
    pub module: String,
    /// Its exit code.
    pub exit_code: i32,
    /// The trap message, if it trapped (or [`UNCAUGHT_JS_EXCEPTION`] and the exception's,
    /// if one ended it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trap: Option<String>,
    /// The activations open when the run ended, outermost first (empty after a clean run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_stack: Vec<String>,
    /// Wall time of the run.
    pub wall_ns: u64,
    /// The clock the module read (`tsc`, `instant`).
    #[serde(default)]
    pub clock: String,
    /// A threaded program's threads whose state the host could not collect (they were
    /// blocked in a host call when the program ended): their counts are missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads_lost: Vec<u32>,
    /// Where the profiler kept its state in the module that ran (a JS runtime chooses by
    /// what its host allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::meta::StateLocation>,
    /// The program was a component (run, tested or served): its probes reach no host
    /// function of the profiler's, so it takes only the metrics that need none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub component: bool,
}

impl RunInfo {
    /// Whether the run was under a JS host (node or a browser), by the clock it read.
    pub fn under_js(&self) -> bool {
        self.clock == NODE_CLOCK || self.clock == BROWSER_CLOCK
    }
}

/// One function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Function {
    /// Index in `functions`, which `contexts` refer to.
    pub id: u32,
    /// Demangled name, unique in the profile.
    pub name: String,
    /// Source file of the definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Line of the definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Imported: its time is time spent in the host.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub import: bool,
    /// Exact number of calls.
    pub calls: u64,
    /// Cost in the function itself, callees excluded (`self`), and with its callees,
    /// counted once per outermost activation (`total`).
    #[serde(flatten)]
    pub cost: Costs,
}

impl Function {
    /// Function `id`, called `calls` times, with no source, not an import, no costs.
    pub fn of_calls(id: u32, name: impl Into<String>, calls: u64) -> Function {
        Function {
            id,
            name: name.into(),
            file: None,
            line: None,
            import: false,
            calls,
            cost: Costs::default(),
        }
    }

    /// The function's own weight in `metric`: its self time or self instructions, or, for
    /// the calls metric, its calls.
    pub fn own_weight(&self, metric: Metric) -> u64 {
        match metric.facts().unit {
            Unit::Calls => self.calls,
            _ => self.cost.get(metric).0,
        }
    }
}

impl LineCost {
    /// The line's cost in `metric`'s unit: instructions, nanoseconds (0 without samples),
    /// or 0 for the calls metric.
    pub fn cost(&self, metric: Metric) -> u64 {
        match metric.facts().unit {
            Unit::Calls => 0,
            Unit::Nanoseconds => self.self_ns.unwrap_or(0),
            Unit::Instructions => self.instructions,
        }
    }
}

/// What one function cost on one source line: the instructions it executed there (the
/// instructions metric), or the time sampled there (the stack sampler).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineCost {
    /// The function's name (in `functions`).
    pub function: String,
    /// The source file; none for instructions the line program does not cover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The line (0 without a file).
    pub line: u32,
    /// Executed instructions of the function on that line (with the instructions metric).
    pub instructions: u64,
    /// With the stack sampler, the time sampled on that line, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_ns: Option<u64>,
    /// With the stack sampler, the samples that found that line running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// The functions inlined there, innermost first (none for the function's own code):
    /// the line is the innermost one's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inlined: Vec<crate::symbols::Inlined>,
}

/// Self and inclusive cost, in the profile's metric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Costs {
    /// Self time, in nanoseconds (0 unless the metric is time).
    pub self_ns: u64,
    /// Inclusive time, in nanoseconds (0 unless the metric is time).
    pub total_ns: u64,
    /// Self executed instructions (with the instructions metric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_instructions: Option<u64>,
    /// Inclusive executed instructions (with the instructions metric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_instructions: Option<u64>,
    /// With the sampled time metric: the samples that found this function (arc, context)
    /// itself running, which `self_ns` estimates from; its relative standard error is
    /// about 1/sqrt(n).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_samples: Option<u64>,
}

impl Costs {
    /// Costs of `self_` and `total` in `metric`'s unit (none for the calls metric), from
    /// `samples` samples when they are sampled.
    pub fn in_unit(metric: Metric, self_: u64, total: u64, samples: Option<u64>) -> Costs {
        let mut costs = Costs {
            self_samples: samples,
            ..Costs::default()
        };
        costs.set(metric, self_, total);
        costs
    }

    /// Costs of `self_` and `total` raw readings (clock ticks or instructions) of `metric`.
    pub(super) fn from_raw(metric: Metric, self_: u64, total: u64, ticks_per_ns: f64) -> Costs {
        let ns = |ticks: u64| (ticks as f64 / ticks_per_ns).round() as u64;
        match metric.facts().unit {
            Unit::Nanoseconds => Costs::in_unit(metric, ns(self_), ns(total), None),
            _ => Costs::in_unit(metric, self_, total, None),
        }
    }

    /// Sets the self and inclusive cost in `metric`'s unit.
    pub fn set(&mut self, metric: Metric, self_: u64, total: u64) {
        match metric.facts().unit {
            Unit::Calls => {}
            Unit::Nanoseconds => {
                self.self_ns = self_;
                self.total_ns = total;
            }
            Unit::Instructions => {
                self.self_instructions = Some(self_);
                self.total_instructions = Some(total);
            }
        }
    }

    /// Sets the inclusive cost in `metric`'s unit.
    pub fn set_total(&mut self, metric: Metric, total: u64) {
        match metric.facts().unit {
            Unit::Calls => {}
            Unit::Nanoseconds => self.total_ns = total,
            Unit::Instructions => self.total_instructions = Some(total),
        }
    }

    /// Adds `other` in.
    pub fn add(&mut self, other: &Costs) {
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.self_ns += other.self_ns;
        self.total_ns += other.total_ns;
        self.self_instructions = sum(self.self_instructions, other.self_instructions);
        self.total_instructions = sum(self.total_instructions, other.total_instructions);
        self.self_samples = sum(self.self_samples, other.self_samples);
    }

    /// (self, total) in `metric`'s unit: nanoseconds, instructions, or (0, 0) for calls.
    pub fn get(&self, metric: Metric) -> (u64, u64) {
        match metric.facts().unit {
            Unit::Calls => (0, 0),
            Unit::Nanoseconds => (self.self_ns, self.total_ns),
            Unit::Instructions => (
                self.self_instructions.unwrap_or(0),
                self.total_instructions.unwrap_or(0),
            ),
        }
    }
}

/// Calls from one function to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Arc {
    /// Name of the caller, or [`HOST`].
    pub caller: String,
    /// Name of the callee.
    pub callee: String,
    /// Exact number of calls.
    pub count: u64,
    /// The callee's self and inclusive cost in these calls (for a recursive arc, nested
    /// calls count again).
    #[serde(flatten)]
    pub cost: Costs,
    /// The call sites, with their counts, when known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<ArcSite>,
}

impl Arc {
    /// `count` calls from `caller` to `callee`, without costs or call sites.
    pub fn of_calls(caller: impl Into<String>, callee: impl Into<String>, count: u64) -> Arc {
        Arc {
            caller: caller.into(),
            callee: callee.into(),
            count,
            cost: Costs::default(),
            sites: Vec::new(),
        }
    }
}

/// One call site of an arc.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArcSite {
    /// Where the call is.
    #[serde(flatten)]
    pub pos: SourcePos,
    /// Calls made there.
    pub count: u64,
}

/// One node of the calling-context tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
    /// Index in `contexts`.
    pub id: u32,
    /// Parent node; `None` for the root (the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    /// Function id; `None` for the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<u32>,
    /// This node collects entries whose path was lost when the tree was full.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub folded: bool,
    /// Calls along this path.
    pub calls: u64,
    /// Self and inclusive cost along this path.
    #[serde(flatten)]
    pub cost: Costs,
    /// The allocations made and freed in this context itself, when they are recorded and
    /// there were any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc: Option<super::Allocs>,
}

impl Benchmark {
    /// With the word sampler: of the samples in the benchmark's stretch that found its
    /// routine (or what it called) or the probes running, the share that found the probes
    /// (0 to 1).
    pub fn probe_share(&self) -> Option<f64> {
        let (probes, routine) = (self.probe_samples?, self.total_samples?);
        (probes + routine > 0).then(|| probes as f64 / (probes + routine) as f64)
    }

    /// The routine's inclusive cost per iteration in `metric` (nanoseconds or
    /// instructions); `None` for the calls metric, or a benchmark of no iterations.
    pub fn per_iteration(&self, metric: Metric) -> Option<f64> {
        if !metric.has_cost() || self.iterations == 0 {
            return None;
        }
        Some(self.cost.get(metric).1 as f64 / self.iterations as f64)
    }
}

impl Profile {
    /// The function with this name.
    pub fn function_named(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// How this profile's program is asked for exact costs where its times are sampled:
    /// `--metric instructions`, which every host takes but a component's (run or served),
    /// whose exact figures are its calls alone; under a JS host, where `wasmprof-emcc` may
    /// have linked the program, its variable too, since the wrapper takes no flags.
    pub fn exact_costs_flag(&self) -> Option<&'static str> {
        let component = self.runs.iter().any(|r| r.component);
        let js = self.runs.iter().any(RunInfo::under_js);
        match (component, js) {
            (true, _) => None,
            (false, true) => Some(
                "--metric instructions (WASMPROF_METRIC=instructions where wasmprof-emcc links)",
            ),
            (false, false) => Some("--metric instructions"),
        }
    }

    /// Each function's index in `functions`, by name (names are unique in a profile).
    pub fn index_by_name(&self) -> rustc_hash::FxHashMap<&str, usize> {
        self.functions
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name.as_str(), i))
            .collect()
    }

    /// This profile with other tables (a view's functions, arcs, contexts and lines), the
    /// rest of it cloned; the tables it replaces are not copied.
    pub fn with_tables(
        &self,
        functions: Vec<Function>,
        arcs: Vec<Arc>,
        contexts: Vec<Context>,
        lines: Vec<LineCost>,
    ) -> Profile {
        // Every field named, so that a new one is not forgotten here.
        let Profile {
            format,
            version,
            modules,
            complete,
            runs,
            metric,
            functions: _,
            arcs: _,
            contexts: _,
            sampled_contexts,
            folded_entries,
            arcs_dropped,
            compensation,
            uncompensated,
            sampling,
            lines: _,
            view,
            threads,
            allocations,
            benchmarks,
            requests,
            helpers,
        } = self;
        Profile {
            format: format.clone(),
            version: *version,
            modules: modules.clone(),
            complete: *complete,
            runs: runs.clone(),
            metric: *metric,
            functions,
            arcs,
            contexts,
            sampled_contexts: *sampled_contexts,
            folded_entries: *folded_entries,
            arcs_dropped: *arcs_dropped,
            compensation: *compensation,
            uncompensated: uncompensated.clone(),
            sampling: *sampling,
            lines,
            view: view.clone(),
            threads: threads.clone(),
            allocations: allocations.clone(),
            benchmarks: benchmarks.clone(),
            requests: requests.clone(),
            helpers: helpers.clone(),
        }
    }

    /// The arc from `caller` to `callee`, by name.
    pub fn arc(&self, caller: &str, callee: &str) -> Option<&Arc> {
        self.arcs
            .iter()
            .find(|a| a.caller == caller && a.callee == callee)
    }
}
