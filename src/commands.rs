//! The commands, each a walk down the pipeline:
//! build -> instrument -> run -> symbolize (inside instrument) -> profile -> report.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::build::{self, Mode, TestBinary};
use crate::calibrate;
use crate::cli::{Cli, Command, InstrumentArgs, ProfileArgs, ReportArgs, RunArgs, TestArgs};
use crate::clock::ClockChoice;
use crate::emcc::{self, Driver};
use crate::error::Error;
use crate::fsutil::{relative, write_atomic};
use crate::host::{self, Outcome, RunConfig};
use crate::instrument::{self, Options};
use crate::meta::{Meta, Metric};
use crate::profile::{ProbeCost, Profile};
use crate::report::{self, ReportOptions};
use crate::status::Status;

/// Runs the command `cli` names.
pub fn run(cli: Cli) -> Result<(), Error> {
    let ui = cli.command.ui();
    let status = Status::new(ui.color, ui.quiet);
    match cli.command {
        Command::Test(args) => test(*args, Mode::Test, status),
        Command::Bench(args) => test(*args, Mode::Bench, status),
        Command::Run(args) => run_module(args, status),
        Command::Instrument(args) => instrument_module(args, status),
        Command::Report(args) => report_profile(args),
        Command::Emcc(args) => exit_with(emcc::run(Driver::Cc, &args.args)?),
        Command::Emxx(args) => exit_with(emcc::run(Driver::Cxx, &args.args)?),
    }
}

/// A module made ready to profile: its instrumented bytes and tables.
struct Prepared {
    wasm: Vec<u8>,
    meta: Meta,
}

