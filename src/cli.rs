//! Command-line interface: `cargo wasmprof <command>`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use crate::build::{BuildRequest, Mode};
use crate::format::annotate::Selection;
use crate::format::{CallGraph, EmitOptions, Format};
use crate::meta::Metric;
use crate::profile::{Filter, Grouping};
use crate::status::ColorChoice;

/// An instrumenting profiler for WebAssembly.
///
/// Builds your crate for wasm32 (wasip1 by default; Emscripten and wasm-bindgen crates with
/// --target), rewrites each test binary so that it records its own profile (exact call
/// counts, caller->callee arcs, self and inclusive costs, a calling-context tree), runs it
/// (in an embedded wasmtime, under node, or in a headless browser), and prints a
/// gprof-style report.
#[derive(Debug, Parser)]
#[command(
    name = "cargo wasmprof",
    bin_name = "cargo wasmprof",
    version,
    propagate_version = true
)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// How the commands talk. Each command takes these itself rather than as global flags, so
/// that `run FILE ARGS` hands every argument after FILE, `--quiet` too, to the program.
#[derive(Debug, Clone, Copy, Args)]
#[command(next_help_heading = "Output options")]
pub struct UiOptions {
    /// Coloring: auto, always, never (NO_COLOR is honoured in auto).
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    pub color: ColorChoice,
    /// Print no status lines, only the report and the program's own output.
    #[arg(short, long)]
    pub quiet: bool,
}

impl Command {
    /// The command's colors and status options.
    pub fn ui(&self) -> UiOptions {
        match self {
            Command::Test(args) | Command::Bench(args) => args.ui,
            Command::Run(args) => args.ui,
            Command::Instrument(args) => args.ui,
            Command::Report(args) => args.ui,
            Command::Diff(args) => args.ui,
            Command::Annotate(args) => args.ui,
            Command::Emcc(_) | Command::Emxx(_) => UiOptions {
                color: ColorChoice::Auto,
                quiet: false,
            },
        }
    }
}

impl Cli {
    /// Parses the arguments, whether we were called as `cargo wasmprof ...` (cargo passes
    /// `wasmprof` as the first argument) or as `cargo-wasmprof ...`.
    pub fn parse_args(args: impl IntoIterator<Item = OsString>) -> Cli {
        let mut args: Vec<OsString> = args.into_iter().collect();
        if args.get(1).is_some_and(|a| a == "wasmprof") {
            args.remove(1);
        }
        Cli::parse_from(args)
    }
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build the crate's tests for wasm32-wasip1 (or --target wasm32-unknown-emscripten),
    /// profile them, and report.
    ///
    /// Takes `cargo test`'s selection flags. NAME and everything after `--` go to the test
    /// harness (filters, --exact, --nocapture). A profile per test binary is
    /// written to the target directory's wasmprof/ folder; the report covers them all.
    Test(Box<TestArgs>),
    /// Build the crate's benchmarks for wasm32-wasip1 (or wasm32-unknown-emscripten),
    /// profile them, and report.
    ///
    /// Takes `cargo bench`'s selection flags; benches are built with the bench profile,
    /// names and DWARF kept. The harness gets `--bench`, then NAME and everything after
    /// `--`. A profile per bench binary goes to the target directory's wasmprof/ folder.
    /// The report adds the cost of one iteration of each routine that a harness's
    /// measuring loop ran (criterion's or libtest's `Bencher::iter`).
    Bench(Box<TestArgs>),
    /// Run a wasip1 command module in the embedded host, profiled (or as is); or a .js
    /// program that wasmprof-emcc linked, under node.
    Run(RunArgs),
    /// Write an instrumented copy of a module, for any host that gives it a clock.
    Instrument(InstrumentArgs),
    /// Print the report of a profile file again, or write it in another format.
    ///
    /// Formats: text (gprof-style, the default), json (the profile), pprof (go tool pprof,
    /// speedscope), callgrind (KCachegrind, callgrind_annotate), folded (flame graph tools),
    /// flamegraph (SVG), speedscope, firefox (the Firefox Profiler's processed format), html
    /// (one self-contained page).
    Report(ReportArgs),
    /// Print the source of functions with the instructions each line executed, exact.
    ///
    /// Needs a profile made with `--metric instructions` (in the embedded wasmtime): its
    /// per-line costs come from every straight-line segment's run count and the original
    /// module's DWARF line table. Lines of 20% or more of a function's instructions are
    /// marked `>>`; instructions on lines of other files (code inlined from them) are
    /// listed below each function's source.
    Annotate(AnnotateArgs),
    /// Compare two profiles: per-function change of calls and cost, largest first.
    ///
    /// With --fail-above PCT it exits with code 3 when the whole cost grew by more than PCT
    /// percent, so CI can gate on the deterministic instruction count.
    Diff(DiffArgs),
    /// Run Emscripten's emcc as `wasmprof-emcc` does: a final link's module comes out
    /// instrumented, with the runtime that saves its profile.
    ///
    /// Every argument goes to emcc; compile steps get `-g` unless you chose a `-g` level.
    /// Set WASMPROF_EMCC to use another emcc than the one on PATH.
    #[command(name = "emcc", disable_help_flag = true)]
    Emcc(DriverArgs),
    /// Run Emscripten's em++ as `wasmprof-emxx` does (see `emcc`; WASMPROF_EMXX names
    /// another em++).
    #[command(name = "em++", alias = "emxx", disable_help_flag = true)]
    Emxx(DriverArgs),
}

