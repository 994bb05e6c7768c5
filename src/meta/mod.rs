//! The meta ([`Meta`]): the forensic tables an instrumented module carries, what each
//! function id and call-site id stands for, and where the profiler's state lies in its
//! memory.
//!
//! The instrumenter writes them, as JSON, into the module's `wasmprof` custom section, so
//! any host that runs the module (the embedded wasmtime, the JS runtime) can turn a dump of
//! the profiler's memory into a self-contained profile without the original build.

use serde::{Deserialize, Serialize};

use crate::layout::Layout;
use crate::symbols::Symbol;

mod allocations;
pub mod binary;
mod sites;

pub use allocations::{AllocKind, Allocations, Allocator};
pub use sites::SiteMeta;

/// Name of the custom section that holds [`Meta`].
pub const SECTION: &str = "wasmprof";
/// Name under which the instrumented module exports the profiler's memory.
pub const MEMORY_EXPORT: &str = "__wasmprof_memory";
/// Name under which an instrumented module whose call sites count in globals exports the
/// function that stores them into the profiler's memory: a host calls it before it reads
/// the memory.
pub const FLUSH_EXPORT: &str = "__wasmprof_flush";
/// Name under which the instrumented module exports the global holding the current
/// context-tree node (after a trap: the innermost open activation).
pub const CUR_EXPORT: &str = "__wasmprof_cur";
/// Name under which the module that holds the profiler's state exports the instruction
/// counter (with the instructions metric): its value when the run ended closes the
/// activations still open.
pub const INSTRUCTIONS_EXPORT: &str = "__wasmprof_instructions";
/// Import module of the clock the instrumented module reads at entries and exits.
pub const CLOCK_MODULE: &str = STATE_MODULE;
/// Import name of the clock: `() -> i64`, monotonic nanoseconds.
pub const CLOCK_NAME: &str = "now";
/// wasi-threads' import: `thread-spawn(start_arg: i32) -> i32` (the new thread's id, or
/// a negative error), under the module `wasi`.
pub const THREAD_SPAWN: (&str, &str) = ("wasi", "thread-spawn");
/// wasi-threads' entry point of every new thread: `wasi_thread_start(tid: i32, arg: i32)`.
pub const THREAD_START: &str = "wasi_thread_start";

/// Name of the custom section that says, for the stack sampler, what each stretch of the
/// instrumented module's code is: little-endian `u32` pairs `(offset, what)`, sorted by
/// offset (the offset in the module's bytes where the stretch starts), `what` the index of
/// a line in [`Meta::line_tables`], [`NO_LINE`] for the program's code without one, or
/// [`PROBE_CODE`] for code the instrumenter added.
pub const ADDRESSES_SECTION: &str = "wasmprof.addresses";
/// What [`ADDRESSES_SECTION`] says of the probes' code.
pub const PROBE_CODE: u32 = u32::MAX - 1;

/// Name of the custom section that maps each function index of the instrumented module
/// back to its function id: one little-endian u32 per index, [`NO_FUNCTION`] for the
/// profiler's own functions. A host's backtrace (a trap's) names instrumented indices.
pub const FRAMES_SECTION: &str = "wasmprof.frames";
/// The function id of the profiler's own functions in [`FRAMES_SECTION`].
pub const NO_FUNCTION: u32 = u32::MAX;
/// Version of the [`Meta`] format and of the memory layout.
pub const VERSION: u32 = 13;
/// Import module of everything an instrumented module takes from outside: the clock, and
/// with [`StateLocation::StateModule`] the state module's exports.
pub const STATE_MODULE: &str = "wasmprof";
/// Name of the custom section that holds the state module, with
/// [`StateLocation::StateModule`].
pub const STATE_SECTION: &str = "wasmprof.state";

/// Name of the custom section in which a module instrumented for the JS hosts carries the
/// same program instrumented with [`StateLocation::StateModule`] (without its DWARF): the
/// JS runtime runs it where the host allows a module one memory (node 20's V8), the module
/// itself everywhere else ([`Meta::one_memory_variant`]).
pub const ONE_MEMORY_SECTION: &str = "wasmprof.one-memory";

/// Where the profiler keeps its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StateLocation {
    /// In a memory the probes add to the module (`instrument::probes::add`).
    #[default]
    OwnMemory,
    /// In the module of [`STATE_SECTION`], which the instrumented module imports its probes,
    /// memory and globals from (`instrument::probes::import_state_module`).
    StateModule,
}

