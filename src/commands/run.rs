//! `cargo wasmprof run`: profile one program (a WASI module, or a JS program that
//! `wasmprof-emcc` linked) in its host, or run it as it is.

use std::path::{Path, PathBuf};

use super::pipeline::{exit_with, finish, probe_cost, profile_run, program_name, stem};
use crate::cli::{ProfileArgs, RunArgs};
use crate::error::Error;
use crate::fsutil::relative;
use crate::host;
use crate::profile::Profile;
use crate::status::Status;

/// `run`: the profile goes to PROGRAM.wasmprof.json (or `--output`), then the report; the
/// command ends with the program's exit code.
pub(super) fn run(args: RunArgs, status: Status) -> Result<(), Error> {
    let path = args.module();
    let host = host::for_program(path);
    let config = args
        .profile
        .run_config(program_name(path), args.program_args().to_vec(), ".");
    let options = (!args.no_instrument).then(|| args.profile.instrument.to_options());
    let prepared = host.prepare(path, options.as_ref(), status)?;
    if options.is_none() {
        let outcome = host
            .run(&prepared, &config)
            .map_err(|source| Error::host(path, source))?;
        if let Some(trap) = &outcome.trap {
            crate::status::error(format!("{} trapped: {trap}", relative(path)));
        }
        return exit_with(outcome.exit_code);
    }
    // A module that carried the profiler already keeps the metric it was instrumented for.
    let metric = prepared
        .meta
        .as_ref()
        .map_or(args.profile.instrument.metric, |m| m.metric);
    let compensation = probe_cost(host, metric, &args.profile, status)?;
    let (profile, outcome) = profile_run(host, &prepared, &config, &compensation)?;
    write_default_profile(path, &profile, &args.profile, status)?;
    finish(&[profile], &args.profile, &stem(path), status)?;
    exit_with(outcome.exit_code)
}

/// `run` writes the profile to PROGRAM.wasmprof.json unless told where (`--output`).
fn write_default_profile(
    path: &Path,
    profile: &Profile,
    args: &ProfileArgs,
    status: Status,
) -> Result<(), Error> {
    if args.output.is_some() {
        return Ok(());
    }
    let file = PathBuf::from(format!("{}.wasmprof.json", stem(path).display()));
    profile.write(&file)?;
    status.done(
        "Profiled",
        format!("{} -> {}", relative(path), relative(&file)),
    );
    Ok(())
}