/// The arguments of `emcc` and `em++`: all of them go to the driver.
#[derive(Debug, Args)]
pub struct DriverArgs {
    /// Arguments for the driver.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<OsString>,
}

/// `cargo test`'s and `cargo bench`'s flags that choose what to build.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Cargo options")]
pub struct CargoArgs {
    /// Package(s) to test.
    #[arg(short, long = "package", value_name = "SPEC")]
    pub packages: Vec<String>,
    /// Test all packages in the workspace.
    #[arg(long)]
    pub workspace: bool,
    /// Exclude packages from the test (with --workspace).
    #[arg(long, value_name = "SPEC")]
    pub exclude: Vec<String>,
    /// Test only this package's library.
    #[arg(long)]
    pub lib: bool,
    /// Test all binaries.
    #[arg(long)]
    pub bins: bool,
    /// Test only the named binary.
    #[arg(long = "bin", value_name = "NAME")]
    pub bin: Vec<String>,
    /// Test only the named integration test.
    #[arg(long = "test", value_name = "NAME")]
    pub test: Vec<String>,
    /// Test all integration tests.
    #[arg(long)]
    pub tests: bool,
    /// Only the named bench target.
    #[arg(long = "bench", value_name = "NAME")]
    pub bench: Vec<String>,
    /// All bench targets.
    #[arg(long)]
    pub benches: bool,
    /// Only the named example.
    #[arg(long = "example", value_name = "NAME")]
    pub example: Vec<String>,
    /// All examples.
    #[arg(long)]
    pub examples: bool,
    /// All targets (lib, bins, tests, benches, examples).
    #[arg(long)]
    pub all_targets: bool,
    /// Only the library's doc tests (each profiled as a binary of its own). Without a
    /// target selection, `test` runs them after the other binaries, as cargo does.
    #[arg(long, conflicts_with_all = ["lib", "bins", "bin", "test", "tests", "bench", "benches", "example", "examples", "all_targets"])]
    pub doc: bool,
    /// Space or comma separated features to activate.
    #[arg(short = 'F', long, value_name = "FEATURES")]
    pub features: Vec<String>,
    /// Activate all features.
    #[arg(long)]
    pub all_features: bool,
    /// Do not activate the `default` feature.
    #[arg(long)]
    pub no_default_features: bool,
    /// Build in release mode (names and DWARF are kept; the opt-level is the profile's).
    #[arg(short, long)]
    pub release: bool,
    /// Build with the given profile.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Build for this target: wasm32-wasip1 runs in the embedded wasmtime, and so does
    /// wasm32-wasip1-threads (wasi-threads: a profile per thread, merged by default, `report
    /// --threads` for each); wasm32-unknown-emscripten links through wasmprof-emcc (wrapping the linker you
    /// configured for it, else emcc) and runs under node; wasm32-unknown-unknown is for
    /// wasm-bindgen crates, whose wasm-bindgen-test binaries wasm-bindgen-test-runner runs
    /// under node, or in headless Chromium when the crate (`run_in_browser`) or
    /// WASM_BINDGEN_USE_BROWSER asks.
    #[arg(long, value_name = "TRIPLE", default_value = "wasm32-wasip1")]
    pub target: crate::build::Target,
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// Directory for all generated artifacts (profiles go to its wasmprof/ folder).
    #[arg(long, value_name = "DIRECTORY")]
    pub target_dir: Option<PathBuf>,
    /// Number of parallel build jobs.
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<String>,
    /// Require Cargo.lock to be up to date.
    #[arg(long)]
    pub locked: bool,
    /// Run without accessing the network.
    #[arg(long)]
    pub offline: bool,
    /// Require Cargo.lock and the cache to be up to date.
    #[arg(long)]
    pub frozen: bool,
}

