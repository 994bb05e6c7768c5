//! `run`: one program, profiled in its host or run as it is; and the doc tests' runner,
//! the same command with hidden flags that `test` has rustdoc call for each doc test
//! ([`DoctestRunner::to_args`] writes them, [`RunArgs::to_request`] reads them back).

use std::path::PathBuf;

use clap::Args;

use super::cargo::BuildFlags;
use super::profile::ProfileArgs;
use super::requests::{doctest_compensation, DoctestRunner, ProgramToRun, RunRequest};
use super::value_enums::TargetArg;
use super::UiOptions;
use crate::build::{BuildRequest, Mode, Target};
use crate::profile::ProbeCost;

/// `cargo wasmprof run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run the module as it is, without the profiler.
    #[arg(long)]
    pub no_instrument: bool,
    /// With `--no-instrument`: sample the module's stacks as it runs and write the samples
    /// (stacks of function indices, their counts and times) to FILE, as JSON: what the stack
    /// sampler sees of a program with no probe in it, to hold against `perf record`.
    #[arg(long, value_name = "FILE", hide = true, requires = "no_instrument")]
    pub plain_samples: Option<PathBuf>,
    /// Write the profile into DIR, named after the doc test the module is, and no report:
    /// how `cargo wasmprof test` has rustdoc run each doc test.
    #[arg(long, value_name = "DIR", hide = true)]
    pub doctest_dir: Option<PathBuf>,
    /// With `--doctest-dir` and `--metric exact-time`: the probes' cost that `test`
    /// measured, `IN_CALLEE,IN_CALLER` nanoseconds per call, to subtract.
    #[arg(long, value_name = "NS,NS", hide = true, value_parser = parse_probe_cost)]
    pub probe_cost: Option<ProbeCost>,
    /// The program to run: a WASI command (a wasip1 module or a wasi:cli component) or a
    /// JS program linked by wasmprof-emcc (`prog.js`, or `prog` with `prog.wasm` beside
    /// it, as emcc writes `-o prog`), then its arguments: everything after FILE goes to the
    /// program, even what looks like our own options. Without FILE (or after `--`), the
    /// package's binary is built and run, as `cargo run` does, with these as its arguments.
    #[arg(
        value_name = "FILE [ARGS]",
        num_args = 0..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
    /// Whether `command` came after `--`: the arguments of the binary cargo builds, not a
    /// FILE (set by [`super::Cli::parse_args`], which sees the raw arguments).
    #[arg(skip)]
    pub after_escape: bool,
    /// Without FILE: what cargo builds, as `cargo run` takes it.
    #[command(flatten)]
    pub cargo: RunCargoArgs,
    /// The profile and report (the profile goes to FILE.wasmprof.json unless --output).
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Colors and status lines.
    #[command(flatten)]
    pub ui: UiOptions,
}

/// `cargo run`'s flags that choose what to build, for `run` without a FILE.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Cargo options (without FILE, as `cargo run` takes them)")]
pub struct RunCargoArgs {
    /// Package with the target to run.
    #[arg(short, long = "package", value_name = "SPEC")]
    pub package: Option<String>,
    /// Name of the bin target to run.
    #[arg(long, value_name = "NAME")]
    pub bin: Option<String>,
    /// Name of the example target to run.
    #[arg(long, value_name = "NAME")]
    pub example: Option<String>,
    /// Build for this target: wasm32-wasip1 (the default), wasm32-wasip1-threads and
    /// wasm32-wasip2 run in the embedded wasmtime, wasm32-unknown-emscripten under node.
    #[arg(long, value_name = "TRIPLE")]
    pub target: Option<TargetArg>,
    /// How cargo builds.
    #[command(flatten)]
    pub build: BuildFlags,
}

impl RunCargoArgs {
    /// Whether any of these flags was given.
    pub fn any(&self) -> bool {
        !self.selection().is_empty() || self.target.is_some() || self.build.any()
    }

    /// The build of the binary to run, instrumenting an Emscripten link as `instrument`
    /// says.
    fn to_request(&self, instrument: &crate::instrument::Options) -> BuildRequest {
        self.to_build(instrument, Mode::Run, Target::default())
    }

    /// The build of `mode`'s binary, for `target` unless `--target` says.
    pub(super) fn to_build(
        &self,
        instrument: &crate::instrument::Options,
        mode: Mode,
        target: Target,
    ) -> BuildRequest {
        let target = self.target.map_or(target, Into::into);
        self.build
            .request(mode, target, self.selection(), instrument)
    }

