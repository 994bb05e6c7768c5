//! The commands, each a walk down the pipeline:
//! build -> instrument -> run -> symbolize (inside instrument) -> profile -> report.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;

use crate::build::{self, Mode, Target, TestBinary};
use crate::calibrate;
use crate::cli::{
    Cli, Command, DiffArgs, InstrumentArgs, ProfileArgs, ReportArgs, RunArgs, TestArgs,
};
use crate::clock::ClockChoice;
use crate::diff::Diff;
use crate::emcc::{self, Driver};
use crate::emscripten;
use crate::error::Error;
use crate::format::{EmitOptions, Format};
use crate::fsutil::{relative, write_atomic};
use crate::host::{self, Outcome, RunConfig};
use crate::instrument::{self, Options};
use crate::meta::{Meta, Metric, StateLocation};
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
        Command::Report(args) => report_profile(args, status),
        Command::Diff(args) => diff_profiles(args),
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
    let spinner = status.spinner("Instrumenting", relative(path));
    let done = instrument::instrument(&bytes, options).map_err(|e| Error::input(path, e))?;
    drop(spinner);
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

/// Instruments the module that the Emscripten program `js` loads, in place, unless the
/// link instrumented it with the same options already.
fn prepare_beside(js: &Path, options: &Options, status: Status) -> Result<(), Error> {
    let wasm = js.with_extension("wasm");
    let started = Instant::now();
    let spinner = status.spinner("Instrumenting", relative(&wasm));
    let done = emcc::instrument_in_place(&wasm, options)?;
    drop(spinner);
    if let Some(meta) = done {
        status.step(
            "Instrumented",
            format!(
                "{} ({} functions) in {:.2}s",
                relative(&wasm),
                meta.functions.len(),
                started.elapsed().as_secs_f64()
            ),
        );
    }
    Ok(())
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
    let mut profile = outcome
        .profile(&prepared.meta, relative(path))
        .map_err(|e| Error::input(path, format!("{e:#}")))?;
    if let Some(cost) = compensation {
        profile.compensate(cost);
    }
    report_trap(path, &profile);
    Ok((profile, outcome))
}