impl StateLocation {
    /// Every state location.
    pub const ALL: [StateLocation; 2] = [StateLocation::OwnMemory, StateLocation::StateModule];

    /// Its name, as `--state` takes it.
    pub fn name(self) -> &'static str {
        match self {
            StateLocation::OwnMemory => "own-memory",
            StateLocation::StateModule => "state-module",
        }
    }
}

/// How the host samples a module of the sampled time metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sampler {
    /// The host interrupts the program's threads and walks their stacks: each sample is
    /// where the code was, the probes' own code recognised by its address
    /// ([`ADDRESSES_SECTION`] maps it). The embedded wasmtime on Linux.
    Stacks,
    /// A sampler beside the program reads which context node the probes say runs (the
    /// sample word in the profiler's shared memory). Hosts without a stack sampler.
    #[default]
    Word,
    /// V8's own sampler (node's inspector), which the JS runtime starts: each sample is
    /// the stack of functions that ran, not where inside them, so the probes' code is
    /// inside their samples.
    V8,
}

impl Sampler {
    /// Its name, as `--sampler` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Sampler::Stacks => "stacks",
            Sampler::Word => "word",
            Sampler::V8 => "v8",
        }
    }
}

/// What the instrumented module measures besides exact calls and arcs. What each one
/// measures, in what unit, and what its probes record is in one table, [`Metric::facts`];
/// the formats and hosts read it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Counts and arcs at function entry alone.
    Calls,
    /// Sampled wall time: the probes publish which context runs, a sampler beside the
    /// program credits time to it.
    #[default]
    Time,
    /// Wall time from the clock the probes read at every entry and exit.
    ExactTime,
    /// Executed wasm instructions, counted per straight-line segment.
    Instructions,
}

/// What a metric's costs are measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// No cost: the calls metric's exact counts are all there is.
    Calls,
    /// Wall time, in nanoseconds.
    Nanoseconds,
    /// Executed wasm instructions.
    Instructions,
}

impl Unit {
    /// The unit's name for people: `nanoseconds`, `instructions`, `calls`.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Calls => "calls",
            Unit::Nanoseconds => "nanoseconds",
            Unit::Instructions => "instructions",
        }
    }
}

/// What the probes of a metric record besides each call and its arc (which every metric
/// counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Probes {
    /// Exit probes at every exit, and the calling-context tree with a cost per node, which
    /// the metric's cost needs (the sampled time metric's samples need none: it keeps the
    /// tree only when asked, `crate::instrument::Options::keeps_contexts`).
    pub tree: bool,
    /// A clock read (a host call) at every entry and exit.
    pub clock: bool,
    /// The instruction counter, which the exit probes read, and its reading at the end.
    pub counter: bool,
}

/// One metric's facts (see [`Metric::facts`]).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MetricFacts {
    /// Its name, as `--metric` and `WASMPROF_METRIC` take it.
    pub name: &'static str,
    /// What its costs are measured in.
    pub unit: Unit,
    /// What its cost is called in a report's words: `time`, `instructions` (`calls` for
    /// the calls metric).
    pub label: &'static str,
    /// The text report's share column: gprof's `%time`, `%instr` (`%calls` for the calls
    /// metric, whose share is of the calls).
    pub share: &'static str,
    /// Whether its cost is wall time.
    pub is_time: bool,
    /// Whether its times are estimates from samples (each with its sample count).
    pub sampled: bool,
    /// What its probes record.
    pub probes: Probes,
    /// What the flat profile's figures are, in the report's words.
    pub describes: &'static str,
}

/// Every metric's facts, in [`Metric`]'s order.
const FACTS: [MetricFacts; 4] = [
    MetricFacts {
        name: "calls",
        unit: Unit::Calls,
        label: "calls",
        share: "%calls",
        is_time: false,
        sampled: false,
        probes: Probes {
            tree: false,
            clock: false,
            counter: false,
        },
        describes: "calls only",
    },
    MetricFacts {
        name: "time",
        unit: Unit::Nanoseconds,
        label: "time",
        share: "%time",
        is_time: true,
        sampled: true,
        probes: Probes {
            tree: false,
            clock: false,
            counter: false,
        },
        describes: WALL_TIME,
    },
    MetricFacts {
        name: "exact-time",
        unit: Unit::Nanoseconds,
        label: "time",
        share: "%time",
        is_time: true,
        sampled: false,
        probes: Probes {
            tree: true,
            clock: true,
            counter: false,
        },
        describes: WALL_TIME,
    },
    MetricFacts {
        name: "instructions",
        unit: Unit::Instructions,
        label: "instructions",
        share: "%instr",
        is_time: false,
        sampled: false,
        probes: Probes {
            tree: true,
            clock: false,
            counter: true,
        },
        describes: "executed wasm instructions; self: the function alone; total: with its \
                    callees, once per outermost call",
    },
];