    /// The flags that choose the binary, as cargo takes them.
    fn selection(&self) -> Vec<String> {
        let options = [
            ("--package", &self.package),
            ("--bin", &self.bin),
            ("--example", &self.example),
        ];
        options
            .into_iter()
            .filter_map(|(flag, value)| value.as_ref().map(|v| [flag.to_string(), v.clone()]))
            .flatten()
            .collect()
    }
}

impl RunArgs {
    /// The request these arguments make: the program (or the build of the package's
    /// binary), its arguments, and, when rustdoc runs it for `test` (`--doctest-dir`), the
    /// doc test's runner they describe.
    pub fn to_request(&self) -> RunRequest {
        let profile = self.profile.to_request();
        let doctest = self.doctest_dir.as_ref().map(|dir| DoctestRunner {
            dir: dir.clone(),
            instrument: profile.instrument.clone(),
            sample_interval: profile.sample_interval,
            compensation: doctest_compensation(
                &profile.instrument,
                self.probe_cost,
                profile.compensate,
            ),
        });
        let (program, args) = match self.command.split_first() {
            Some((file, args)) if !self.after_escape => {
                (ProgramToRun::File(PathBuf::from(file)), args.to_vec())
            }
            _ => (
                ProgramToRun::Build(super::cargo::quiet(
                    self.cargo.to_request(&profile.instrument),
                    self.ui.quiet,
                )),
                self.command.clone(),
            ),
        };
        RunRequest {
            program,
            args,
            instrument: !self.no_instrument,
            profile,
            doctest,
            plain_samples: self.plain_samples.clone(),
        }
    }
}

/// `IN_CALLEE,IN_CALLER` as a probe cost.
fn parse_probe_cost(text: &str) -> Result<ProbeCost, String> {
    let (callee, caller) = text
        .split_once(',')
        .ok_or("expected IN_CALLEE,IN_CALLER nanoseconds")?;
    let ns = |s: &str| s.trim().parse::<f64>().map_err(|e| format!("{s}: {e}"));
    Ok(ProbeCost {
        in_callee_ns: ns(callee)?,
        in_caller_ns: ns(caller)?,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::cli::{Cli, Command};
    use crate::instrument::Options;
    use crate::meta::{Metric, Sampler, StateLocation};
    use crate::profile::Compensation;

    /// The runner `to_args` describes, as `run` reads it back.
    fn parsed(runner: &DoctestRunner) -> Option<DoctestRunner> {
        let mut argv = vec![
            "cargo-wasmprof".to_string(),
            "wasmprof".into(),
            "run".into(),
        ];
        argv.extend(runner.to_args());
        argv.extend(["doctest.wasm".to_string(), "--quiet".into()]);
        let Command::Run(args) = Cli::parse_args(argv.into_iter().map(Into::into)).command else {
            panic!("not the run command");
        };
        let request = args.to_request();
        assert!(
            matches!(&request.program, ProgramToRun::File(f) if f == Path::new("doctest.wasm"))
        );
        assert_eq!(request.args, ["--quiet"]);
        request.doctest
    }

    #[test]
    fn the_doc_tests_runner_arguments_read_back_as_written() {
        let cost = ProbeCost {
            in_callee_ns: 1.0 / 3.0,
            in_caller_ns: 12.75,
        };
        for metric in Metric::ALL {
            for state in StateLocation::ALL {
                let clocked = metric.facts().probes.clock;
                let compensations = match clocked {
                    true => vec![
                        Compensation::Subtract(cost),
                        Compensation::Keep(crate::cli::NO_COMPENSATION.into()),
                    ],
                    false => vec![Compensation::None],
                };
                for ((compensation, sampler), allocations) in compensations
                    .into_iter()
                    .flat_map(|c| {
                        [Sampler::Stacks, Sampler::Word, Sampler::V8].map(|s| (c.clone(), s))
                    })
                    .flat_map(|c| [(c.clone(), true), (c, false)])
                {
                    let runner = DoctestRunner {
                        dir: PathBuf::from("/tmp/a dir/doctests.tmp"),
                        instrument: Options {
                            max_contexts: 1234,
                            metric,
                            contexts: allocations,
                            state,
                            host_exceptions: false,
                            sampler,
                            one_memory_variant: false,
                            allocations,
                            max_live_allocations: 777,
                            inlining_budget: false,
                            entries: crate::instrument::EntryProbes::BySize,
                            site_counters: Default::default(),
                            unoptimized: false,
                        },
                        sample_interval: Some(Duration::from_micros(250)),
                        compensation,
                    };
                    assert_eq!(parsed(&runner).as_ref(), Some(&runner));
                }
            }
        }
    }
}