/// Says where the program trapped, if it did.
fn report_trap(path: &Path, profile: &Profile) {
    let run = &profile.runs[0];
    if let Some(trap) = &run.trap {
        let innermost: Vec<&str> = run
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
}

/// Measures the probes' cost, when the profiles measure time and the user wants it
/// subtracted.
fn probe_cost(args: &ProfileArgs, status: Status) -> Result<Option<ProbeCost>, Error> {
    if args.no_compensation || args.instrument.metric != Metric::Time {
        return Ok(None);
    }
    let spinner = status.spinner("Calibrating", "the probes' cost");
    let cost = calibrate::probe_cost(ClockChoice::Auto)
        .map_err(|e| anyhow::anyhow!("cannot measure the probes' cost: {e:#}"))?;
    drop(spinner);
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
fn finish(
    profiles: &[Profile],
    args: &ProfileArgs,
    reports: &Path,
    status: Status,
) -> Result<(), Error> {
    let merged = match profiles {
        [one] => one.clone(),
        many => Profile::merge(many),
    };
    if let Some(output) = &args.output {
        merged.write(output)?;
        status.done("Wrote", format!("merged profile to {}", relative(output)));
    }
    if args.no_report {
        return Ok(());
    }
    let options = EmitOptions {
        top: args.top,
        icicle: args.icicle,
    };
    for &format in &args.format {
        if format == Format::Text {
            print_text(&merged, &options);
            continue;
        }
        let stem = reports
            .file_name()
            .map_or_else(|| "report".into(), |s| s.to_string_lossy().into_owned());
        let file = reports.with_file_name(format.file_name(&stem));
        let bytes = format.render(&merged, &options).map_err(|e| {
            anyhow::anyhow!("cannot write the {} report: {e:#}", format_name(format))
        })?;
        write_atomic(&file, &bytes)?;
        status.done(
            "Wrote",
            format!("{} report to {}", format_name(format), relative(&file)),
        );
    }
    Ok(())
}

/// Prints the text report, colored where the terminal allows.
fn print_text(profile: &Profile, options: &EmitOptions) {
    use std::io::Write as _;
    let text = report::render(profile, &ReportOptions { top: options.top });
    let _ = write!(anstream::stdout(), "{text}");
}

/// A format's name as `--format` takes it.
fn format_name(format: Format) -> String {
    use clap::ValueEnum as _;
    format
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string())
}

/// `test` and `bench`: build, then profile every binary.
fn test(args: TestArgs, mode: Mode, status: Status) -> Result<(), Error> {
    let target = args.cargo.target;
    let mut options = args.profile.instrument.to_options();
    let built = build::build(&args.cargo, mode, options.metric)?;
    // Profiles of the default target in wasmprof/, others in wasmprof/<triple>/ (as cargo
    // keeps its own outputs).
    let out_dir = match target {
        Target::Wasip1 => built.target_dir.join("wasmprof"),
        other => built.target_dir.join("wasmprof").join(other.triple()),
    };
    let compensation = match target {
        Target::Wasip1 => probe_cost(&args.profile, status)?,
        Target::Emscripten => None, // the calibration measures wasmtime's probes, not node's
    };
    if target == Target::Emscripten {
        options.state = StateLocation::StateModule; // node 20 allows one memory per module
    }
    let harness: Vec<String> = mode
        .harness_args()
        .iter()
        .map(|a| a.to_string())
        .chain(args.testname.iter().cloned())
        .chain(args.harness_args.iter().cloned())
        .collect();
    let mut profiles = Vec::new();
    let mut failed = Vec::new();
    for (i, binary) in built.binaries.iter().enumerate() {
        let step = status.item(i + 1, built.binaries.len());
        let (profile, exit_code) = match target {
            Target::Wasip1 => {
                let prepared = prepare(&binary.path, &options, step)?;
                status.done(
                    "Running",
                    format!("{} ({})", binary.label, relative(&binary.path)),
                );
                let config = RunConfig::new(
                    program_name(&binary.path),
                    harness.clone(),
                    &binary.package_dir,
                );
                let (profile, outcome) =
                    profile_run(&binary.path, &prepared, &config, compensation)?;
                (profile, outcome.exit_code)
            }
            Target::Emscripten => {
                prepare_beside(&binary.path, &options, step)?;
                status.done(
                    "Running",
                    format!("{} ({})", binary.label, relative(&binary.path)),
                );
                let (profile, exit_code) =
                    emscripten::profile_run(&binary.path, &harness, &binary.package_dir)?;
                report_trap(&binary.path, &profile);
                (profile, exit_code)
            }
        };
        let file = out_dir.join(binary.profile_name());
        profile.write(&file)?;
        status.done(
            "Profiled",
            format!("{} -> {}", binary.label, relative(&file)),
        );
        profiles.push(profile);
        if exit_code != 0 {
            failed.push(rerun_hint(binary));
            if !args.no_fail_fast {
                break;
            }
        }
    }
    finish(&profiles, &args.profile, &out_dir.join("report"), status)?;
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
    if emscripten::is_program(module) {
        return run_program(args, status);
    }
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
    write_default_profile(module, &profile, &args.profile, status)?;
    finish(&[profile], &args.profile, &stem(module), status)?;
    exit_with(outcome.exit_code)
}

/// `run` of a program that wasmprof-emcc linked (`.js`, `.mjs`): under node.
fn run_program(args: RunArgs, status: Status) -> Result<(), Error> {
    let js = args.module();
    if args.no_instrument {
        return Err(Error::input(
            js,
            "--no-instrument runs wasip1 modules; run a JS program with node itself",
        ));
    }
    let mut options = args.profile.instrument.to_options();
    options.state = StateLocation::StateModule;
    prepare_beside(js, &options, status)?;
    let (profile, exit_code) = emscripten::profile_run(js, args.program_args(), Path::new("."))?;
    report_trap(js, &profile);
    write_default_profile(js, &profile, &args.profile, status)?;
    finish(&[profile], &args.profile, &stem(js), status)?;
    exit_with(exit_code)
}

/// `run` writes the profile to MODULE.wasmprof.json unless told where (`--output`).
fn write_default_profile(
    module: &Path,
    profile: &Profile,
    args: &ProfileArgs,
    status: Status,
) -> Result<(), Error> {
    if args.output.is_some() {
        return Ok(());
    }
    let file = PathBuf::from(format!("{}.wasmprof.json", stem(module).display()));
    profile.write(&file)?;
    status.done(
        "Profiled",
        format!("{} -> {}", relative(module), relative(&file)),
    );
    Ok(())
}

/// Where `run` writes what it makes of `module`: its stem, in the working directory (the
/// formats add their extensions).
fn stem(module: &Path) -> PathBuf {
    PathBuf::from(
        module
            .file_stem()
            .map_or_else(|| "module".into(), |s| s.to_string_lossy().into_owned()),
    )
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
    let spinner = status.spinner("Instrumenting", relative(&args.input));
    let done = instrument::instrument(&bytes, &args.instrument.to_options())
        .map_err(|e| Error::input(&args.input, e))?;
    drop(spinner);
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

fn report_profile(args: ReportArgs, status: Status) -> Result<(), Error> {
    use std::io::{IsTerminal as _, Write as _};
    let profile =
        Profile::read(&args.profile).map_err(|e| Error::input(&args.profile, format!("{e:#}")))?;
    let options = EmitOptions {
        top: args.top,
        icicle: args.icicle,
    };
    if args.format == Format::Text && args.output.is_none() {
        print_text(&profile, &options);
        return Ok(());
    }
    let bytes = args
        .format
        .render(&profile, &options)
        .map_err(|e| Error::input(&args.profile, format!("{e:#}")))?;
    match &args.output {
        Some(file) => {
            write_atomic(file, &bytes)?;
            status.done(
                "Wrote",
                format!("{} report to {}", format_name(args.format), relative(file)),
            );
        }
        None if args.format.is_binary() && std::io::stdout().is_terminal() => {
            return Err(anyhow::anyhow!(
                "{} is binary; write it to a file with -o FILE",
                format_name(args.format)
            )
            .into());
        }
        None => {
            std::io::stdout()
                .write_all(&bytes)
                .context("cannot write to standard output")?;
        }
    }
    Ok(())
}

fn diff_profiles(args: DiffArgs) -> Result<(), Error> {
    use std::io::Write as _;
    let read = |path: &Path| Profile::read(path).map_err(|e| Error::input(path, format!("{e:#}")));
    let (base, new) = (read(&args.base)?, read(&args.new)?);
    let diff = Diff::of(&base, &new, args.metric)?;
    let text = if args.json {
        serde_json::to_string_pretty(&diff).expect("diffs serialize") + "\n"
    } else {
        diff.render(args.top)
    };
    let _ = write!(anstream::stdout(), "{text}");
    match args.fail_above {
        Some(limit) if diff.change_percent > limit => Err(Error::Regression(format!(
            "{} grew by {:.2}% from {} to {}, above the {limit}% allowed",
            diff.metric.name(),
            diff.change_percent,
            relative(&args.base),
            relative(&args.new)
        ))),
        _ => Ok(()),
    }
}
