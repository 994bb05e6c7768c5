//! The test suites of published crates, at the versions fixtures/corpus pins (their own
//! dev-dependencies pinned by fixtures/corpus/locks), run twice: with cargo, whose runner is
//! `cargo wasmprof run --no-instrument`, and with `cargo wasmprof test` under every metric.
//! Both must run the same binaries in the same order with the same `test result:` lines;
//! the profiled run leaves a profile for each binary, whose allocations add up, and a
//! merged profile with each function once. The wall times, plain and profiled, are printed per crate and metric:
//! first runs, each with wasmtime's compilation cache and the profiler's cache of
//! instrumented modules empty (`$XDG_CACHE_HOME` a new directory), so that every module is
//! instrumented and compiled in each, as the first time a user runs it; and the default
//! metric's and the plain run's second runs, their modules in the caches.
//!
//! The two smallest suites run by default (CI runs them); `WASMPROF_CORPUS=all` runs
//! every crate, `WASMPROF_CORPUS=semver,memchr` the ones named.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use cargo_wasmprof::profile::Profile;
use common::{check_allocations, copy_dir, each_function_once, output, running};

/// The crates, smallest suite first, as fixtures/corpus/Cargo.toml pins them.
const CORPUS: &[&str] = &[
    "smallvec",
    "semver",
    "memchr",
    "hashbrown",
    "regex-syntax",
    "serde_json",
];
/// How many of them run unless `WASMPROF_CORPUS` says otherwise.
const DEFAULT: usize = 2;
const METRICS: &[&str] = &["time", "calls", "exact-time", "instructions"];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/corpus")
}

/// Each crate's unpacked source in cargo's registry cache (cargo downloads what it lacks).
fn sources() -> Vec<(String, PathBuf)> {
    let out = output(
        Command::new(env!("CARGO"))
            .args(["metadata", "--format-version", "1", "--manifest-path"])
            .arg(corpus_dir().join("Cargo.toml")),
    );
    assert!(out.status.success(), "cargo fetches the corpus");
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"] != "corpus")
        .map(|p| {
            let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap());
            (
                p["name"].as_str().unwrap().to_string(),
                manifest.parent().unwrap().to_path_buf(),
            )
        })
        .collect()
}

fn chosen() -> Vec<&'static str> {
    match std::env::var("WASMPROF_CORPUS").as_deref() {
        Ok("all") => CORPUS.to_vec(),
        Ok(list) if !list.is_empty() => CORPUS
            .iter()
            .copied()
            .filter(|c| list.split(',').any(|n| n.trim() == *c))
            .collect(),
        _ => CORPUS[..DEFAULT].to_vec(),
    }
}

/// What a run printed that the two runs must agree on: the binaries (`Running X`,
/// `Doc-tests X`) in order, and every `test result:` line without its time.
#[derive(Debug, PartialEq)]
struct Suite {
    binaries: Vec<String>,
    results: Vec<String>,
}

impl Suite {
    fn of(out: &std::process::Output) -> Suite {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let binaries = running(out);
        let results = stdout
            .lines()
            .filter(|l| l.starts_with("test result:"))
            .map(|l| l.split("; finished in").next().unwrap_or(l).to_string())
            .collect();
        Suite { binaries, results }
    }
}

