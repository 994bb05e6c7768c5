//! `test` and `bench`: cargo's flags that choose what to build, as `cargo test` and
//! `cargo bench` spell them, and the harness's arguments.

use std::path::PathBuf;

use clap::Args;

use super::profile::ProfileArgs;
use super::requests::{BaselineRequest, DocTests, TestRequest};
use super::value_enums::TargetArg;
use super::UiOptions;
use crate::build::{BuildRequest, Mode, Target};
use crate::diff::baseline::check_name;

/// `cargo test`'s and `cargo bench`'s flags that choose what to build.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Cargo options")]
pub struct CargoArgs {
    /// Package(s) to test.
    #[arg(short, long = "package", value_name = "SPEC")]
    pub packages: Vec<String>,
    /// Test all packages in the workspace.
    #[arg(long)]
    pub workspace: bool,
    /// Exclude packages from the test (with --workspace).
    #[arg(long, value_name = "SPEC")]
    pub exclude: Vec<String>,
    /// Test only this package's library.
    #[arg(long)]
    pub lib: bool,
    /// Test all binaries.
    #[arg(long)]
    pub bins: bool,
    /// Test only the named binary.
    #[arg(long = "bin", value_name = "NAME")]
    pub bin: Vec<String>,
    /// Test only the named integration test.
    #[arg(long = "test", value_name = "NAME")]
    pub test: Vec<String>,
    /// Test all integration tests.
    #[arg(long)]
    pub tests: bool,
    /// Only the named bench target.
    #[arg(long = "bench", value_name = "NAME")]
    pub bench: Vec<String>,
    /// All bench targets.
    #[arg(long)]
    pub benches: bool,
    /// Only the named example.
    #[arg(long = "example", value_name = "NAME")]
    pub example: Vec<String>,
    /// All examples.
    #[arg(long)]
    pub examples: bool,
    /// All targets (lib, bins, tests, benches, examples).
    #[arg(long)]
    pub all_targets: bool,
    /// Only the library's doc tests (each profiled as a binary of its own). Without a
    /// target selection, `test` runs them after the other binaries, as cargo does.
    #[arg(long, conflicts_with_all = ["lib", "bins", "bin", "test", "tests", "bench", "benches", "example", "examples", "all_targets"])]
    pub doc: bool,
    /// How cargo builds.
    #[command(flatten)]
    pub build: BuildFlags,
    /// Build for this target: wasm32-wasip1 runs in the embedded wasmtime, and so do
    /// wasm32-wasip1-threads (wasi-threads: a profile per thread, merged by default, `report
    /// --threads` for each) and wasm32-wasip2 (components); wasm32-unknown-emscripten links through wasmprof-emcc (wrapping the linker you
    /// configured for it, else emcc) and runs under node; wasm32-unknown-unknown is for
    /// wasm-bindgen crates, whose wasm-bindgen-test binaries wasm-bindgen-test-runner runs
    /// under node, or in headless Chromium when the crate (`run_in_browser`) or
    /// WASM_BINDGEN_USE_BROWSER asks.
    #[arg(long, value_name = "TRIPLE", default_value = "wasm32-wasip1")]
    pub target: TargetArg,
}

/// cargo's flags that say how to build, as `cargo build` spells them: `test`, `bench`,
/// `run` and `serve` take them alike.
#[derive(Debug, Clone, Default, Args)]
pub struct BuildFlags {
    /// Space or comma separated features to activate.
    #[arg(short = 'F', long, value_name = "FEATURES")]
    pub features: Vec<String>,
    /// Activate all features.
    #[arg(long)]
    pub all_features: bool,
    /// Do not activate the `default` feature.
    #[arg(long)]
    pub no_default_features: bool,
    /// Build in release mode (names and DWARF are kept; the opt-level is the profile's).
    #[arg(short, long)]
    pub release: bool,
    /// Build with the given profile.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Path to Cargo.toml.
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// Directory for all generated artifacts (profiles go to its wasmprof/ folder).
    #[arg(long, value_name = "DIRECTORY")]
    pub target_dir: Option<PathBuf>,
    /// Number of parallel build jobs.
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<String>,
    /// Require Cargo.lock to be up to date.
    #[arg(long)]
    pub locked: bool,
    /// Run without accessing the network.
    #[arg(long)]
    pub offline: bool,
    /// Require Cargo.lock and the cache to be up to date.
    #[arg(long)]
    pub frozen: bool,
}

impl BuildFlags {
    /// Whether any of these flags was given.
    pub fn any(&self) -> bool {
        !self.cargo_args().is_empty()
            || self.profile.is_some()
            || self.manifest_path.is_some()
            || self.target_dir.is_some()
    }

    /// The build of `mode` for `target`, of the targets that `selection` (cargo's flags that
    /// choose them) names, instrumenting an Emscripten link as `instrument` says (its
    /// metric, and whether it records allocations).
    pub(super) fn request(
        &self,
        mode: Mode,
        target: Target,
        mut selection: Vec<String>,
        instrument: &crate::instrument::Options,
    ) -> BuildRequest {
        selection.extend(self.cargo_args());
        BuildRequest {
            mode,
            target,
            cargo_args: selection,
            manifest_path: self.manifest_path.clone(),
            target_dir: self.target_dir.clone(),
            profile: self.profile.clone(),
            metric: instrument.metric,
            contexts: instrument.contexts,
            allocations: instrument.allocations,
            max_live_allocations: Some(instrument.max_live_allocations),
        }
    }

