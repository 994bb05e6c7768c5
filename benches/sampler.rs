//! The stack sampler against perf: `cargo bench --bench sampler` (needs `perf` and a
//! kernel that lets it sample: root, or `perf_event_paranoid` at most 1).
//!
//! Two programs, fixtures/parts (a loop, 60 M small calls, a recursion) and
//! fixtures/mixed (sorting, a hash map, libm, formatting through `dyn Write`, a tree of
//! boxes), release builds with names and DWARF, run plain (uninstrumented) in
//! cargo-wasmprof's embedded wasmtime, RUNS times each. Each run is sampled by both
//! samplers at once: the stack sampler (`run --no-instrument`, its samples written out) and
//! `perf record -e cpu-clock` of the same process, which names the module's functions
//! through the perf map cargo-wasmprof writes when asked. For each function, its share of
//! the samples found in the module's own code (self time; samples in host code are
//! wasmtime's or the host's for perf, and left out of both sides), per run and pooled over
//! the runs, and the largest difference. The two samplers sample at unrelated moments, so
//! even two perfect ones differ by chance: the table prints the difference that chance
//! alone gives (two standard errors of the pooled shares' difference) beside each.
//!
//! `WASMPROF_BENCH_PROGRAM="FILE ARGS..."` adds a program of one's own (a WASI command
//! module with names, run with ARGS), for the check on code not written for it.

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use cargo_wasmprof::host::PERF_MAP_VAR;
use cargo_wasmprof::profile::StackSamples;

/// Runs of each program.
const RUNS: usize = 5;
/// Our sampler's interval, in microseconds, and perf's frequency: about as often, never in
/// step.
const INTERVAL_US: u64 = 250;
const PERF_HZ: u64 = 3_989;

/// Each function's self samples in the module's code, by function id.
type Shares = BTreeMap<u32, f64>;