impl CargoArgs {
    /// Whether the flags choose targets (`--lib`, `--tests`, ...): cargo runs no doc tests
    /// then.
    pub fn selects_targets(&self) -> bool {
        self.lib
            || self.bins
            || self.tests
            || self.benches
            || self.examples
            || self.all_targets
            || !self.bin.is_empty()
            || !self.test.is_empty()
            || !self.bench.is_empty()
            || !self.example.is_empty()
    }

    /// The build these flags ask for, in `mode`, instrumenting an Emscripten link for
    /// `metric`.
    pub fn to_request(&self, mode: Mode, metric: Metric) -> BuildRequest {
        let mut out = Vec::new();
        let mut values = |flag: &str, values: &[String]| {
            for v in values {
                out.push(flag.to_string());
                out.push(v.clone());
            }
        };
        values("--package", &self.packages);
        values("--exclude", &self.exclude);
        values("--bin", &self.bin);
        values("--test", &self.test);
        values("--bench", &self.bench);
        values("--example", &self.example);
        values("--features", &self.features);
        let flags = [
            (self.workspace, "--workspace"),
            (self.lib, "--lib"),
            (self.bins, "--bins"),
            (self.tests, "--tests"),
            (self.benches, "--benches"),
            (self.examples, "--examples"),
            (self.all_targets, "--all-targets"),
            (self.all_features, "--all-features"),
            (self.no_default_features, "--no-default-features"),
            (self.release, "--release"),
            (self.locked, "--locked"),
            (self.offline, "--offline"),
            (self.frozen, "--frozen"),
        ];
        out.extend(
            flags
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, flag)| flag.to_string()),
        );
        if let Some(jobs) = &self.jobs {
            out.extend(["--jobs".to_string(), jobs.clone()]);
        }
        BuildRequest {
            mode,
            target: self.target,
            cargo_args: out,
            manifest_path: self.manifest_path.clone(),
            target_dir: self.target_dir.clone(),
            profile: self.profile.clone(),
            metric,
        }
    }
}

impl ProfileArgs {
    /// How the program is run: `program` with `args` in `dir`, sampled as asked.
    pub fn run_config(
        &self,
        program: String,
        args: Vec<String>,
        dir: impl Into<PathBuf>,
    ) -> crate::host::RunConfig {
        crate::host::RunConfig {
            sample_interval: std::time::Duration::from_micros(self.sample_interval),
            ..crate::host::RunConfig::new(program, args, dir)
        }
    }
}

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
    pub format: Vec<Format>,
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
    /// With `--metric time`: sample every US microseconds (each sample is credited with
    /// the time that actually passed since the previous one).
    #[arg(
        long,
        value_name = "US",
        default_value_t = crate::host::DEFAULT_SAMPLE_INTERVAL.as_micros() as u64,
        value_parser = clap::value_parser!(u64).range(10..=1_000_000)
    )]
    pub sample_interval: u64,
    /// What the instrumentation measures.
    #[command(flatten)]
    pub instrument: InstrumentOptions,
}

/// What the instrumented module measures.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Instrumentation options")]
pub struct InstrumentOptions {
    /// What to measure besides exact calls and arcs: `time` (wall time, self and
    /// inclusive, sampled: estimates, with the probes' own time left out), `exact-time`
    /// (wall time read at every entry and exit: every call timed, the probes' calibrated
    /// cost subtracted), `instructions` (executed wasm instructions: the same on every run
    /// and machine, for CI), or `calls` (nothing more: the cheapest).
    #[arg(long, value_name = "METRIC", default_value = "time")]
    pub metric: Metric,
    /// The most calling contexts to keep: the profiler's memory grows with the tree up to
    /// room for N (48 bytes each); past it, entries are folded per function (counts and
    /// times stay exact, their paths are lost, and the report says how many).
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
    pub state: crate::meta::StateLocation,
}

impl InstrumentOptions {
    /// The instrumenter's options.
    pub fn to_options(&self) -> crate::instrument::Options {
        crate::instrument::Options {
            max_contexts: self.max_contexts,
            metric: self.metric,
            state: self.state,
            host_exceptions: false,
        }
    }
}

/// `cargo wasmprof test` and `cargo wasmprof bench`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Only run tests (or benches) whose names contain this string (passed to the harness).
    #[arg(value_name = "NAME")]
    pub testname: Option<String>,
    /// Arguments for the test harness (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub harness_args: Vec<String>,
    /// Run every test binary, even after one fails.
    #[arg(long)]
    pub no_fail_fast: bool,
    /// What to build.
    #[command(flatten)]
    pub cargo: CargoArgs,
    /// The profile and report.
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Colors and status lines.
    #[command(flatten)]
    pub ui: UiOptions,
}

