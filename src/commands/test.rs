//! `cargo wasmprof test` and `cargo wasmprof bench`: build the crate's binaries, then
//! profile each in the host its target runs in.

use crate::build::{self, Mode, Target, TestBinary};
use crate::cli::TestArgs;
use crate::error::Error;
use crate::fsutil::relative;
use crate::host;

use super::pipeline::{finish, probe_cost, profile_run, program_name};
use crate::status::Status;

/// `test` and `bench`: build, then profile every binary.
pub(super) fn test(args: TestArgs, mode: Mode, status: Status) -> Result<(), Error> {
    let target = args.cargo.target;
    let options = args.profile.instrument.to_options();
    let built = build::build(&args.cargo.to_request(mode, options.metric))?;
    // Profiles of the default target in wasmprof/, others in wasmprof/<triple>/ (as cargo
    // keeps its own outputs).
    let out_dir = match target {
        Target::Wasip1 => built.target_dir.join("wasmprof"),
        other => built.target_dir.join("wasmprof").join(other.triple()),
    };
    let harness: Vec<String> = mode
        .harness_args()
        .iter()
        .map(|a| a.to_string())
        .chain(args.testname.iter().cloned())
        .chain(args.harness_args.iter().cloned())
        .collect();
    // One target, one kind of binary: the first says which host runs them all.
    let host = match built.binaries.first() {
        Some(binary) => host::for_program(&binary.path),
        None => return finish(&[], &args.profile, &out_dir.join("report"), status),
    };
    let compensation = probe_cost(host, args.profile.instrument.metric, &args.profile, status)?;
    let mut profiles = Vec::new();
    let mut failed = Vec::new();
    for (i, binary) in built.binaries.iter().enumerate() {
        let step = status.item(i + 1, built.binaries.len());
        let prepared = host.prepare(&binary.path, Some(&options), step)?;
        status.done(
            "Running",
            format!("{} ({})", binary.label, relative(&binary.path)),
        );
        let config = args.profile.run_config(
            program_name(&binary.path),
            harness.clone(),
            &binary.package_dir,
        );
        let (profile, outcome) = profile_run(host, &prepared, &config, &compensation)?;
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
