//! `cargo wasmprof test` and `cargo wasmprof bench`: build the crate's binaries, then
//! profile each in the host its target runs in.

use std::path::{Path, PathBuf};

use crate::build::{self, Mode, Target, TestBinary};
use crate::cli::TestArgs;
use crate::error::{Error, HostError};
use crate::fsutil::relative;
use crate::harness::DocTest;
use crate::host;
use crate::profile::Profile;

use super::pipeline::{finish, probe_cost, profile_run, program_name, Compensation};
use crate::status::Status;

/// `test` and `bench`: build, then profile every binary.
pub(super) fn test(args: TestArgs, mode: Mode, status: Status) -> Result<(), Error> {
    let target = args.cargo.target;
    let options = args.profile.instrument.to_options();
    let request = args.cargo.to_request(mode, options.metric);
    let built = if args.cargo.doc {
        build::Built {
            binaries: Vec::new(),
            target_dir: build::target_dir(&request)?,
        }
    } else {
        build::build(&request)?
    };
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
    let mut profiles = Vec::new();
    let mut failed = Vec::new();
    // Doc tests come last, as in cargo (the libraries' and, with --doc, only they), and not
    // after a failure unless --no-fail-fast.
    let libraries: Vec<&str> = built
        .binaries
        .iter()
        .filter(|b| b.kind == "lib")
        .map(|b| b.package.as_str())
        .collect();
    let wants_doc = mode == Mode::Test
        && (args.cargo.doc || (!args.cargo.selects_targets() && !libraries.is_empty()));
    // One target, one kind of binary: the first says which host runs them all (doc tests
    // run in the embedded wasmtime).
    let host = match built.binaries.first() {
        Some(binary) => host::for_program(&binary.path),
        None => &host::Embedded,
    };
    let compensation = probe_cost(host, args.profile.instrument.metric, &args.profile, status)?;
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
        let (profile, outcome) = match profile_run(host, &prepared, &config, &compensation) {
            Err(Error::Host {
                source: HostError::NoTests,
                ..
            }) => continue, // nothing ran, as with cargo
            other => other?,
        };
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
                not_run(&built.binaries[i + 1..], wants_doc);
                break;
            }
        }
    }
    if wants_doc && (failed.is_empty() || args.no_fail_fast) {
        if target.is_wasi() {
            let (doc, passed) = doc_tests(
                &args,
                &request,
                &harness,
                &compensation,
                &out_dir,
                &libraries,
                status,
            )?;
            profiles.extend(doc);
            if !passed {
                failed.push("--doc".to_string());
            }
        } else {
            crate::status::note(format!(
                "doc tests are not profiled for {}: `cargo test --doc --target {}` runs them",
                target.triple(),
                target.triple()
            ));
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

/// Runs the doc tests with cargo, each through `cargo wasmprof run --doctest-dir` as the
/// target's runner, and takes in their profiles (one per doc test, kept in `out_dir`
/// beside the binaries', where those of `packages` from an earlier run are removed); also
/// says whether they all passed.
fn doc_tests(
    args: &TestArgs,
    request: &build::BuildRequest,
    harness: &[String],
    compensation: &Compensation,
    out_dir: &Path,
    packages: &[&str],
    status: Status,
) -> Result<(Vec<Profile>, bool), Error> {
    // The doc tests' profiles of an earlier run go: some are named by process id.
    for entry in std::fs::read_dir(out_dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if packages
            .iter()
            .any(|p| name.starts_with(&format!("{p}-doc-")))
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let dir = out_dir.join("doctests.tmp");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| Error::input(&dir, e))?;
    let exe =
        std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find cargo-wasmprof: {e}"))?;
    let instrument = &args.profile.instrument;
    let mut runner: Vec<String> = vec![exe.display().to_string(), "wasmprof".into(), "run".into()];
    let mut option = |flag: &str, value: String| runner.extend([flag.to_string(), value]);
    option("--doctest-dir", dir.display().to_string());
    option("--metric", instrument.metric.name().to_string());
    option("--max-contexts", instrument.max_contexts.to_string());
    option(
        "--state",
        clap::ValueEnum::to_possible_value(&instrument.state)
            .expect("every state location has a name")
            .get_name()
            .to_string(),
    );
    option(
        "--sample-interval",
        args.profile.sample_interval.to_string(),
    );
    match compensation {
        Compensation::Subtract(cost) => option(
            "--probe-cost",
            format!("{},{}", cost.in_callee_ns, cost.in_caller_ns),
        ),
        Compensation::Keep(_) => runner.push("--no-compensation".into()),
        Compensation::None => {}
    }
    let passed = build::run_doctests(request, &runner, harness)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| Error::input(&dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut profiles = Vec::new();
    for file in &files {
        let profile = Profile::read(file).map_err(|e| Error::input(file, format!("{e:#}")))?;
        let kept = out_dir.join(file.file_name().expect("a file name"));
        std::fs::rename(file, &kept).map_err(|e| Error::input(&kept, e))?;
        profiles.push(profile);
    }
    // rustdoc runs them in parallel: in the report they come by file and line.
    profiles.sort_by_cached_key(|p| DocTest::of(p).map(|t| (t.mangled_path, t.line)));
    let _ = std::fs::remove_dir_all(&dir);
    if !profiles.is_empty() {
        status.done(
            "Profiled",
            format!(
                "{} doc test{} -> {}",
                profiles.len(),
                if profiles.len() == 1 { "" } else { "s" },
                relative(&out_dir.join("*-doc-*.json"))
            ),
        );
    }
    Ok((profiles, passed))
}

/// Says which binaries (and whether the doc tests) a fail-fast run left out, so that a
/// profile of fewer binaries is not taken for the whole suite's.
fn not_run(rest: &[TestBinary], doc: bool) {
    let mut left: Vec<&str> = rest.iter().map(|b| b.label.as_str()).collect();
    if doc {
        left.push("the doc tests");
    }
    if left.is_empty() {
        return;
    }
    crate::status::note(format!(
        "not run after the failure: {}; pass `--no-fail-fast` to run them all",
        left.join(", ")
    ));
}

/// cargo's flag to rerun one test binary.
fn rerun_hint(binary: &TestBinary) -> String {
    match binary.kind.as_str() {
        "lib" | "rlib" | "cdylib" | "staticlib" | "proc-macro" => "--lib".to_string(),
        kind => format!("--{kind} {}", binary.target),
    }
}
