//! What every JS host does with the process that runs the program (node for an Emscripten
//! program, `wasm-bindgen-test-runner` for a wasm-bindgen test binary): the command with
//! the JS runtime's environment and the stdio the run asks for, its exit code, and the dump
//! the runtime left turned into an [`Outcome`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{Marks, Outcome, RunConfig};
use crate::error::HostError;
use crate::js_runtime::{OUT_VAR, SAMPLE_INTERVAL_VAR};
use crate::profile::DumpFile;

/// A JS host's process, ready to run.
pub(super) struct JsProcess {
    /// What it runs (node, the runner), for its errors.
    exe: PathBuf,
    /// The command, with its arguments and environment.
    pub(super) command: Command,
}

impl JsProcess {
    /// `exe PROGRAM ARGS` in the run's directory, with the sampled time metric's interval
    /// for the runtime where one is asked for (else the runtime takes its sampler's), and
    /// the program's output where the run asks for it.
    pub(super) fn new(exe: &Path, program: &Path, config: &RunConfig) -> JsProcess {
        let mut command = Command::new(exe);
        command
            .arg(program)
            .args(&config.args)
            .current_dir(&config.dir);
        if let Some(interval) = config.sample_interval {
            command.env(SAMPLE_INTERVAL_VAR, interval.as_micros().max(1).to_string());
        }
        if !config.inherit_stdio {
            command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
        }
        JsProcess {
            exe: exe.to_path_buf(),
            command,
        }
    }

    /// Runs the process to its end (the runtime sends its dump some other way: a browser
    /// page posts it); its exit code.
    pub(super) fn run(mut self) -> Result<i32, HostError> {
        let status = self.command.status().map_err(|e| {
            HostError::Unavailable(format!("cannot run {}: {e}", self.exe.display()))
        })?;
        Ok(status.code().unwrap_or(1))
    }

    /// Runs the process with the runtime told to save its dump to a temporary file; its
    /// exit code and the dump, if the runtime saved one.
    pub(super) fn run_with_dump_file(mut self) -> Result<(i32, Option<Vec<u8>>), HostError> {
        let file = tempfile::Builder::new()
            .prefix("wasmprof-dump-")
            .suffix(".json")
            .tempfile()
            .map_err(|e| {
                HostError::Unavailable(format!(
                    "cannot create a temporary file for the profile: {e}"
                ))
            })?;
        self.command.env(OUT_VAR, file.path());
        let code = self.run()?;
        Ok((code, std::fs::read(file.path()).ok()))
    }
}

/// How a JS host's run that exited with `code` ended, from the `dump` its runtime left;
/// without one, the error says what may have kept it (`hint`).
pub(super) fn outcome(
    code: i32,
    dump: Option<Vec<u8>>,
    hint: &'static str,
) -> Result<Outcome, HostError> {
    let Some(dump) = dump.filter(|d| !d.is_empty()) else {
        return Err(HostError::NoProfile { code, hint });
    };
    let run = DumpFile::from_slice(&dump)
        .and_then(DumpFile::into_run_dump)
        .map_err(|e| HostError::BadProfile(format!("{e:#}")))?;
    Ok(Outcome {
        exit_code: code,
        trap: run.run.trap,
        dump: Some(run.dump),
        wall_ns: run.run.wall_ns,
        threads: run.threads,
        lost_threads: run.lost_threads,
        ran: Some(run.meta),
        marks: Marks::default(),
        plain_samples: None,
    })
}
