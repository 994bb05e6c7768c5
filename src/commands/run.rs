//! `cargo wasmprof run`: profile one program (a WASI module, or a JS program that
//! `wasmprof-emcc` linked) in its host, or run it as it is.

use std::path::{Path, PathBuf};

use super::pipeline::{
    exit_with, finish, probe_cost, profile_run, program_name, program_to_run, stem,
};
use crate::cli::{DoctestRunner, ReportRequest, RunRequest};
use crate::error::Error;
use crate::fsutil::{relative, write_atomic};
use crate::harness::DocTest;
use crate::host;
use crate::instrument::{EntryProbes, Options};
use crate::profile::Profile;
use crate::status::Status;

/// `run`: the profile goes to PROGRAM.wasmprof.json (or `--output`; a binary cargo built:
/// to `<target-dir>/wasmprof/`, as `test`'s), then the report; the command ends with the
/// program's exit code.
pub(super) fn run(request: RunRequest, status: Status) -> Result<(), Error> {
    let (path, profile_file, built) = program_to_run(&request.program)?;
    if built.is_some() {
        let command = std::iter::once(relative(&path))
            .chain(request.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        status.step("Running", format!("`{command}`"));
    }
    let path = path.as_path();
    let host = host::for_program(path);
    let profile = &request.profile;
    let config = host::RunConfig {
        sample_plain: request.plain_samples.is_some(),
        ..profile.run_config(program_name(path), request.args.clone(), ".")
    };
    if let Some(doctest) = &request.doctest {
        return run_doctest(path, doctest, host, &config);
    }
    let options = request.instrument.then(|| Options {
        unoptimized: built.as_ref().is_some_and(|b| b.unoptimized),
        ..profile.instrument.clone()
    });
    let prepared = host.prepare(path, options.as_ref(), status)?;
    if options.is_none() {
        let outcome = host
            .run(&prepared, &config)
            .map_err(|source| Error::host(path, source))?;
        if let Some(trap) = &outcome.trap {
            crate::status::error(format!("{} trapped: {trap}", relative(path)));
        }
        if let (Some(file), Some(samples)) = (&request.plain_samples, &outcome.plain_samples) {
            let json = serde_json::to_vec(samples).map_err(anyhow::Error::from)?;
            write_atomic(file, &json)?;
        }
        return exit_with(outcome.exit_code);
    }
    // A module that carried the profiler already keeps the metric it was instrumented for.
    let metric = prepared
        .meta
        .as_ref()
        .map_or(profile.instrument.metric, |m| m.metric);
    let compensation = probe_cost(host, metric, profile.compensate, status)?;
    let (written, outcome) = profile_run(host, &prepared, &config, &compensation)?;
    write_default_profile(path, &profile_file, &written, &profile.report, status)?;
    finish(&[written], &profile.report, &stem(path), status)?;
    exit_with(outcome.exit_code)
}

/// One doc test, run by rustdoc as `run --doctest-dir DIR MODULE ARGS` (see
/// [`DoctestRunner`]): profiled quietly (rustdoc shows a doc test's output only when it
/// fails), its profile written into the runner's directory under the doc test's name, for
/// `cargo wasmprof test` to take in. Exact times are compensated by the probes' cost that
/// `test` measured: calibrating for each doc test would take longer than most run.
fn run_doctest(
    path: &Path,
    runner: &DoctestRunner,
    host: &dyn host::Host,
    config: &host::RunConfig,
) -> Result<(), Error> {
    let quiet = Status::new(crate::status::ColorChoice::Never, true);
    // Compiling a doc test is most of its run: every entry probe a call of `enter` gives
    // the host the least code to compile (BENCHMARKS.md, "Levers tried,
    // not kept", and the file's history).
    let options = Options {
        entries: EntryProbes::Calls,
        ..runner.instrument.clone()
    };
    let prepared = host.prepare(path, Some(&options), quiet)?;
    let (mut profile, outcome) = profile_run(host, &prepared, config, &runner.compensation)?;
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "crate".into());
    let package_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let (label, name) = match DocTest::of(&profile) {
        Some(test) => {
            let file = package_dir
                .as_deref()
                .and_then(|dir| source_file(dir, &test))
                .unwrap_or_else(|| test.mangled_path.clone());
            (
                format!("doc test {file} (line {})", test.line),
                format!("{package}-doc-{}-{}.json", test.mangled_path, test.line),
            )
        }
        None if DocTest::merged(&profile) => (
            format!("the merged doc tests of {package}"),
            format!("{package}-doc-merged-{}.json", std::process::id()),
        ),
        // A doc test with a `main` of its own: rustdoc leaves nothing that says which.
        None => (
            format!("a doc test of {package} with its own main"),
            format!("{package}-doc-main-{}.json", std::process::id()),
        ),
    };
    profile.modules = vec![label.clone()];
    profile.runs[0].module = label;
    profile.write(&runner.dir.join(name))?;
    exit_with(outcome.exit_code)
}

/// The source file under `package_dir` (relative to it) that holds doc test `test`.
fn source_file(package_dir: &Path, test: &DocTest) -> Option<String> {
    let mut dirs = vec![package_dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if name != "target" && !name.to_string_lossy().starts_with('.') {
                    dirs.push(path);
                }
                continue;
            }
            let relative = path.strip_prefix(package_dir).ok()?.to_string_lossy();
            if relative.ends_with(".rs") && test.is_in(&relative) {
                return Some(relative.into_owned());
            }
        }
    }
    None
}

/// `run` writes the profile to `file` unless told where (`--output`).
fn write_default_profile(
    path: &Path,
    file: &Path,
    profile: &Profile,
    args: &ReportRequest,
    status: Status,
) -> Result<(), Error> {
    if args.output.is_some() {
        return Ok(());
    }
    profile.write(file)?;
    status.done(
        "Profiled",
        format!("{} -> {}", relative(path), relative(file)),
    );
    Ok(())
}
