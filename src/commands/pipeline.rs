//! The steps that every command running a program shares, whichever host runs it: run the
//! prepared program, decode and compensate its profile, say where it trapped, and write the
//! profile and its views.

use std::path::{Path, PathBuf};

use crate::build::{self, TestBinary};
use crate::calibrate;
use crate::cli::{ProgramToRun, ReportRequest, NO_COMPENSATION};
use crate::clock::ClockChoice;
use crate::error::Error;
use crate::format::{self, Format};
use crate::fsutil::{relative, write_atomic};
use crate::harness;
use crate::host::{Host, Outcome, Prepared, RunConfig};
use crate::meta::Metric;
use crate::profile::{Compensation, Profile};
use crate::status::Status;

/// Runs a prepared, instrumented program in `host` and decodes its profile, less the
/// probes' cost when `compensation` says so (else the profile says why not), with each
/// benchmark its harness named split out of its routine's figures; the profile exists
/// whatever way the program ended.
pub(super) fn profile_run(
    host: &dyn Host,
    prepared: &Prepared,
    config: &RunConfig,
    compensation: &Compensation,
) -> Result<(Profile, Outcome), Error> {
    let path = &prepared.path;
    let meta = prepared
        .meta
        .as_ref()
        .ok_or_else(|| Error::input(path, "does not carry the profiler"))?;
    let outcome = host
        .run(prepared, config)
        .map_err(|source| Error::host(path, source))?;
    let mut profile = outcome
        .profile(meta, relative(path))
        .map_err(|e| Error::input(path, format!("{e:#}")))?;
    if crate::instrument::component::is_component(&prepared.wasm) {
        profile.runs.iter_mut().for_each(|r| r.component = true);
    }
    if let Some(why) = profile.apply(compensation) {
        crate::status::warning(format!(
            "{}: the times include the probes' own cost: {why}",
            relative(path)
        ));
    }
    if !outcome.marks.is_empty() {
        let meta = outcome.ran.as_ref().unwrap_or(meta);
        let at_marks = outcome.marks.dumps().map(|(mark, dump)| {
            let mut p = Profile::decode(meta, &dump, outcome.run_info(relative(path)))?;
            p.apply(compensation);
            Ok((mark.id.clone(), mark.moment, p))
        });
        profile.benchmarks = harness::benchmarks(at_marks, &profile)
            .map_err(|e| Error::input(path, format!("{e:#}")))?;
    }
    report_trap(path, &profile);
    Ok((profile, outcome))
}

/// Says where the program trapped, if it did: in the innermost function of the program's
/// own code, and what of the runtime it was in (a panic's abort), on a line of its own.
fn report_trap(path: &Path, profile: &Profile) {
    let run = &profile.runs[0];
    if let Some(trap) = &run.trap {
        let stack = &run.open_stack;
        let own = harness::innermost_own(profile, stack);
        let place = match (own, stack.last()) {
            (_, None) => " (the host gave no stack)".to_string(),
            (Some(at), Some(innermost)) if at + 1 < stack.len() => {
                format!(", in {} (in {innermost})", stack[at])
            }
            (Some(at), _) => format!(", in {}", stack[at]),
            (None, Some(innermost)) => format!(", in {innermost}"),
        };
        // A program that trapped mid-line (libtest's `test name ... `) leaves the cursor
        // there; the program's own output stays as it wrote it.
        eprintln!();
        crate::status::error(format!("{} trapped: {trap}{place}", relative(path)));
    }
}

/// Measures the probes' cost when the profiles' `metric` reads a clock at its probes,
/// `host` runs the probes the calibration measures and the user wants it subtracted
/// (`compensate`).
pub(super) fn probe_cost(
    host: &dyn Host,
    metric: Metric,
    compensate: bool,
    status: Status,
) -> Result<Compensation, Error> {
    if !metric.facts().probes.clock {
        return Ok(Compensation::None);
    }
    if !compensate {
        return Ok(Compensation::Keep(NO_COMPENSATION.into()));
    }
    if !host.calibrated() {
        return Ok(Compensation::Keep(
            "the calibration measures the embedded wasmtime's probes, not this host's".into(),
        ));
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
    Ok(Compensation::Subtract(cost))
}

/// The program `program` names (built first, when it is the package's binary, that built
/// binary's `TestBinary`) and where its profile goes: FILE.wasmprof.json in the working
/// directory, or, for a binary cargo built, the target directory's profiles, as `test`'s.
pub(super) fn program_to_run(
    program: &ProgramToRun,
) -> Result<(PathBuf, PathBuf, Option<TestBinary>), Error> {
    match program {
        ProgramToRun::File(path) => {
            let file = PathBuf::from(format!("{}.wasmprof.json", stem(path).display()));
            Ok((path.clone(), file, None))
        }
        ProgramToRun::Build(build) => {
            let (binary, target_dir) = build::build_program(build)?;
            let file = build::profiles_dir(&target_dir, build.target).join(binary.profile_name());
            Ok((binary.path.clone(), file, Some(binary)))
        }
    }
}

/// Writes the merged profile if asked, and the report's formats unless told not to: text
/// to the terminal, the others to files named after `reports`. Each binary's own profile,
/// written before, keeps its module's functions as they are.
pub(super) fn finish(
    profiles: &[Profile],
    args: &ReportRequest,
    reports: &Path,
    status: Status,
) -> Result<(), Error> {
    // Merged even when one: copies of one function in a module (same name, file and
    // line, ` [func N]` apart) are one entry in the report as in a merge of many.
    let merged = Profile::merge(profiles);
    if let Some(output) = &args.output {
        merged.write(output)?;
        status.done("Wrote", format!("merged profile to {}", relative(output)));
    }
    if !args.show {
        return Ok(());
    }
    let options = &args.emit;
    let merged = merged
        .into_view(&args.filter)
        .map_err(|e| anyhow::anyhow!("cannot show the profile: {e:#}"))?;
    for &format in &args.formats {
        if format == Format::Text {
            // On a line of its own: a program that ended mid-line (a test that aborted
            // after libtest's `test name ... `) leaves the cursor there.
            println!();
            format::print_text(&merged, options);
            continue;
        }
        let stem = reports
            .file_name()
            .map_or_else(|| "report".into(), |s| s.to_string_lossy().into_owned());
        let file = reports.with_file_name(format.file_name(&stem));
        let bytes = format
            .render(&merged, options)
            .map_err(|e| anyhow::anyhow!("cannot write the {} report: {e:#}", format.name()))?;
        write_atomic(&file, &bytes)?;
        status.done(
            "Wrote",
            format!("{} report to {}", format.name(), relative(&file)),
        );
    }
    Ok(())
}

/// `argv[0]` for a program: its file name.
pub(super) fn program_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// Where `run` writes what it makes of `module`: its stem, in the working directory (the
/// formats add their extensions).
pub(super) fn stem(module: &Path) -> PathBuf {
    PathBuf::from(
        module
            .file_stem()
            .map_or_else(|| "module".into(), |s| s.to_string_lossy().into_owned()),
    )
}

/// Ends a command with the program's own exit code.
pub(super) fn exit_with(code: i32) -> Result<(), Error> {
    match code {
        0 => Ok(()),
        code => Err(Error::ProgramExit(code)),
    }
}