#[test]
fn real_crates_test_suites_run_alike_plain_and_profiled() {
    let sources = sources();
    let wasmprof = env!("CARGO_BIN_EXE_cargo-wasmprof");
    let mut table = vec![format!(
        "{:<14} {:<13} {:>9} {:>9} {:>7} {:>9} {:>9}",
        "crate", "metric", "plain", "profiled", "ratio", "profiles", "functions"
    )];
    for name in chosen() {
        let (_, source) = sources
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} in fixtures/corpus"));
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join(name);
        copy_dir(source, &dir);
        std::fs::copy(
            corpus_dir().join(format!("locks/{name}.lock")),
            dir.join("Cargo.lock"),
        )
        .unwrap();

        // Empty caches (compiled and instrumented modules) for each run (see the top).
        let cold = |run: &str| work.path().join(format!("wasmtime-cache-{run}"));
        let plain_target = work.path().join("plain");
        let plain = |no_run: bool| {
            let mut cmd = Command::new(env!("CARGO"));
            cmd.env("XDG_CACHE_HOME", cold("plain"));
            cmd.args([
                "test",
                "--target",
                "wasm32-wasip1",
                "--no-fail-fast",
                "--locked",
            ])
            .arg("--target-dir")
            .arg(&plain_target)
            .env(
                "CARGO_TARGET_WASM32_WASIP1_RUNNER",
                format!("{wasmprof} wasmprof run --no-instrument"),
            )
            .current_dir(&dir);
            if no_run {
                cmd.arg("--no-run");
            }
            let started = Instant::now();
            (output(&mut cmd), started.elapsed().as_secs_f64())
        };
        // Built first, so that the times are the runs'.
        assert!(plain(true).0.status.success(), "{name} builds");
        let (out, plain_secs) = plain(false);
        let plain_code = out.status.code();
        let expected = Suite::of(&out);
        assert!(!expected.binaries.is_empty(), "{name}: {expected:?}");

        let prof_target = work.path().join("profiled");
        for &metric in METRICS {
            let profiles = prof_target.join("wasmprof");
            let _ = std::fs::remove_dir_all(&profiles);
            let merged = work.path().join(format!("{metric}.json"));
            let mut cmd = Command::new(wasmprof);
            cmd.args([
                "wasmprof",
                "test",
                "--no-fail-fast",
                "--locked",
                "--no-report",
            ])
            .args(["--metric", metric, "--color", "never"])
            .arg("--target-dir")
            .arg(&prof_target)
            .arg("-o")
            .arg(&merged)
            .current_dir(&dir);
            if metric == METRICS[0] {
                // Once untimed, to build (the profiler's build keeps DWARF: a target dir
                // of its own).
                output(cmd.env("XDG_CACHE_HOME", cold("build")));
            }
            cmd.env("XDG_CACHE_HOME", cold(metric));
            let started = Instant::now();
            let out = output(&mut cmd);
            let secs = started.elapsed().as_secs_f64();
            assert_eq!(
                out.status.code(),
                plain_code,
                "{name} {metric}: cargo's exit code"
            );
            let got = Suite::of(&out);
            assert_eq!(
                got, expected,
                "{name} {metric}: the same binaries and results"
            );
            let p = Profile::read(&merged).unwrap();
            each_function_once(&p);
            let files: Vec<_> = std::fs::read_dir(&profiles)
                .unwrap()
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .collect();
            let binaries = expected
                .binaries
                .iter()
                .filter(|b| !b.starts_with("Doc-tests "))
                .count();
            // The allocations recorded add up in each binary's run.
            for file in &files {
                check_allocations(&Profile::read(&file.path()).unwrap());
            }
            assert!(
                files.len() >= binaries && p.modules.len() == files.len(),
                "{name} {metric}: a profile for each of {binaries} binaries and the doc tests: {} files, {} modules",
                files.len(),
                p.modules.len()
            );
            table.push(format!(
                "{name:<14} {metric:<13} {plain_secs:>8.2}s {secs:>8.2}s {:>6.2}x {:>9} {:>9}",
                secs / plain_secs,
                files.len(),
                p.functions.len()
            ));
            if metric == METRICS[0] {
                // Once more, as a user's second run, with the modules compiled in the
                // first (the plain run's too).
                let plain_again = plain(false).1;
                let started = Instant::now();
                assert_eq!(output(&mut cmd).status.code(), plain_code);
                let again = started.elapsed().as_secs_f64();
                table.push(format!(
                    "{name:<14} {:<13} {plain_again:>8.2}s {again:>8.2}s {:>6.2}x",
                    format!("{metric}, again"),
                    again / plain_again,
                ));
            }
        }
    }
    println!("{}", table.join("\n"));
}
