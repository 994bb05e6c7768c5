//! The plain requests the command line turns into: what each command is asked to do, with
//! no clap type in it. Each command turns its arguments into one of these once, at its top
//! (`TestArgs::to_request`, `RunArgs::to_request`, ...), and the layers below take the
//! plain values inside (`BuildRequest`, `instrument::Options`, `EmitOptions`, `Filter`).

use std::path::PathBuf;
use std::time::Duration;

use crate::build::BuildRequest;
use crate::format::annotate::{AnnotateOptions, Selection};
use crate::format::{EmitOptions, Format};
use crate::host::RunConfig;
use crate::instrument::Options;
use crate::meta::Metric;
use crate::profile::{Compensation, Filter};

/// `test` or `bench`: build, then profile every binary cargo would run.
#[derive(Debug, Clone)]
pub struct TestRequest {
    /// What cargo builds.
    pub build: BuildRequest,
    /// Which doc tests run after the binaries.
    pub doc_tests: DocTests,
    /// The arguments every binary's harness gets (`--bench`, the test name, the user's).
    pub harness: Vec<String>,
    /// Stop at the first binary that fails, as cargo does.
    pub fail_fast: bool,
    /// How each binary is profiled and what is reported.
    pub profile: ProfileRequest,
    /// The baselines this run is kept as and compared with.
    pub baselines: BaselineRequest,
}

/// What `test` and `bench` do with baselines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BaselineRequest {
    /// Keep the run's profiles as this baseline.
    pub save: Option<String>,
    /// Compare the run with this baseline.
    pub compare: Option<String>,
    /// Fail (exit 3) when a benchmark or test grew by more than this percentage past its
    /// noise.
    pub fail_above: Option<f64>,
}

/// Which doc tests a `test` runs, as cargo decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocTests {
    /// The libraries' doc tests, after the other binaries (no target selection).
    AfterBinaries,
    /// Only the doc tests (`--doc`; `test` runs them, `bench` none): nothing is built for
    /// the other binaries.
    Only,
    /// None: a target selection (`--lib`, `--tests`, ...) or `bench`.
    None,
}

/// `run`: one program, profiled or as it is.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The program: a file, or the package's binary that cargo builds.
    pub program: ProgramToRun,
    /// The program's own arguments.
    pub args: Vec<String>,
    /// Whether to profile it (else it runs as it is).
    pub instrument: bool,
    /// How it is profiled and what is reported.
    pub profile: ProfileRequest,
    /// When rustdoc runs it for `test`, as one doc test: where its profile goes.
    pub doctest: Option<DoctestRunner>,
    /// Run as it is, its stacks sampled into this file (the stack sampler's check).
    pub plain_samples: Option<PathBuf>,
}

/// `serve`: a wasi:http component served, profiled or as it is.
#[derive(Debug, Clone)]
pub struct ServeRequest {
    /// The component: a file, or the package's that cargo builds.
    pub program: ProgramToRun,
    /// Where to listen.
    pub addr: std::net::SocketAddr,
    /// Stop once this many requests have been answered.
    pub requests: Option<u64>,
    /// The most requests in flight at once.
    pub workers: usize,
    /// How many requests an instance of a WASI 0.3 service serves.
    pub instance_reuse: u32,
    /// How many requests an instance of a WASI 0.3 service serves at once.
    pub instance_concurrency: u16,
    /// Whether to profile it (else it is served as it is).
    pub instrument: bool,
    /// A plain server's requests to show beside the profiled ones.
    pub plain: Option<std::path::PathBuf>,
    /// How it is profiled and what is reported.
    pub profile: ProfileRequest,
}

/// What `run` runs.
#[derive(Debug, Clone)]
pub enum ProgramToRun {
    /// A module, a component, or the JS program that loads one.
    File(PathBuf),
    /// The binary cargo builds, as `cargo run` builds it.
    Build(BuildRequest),
}

/// How programs are profiled and what is reported, for the commands that run them.
#[derive(Debug, Clone)]
pub struct ProfileRequest {
    /// What the instrumentation measures and where it keeps its state.
    pub instrument: Options,
    /// The sampled time metric's interval, where one is asked for (else its sampler's own).
    pub sample_interval: Option<Duration>,
    /// Whether to subtract the probes' measured cost from exact times.
    pub compensate: bool,
    /// What is written and shown of the profiles.
    pub report: ReportRequest,
}

impl ProfileRequest {
    /// How `program` runs with `args` in `dir`, sampled as asked.
    pub fn run_config(
        &self,
        program: String,
        args: Vec<String>,
        dir: impl Into<PathBuf>,
    ) -> RunConfig {
        RunConfig {
            sample_interval: self.sample_interval,
            ..RunConfig::new(program, args, dir)
        }
    }
}

/// What a command writes and shows of the profiles it made.
#[derive(Debug, Clone)]
pub struct ReportRequest {
    /// Where the merged profile of every binary goes, if anywhere.
    pub output: Option<PathBuf>,
    /// The report's formats: text to the terminal, the others to files.
    pub formats: Vec<Format>,
    /// Whether to show any report (the profiles are written either way).
    pub show: bool,
    /// What the formats show.
    pub emit: EmitOptions,
    /// Which stacks the report keeps and how it groups them.
    pub filter: Filter,
}