/// Instruments `path`'s module, or takes it as it is when it is instrumented already.
fn prepare(path: &Path, options: &Options, status: Status) -> Result<Prepared, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::input(path, e))?;
    if let Ok(Some(meta)) = Meta::from_module(&bytes) {
        return Ok(Prepared { wasm: bytes, meta });
    }
    let started = Instant::now();
    let done = instrument::instrument(&bytes, options).map_err(|e| Error::input(path, e))?;
    status.step(
        "Instrumented",
        format!(
            "{} ({} functions, {} call sites) in {:.2}s",
            relative(path),
            done.meta.functions.len(),
            done.meta.direct_sites.len() + done.meta.indirect_sites.len(),
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(Prepared {
        wasm: done.wasm,
        meta: done.meta,
    })
}

/// Runs a prepared module and decodes its profile; the profile exists whatever way the
/// program ended.
fn profile_run(
    path: &Path,
    prepared: &Prepared,
    config: &RunConfig,
    compensation: Option<ProbeCost>,
) -> Result<(Profile, Outcome), Error> {
    let outcome =
        host::run(&prepared.wasm, config).map_err(|e| Error::input(path, format!("{e:#}")))?;
    let state = outcome
        .state
        .as_ref()
        .ok_or_else(|| Error::input(path, "the module carries no profiler state"))?;
    let mut profile = Profile::decode(&prepared.meta, state, outcome.run_info(relative(path)))
        .map_err(|e| Error::input(path, format!("cannot decode the profile: {e:#}")))?;
    if let Some(cost) = compensation {
        profile.compensate(cost);
    }
    if let Some(trap) = &outcome.trap {
        let innermost: Vec<&str> = profile.runs[0]
            .open_stack
            .iter()
            .rev()
            .take(3)
            .map(String::as_str)
            .collect();
        crate::status::error(format!(
            "{} trapped: {trap}, in {}",
            relative(path),
            innermost.join(" <- ")
        ));
    }
    Ok((profile, outcome))
}

/// Measures the probes' cost, when the profiles measure time and the user wants it
/// subtracted.
fn probe_cost(args: &ProfileArgs, status: Status) -> Result<Option<ProbeCost>, Error> {
    if args.no_compensation || args.instrument.metric != Metric::Time {
        return Ok(None);
    }
    let cost = calibrate::probe_cost(ClockChoice::Auto)
        .map_err(|e| anyhow::anyhow!("cannot measure the probes' cost: {e:#}"))?;
    status.step(
        "Calibrated",
        format!(
            "the probes cost {:.1} ns in the callee and {:.1} ns in the caller per call; subtracted",
            cost.in_callee_ns, cost.in_caller_ns
        ),
    );
    Ok(Some(cost))
}

/// Writes the merged profile if asked, and prints the report unless told not to.
fn finish(profiles: &[Profile], args: &ProfileArgs, status: Status) -> Result<(), Error> {
    let merged = match profiles {
        [one] => one.clone(),
        many => Profile::merge(many),
    };
    if let Some(output) = &args.output {
        merged.write(output)?;
        status.done("Wrote", format!("merged profile to {}", relative(output)));
    }
    if !args.no_report {
        use std::io::Write as _;
        let text = report::render(&merged, &ReportOptions { top: args.top });
        let _ = write!(anstream::stdout(), "{text}");
    }
    Ok(())
}

/// `test` and `bench`: build, then profile every binary.
fn test(args: TestArgs, mode: Mode, status: Status) -> Result<(), Error> {
    let built = build::build(&args.cargo, mode)?;
    let out_dir = built.target_dir.join("wasmprof");
    let compensation = probe_cost(&args.profile, status)?;
    let options = args.profile.instrument.to_options();
    let harness: Vec<String> = mode
        .harness_args()
        .iter()
        .map(|a| a.to_string())
        .chain(args.testname.iter().cloned())
        .chain(args.harness_args.iter().cloned())
        .collect();
    let mut profiles = Vec::new();
    let mut failed = Vec::new();
    for binary in &built.binaries {
        let prepared = prepare(&binary.path, &options, status)?;
        status.done(
            "Running",
            format!("{} ({})", binary.label, relative(&binary.path)),
        );
        let config = RunConfig::new(
            program_name(&binary.path),
            harness.clone(),
            &binary.package_dir,
        );
        let (profile, outcome) = profile_run(&binary.path, &prepared, &config, compensation)?;
        let file = out_dir.join(binary.profile_name());
        profile.write(&file)?;
        status.done(
            "Profiled",
            format!("{} -> {}", binary.label, relative(&file)),
        );
        profiles.push(profile);
        if outcome.exit_code != 0 {
            failed.push(rerun_hint(binary));
            if !args.no_fail_fast {
                break;
            }
        }
    }
    finish(&profiles, &args.profile, status)?;
    match failed.as_slice() {
        [] => Ok(()),
        [one] => Err(Error::TestsFailed(format!(
            "test failed, to rerun pass `{one}`"
        ))),
        many => Err(Error::TestsFailed(format!(
            "{} targets failed:\n    `{}`",
            many.len(),
            many.join("`\n    `")
        ))),
    }
}

/// cargo's flag to rerun one test binary.
fn rerun_hint(binary: &TestBinary) -> String {
    match binary.kind.as_str() {
        "lib" | "rlib" | "cdylib" | "staticlib" | "proc-macro" => "--lib".to_string(),
        kind => format!("--{kind} {}", binary.target),
    }
}

fn run_module(args: RunArgs, status: Status) -> Result<(), Error> {
    let module = args.module();
    let config = RunConfig::new(program_name(module), args.program_args().to_vec(), ".");
    if args.no_instrument {
        let bytes = std::fs::read(module).map_err(|e| Error::input(module, e))?;
        let outcome =
            host::run(&bytes, &config).map_err(|e| Error::input(module, format!("{e:#}")))?;
        if let Some(trap) = &outcome.trap {
            crate::status::error(format!("{} trapped: {trap}", relative(module)));
        }
        return exit_with(outcome.exit_code);
    }
    let prepared = prepare(module, &args.profile.instrument.to_options(), status)?;
    let compensation = probe_cost(&args.profile, status)?;
    let (profile, outcome) = profile_run(module, &prepared, &config, compensation)?;
    if args.profile.output.is_none() {
        let stem = module
            .file_stem()
            .map_or_else(|| "module".into(), |s| s.to_string_lossy().into_owned());
        let file = PathBuf::from(format!("{stem}.wasmprof.json"));
        profile.write(&file)?;
        status.done(
            "Profiled",
            format!("{} -> {}", relative(module), relative(&file)),
        );
    }
    finish(&[profile], &args.profile, status)?;
    exit_with(outcome.exit_code)
}

/// `argv[0]` for a module: its file name.
fn program_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

fn exit_with(code: i32) -> Result<(), Error> {
    match code {
        0 => Ok(()),
        code => Err(Error::ProgramExit(code)),
    }
}

fn instrument_module(args: InstrumentArgs, status: Status) -> Result<(), Error> {
    let bytes = std::fs::read(&args.input).map_err(|e| Error::input(&args.input, e))?;
    let done = instrument::instrument(&bytes, &args.instrument.to_options())
        .map_err(|e| Error::input(&args.input, e))?;
    write_atomic(&args.output, &done.wasm)?;
    status.done(
        "Instrumented",
        format!(
            "{} -> {} ({} functions, {} direct and {} indirect call sites)",
            relative(&args.input),
            relative(&args.output),
            done.meta.functions.len(),
            done.meta.direct_sites.len(),
            done.meta.indirect_sites.len()
        ),
    );
    Ok(())
}

fn report_profile(args: ReportArgs) -> Result<(), Error> {
    use std::io::Write as _;
    let profile =
        Profile::read(&args.profile).map_err(|e| Error::input(&args.profile, format!("{e:#}")))?;
    let text = report::render(&profile, &ReportOptions { top: args.top });
    let _ = write!(anstream::stdout(), "{text}");
    Ok(())
}
