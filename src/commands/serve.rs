//! `cargo wasmprof serve`: a wasi:http component (the one named, or the package's,
//! built for wasm32-wasip2) served until told to stop, its requests profiled; then the
//! profile and the report, or, served as it is, the requests alone.

use super::pipeline::{finish, program_to_run, stem};
use crate::cli::ServeRequest;
use crate::error::Error;
use crate::fsutil::relative;
use crate::host::{self, Embedded, Host as _, ServeConfig};
use crate::profile::{Profile, Requests};
use crate::status::Status;

/// The requests of a plain server that `file` holds (`serve --no-instrument -o FILE`).
fn plain_requests(file: &std::path::Path) -> Result<Requests, Error> {
    let profile = Profile::read(file).map_err(|e| Error::input(file, format!("{e:#}")))?;
    profile.requests.ok_or_else(|| {
        Error::input(
            file,
            "holds no server's requests (`serve --no-instrument -o FILE` writes them)",
        )
    })
}

/// `serve`: the profile goes to COMPONENT.wasmprof.json (or `--output`; a component cargo
/// built: to `<target-dir>/wasmprof/wasm32-wasip2/`, as `run`'s), then the report. Served
/// plain, the requests' table alone, and with `--output`, a profile of the requests alone
/// (what `--plain` reads).
pub(super) fn serve(request: ServeRequest, status: Status) -> Result<(), Error> {
    let plain = request.plain.as_deref().map(plain_requests).transpose()?;
    let (path, profile_file, built) = program_to_run(&request.program)?;
    let profile = &request.profile;
    let options = request.instrument.then(|| crate::instrument::Options {
        unoptimized: built.is_some_and(|b| b.unoptimized),
        ..profile.instrument.clone()
    });
    let prepared = Embedded.prepare(&path, options.as_ref(), status)?;
    let config = ServeConfig {
        addr: request.addr,
        requests: request.requests,
        workers: request.workers,
        instance_reuse: host::Reuse {
            requests: request.instance_reuse,
            at_once: request.instance_concurrency,
        },
        sample_interval: profile.sample_interval,
    };
    let served = host::serve(&prepared, &config, status).map_err(|e| Error::host(&path, e))?;
    let Some(mut profile_made) = served.profile else {
        if let Some(output) = &profile.report.output {
            let requests = Profile {
                modules: vec![relative(&path)],
                metric: crate::meta::Metric::Calls,
                requests: Some(served.requests.clone()),
                ..Profile::merge(&[])
            };
            requests.write(output)?;
            status.done("Wrote", format!("the requests to {}", relative(output)));
        }
        let report = crate::format::requests_report(&served.requests);
        let _ = std::io::Write::write_all(&mut anstream::stdout(), report.as_bytes());
        return Ok(());
    };
    if let Some(requests) = profile_made.requests.as_mut() {
        requests.plain = plain.map(Box::new);
    }
    if profile.report.output.is_none() {
        profile_made.write(&profile_file)?;
        status.done(
            "Profiled",
            format!("{} -> {}", relative(&path), relative(&profile_file)),
        );
    }
    finish(&[profile_made], &profile.report, &stem(&path), status)
}
