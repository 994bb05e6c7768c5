//! `cargo wasmprof test` and `cargo wasmprof bench`: build the crate's binaries, then
//! profile each in the host its target runs in.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use super::pipeline::{finish, probe_cost, profile_run, program_name};
use crate::build::{self, Mode, Target, TestBinary};
use crate::cli::{DocTests, DoctestRunner, TestRequest};
use crate::diff::baseline::{self, Baseline, Comparison};
use crate::error::{Error, HostError};
use crate::fsutil::relative;
use crate::harness::DocTest;
use crate::host::{self, Prepared};
use crate::instrument::Options;
use crate::profile::{Compensation, Profile};
use crate::status::Status;

/// `test` and `bench`: build, then profile every binary, then the doc tests.
pub(super) fn test(request: TestRequest, status: Status) -> Result<(), Error> {
    let build = &request.build;
    // The baseline to compare with, checked before anything runs.
    let baseline = match &request.baselines.compare {
        Some(name) => Some(baseline_to_compare(&request, name)?),
        None => None,
    };
    let built = match request.doc_tests {
        DocTests::Only => build::Built {
            binaries: Vec::new(),
            target_dir: build::target_dir(build)?,
        },
        _ => build::build(build)?,
    };
    let out_dir = build::profiles_dir(&built.target_dir, build.target);
    // Doc tests come last, as in cargo (the libraries' and, with --doc, only they), and not
    // after a failure unless --no-fail-fast.
    let libraries: Vec<&str> = built
        .binaries
        .iter()
        .filter(|b| b.kind == "lib")
        .map(|b| b.package.as_str())
        .collect();
    let wants_doc = build.mode == Mode::Test
        && match request.doc_tests {
            DocTests::Only => true,
            DocTests::AfterBinaries => !libraries.is_empty(),
            DocTests::None => false,
        };
    // One target, one kind of binary: the first says which host runs them all (doc tests
    // run in the embedded wasmtime).
    let host = match built.binaries.first() {
        Some(binary) => host::for_program(&binary.path),
        None => &host::Embedded,
    };
    let profile = &request.profile;
    let compensation = probe_cost(host, profile.instrument.metric, profile.compensate, status)?;
    let run = BinariesRun {
        request: &request,
        host,
        compensation: &compensation,
        out_dir: &out_dir,
        status,
    };
    let (mut profiles, mut failed) = run.binaries(&built.binaries, wants_doc)?;
    if wants_doc && (failed.is_empty() || !request.fail_fast) {
        let (doc, passed) = match build.target {
            Target::Unknown => (Vec::new(), run.unprofiled_doc_tests()?),
            // A doc test is a program with a `main`: WASI and Emscripten's hosts run it.
            _ => run.doc_tests(&libraries)?,
        };
        profiles.extend(doc);
        if !passed {
            failed.push("--doc".to_string());
        }
    }
    let (names, profiles): (Vec<String>, Vec<Profile>) = profiles.into_iter().unzip();
    if profiles.is_empty() {
        crate::status::note("no profile and no report: the binaries ran no test");
    } else {
        finish(&profiles, &profile.report, &out_dir.join("report"), status)?;
    }
    let named: Vec<(String, &Profile)> = names.into_iter().zip(&profiles).collect();
    let regression = baselines(
        &request,
        baseline.as_ref(),
        &out_dir,
        &named,
        failed.is_empty(),
        status,
    )?;
    verdict(&failed, request.fail_fast)?;
    regression.map_or(Ok(()), Err)
}

/// The tests' verdict, as cargo gives it: the rerun flag of the binary that `failed`
/// where the run stopped at it (`fail_fast`), else each failed binary's, listed.
fn verdict(failed: &[String], fail_fast: bool) -> Result<(), Error> {
    match failed {
        [] => Ok(()),
        [one] if fail_fast => Err(Error::TestsFailed(format!(
            "{} failed, to rerun pass `{one}`",
            if one == "--doc" { "doctest" } else { "test" }
        ))),
        many => Err(Error::TestsFailed(format!(
            "{} target{} failed:\n    `{}`",
            many.len(),
            if many.len() == 1 { "" } else { "s" },
            many.join("`\n    `")
        ))),
    }
}