/// `cargo wasmprof run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run the module as it is, without the profiler.
    #[arg(long)]
    pub no_instrument: bool,
    /// Write the profile into DIR, named after the doc test the module is, and no report:
    /// how `cargo wasmprof test` has rustdoc run each doc test.
    #[arg(long, value_name = "DIR", hide = true)]
    pub doctest_dir: Option<PathBuf>,
    /// With `--doctest-dir` and `--metric exact-time`: the probes' cost that `test`
    /// measured, `IN_CALLEE,IN_CALLER` nanoseconds per call, to subtract.
    #[arg(long, value_name = "NS,NS", hide = true, value_parser = parse_probe_cost)]
    pub probe_cost: Option<crate::profile::ProbeCost>,
    /// The wasip1 command module (or a .js program linked by wasmprof-emcc), then the
    /// program's arguments: everything after it goes to the program, even what looks like
    /// our own options.
    #[arg(
        value_name = "FILE.wasm [ARGS]",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
    /// The profile and report (the profile goes to FILE.wasmprof.json unless --output).
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Colors and status lines.
    #[command(flatten)]
    pub ui: UiOptions,
}

impl RunArgs {
    /// The module to run.
    pub fn module(&self) -> &Path {
        Path::new(&self.command[0])
    }

    /// The program's arguments.
    pub fn program_args(&self) -> &[String] {
        &self.command[1..]
    }
}

/// What a report shows of a profile, for every command that writes one.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Report options")]
pub struct ViewArgs {
    /// Show the N costliest functions in the flat profile, and the N costliest tests
    /// (`all`: every one).
    #[arg(long, value_name = "N|all", default_value = "25", value_parser = parse_top)]
    pub top: Top,
    /// The call graph's entries: the N costliest (by inclusive cost) of the functions the
    /// flat profile shows, or `full`, gprof's whole graph.
    #[arg(long, value_name = "N|full", default_value = "5", value_parser = parse_call_graph)]
    pub call_graph: CallGraph,
    /// List the runtime's scaffolding (the start-up, the test harness, the standard
    /// library and WASI calls that only they make) function by function; it is one
    /// folded line otherwise. It is measured either way.
    #[arg(long)]
    pub show_runtime: bool,
    /// With `--metric instructions`: list the functions inlined into others as rows of
    /// their own in the flat profile, marked `[inlined]` (their instructions leave the
    /// self cost of the functions they were inlined into).
    #[arg(long)]
    pub inlined: bool,
    /// Draw flame graphs from the top down (icicle).
    #[arg(long)]
    pub icicle: bool,
    /// Print function names whole in the text report (long ones are elided in their
    /// generic arguments otherwise; the other formats always have them whole).
    #[arg(long)]
    pub full_names: bool,
    /// List each thread of a threaded program (wasm32-wasip1-threads) in the text report:
    /// its total, how it ended and its costliest functions (the other sections show their
    /// sum; speedscope, Firefox and pprof files have a track or label per thread).
    #[arg(long)]
    pub threads: bool,
    /// Which stacks to show and how to group them.
    #[command(flatten)]
    pub filter: FilterArgs,
}

impl ViewArgs {
    /// The options of the formats.
    pub fn to_emit_options(&self) -> EmitOptions {
        EmitOptions {
            top: self.top.0,
            call_graph: self.call_graph,
            show_runtime: self.show_runtime,
            inlined: self.inlined,
            icicle: self.icicle,
            full_names: self.full_names,
            threads: self.threads,
        }
    }
}

/// pprof's focus and ignore, and grouping: a view of the profile that every format draws.
#[derive(Debug, Clone, Args)]
pub struct FilterArgs {
    /// Only the stacks through a function whose name matches REGEX, with costs re-rooted
    /// there (its callers left out), as pprof's `--focus`.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub focus: Option<regex::Regex>,
    /// Leave out the stacks through a function whose name matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub ignore: Option<regex::Regex>,
    /// Group the costs by function, by source file or by crate (a C library, an import
    /// module).
    #[arg(long, value_name = "WHAT", default_value = "function")]
    pub by: Grouping,
}

impl FilterArgs {
    /// The view these options ask for.
    pub fn to_filter(&self) -> Filter {
        Filter {
            focus: self.focus.clone(),
            ignore: self.ignore.clone(),
            by: self.by,
        }
    }
}

/// How many rows a report shows: `None` for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Top(pub Option<usize>);