    /// The flags cargo takes as they are.
    fn cargo_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        push_valued(&mut out, "--features", &self.features);
        push_switches(
            &mut out,
            &[
                (self.all_features, "--all-features"),
                (self.no_default_features, "--no-default-features"),
                (self.release, "--release"),
                (self.locked, "--locked"),
                (self.offline, "--offline"),
                (self.frozen, "--frozen"),
            ],
        );
        push_valued(&mut out, "--jobs", self.jobs.as_slice());
        out
    }
}

impl CargoArgs {
    /// Whether the flags choose targets (`--lib`, `--tests`, ...): cargo runs no doc tests
    /// then.
    pub fn selects_targets(&self) -> bool {
        self.lib
            || self.bins
            || self.tests
            || self.benches
            || self.examples
            || self.all_targets
            || !self.bin.is_empty()
            || !self.test.is_empty()
            || !self.bench.is_empty()
            || !self.example.is_empty()
    }

    /// The build these flags ask for, in `mode`, instrumenting an Emscripten link as
    /// `instrument` says (its metric, and whether it records allocations).
    fn to_request(&self, mode: Mode, instrument: &crate::instrument::Options) -> BuildRequest {
        let mut out = Vec::new();
        push_valued(&mut out, "--package", &self.packages);
        push_valued(&mut out, "--exclude", &self.exclude);
        push_valued(&mut out, "--bin", &self.bin);
        push_valued(&mut out, "--test", &self.test);
        push_valued(&mut out, "--bench", &self.bench);
        push_valued(&mut out, "--example", &self.example);
        push_switches(
            &mut out,
            &[
                (self.workspace, "--workspace"),
                (self.lib, "--lib"),
                (self.bins, "--bins"),
                (self.tests, "--tests"),
                (self.benches, "--benches"),
                (self.examples, "--examples"),
                (self.all_targets, "--all-targets"),
            ],
        );
        self.build
            .request(mode, self.target.into(), out, instrument)
    }
}

/// `build`, with cargo's own status lines silenced where `--quiet` asks (cargo's
/// `--quiet`: its `Compiling`/`Finished` lines go, its errors stay).
pub(super) fn quiet(mut build: BuildRequest, quiet: bool) -> BuildRequest {
    if quiet {
        build.cargo_args.push("--quiet".to_string());
    }
    build
}

/// `flag VALUE` for each of `values`, as cargo takes a repeated flag.
fn push_valued(out: &mut Vec<String>, flag: &str, values: &[String]) {
    for v in values {
        out.extend([flag.to_string(), v.clone()]);
    }
}

/// Each switch of `switches` that is on.
fn push_switches(out: &mut Vec<String>, switches: &[(bool, &str)]) {
    out.extend(
        (switches.iter())
            .filter(|(on, _)| *on)
            .map(|(_, flag)| flag.to_string()),
    );
}

/// `cargo wasmprof test` and `cargo wasmprof bench`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Only run tests (or benches) whose names contain this string (passed to the harness).
    #[arg(value_name = "NAME")]
    pub testname: Option<String>,
    /// Arguments for the test harness (after `--`).
    #[arg(last = true, value_name = "ARGS")]
    pub harness_args: Vec<String>,
    /// Run every test binary, even after one fails.
    #[arg(long)]
    pub no_fail_fast: bool,
    /// Keep this run's profiles as baseline NAME, in
    /// `<target-dir>/wasmprof/baselines/NAME/` (as criterion's `--save-baseline`), when
    /// every test passes.
    #[arg(long, value_name = "NAME", value_parser = check_name)]
    pub save_baseline: Option<String>,
    /// Compare this run with baseline NAME: each benchmark's cost per iteration and each
    /// test's cost, and the functions that changed most; also written as Markdown to
    /// `<target-dir>/wasmprof/baselines/NAME.compared.md`, for a pull request.
    #[arg(long, value_name = "NAME", value_parser = check_name)]
    pub baseline: Option<String>,
    /// With --baseline: exit with code 3 when a benchmark or test grew by more than PCT
    /// percent (beyond the noise of sampled time).
    #[arg(long, value_name = "PCT", requires = "baseline")]
    pub fail_above: Option<f64>,
    /// What to build.
    #[command(flatten)]
    pub cargo: CargoArgs,
    /// The profile and report.
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Colors and status lines.
    #[command(flatten)]
    pub ui: UiOptions,
}

impl TestArgs {
    /// The request these arguments make of `test` (`mode` [`Mode::Test`]) or `bench`.
    pub fn to_request(&self, mode: Mode) -> TestRequest {
        let profile = self.profile.to_request();
        let doc_tests = match (mode, self.cargo.doc, self.cargo.selects_targets()) {
            (_, true, _) => DocTests::Only,
            (Mode::Test, false, false) => DocTests::AfterBinaries,
            _ => DocTests::None,
        };
        TestRequest {
            build: quiet(
                self.cargo.to_request(mode, &profile.instrument),
                self.ui.quiet,
            ),
            doc_tests,
            harness: mode
                .harness_args()
                .iter()
                .map(|a| a.to_string())
                .chain(self.testname.iter().cloned())
                .chain(self.harness_args.iter().cloned())
                .collect(),
            fail_fast: !self.no_fail_fast,
            profile,
            baselines: BaselineRequest {
                save: self.save_baseline.clone(),
                compare: self.baseline.clone(),
                fail_above: self.fail_above,
            },
        }
    }
}