/// Baseline `name` of the run `request` makes, checked to compare with it.
fn baseline_to_compare(request: &TestRequest, name: &str) -> Result<Baseline, Error> {
    let build = &request.build;
    let out_dir = build::profiles_dir(&build::target_dir(build)?, build.target);
    let found = Baseline::load(&baseline::dir(&out_dir, name), name)?;
    found.check(
        request.profile.instrument.metric,
        request.build.target.triple(),
    )?;
    Ok(found)
}

/// Compares the run's `profiles` (each with its file name) with the `baseline` the request
/// names, and keeps them as the one it saves (only when every test `passed`). Returns the
/// regression past `--fail-above`, if any, which fails the command once the tests' own
/// verdict is out.
fn baselines(
    request: &TestRequest,
    baseline: Option<&Baseline>,
    out_dir: &Path,
    profiles: &[(String, &Profile)],
    passed: bool,
    status: Status,
) -> Result<Option<Error>, Error> {
    let wanted = &request.baselines;
    let metric = request.profile.instrument.metric;
    let target = request.build.target.triple();
    let mut regression = None;
    if let (Some(name), Some(found)) = (&wanted.compare, baseline) {
        let comparison = found.compare(profiles)?;
        let _ = std::io::Write::write_all(&mut anstream::stdout(), comparison.render().as_bytes());
        comparison.write_markdown(&Comparison::markdown_file(out_dir, name))?;
        if let (Some(limit), Some(worst)) = (wanted.fail_above, comparison.worst_regression()) {
            if worst.change_percent() > limit {
                regression = Some(Error::Regression(format!(
                    "{}: {} grew by {:.2}% from baseline `{name}`, above the {limit}% allowed",
                    worst.profile,
                    worst.describe(),
                    worst.change_percent()
                )));
            }
        }
    }
    if let Some(name) = &wanted.save {
        if !passed {
            crate::status::note(format!(
                "baseline `{name}` not saved: a test failed, and a failing run's profiles \
                 make no baseline"
            ));
        } else {
            let dir = baseline::dir(out_dir, name);
            baseline::save(&dir, metric, target, profiles)?;
            status.done(
                "Saved",
                format!(
                    "baseline `{name}` ({} profiles) in {}",
                    profiles.len(),
                    relative(&dir)
                ),
            );
        }
    }
    Ok(regression)
}

/// The name libtest knows the test by that the run of `p` stopped in: the innermost of its
/// open calls that is a `#[test]` function, its path less the crate's name.
fn failing_test(p: &Profile) -> Option<String> {
    let tests = crate::harness::test_functions(p);
    let stack = &p.runs.first()?.open_stack;
    let test = stack
        .iter()
        .rev()
        .find(|name| tests.iter().any(|t| &t.name == *name))?;
    test.split_once("::").map(|(_, path)| path.to_string())
}

/// A profile with its file's name in the out dir (which a baseline keeps it by).
type Named = (String, Profile);

/// How many binaries are instrumented at once at most: a large debug binary takes several
/// hundred MB while it is rewritten.
const AT_ONCE: usize = 4;

/// How many binaries are instrumented at once here: one per core, up to [`AT_ONCE`].
fn at_once() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(AT_ONCE))
}

/// What profiling a `test` run's binaries and doc tests shares: the request, the host
/// that runs them, the probes' cost, and where their profiles go.
struct BinariesRun<'a> {
    request: &'a TestRequest,
    host: &'a dyn host::Host,
    compensation: &'a Compensation,
    out_dir: &'a Path,
    status: Status,
}