/// `N` or `all` as a number of rows.
fn parse_top(text: &str) -> Result<Top, String> {
    match text {
        "all" => Ok(Top(None)),
        n => n
            .parse::<usize>()
            .map(|n| Top(Some(n)))
            .map_err(|_| "expected a number of rows or `all`".to_string()),
    }
}

/// `N` or `full` as the call graph's entries.
fn parse_call_graph(text: &str) -> Result<CallGraph, String> {
    match text {
        "full" | "all" => Ok(CallGraph::Full),
        n => n
            .parse::<usize>()
            .map(CallGraph::Top)
            .map_err(|_| "expected a number of entries or `full`".to_string()),
    }
}

/// A regular expression, its error on one line.
fn parse_regex(text: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(text).map_err(|e| match e {
        regex::Error::Syntax(message) => message
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map_or("not a regular expression", str::trim)
            .to_string(),
        other => other.to_string(),
    })
}

/// `IN_CALLEE,IN_CALLER` as a probe cost.
fn parse_probe_cost(text: &str) -> Result<crate::profile::ProbeCost, String> {
    let (callee, caller) = text
        .split_once(',')
        .ok_or("expected IN_CALLEE,IN_CALLER nanoseconds")?;
    let ns = |s: &str| s.trim().parse::<f64>().map_err(|e| format!("{s}: {e}"));
    Ok(crate::profile::ProbeCost {
        in_callee_ns: ns(callee)?,
        in_caller_ns: ns(caller)?,
    })
}

/// `cargo wasmprof instrument`.
#[derive(Debug, Args)]
pub struct InstrumentArgs {
    /// The module to instrument.
    #[arg(value_name = "IN.wasm")]
    pub input: PathBuf,
    /// Where to write the instrumented module.
    #[arg(short, long, value_name = "OUT.wasm")]
    pub output: PathBuf,
    /// What the instrumentation measures.
    #[command(flatten)]
    pub instrument: InstrumentOptions,
    /// Colors and status lines.
    #[command(flatten)]
    pub ui: UiOptions,
}

/// `cargo wasmprof report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A profile written by cargo-wasmprof (or a dump of the JS runtime).
    #[arg(value_name = "PROFILE.json")]
    pub profile: PathBuf,
    /// The format to write.
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub format: Format,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// What the report shows.
    #[command(flatten)]
    pub view: ViewArgs,
    /// Colors.
    #[command(flatten)]
    pub ui: UiOptions,
}

/// `cargo wasmprof annotate`.
#[derive(Debug, Args)]
pub struct AnnotateArgs {
    /// A profile made with `--metric instructions`.
    #[arg(value_name = "PROFILE.json")]
    pub profile: PathBuf,
    /// What to annotate: the functions whose names match a regular expression, or a
    /// source file (a path or its end, `src/lib.rs`). Without it, the costliest functions
    /// of the program's own code.
    #[arg(value_name = "FUNCTION|FILE")]
    pub what: Option<String>,
    /// Without FUNCTION: how many of the costliest functions to annotate.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub top: usize,
    /// Lines of source to show around each line with a cost.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub context: u32,
    /// Colors.
    #[command(flatten)]
    pub ui: UiOptions,
}

impl AnnotateArgs {
    /// What to annotate: a file when WHAT names one (it has a `/` or a source file's
    /// extension), else a regular expression on function names.
    pub fn selection(&self) -> Result<Selection, String> {
        let Some(what) = &self.what else {
            return Ok(Selection::Top(self.top));
        };
        let extensions = [".rs", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".zig"];
        if what.contains('/') || extensions.iter().any(|e| what.ends_with(e)) {
            return Ok(Selection::File(what.clone()));
        }
        parse_regex(what).map(Selection::Functions)
    }
}

/// `cargo wasmprof diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The profile to compare against.
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The profile to compare.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// What to compare: calls, time or instructions (default: what both measured; calls
    /// when they measured different things).
    #[arg(long, value_name = "METRIC")]
    pub metric: Option<Metric>,
    /// Exit with code 3 when the whole cost grew by more than PCT percent.
    #[arg(long, value_name = "PCT")]
    pub fail_above: Option<f64>,
    /// Show only the N functions that changed most (`all`: every one).
    #[arg(long, value_name = "N|all", default_value = "25", value_parser = parse_top)]
    pub top: Top,
    /// Which stacks and groups to compare.
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Print function names whole (long ones are elided in their generic arguments
    /// otherwise; `--json` has them whole).
    #[arg(long)]
    pub full_names: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Colors.
    #[command(flatten)]
    pub ui: UiOptions,
}
