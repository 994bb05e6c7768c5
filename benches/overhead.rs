//! Overhead benchmark: `cargo bench --bench overhead`.
//!
//! Builds the fixture crates' test binaries with the profiler's own build step, then for
//! each workload measures, side by side in one run and in the same embedded wasmtime:
//! - the instrumenter's time on the binary, against a plain walrus parse + emit of it;
//! - the program's run time uninstrumented and instrumented (median of RUNS runs each,
//!   interleaved), and their ratio, with the default clock (the TSC where it is invariant)
//!   and with `Instant`.
//!
//! Run times exclude compilation (the host times `_start` alone).

use std::path::{Path, PathBuf};
use std::time::Instant;

use cargo_wasmprof::build::{build_tests, TestBinary};
use cargo_wasmprof::cli::CargoArgs;
use cargo_wasmprof::clock::ClockChoice;
use cargo_wasmprof::host::{self, RunConfig};
use cargo_wasmprof::instrument::{self, Options};

const RUNS: usize = 7;

struct Workload {
    name: &'static str,
    wasm: Vec<u8>,
    args: Vec<String>,
    dir: PathBuf,
}

impl Workload {
    fn test_binary(name: &'static str, binary: &TestBinary, args: &[&str]) -> Workload {
        Workload {
            name,
            wasm: std::fs::read(&binary.path).expect("test binary"),
            args: args.iter().map(|a| a.to_string()).collect(),
            dir: binary.package_dir.clone(),
        }
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn seconds(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn fixture(name: &str) -> Vec<TestBinary> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let args = CargoArgs {
        manifest_path: Some(root.join("fixtures").join(name).join("Cargo.toml")),
        target_dir: Some(root.join("target/bench-fixtures")),
        ..CargoArgs::default()
    };
    build_tests(&args)
        .unwrap_or_else(|e| panic!("building fixtures/{name}: {e}"))
        .binaries
}

fn main() {
    // `cargo bench` passes --bench; there are no filters to honour.
    let calls = fixture("calls");
    let lib = calls
        .iter()
        .find(|b| b.kind == "lib")
        .expect("calls lib tests");
    let integration = calls
        .iter()
        .find(|b| b.kind == "test")
        .expect("calls integration tests");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workloads = vec![
        Workload::test_binary("calls: all unit tests", lib, &[]),
        Workload::test_binary(
            "calls: fib_of_20 only",
            lib,
            &["--exact", "tests::fib_of_20"],
        ),
        Workload::test_binary("calls: integration test", integration, &[]),
        Workload {
            name: "fib(27) in WAT (call-dense)",
            wasm: wat::parse_file(root.join("fixtures/wat/fib.wat")).expect("fib.wat"),
            args: vec![],
            dir: root.to_path_buf(),
        },
    ];

    println!(
        "{:<30} {:>8} {:>10} {:>11} {:>11} {:>11} {:>8} {:>11} {:>8}",
        "workload",
        "size",
        "walrus rt",
        "instrument",
        "plain run",
        "profiled",
        "ratio",
        "(Instant)",
        "ratio"
    );
    let mut log_sum = 0.0;
    for w in &workloads {
        let bytes = &w.wasm;
        let round_trip = median(
            (0..RUNS)
                .map(|_| seconds(|| drop(walrus::Module::from_buffer(bytes).unwrap().emit_wasm())))
                .collect(),
        );
        let mut instrumented = None;
        let instrument_time = median(
            (0..RUNS)
                .map(|_| {
                    seconds(|| {
                        instrumented =
                            Some(instrument::instrument(bytes, &Options::default()).unwrap())
                    })
                })
                .collect(),
        );
        let instrumented = instrumented.unwrap().wasm;
        let config = RunConfig {
            inherit_stdio: false,
            ..RunConfig::new("bench.wasm", w.args.clone(), &w.dir)
        };
        let with_instant = RunConfig {
            clock: ClockChoice::Instant,
            ..config.clone()
        };
        let (mut plain, mut profiled, mut instant) = (Vec::new(), Vec::new(), Vec::new());
        let wall =
            |wasm: &[u8], config: &RunConfig| host::run(wasm, config).unwrap().wall_ns as f64 / 1e9;
        for _ in 0..RUNS {
            plain.push(wall(bytes, &config));
            profiled.push(wall(&instrumented, &config));
            instant.push(wall(&instrumented, &with_instant));
        }
        let (plain, profiled, instant) = (median(plain), median(profiled), median(instant));
        let ratio = profiled / plain;
        log_sum += ratio.ln();
        println!(
            "{:<30} {:>6.1}MB {:>8.1}ms {:>9.1}ms {:>9.2}ms {:>9.2}ms {:>7.2}x {:>9.2}ms {:>7.2}x",
            w.name,
            bytes.len() as f64 / 1e6,
            round_trip * 1e3,
            instrument_time * 1e3,
            plain * 1e3,
            profiled * 1e3,
            ratio,
            instant * 1e3,
            instant / plain
        );
    }
    println!(
        "geometric mean of the run-time ratios: {:.2}x ({} workloads, median of {RUNS} runs each)",
        (log_sum / workloads.len() as f64).exp(),
        workloads.len()
    );
}