/// `instrument`: a module in, an instrumented module out.
#[derive(Debug, Clone)]
pub struct InstrumentRequest {
    /// The module.
    pub input: PathBuf,
    /// Where the instrumented module goes.
    pub output: PathBuf,
    /// What the instrumentation measures.
    pub options: Options,
}

/// `report`: a profile (or a dump) in one format.
#[derive(Debug, Clone)]
pub struct ReportFileRequest {
    /// The profiles: one, or several to merge.
    pub profiles: Vec<PathBuf>,
    /// The format to write.
    pub format: Format,
    /// The file to write (else standard output).
    pub output: Option<PathBuf>,
    /// What the format shows.
    pub emit: EmitOptions,
    /// Which stacks it keeps and how it groups them.
    pub filter: Filter,
}

/// `annotate`: the source of some functions beside their per-line costs.
#[derive(Debug, Clone)]
pub struct AnnotateRequest {
    /// The profile (of the instructions metric).
    pub profile: PathBuf,
    /// Which functions.
    pub selection: Selection,
    /// How much source around each line.
    pub options: AnnotateOptions,
}

/// `diff`: two profiles compared.
#[derive(Debug, Clone)]
pub struct DiffRequest {
    /// The profile compared against.
    pub base: PathBuf,
    /// The profile compared.
    pub new: PathBuf,
    /// What to compare (else what both measured).
    pub metric: Option<Metric>,
    /// The whole cost's growth, in percent, past which the command fails.
    pub fail_above: Option<f64>,
    /// How many functions to show (all when `None`).
    pub top: Option<usize>,
    /// Which stacks and groups to compare.
    pub filter: Filter,
    /// Print names whole.
    pub full_names: bool,
    /// How to write the comparison.
    pub format: crate::diff::DiffFormat,
}

/// How `test` has rustdoc run each doc test: `cargo wasmprof run` with the doc test's
/// module, profiled as `test` profiles its binaries, the profile written into a directory
/// where `test` takes it in, and no report. [`DoctestRunner::to_args`] writes the command
/// line; `run` parses it back into this.
#[derive(Debug, Clone, PartialEq)]
pub struct DoctestRunner {
    /// Where the doc test's profile goes, named after the doc test.
    pub dir: PathBuf,
    /// What the instrumentation measures.
    pub instrument: Options,
    /// The sampled time metric's interval, where one is asked for.
    pub sample_interval: Option<Duration>,
    /// What is done about the probes' cost in exact times: `test` measured it once for
    /// every doc test.
    pub compensation: Compensation,
}

impl DoctestRunner {
    /// The runner's arguments after `run` (the doc test's module and its arguments come
    /// after them).
    pub fn to_args(&self) -> Vec<String> {
        use super::value_enums::{name_of, MetricArg, SamplerArg, StateArg};
        let options = &self.instrument;
        let mut args = vec![
            "--doctest-dir".to_string(),
            self.dir.display().to_string(),
            "--metric".to_string(),
            name_of(MetricArg::from(options.metric)),
            "--max-contexts".to_string(),
            options.max_contexts.to_string(),
            "--max-live-allocations".to_string(),
            options.max_live_allocations.to_string(),
            "--state".to_string(),
            name_of(StateArg::from(options.state)),
            "--sampler".to_string(),
            name_of(SamplerArg::from(options.sampler)),
        ];
        if let Some(interval) = self.sample_interval {
            args.extend([
                "--sample-interval".to_string(),
                interval.as_micros().to_string(),
            ]);
        }
        if options.contexts {
            args.push("--contexts".into());
        }
        if options.allocations {
            args.push("--allocations".into());
        }
        match &self.compensation {
            Compensation::Subtract(cost) => args.extend([
                "--probe-cost".to_string(),
                format!("{},{}", cost.in_callee_ns, cost.in_caller_ns),
            ]),
            Compensation::Keep(_) => args.push("--no-compensation".into()),
            Compensation::None => {}
        }
        args
    }
}

/// The compensation a doc test's runner applies: the cost `test` measured, or none when
/// told not to subtract it (or, with exact time, when it was given none).
pub(super) fn doctest_compensation(
    options: &Options,
    probe_cost: Option<crate::profile::ProbeCost>,
    compensate: bool,
) -> Compensation {
    match (options.metric.facts().probes.clock, probe_cost, compensate) {
        (false, ..) => Compensation::None,
        (true, _, false) => Compensation::Keep(NO_COMPENSATION.into()),
        (true, Some(cost), true) => Compensation::Subtract(cost),
        (true, None, true) => {
            Compensation::Keep("the doc test's runner was given no probe cost".into())
        }
    }
}

/// Why exact times keep the probes' cost when the user asks for it.
pub const NO_COMPENSATION: &str = "--no-compensation";