/// How the flat profile describes wall time.
const WALL_TIME: &str =
    "wall time; self: the function alone; total: with its callees, once per outermost call";

impl Metric {
    /// Every metric.
    pub const ALL: [Metric; 4] = [
        Metric::Calls,
        Metric::Time,
        Metric::ExactTime,
        Metric::Instructions,
    ];

    /// What the metric measures, in what unit, and what its probes record.
    pub fn facts(self) -> &'static MetricFacts {
        &FACTS[self as usize]
    }

    /// The metric's name, as `--metric` takes it.
    pub fn name(self) -> &'static str {
        self.facts().name
    }

    /// The metric of this name.
    pub fn from_name(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether each activation has a cost (time or instructions), kept in the context tree.
    pub fn has_cost(self) -> bool {
        self.facts().unit != Unit::Calls
    }

    /// Whether the cost is wall time (sampled or read at every entry and exit).
    pub fn is_time(self) -> bool {
        self.facts().is_time
    }
}

/// Everything a host needs to decode the profiler's memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    /// [`VERSION`] of the instrumenter that wrote this.
    pub version: u32,
    /// What the module measures.
    pub metric: Metric,
    /// Whether its probes keep the calling-context tree (exact calls per context); without
    /// it, calls are counted per function and per arc, and the sampled time metric's
    /// contexts are those its samples found.
    pub contexts: bool,
    /// Where the profiler's state is.
    #[serde(default)]
    pub state: StateLocation,
    /// Whether each import's thunk handles the host's own exceptions
    /// ([`crate::instrument::Options::host_exceptions`]).
    #[serde(default)]
    pub host_exceptions: bool,
    /// Whether the module carries its variant for hosts that allow one memory, in
    /// [`ONE_MEMORY_SECTION`] ([`crate::instrument::Options::one_memory_variant`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_memory_variant: bool,
    /// Whether the module keeps V8's inlining budget with functions nothing calls
    /// ([`crate::instrument::Options::inlining_budget`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inlining_budget: bool,
    /// How a host samples it, with the sampled time metric.
    #[serde(default)]
    pub sampler: Sampler,
    /// Whether the module was built without optimization
    /// ([`crate::instrument::Options::unoptimized`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unoptimized: bool,
    /// Where the state lies in the profiler's memory.
    pub layout: Layout,
    /// One entry per function id (= the function's index in the original module).
    pub functions: Vec<FunctionMeta>,
    /// Direct call sites: entry k is site id k + 1.
    #[serde(with = "sites::compact")]
    pub direct_sites: Vec<SiteMeta>,
    /// Indirect call sites: entry k is site id `INDIRECT_SITE | k`.
    #[serde(with = "sites::compact")]
    pub indirect_sites: Vec<SiteMeta>,
    /// The function id of each function index of the instrumented module (an import's
    /// thunk has the import's; the profiler's own functions [`NO_FUNCTION`]), read from
    /// [`FRAMES_SECTION`]; empty where the module did not come with it.
    #[serde(skip)]
    pub frames: Vec<u32>,
    /// The source lines the module's code is at: with the instructions metric (the state
    /// in the profiler's own memory), every counted straight-line segment's; with the stack
    /// sampler, those [`ADDRESSES_SECTION`] names.
    #[serde(default, skip_serializing_if = "LineTables::is_empty")]
    pub line_tables: LineTables,
    /// What the module records of the program's allocations.
    #[serde(default)]
    pub allocations: Allocations,
}

/// Where code is in the source, compactly (a module has tens of thousands of segments and
/// lines): numbers into the tables of lines, files and names.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LineTables {
    /// Each counted segment, by index: its function id, and `[line, instructions]` pairs
    /// (the line an index into `lines`, or [`NO_LINE`] for instructions the line program
    /// does not cover).
    pub segments: Vec<(u32, Vec<[u32; 2]>)>,
    /// Each line: its file (an index into `files`), its number, and the functions inlined
    /// there, innermost first, as `[name (an index into names), call line]`.
    pub lines: Vec<(u32, u32, Vec<[u32; 2]>)>,
    /// The source files.
    pub files: Vec<String>,
    /// The inlined functions' names.
    pub names: Vec<String>,
}