impl BinariesRun<'_> {
    /// Profiles each binary in cargo's order, each profile written to the out dir; stops
    /// after the first that fails unless the request says not to (`doc`: whether doc
    /// tests would follow, for the note that says what was not run). Returns the profiles
    /// and the failed binaries' rerun flags.
    fn binaries(
        &self,
        binaries: &[TestBinary],
        doc: bool,
    ) -> Result<(Vec<Named>, Vec<String>), Error> {
        let (request, status) = (self.request, self.status);
        let mut profiles = Vec::new();
        let mut failed = Vec::new();
        let mut ready = VecDeque::new();
        for (i, binary) in binaries.iter().enumerate() {
            if ready.is_empty() {
                let batch = &binaries[i..binaries.len().min(i + at_once())];
                ready.extend(self.prepare(batch, i, binaries.len()));
            }
            let prepared = ready.pop_front().expect("a batch of one binary or more")?;
            status.done(
                "Running",
                format!("{} ({})", binary.label, relative(&binary.path)),
            );
            let config = request.profile.run_config(
                program_name(&binary.path),
                request.harness.clone(),
                &binary.package_dir,
            );
            let (profile, outcome) =
                match profile_run(self.host, &prepared, &config, self.compensation) {
                    Err(Error::Host {
                        source: HostError::NoTests,
                        ..
                    }) => continue, // nothing ran, as with cargo
                    other => other?,
                };
            let file = self.out_dir.join(binary.profile_name());
            profile.write(&file)?;
            status.done(
                "Profiled",
                format!("{} -> {}", binary.label, relative(&file)),
            );
            if outcome.trap.is_some() {
                self.show_lost_output(binary, &profile);
            }
            profiles.push((binary.profile_name(), profile));
            if outcome.exit_code != 0 {
                failed.push(rerun_hint(binary));
                if request.fail_fast {
                    not_run(&binaries[i + 1..], doc);
                    break;
                }
            }
        }
        Ok((profiles, failed))
    }

    /// A test that panicked took its output with it: a panic aborts on wasm, and libtest
    /// had captured the test's output. As `cargo test` shows a failing test's output, the
    /// test the run stopped in is run again alone, uncaptured and without the profiler
    /// (through `cargo wasmprof run --no-instrument`, in the embedded wasmtime), and what it
    /// printed is shown under its name, where it printed a panic's message.
    fn show_lost_output(&self, binary: &TestBinary, profile: &Profile) {
        let request = self.request;
        let embedded = matches!(
            request.build.target,
            Target::Wasip1 | Target::Wasip1Threads | Target::Wasip2
        );
        let uncaptured =
            (request.harness.iter()).any(|a| a == "--nocapture" || a == "--no-capture");
        if request.build.mode != Mode::Test || !embedded || uncaptured {
            return;
        }
        let Some(name) = failing_test(profile) else {
            return;
        };
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        let Ok(rerun) = std::process::Command::new(exe)
            .args(["run", "--no-instrument", "--quiet"])
            .arg(&binary.path)
            .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .current_dir(&binary.package_dir)
            .stdin(std::process::Stdio::null())
            .output()
        else {
            return;
        };
        let stdout = String::from_utf8_lossy(&rerun.stdout);
        let stderr = String::from_utf8_lossy(&rerun.stderr);
        if !stderr.contains("panicked at") {
            return;
        }
        // libtest's own lines around the test's output.
        let printed = stdout
            .trim_start()
            .trim_start_matches("running 1 test")
            .trim_start()
            .trim_start_matches(&format!("test {name} ... "));
        // (The rerun's own trap line is the one this run printed already.)
        let panicked: Vec<&str> = stderr
            .lines()
            .skip_while(|l| l.is_empty())
            .take_while(|l| !l.starts_with("error: "))
            .collect();
        println!(
            "\n---- {name} stdout ----\n{printed}{}{}\n",
            if printed.is_empty() || printed.ends_with('\n') {
                ""
            } else {
                "\n"
            },
            panicked.join("\n")
        );
        crate::status::note(format!(
            "the output of `{name}` above is from a second run of it alone, uncaptured and \
             not profiled: its abort lost what libtest had captured (`-- --nocapture` shows \
             it as it runs)"
        ));
    }

    /// Makes the binaries of `batch` ready to run, each on a thread of its own (`first` is
    /// the first one's index among `of`), before any of them runs: instrumenting a binary
    /// keeps about one core busy, and no program shares the machine with it.
    fn prepare(
        &self,
        batch: &[TestBinary],
        first: usize,
        of: usize,
    ) -> Vec<Result<Prepared, Error>> {
        let prepare = |k: usize| {
            let binary = &batch[k];
            let options = Options {
                unoptimized: binary.unoptimized,
                ..self.request.profile.instrument.clone()
            };
            let step = self.status.item(first + k + 1, of);
            self.host.prepare(&binary.path, Some(&options), step)
        };
        std::thread::scope(|scope| {
            let others: Vec<_> = (1..batch.len())
                .map(|k| scope.spawn(move || prepare(k)))
                .collect();
            let mut done = vec![prepare(0)];
            for other in others {
                done.push(
                    other
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                );
            }
            done
        })
    }

    /// Runs the doc tests of a wasm32-unknown-unknown build as `cargo test` runs them there,
    /// not profiled: rustdoc builds each, and wasm-bindgen-test-runner runs only
    /// `#[wasm_bindgen_test]` functions, which a doc test has none of. Whether they passed.
    fn unprofiled_doc_tests(&self) -> Result<bool, Error> {
        let build = &self.request.build;
        let runner = [host::BINDGEN_RUNNER.to_string()];
        let passed = build::run_doctests(build, &runner, &self.request.harness)?;
        crate::status::note(format!(
            "doc tests for {} ran as `cargo test` runs them, not profiled: \
             wasm-bindgen-test-runner runs only #[wasm_bindgen_test] functions, which a doc \
             test has none of (each is built, and passes if it builds)",
            build.target.triple()
        ));
        Ok(passed)
    }

    /// Runs the doc tests with cargo, each through `cargo wasmprof run --doctest-dir` as
    /// the target's runner, and takes in their profiles (one per doc test, kept in the out
    /// dir beside the binaries', where those of `packages` from an earlier run are
    /// removed); also says whether they all passed.
    fn doc_tests(&self, packages: &[&str]) -> Result<(Vec<Named>, bool), Error> {
        let out_dir = self.out_dir;
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
        let exe = std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("cannot find cargo-wasmprof: {e}"))?;
        let profile = &self.request.profile;
        let doctest = DoctestRunner {
            dir: dir.clone(),
            instrument: profile.instrument.clone(),
            sample_interval: profile.sample_interval,
            compensation: self.compensation.clone(),
        };
        let mut runner: Vec<String> =
            vec![exe.display().to_string(), "wasmprof".into(), "run".into()];
        runner.extend(doctest.to_args());
        let passed = build::run_doctests(&self.request.build, &runner, &self.request.harness)?;
        let profiles = take_doc_profiles(&dir, out_dir)?;
        let _ = std::fs::remove_dir_all(&dir);
        if !profiles.is_empty() {
            self.status.done(
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
}

/// The doc tests' profiles the runner wrote into `dir`, moved into `out_dir`, each with its
/// file name, in the order of their files and lines (rustdoc runs them in parallel).
fn take_doc_profiles(dir: &Path, out_dir: &Path) -> Result<Vec<Named>, Error> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::input(dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut profiles = Vec::new();
    for file in &files {
        let profile = Profile::read(file).map_err(|e| Error::input(file, format!("{e:#}")))?;
        let name = file.file_name().expect("a file name");
        let kept = out_dir.join(name);
        std::fs::rename(file, &kept).map_err(|e| Error::input(&kept, e))?;
        profiles.push((name.to_string_lossy().into_owned(), profile));
    }
    profiles.sort_by_cached_key(|(_, p)| DocTest::of(p).map(|t| (t.mangled_path, t.line)));
    Ok(profiles)
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
