//! How the commands that run programs profile them: the instrumentation's flags
//! (`--metric`, `--max-contexts`, `--state`), the sampler's interval, the probes' cost, and
//! what is written and reported.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::requests::{ProfileRequest, ReportRequest};
use super::value_enums::{FormatArg, MetricArg, SamplerArg, StateArg};
use super::view::ViewArgs;
use crate::instrument::Options;

/// Options of the profile and its report, shared by the commands that run a program.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Profile options")]
pub struct ProfileArgs {
    /// Also write the merged profile of all binaries of the run to FILE.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The report's formats, comma-separated: text goes to the terminal, the others to
    /// files beside the profiles (see `cargo wasmprof report --help`).
    #[arg(
        long,
        value_name = "FORMAT",
        value_delimiter = ',',
        default_value = "text"
    )]
    pub format: Vec<FormatArg>,
    /// What the report shows.
    #[command(flatten)]
    pub view: ViewArgs,
    /// Write the profiles but no report.
    #[arg(long)]
    pub no_report: bool,
    /// With `--metric exact-time`: keep the times as measured, do not subtract the probes'
    /// own cost (which is measured at start-up otherwise).
    #[arg(long)]
    pub no_compensation: bool,
    /// With `--metric time`: sample every US microseconds (the word sampler: its first 20 ms
    /// ten times as often, at most every 5 us, so that a short run still gets samples). Each
    /// sample is credited with the time that passed since the one before [default: 1000
    /// with `--sampler stacks`, whose samples interrupt the program, 250 under node, 100
    /// with `word`]
    #[arg(
        long,
        value_name = "US",
        value_parser = clap::value_parser!(u64).range(10..=1_000_000)
    )]
    pub sample_interval: Option<u64>,
    /// What the instrumentation measures.
    #[command(flatten)]
    pub instrument: InstrumentFlags,
}

/// What the instrumented module measures.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Instrumentation options")]
pub struct InstrumentFlags {
    /// What to measure: `time` (wall time per function, calling context and source line,
    /// sampled from the program's stacks as perf samples, with exact calls and arcs per
    /// function from probes that only count: the fastest, about perf's accuracy),
    /// `exact-time` (a clock read at every entry and exit: every call timed, the probes'
    /// calibrated cost subtracted; slow where calls are dense), `instructions` (executed
    /// wasm instructions, exact per line: the same on every run and machine, for CI), or
    /// `calls` (exact calls and arcs alone).
    #[arg(long, value_name = "METRIC", default_value = "time")]
    pub metric: MetricArg,
    /// With `--metric time`: count calls per calling context too (each path of calls from
    /// the entry point), not only per function and per arc. The probes then keep the
    /// calling-context tree at every call and return: 1.64x on a naive fib, where calls per
    /// function cost 1.21x, and about 1.05x on loops.
    #[arg(long)]
    pub contexts: bool,
    /// Record the program's allocations in their calling contexts (brings `--contexts`
    /// with it): every call of the allocator entry points found by name (`malloc`,
    /// `calloc`, `realloc`, `free`, `aligned_alloc`, `posix_memalign`, Rust's
    /// `__rust_alloc`, `__rust_dealloc`, ...) and every `memory.grow`: allocations and
    /// bytes, frees matched to their allocations by address, bytes still held at the end,
    /// the peak, pages grown. About 4x on allocation-heavy code (a million small vectors:
    /// 4.3x), a few nanoseconds an allocator call.
    #[arg(long)]
    pub allocations: bool,
    /// The most calling contexts to keep (with `--contexts`, `--allocations`, or the
    /// metrics that keep them): the profiler's memory grows with the tree up to room for N
    /// (64 bytes each, 128 where allocations are recorded); past it, entries are folded per
    /// function (counts and times stay exact, their paths are lost, and the report says how
    /// many).
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::instrument::DEFAULT_MAX_CONTEXTS,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::layout::MAX_CONTEXTS))
    )]
    pub max_contexts: u32,
    /// Where the profiler keeps its state: `own-memory` (a memory of its own in the module:
    /// the fastest, for wasmtime and current browsers) or `state-module` (a small module
    /// carried inside the instrumented one, for hosts that allow one memory per module,
    /// such as node 20).
    #[arg(long, value_name = "WHERE", default_value = "own-memory")]
    pub state: StateArg,
    /// With `--metric time`, how the embedded wasmtime samples: `stacks` (on Linux it
    /// interrupts the program's threads and walks their stacks: time per function, calling
    /// context and line, each host call's time under its caller) or `word` (a sampler beside
    /// the program reads which calling context the probes say runs: any host; brings
    /// `--contexts` with it). JS hosts choose for themselves: V8's own sampler under node
    /// (`v8`, and in a page served with `Document-Policy: js-profiling`), the word sampler
    /// for threads, wasm-bindgen's tests and other pages.
    #[arg(long, value_name = "HOW", value_enum, default_value = DEFAULT_SAMPLER)]
    pub sampler: SamplerArg,
    /// With `--allocations`: the most allocations followed live at once: each is followed
    /// from its allocation to its free in a table of the profiler's, which starts with room
    /// for 768 and doubles as the program needs, up to N (48 bytes a slot with the table's
    /// copy and its log, a power of two of slots, three quarters of them used). Past it,
    /// allocations are still counted in their contexts, but not in the bytes held or the
    /// peak, and the report says how many.
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::layout::MAX_LIVE,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::layout::MAX_LIVE))
    )]
    pub max_live_allocations: u32,
}

/// The sampler of `--metric time` unless told: the machine's stacks where the embedded
/// host can walk them.
const DEFAULT_SAMPLER: &str = if cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)) {
    "stacks"
} else {
    "word"
};

impl InstrumentFlags {
    /// The instrumenter's options.
    pub fn to_options(&self) -> Options {
        Options {
            max_contexts: self.max_contexts,
            metric: self.metric.into(),
            contexts: self.contexts,
            state: self.state.into(),
            host_exceptions: false,
            sampler: self.sampler.into(),
            one_memory_variant: false,
            allocations: self.allocations,
            max_live_allocations: self.max_live_allocations,
            inlining_budget: false,
            entries: crate::instrument::EntryProbes::BySize,
            site_counters: Default::default(),
            unoptimized: false,
        }
    }
}

impl ProfileArgs {
    /// The request these flags make.
    pub fn to_request(&self) -> ProfileRequest {
        ProfileRequest {
            instrument: self.instrument.to_options(),
            sample_interval: self.sample_interval.map(Duration::from_micros),
            compensate: !self.no_compensation,
            report: ReportRequest {
                output: self.output.clone(),
                formats: self.format.iter().map(|&f| f.into()).collect(),
                show: !self.no_report,
                emit: self.view.to_emit_options(),
                filter: self.view.filter.to_filter(),
            },
        }
    }
}