impl LineTables {
    /// Whether it has no line.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty() && self.lines.is_empty()
    }
}

/// The line index of instructions without a source line.
pub const NO_LINE: u32 = u32::MAX;

/// One function id. In JSON its symbol's fields are its own ([`FlatFunction`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "FlatFunction", into = "FlatFunction")]
pub struct FunctionMeta {
    /// Name and definition.
    pub symbol: Symbol,
    /// Whether the function is imported (its time is time spent in the host).
    pub import: bool,
}

/// A [`FunctionMeta`] as the meta's JSON has it, every field at one level: what
/// `#[serde(flatten)]` would write, read without buffering each entry first (a module has
/// thousands of functions and sites, and their reading is part of every run's start).
#[derive(Serialize, Deserialize)]
struct FlatFunction {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    inlinable: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    import: bool,
}

impl From<FlatFunction> for FunctionMeta {
    fn from(f: FlatFunction) -> FunctionMeta {
        let symbol = Symbol {
            name: f.name,
            file: f.file,
            line: f.line,
            inlinable: f.inlinable,
        };
        FunctionMeta {
            symbol,
            import: f.import,
        }
    }
}

impl From<FunctionMeta> for FlatFunction {
    fn from(f: FunctionMeta) -> FlatFunction {
        FlatFunction {
            name: f.symbol.name,
            file: f.symbol.file,
            line: f.symbol.line,
            inlinable: f.symbol.inlinable,
            import: f.import,
        }
    }
}

impl Meta {
    /// Whether the module's probes record the program's allocations.
    pub fn records_allocations(&self) -> bool {
        self.layout.live_slots > 0
    }

    /// Reads the meta from an instrumented module; `Ok(None)` if it has none.
    pub fn from_module(wasm: &[u8]) -> anyhow::Result<Option<Meta>> {
        let Some(data) = custom_section(wasm, SECTION)? else {
            return Ok(None);
        };
        let mut meta: Meta = match serde_json::from_slice(data) {
            Ok(meta) => meta,
            Err(e) => {
                /// The field every version of the meta starts with.
                #[derive(Deserialize)]
                struct Written {
                    version: u32,
                }
                return Err(match serde_json::from_slice::<Written>(data) {
                    Ok(Written { version }) if version != VERSION => OtherVersion(version).into(),
                    _ => e.into(),
                });
            }
        };
        meta.frames = frames(wasm)?;
        Ok(Some(meta))
    }

    /// The function ids of a backtrace's frames, given as function indices of the
    /// instrumented module, innermost first; the profiler's own frames are left out.
    pub fn frame_functions(&self, indices: impl IntoIterator<Item = u32>) -> Vec<u32> {
        indices
            .into_iter()
            .filter_map(|index| self.frames.get(index as usize).copied())
            .filter(|&f| f != NO_FUNCTION && (f as usize) < self.functions.len())
            .collect()
    }
}

/// A module instrumented by a build of cargo-wasmprof whose meta (of this [`VERSION`])
/// this build does not read.
#[derive(Debug, thiserror::Error)]
#[error(
    "instrumented by another version of cargo-wasmprof (its tables are of version {0}, \
     this one reads {VERSION}): instrument the original module again"
)]
pub struct OtherVersion(pub u32);

/// The table of [`FRAMES_SECTION`] in `wasm` (empty without one).
pub fn frames(wasm: &[u8]) -> anyhow::Result<Vec<u32>> {
    let data = custom_section(wasm, FRAMES_SECTION)?.unwrap_or_default();
    Ok(data
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// The contents of the first custom section called `name`.
pub fn custom_section<'a>(wasm: &'a [u8], name: &str) -> anyhow::Result<Option<&'a [u8]>> {
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        if let wasmparser::Payload::CustomSection(section) = payload? {
            if section.name() == name {
                return Ok(Some(section.data()));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facts_table_is_in_the_metrics_order() {
        for metric in Metric::ALL {
            let name = serde_json::to_value(metric).unwrap();
            assert_eq!(name, metric.name(), "{metric:?}");
            assert_eq!(Metric::from_name(metric.name()), Some(metric));
            // A metric whose probes measure a cost record it along the context tree.
            let measured = metric.facts().probes.clock || metric.facts().probes.counter;
            assert_eq!(measured, metric.facts().probes.tree);
        }
        for state in StateLocation::ALL {
            assert_eq!(serde_json::to_value(state).unwrap(), state.name());
        }
    }
}