fn main() {
    let perf_ok = Command::new("perf")
        .args(["stat", "-e", "cpu-clock", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !perf_ok {
        println!("perf cannot sample here (install linux-perf, run as root or lower perf_event_paranoid): skipped");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let mut programs: Vec<(String, PathBuf, Vec<String>)> = ["parts", "mixed"]
        .into_iter()
        .map(|fixture| {
            let binary = common::bench_binary(fixture, fixture);
            (fixture.to_string(), binary.path, vec!["all".to_string()])
        })
        .collect();
    if let Ok(program) = std::env::var("WASMPROF_BENCH_PROGRAM") {
        let mut words = program.split_whitespace().map(String::from);
        let file = PathBuf::from(words.next().expect("WASMPROF_BENCH_PROGRAM names a file"));
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        programs.push((name, file, words.collect()));
    }
    for (name, wasm, args) in &programs {
        let (mut ours, mut theirs): (Vec<Shares>, Vec<Shares>) = (Vec::new(), Vec::new());
        for run in 0..RUNS {
            let (o, t) = sample_once(wasm, args, work.path(), run);
            ours.push(o);
            theirs.push(t);
        }
        report(name, wasm, &ours, &theirs);
    }
}

/// One run of `wasm` with `args`, sampled by both: (ours, perf's) samples per function.
fn sample_once(wasm: &Path, args: &[String], work: &Path, run: usize) -> (Shares, Shares) {
    let samples = work.join(format!("samples-{run}.json"));
    let data = work.join(format!("perf-{run}.data"));
    let status = Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-F",
            &PERF_HZ.to_string(),
            "-o",
        ])
        .arg(&data)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_cargo-wasmprof"))
        .args(["wasmprof", "run", "--no-instrument", "--sample-interval"])
        .arg(INTERVAL_US.to_string())
        .arg("--plain-samples")
        .arg(&samples)
        .arg(wasm)
        .args(args)
        .env(PERF_MAP_VAR, "1")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("perf runs");
    assert!(status.success(), "perf record of the plain run failed");
    let ours: StackSamples =
        serde_json::from_slice(&std::fs::read(&samples).expect("the samples")).unwrap();
    let mut mine = Shares::new();
    for s in ours.stacks.iter().filter(|s| !s.in_host) {
        if let Some(&leaf) = s.frames.last() {
            *mine.entry(leaf).or_default() += s.ns as f64;
        }
    }
    let script = Command::new("perf")
        .args(["script", "-F", "ip,sym", "-i"])
        .arg(&data)
        .output()
        .expect("perf script runs");
    let mut perf = Shares::new();
    for line in String::from_utf8_lossy(&script.stdout).lines() {
        // `IP SYMBOL`: the module's functions are `wasm[ID] NAME`.
        let symbol = line.trim().split_once(' ').map_or("", |(_, symbol)| symbol);
        let id = symbol
            .strip_prefix("wasm[")
            .and_then(|rest| rest.split(']').next())
            .and_then(|id| id.parse::<u32>().ok());
        if let Some(id) = id {
            *perf.entry(id).or_default() += 1.0;
        }
    }
    (mine, perf)
}

/// Shares in percent of the whole.
fn percent(counts: &Shares) -> Shares {
    let total: f64 = counts.values().sum();
    counts
        .iter()
        .map(|(&f, &n)| (f, 100.0 * n / total.max(1.0)))
        .collect()
}

/// The table of one program: each function above 0.5% by either sampler, its pooled
/// shares, their difference, chance's two standard errors, and the per-run differences.
fn report(fixture: &str, wasm: &Path, ours: &[Shares], theirs: &[Shares]) {
    let names = names(wasm);
    let pool = |runs: &[Shares]| {
        let mut sum = Shares::new();
        for run in runs {
            for (f, share) in percent(run) {
                *sum.entry(f).or_default() += share / runs.len() as f64;
            }
        }
        sum
    };
    let (mine, perf) = (pool(ours), pool(theirs));
    // Both sample about as often: the pooled shares' difference has chance's spread of
    // two shares of this many samples each.
    let perf_samples: f64 = theirs.iter().flat_map(|r| r.values()).sum();
    let functions: Vec<u32> = {
        let mut all: Vec<u32> = mine.keys().chain(perf.keys()).copied().collect();
        all.sort_unstable();
        all.dedup();
        let share = |shares: &Shares, f: &u32| shares.get(f).copied().unwrap_or(0.0);
        all.retain(|f| share(&mine, f).max(share(&perf, f)) >= 0.5);
        all.sort_by(|a, b| {
            perf.get(b)
                .unwrap_or(&0.0)
                .total_cmp(perf.get(a).unwrap_or(&0.0))
        });
        all
    };
    println!(
        "\n{fixture}: self shares of the samples in the module's code, {RUNS} runs, both samplers on each (perf {:.0} samples a run)",
        perf_samples / RUNS as f64
    );
    println!(
        "{:<44} {:>8} {:>8} {:>7} {:>7}  per run",
        "function", "perf", "ours", "diff", "chance"
    );
    let mut worst: f64 = 0.0;
    for f in functions {
        let (p, o) = (
            perf.get(&f).copied().unwrap_or(0.0),
            mine.get(&f).copied().unwrap_or(0.0),
        );
        let q = p / 100.0;
        let chance = 200.0 * (2.0 * q * (1.0 - q) / perf_samples).sqrt();
        let per_run: Vec<String> = ours
            .iter()
            .zip(theirs)
            .map(|(o, t)| {
                let (o, t) = (percent(o), percent(t));
                format!(
                    "{:+.1}",
                    o.get(&f).unwrap_or(&0.0) - t.get(&f).unwrap_or(&0.0)
                )
            })
            .collect();
        worst = worst.max((o - p).abs());
        let name = names.get(&f).map_or("?", String::as_str);
        println!(
            "{:<44} {:>7.2}% {:>7.2}% {:>+7.2} {:>7.2}  {}",
            short(name, 44),
            p,
            o,
            o - p,
            chance,
            per_run.join(" ")
        );
    }
    println!("largest difference of the pooled shares: {worst:.2} points");
}

/// The name of each function index of `wasm` (its name section's, demangled).
fn names(wasm: &Path) -> BTreeMap<u32, String> {
    let bytes = std::fs::read(wasm).expect("the module");
    let mut names = BTreeMap::new();
    for payload in wasmparser::Parser::new(0).parse_all(&bytes) {
        let Ok(wasmparser::Payload::CustomSection(section)) = payload else {
            continue;
        };
        let wasmparser::KnownCustom::Name(reader) = section.as_known() else {
            continue;
        };
        for name in reader.flatten() {
            if let wasmparser::Name::Function(map) = name {
                for naming in map.into_iter().flatten() {
                    let name = rustc_demangle::demangle(naming.name).to_string();
                    names.insert(naming.index, name);
                }
            }
        }
    }
    names
}

/// `name` cut to `width` characters.
fn short(name: &str, width: usize) -> String {
    match name.char_indices().nth(width - 1) {
        Some((at, _)) => format!("{}…", &name[..at]),
        None => name.to_string(),
    }
}
