//! The command line: `cargo wasmprof <command>`, clap's types and nothing else below them.
//!
//! Each command's flags are a clap `Args` struct (cargo's selection flags as cargo spells
//! them, `CargoArgs`; the profile's, `ProfileArgs`; the report's, `ViewArgs`), and each
//! turns into a plain request once (`requests`: `TestRequest`, `RunRequest`, ...), which is
//! all the commands and the layers below see. The value enums (`--metric`, `--format`,
//! ...) mirror plain enums of the layers below (`value_enums`), so clap stays here.
//!
//! - `cargo`: `test` and `bench` (cargo's flags, the harness's arguments);
//! - `run`: `run`, and the doc tests' runner that `test` has rustdoc call;
//! - `profile`: how programs are profiled (`--metric`, `--state`, `--sample-interval`, ...);
//! - `view`: what a report shows (`--top`, `--focus`, `--by`, ...);
//! - `files`: `instrument`, `report`, `annotate`, `diff`;
//! - `requests`: the plain requests; `value_enums`: the value enums.

mod cargo;
mod files;
mod profile;
mod requests;
mod run;
mod serve;
mod value_enums;
mod view;

use std::ffi::OsString;

use clap::{Args, CommandFactory, Parser, Subcommand};

pub use cargo::{BuildFlags, CargoArgs, TestArgs};
pub use files::{AnnotateArgs, DiffArgs, InstrumentArgs, ReportArgs};
pub use profile::{InstrumentFlags, ProfileArgs};
pub use requests::{
    AnnotateRequest, BaselineRequest, DiffRequest, DocTests, DoctestRunner, InstrumentRequest,
    ProfileRequest, ProgramToRun, ReportFileRequest, ReportRequest, RunRequest, ServeRequest,
    TestRequest, NO_COMPENSATION,
};
pub use run::{RunArgs, RunCargoArgs};
pub use serve::ServeArgs;
pub use value_enums::{ColorArg, FormatArg, GroupingArg, MetricArg, StateArg, TargetArg};
pub use view::{FilterArgs, Top, ViewArgs};

/// An instrumenting profiler for WebAssembly.
///
/// Builds your crate for wasm32 (wasip1 by default; components, Emscripten and wasm-bindgen
/// crates with --target), rewrites each test binary so that it records its own profile (exact call
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
    pub color: ColorArg,
    /// Print no status lines, only the report and the program's own output.
    #[arg(short, long)]
    pub quiet: bool,
}

impl UiOptions {
    /// The status printer these options ask for (it sets the process's colors).
    pub fn status(self) -> crate::status::Status {
        crate::status::Status::new(self.color.into(), self.quiet)
    }
}

impl Command {
    /// The command's colors and status options.
    pub fn ui(&self) -> UiOptions {
        match self {
            Command::Test(args) | Command::Bench(args) => args.ui,
            Command::Run(args) => args.ui,
            Command::Serve(args) => args.ui,
            Command::Instrument(args) => args.ui,
            Command::Report(args) => args.ui,
            Command::Diff(args) => args.ui,
            Command::Annotate(args) => args.ui,
            Command::Emcc(_) | Command::Emxx(_) => UiOptions {
                color: ColorArg::Auto,
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
        let mut cli = Cli::parse_from(&args);
        if let Command::Run(run) = &mut cli.command {
            // `run -- ARGS`: everything after the first `--` is the command's values only
            // where that `--` came before them (after FILE, a `--` is the program's).
            let escape = args.iter().position(|a| a == "--");
            run.after_escape = escape.is_some_and(|at| {
                !run.command.is_empty()
                    && args[at + 1..]
                        .iter()
                        .map(|a| a.to_str())
                        .eq(run.command.iter().map(|c| Some(c.as_str())))
            }) || (escape.is_some() && run.command.is_empty());
            if !run.after_escape && !run.command.is_empty() && run.cargo.any() {
                let message = "cargo's options choose what `run` builds: they take no FILE \
                               (the binary's arguments go after `--`)";
                Cli::command()
                    .error(clap::error::ErrorKind::ArgumentConflict, message)
                    .exit();
            }
        }
        cli
    }
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build the crate's tests for wasm32 (wasm32-wasip1 unless --target says), profile
    /// them, and report.
    ///
    /// Takes `cargo test`'s selection flags. NAME and everything after `--` go to the test
    /// harness (filters, --exact, --nocapture). A profile per test binary is
    /// written to the target directory's wasmprof/ folder; the report covers them all.
    Test(Box<TestArgs>),
    /// Build the crate's benchmarks for wasm32 (wasm32-wasip1 unless --target says),
    /// profile them, and report.
    ///
    /// Takes `cargo bench`'s selection flags; benches are built with the bench profile,
    /// names and DWARF kept. The harness gets `--bench`, then NAME and everything after
    /// `--`. A profile per bench binary goes to the target directory's wasmprof/ folder.
    /// The report adds the cost of one iteration of each routine that a harness's
    /// measuring loop ran (criterion's or libtest's `Bencher::iter`).
    Bench(Box<TestArgs>),
    /// Build the package's binary and run it profiled, as `cargo run` does; or run a WASI
    /// command (a wasip1 module, or a wasi:cli component of WASI 0.2 or 0.3) in the
    /// embedded host, or a .js program that wasmprof-emcc linked, under node.
    Run(Box<RunArgs>),
    /// Serve a wasi:http component as `wasmtime serve` does (a WASI 0.2 proxy: a fresh
    /// instance per request; a WASI 0.3 service: an instance for up to 128 requests, 16 at
    /// once), and profile its requests until Ctrl-C (or --requests N): exact calls and
    /// arcs, CPU time per function, and each route's requests, latency and CPU per request.
    ///
    /// Without FILE, the package's component is built for wasm32-wasip2 first.
    #[command(
        mut_arg("metric", serve::metric),
        mut_arg("target", serve::target),
        mut_arg("sampler", serve::sampler),
        mut_arg("state", serve::state),
        mut_arg("no_compensation", |a| a.hide(true))
    )]
    Serve(Box<ServeArgs>),
    /// Write an instrumented copy of a module, for any host that gives it a clock.
    Instrument(InstrumentArgs),
    /// Print the report of a profile file again, or write it in another format; of several
    /// profiles, merged (`cargo wasmprof report target/wasmprof/mycrate-*.json`: a package's
    /// binaries, not the views `--format` wrote beside them).
    ///
    /// Formats: text (gprof-style, the default), json (the profile), pprof (go tool pprof,
    /// speedscope), callgrind (KCachegrind, callgrind_annotate), folded (flame graph tools),
    /// flamegraph (SVG), speedscope, firefox (the Firefox Profiler's processed format), html
    /// (one self-contained page).
    Report(ReportArgs),
    /// Print the source of functions with the cost of each line: the instructions it
    /// executed (exact), or the time the stack sampler found there.
    ///
    /// Needs a profile made with `--metric instructions` or with `--metric time --sampler
    /// stacks` (in the embedded wasmtime). Instructions per line come from every
    /// straight-line segment's run count, times per line from the samples' addresses; both
    /// go through the original module's DWARF line table. Lines of 20% or more of a
    /// function's cost are marked `>>`; costs on lines of other files (code inlined from
    /// them) are listed below each function's source.
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
