//! The build step: cargo builds the user's test or bench binaries for wasm32 (wasip1 by
//! default), with names and DWARF kept and the user's opt-level left alone.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context as _;
use cargo_metadata::Message;

use crate::emscripten;
use crate::error::Error;
use crate::meta::Metric;

/// The targets cargo-wasmprof builds for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Target {
    /// `wasm32-wasip1` (`host::Embedded`).
    #[default]
    Wasip1,
    /// `wasm32-wasip1-threads` (`host::Embedded`, a thread an instance).
    Wasip1Threads,
    /// `wasm32-wasip2`: components (`host::Embedded`).
    Wasip2,
    /// `wasm32-unknown-emscripten` (linked by `emcc`, run by `host::Node`).
    Emscripten,
    /// `wasm32-unknown-unknown` for wasm-bindgen (`host::Bindgen`).
    Unknown,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 5] = [
        Target::Wasip1,
        Target::Wasip1Threads,
        Target::Wasip2,
        Target::Emscripten,
        Target::Unknown,
    ];

    /// The target triple.
    pub fn triple(self) -> &'static str {
        match self {
            Target::Wasip1 => "wasm32-wasip1",
            Target::Wasip1Threads => "wasm32-wasip1-threads",
            Target::Wasip2 => "wasm32-wasip2",
            Target::Emscripten => "wasm32-unknown-emscripten",
            Target::Unknown => "wasm32-unknown-unknown",
        }
    }

    /// Whether its programs run in the embedded wasmtime (WASI), not under node.
    pub fn is_wasi(self) -> bool {
        matches!(
            self,
            Target::Wasip1 | Target::Wasip1Threads | Target::Wasip2
        )
    }
}

/// Which of cargo's commands builds the binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// `cargo test`: unit and integration tests.
    #[default]
    Test,
    /// `cargo bench`: benchmarks (the harness is told `--bench`, as cargo does).
    Bench,
    /// `cargo build` of the one binary `cargo run` would run (a bin or an example), or,
    /// where none is built, a library built as a `cdylib` (what a WASI 0.3 command is).
    Run,
    /// `cargo build` of a server: as `Run` (a `wasi:http` component is often a `cdylib`).
    Serve,
}

impl Mode {
    /// The cargo subcommand.
    pub fn cargo_command(self) -> &'static str {
        match self {
            Mode::Test => "test",
            Mode::Bench => "bench",
            Mode::Run | Mode::Serve => "build",
        }
    }

    /// The arguments cargo gives the harness before the user's.
    pub fn harness_args(self) -> &'static [&'static str] {
        match self {
            Mode::Test | Mode::Run | Mode::Serve => &[],
            Mode::Bench => &["--bench"],
        }
    }
}

/// What to build, as plain data (the command line's flags are one way to fill it in).
#[derive(Debug, Clone, Default)]
pub struct BuildRequest {
    /// `cargo test` or `cargo bench`.
    pub mode: Mode,
    /// The target to build for.
    pub target: Target,
    /// cargo's selection flags as it takes them (`--package P`, `--lib`, `--features F`...),
    /// handed on unchanged.
    pub cargo_args: Vec<String>,
    /// `--manifest-path`.
    pub manifest_path: Option<PathBuf>,
    /// `--target-dir`.
    pub target_dir: Option<PathBuf>,
    /// `--profile`: a custom profile, which gets names and DWARF too.
    pub profile: Option<String>,
    /// The metric that the Emscripten link instruments for.
    pub metric: Metric,
    /// The Emscripten link counts calls per calling context (`--contexts`).
    pub contexts: bool,
    /// The Emscripten link records the program's allocations (`--allocations`).
    pub allocations: bool,
    /// The Emscripten link makes room for this many live allocations
    /// (`--max-live-allocations`; `None`: the default).
    pub max_live_allocations: Option<u32>,
}

/// One test or bench binary cargo built.
#[derive(Debug, Clone)]
pub struct TestBinary {
    /// The `.wasm` file.
    pub path: PathBuf,
    /// The package's name.
    pub package: String,
    /// The target's name.
    pub target: String,
    /// The target's kind as cargo names it (`lib`, `bin`, `test`, ...).
    pub kind: String,
    /// What cargo prints in its `Running` line: `unittests src/lib.rs`, `tests/it.rs`.
    pub label: String,
    /// The package's directory, where cargo runs its tests.
    pub package_dir: PathBuf,
    /// Built without optimization (opt-level 0, as cargo's dev and test profiles build).
    pub unoptimized: bool,
}

impl TestBinary {
    /// A stable file name for this binary's profile: `<package>-<target>-<kind>.json`.
    pub fn profile_name(&self) -> String {
        format!("{}-{}-{}.json", self.package, self.target, self.kind)
    }
}

/// What the build produced.
pub struct Built {
    /// The test binaries, in cargo's order.
    pub binaries: Vec<TestBinary>,
    /// The target directory (where profiles go, under `wasmprof/`).
    pub target_dir: PathBuf,
}

/// The cargo program to run: `$CARGO` when cargo runs us, else `cargo`.
fn cargo() -> PathBuf {
    std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from)
}

/// Fails with the rustup command to run when the toolchain has no standard library for
/// `target`.
fn check_target(dir: &Path, target: Target) -> Result<(), Error> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .current_dir(dir)
        .output()
        .with_context(|| format!("cannot run {}", rustc.to_string_lossy()))?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if output.status.success() && !sysroot.join("lib/rustlib").join(target.triple()).exists() {
        return Err(Error::MissingTarget(target.triple()));
    }
    Ok(())
}

/// Builds the test or bench binaries that `args` select (`cargo test --no-run` or
/// `cargo bench --no-run`).
/// With wasm32-unknown-emscripten, the link instruments each binary for the request's metric.
pub fn build(args: &BuildRequest) -> Result<Built, Error> {
    let dir = args
        .manifest_path
        .as_deref()
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    check_target(&dir, args.target)?;
    let metadata = metadata(args)?;

    let messages = "--message-format=json-render-diagnostics";
    let extra: &[&str] = match args.mode {
        Mode::Run | Mode::Serve => &[messages],
        Mode::Test | Mode::Bench => &["--no-run", messages],
    };
    let mut cmd = cargo_command(args, extra)?;
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = cmd.spawn().context("cannot run cargo")?;
    let stdout = child.stdout.take().expect("piped stdout");

    let mut binaries = Vec::new();
    for message in Message::parse_stream(BufReader::new(stdout)) {
        if let Message::CompilerArtifact(artifact) =
            message.context("cannot read cargo's messages")?
        {
            binaries.extend(test_binary(artifact, &metadata, &dir, args.mode));
        }
    }
    let status = child.wait().context("cargo did not finish")?;
    if !status.success() {
        return Err(Error::BuildFailed);
    }
    // cargo reports artifacts as their builds finish, in no fixed order; it runs them
    // sorted by package, then target kind (lib, bins, tests, benches, examples), then name.
    binaries.sort_by(|a, b| {
        (&a.package, kind_rank(&a.kind), &a.target).cmp(&(
            &b.package,
            kind_rank(&b.kind),
            &b.target,
        ))
    });
    Ok(Built {
        binaries,
        target_dir: args
            .target_dir
            .clone()
            .unwrap_or_else(|| metadata.target_directory.clone().into_std_path_buf()),
    })
}

/// The binary cargo would run in `mode` that `artifact` is, if it is one: for `test` and
/// `bench`, an executable built with the test harness, or a test or bench target with a
/// harness of its own (`harness = false`); for `run`, an executable bin or example. `dir`
/// is the package's directory when the artifact does not say.
fn test_binary(
    artifact: cargo_metadata::Artifact,
    metadata: &cargo_metadata::Metadata,
    dir: &Path,
    mode: Mode,
) -> Option<TestBinary> {
    let is = |kinds: &[cargo_metadata::TargetKind]| {
        artifact.target.kind.iter().any(|k| kinds.contains(k))
    };
    use cargo_metadata::TargetKind as K;
    let cdylib = || {
        let wasm = artifact
            .filenames
            .iter()
            .find(|f| f.extension() == Some("wasm"));
        wasm.filter(|_| is(&[K::CDyLib])).cloned()
    };
    let executable = artifact.executable.clone().or_else(cdylib)?;
    let runs = match mode {
        Mode::Run | Mode::Serve => !artifact.profile.test && is(&[K::Bin, K::Example, K::CDyLib]),
        Mode::Test | Mode::Bench => artifact.profile.test || is(&[K::Test, K::Bench]),
    };
    if !runs {
        return None;
    }
    let package_dir = artifact
        .manifest_path
        .parent()
        .map(|p| p.as_std_path().to_path_buf())
        .unwrap_or_else(|| dir.to_path_buf());
    let kind = artifact
        .target
        .kind
        .first()
        .map(|k| k.to_string())
        .unwrap_or_default();
    let src = artifact.target.src_path.as_std_path();
    let src = src
        .strip_prefix(&package_dir)
        .unwrap_or(src)
        .display()
        .to_string();
    let label = match kind.as_str() {
        "test" | "bench" | "example" => src,
        _ => format!("unittests {src}"),
    };
    Some(TestBinary {
        path: executable.into_std_path_buf(),
        package: metadata
            .packages
            .iter()
            .find(|p| p.id == artifact.package_id)
            .map_or_else(|| artifact.target.name.clone(), |p| p.name.to_string()),
        target: artifact.target.name.clone(),
        kind,
        label,
        package_dir,
        unoptimized: artifact.profile.opt_level == "0",
    })
}

/// Builds the one binary `cargo run` would run (`args` in [`Mode::Run`] or
/// [`Mode::Serve`]: a bin, or what `--bin` or `--example` names, else a `cdylib`), and the
/// target directory it went to.
pub fn build_program(args: &BuildRequest) -> Result<(TestBinary, PathBuf), Error> {
    let command = match args.mode {
        Mode::Serve => "serve",
        _ => "run",
    };
    let mut built = build(args)?;
    // A package's cdylib (a component that exports its `run` or its handler) is the
    // program where no bin or example was built beside it.
    if built.binaries.iter().any(|b| b.kind != "cdylib") {
        built.binaries.retain(|b| b.kind != "cdylib");
    }
    match built.binaries.len() {
        1 => Ok((built.binaries.remove(0), built.target_dir)),
        0 => Err(anyhow::anyhow!(
            "a bin target must be available for `cargo wasmprof {command}` (or name a FILE)"
        )
        .into()),
        _ => {
            let names: Vec<&str> = built.binaries.iter().map(|b| b.target.as_str()).collect();
            Err(anyhow::anyhow!(
                "`cargo wasmprof {command}` could not determine which binary to run; use the \
                 `--bin` option to name one (available binaries: {})",
                names.join(", ")
            )
            .into())
        }
    }
}

/// Where the profiles of a run for `target` go in `target_dir`: the default target's in
/// wasmprof/, others in wasmprof/<triple>/ (as cargo keeps its own outputs).
pub fn profiles_dir(target_dir: &Path, target: Target) -> PathBuf {
    match target {
        Target::Wasip1 => target_dir.join("wasmprof"),
        other => target_dir.join("wasmprof").join(other.triple()),
    }
}

/// The target directory that `args` build into.
pub fn target_dir(args: &BuildRequest) -> Result<PathBuf, Error> {
    match &args.target_dir {
        Some(dir) => Ok(dir.clone()),
        None => Ok(metadata(args)?.target_directory.into_std_path_buf()),
    }
}

/// Where cargo runs a target of this kind among a package's binaries: the library's unit
/// tests first, then binaries, integration tests, benches and examples (cargo's order of
/// target kinds).
fn kind_rank(kind: &str) -> u8 {
    match kind {
        "bin" => 1,
        "test" => 2,
        "bench" => 3,
        "example" => 4,
        _ => 0,
    }
}

/// `cargo test|bench --target T` with `extra` flags, the user's selection and the
/// environment that keeps names and DWARF in every profile a test build may use (the same
/// for every cargo run of one command, so that none rebuilds another's artifacts).
fn cargo_command(args: &BuildRequest, extra: &[&str]) -> Result<Command, Error> {
    let mut cmd = Command::new(cargo());
    cmd.args([args.mode.cargo_command(), "--target", args.target.triple()]);
    cmd.args(extra);
    cmd.args(&args.cargo_args);
    let options = [
        ("--profile", args.profile.as_ref().map(PathBuf::from)),
        ("--manifest-path", args.manifest_path.clone()),
        ("--target-dir", args.target_dir.clone()),
    ];
    for (flag, value) in options {
        if let Some(value) = value {
            cmd.arg(flag).arg(value);
        }
    }
    // Names and DWARF for every profile a test build may use; opt-level stays the user's.
    for profile in ["DEV", "TEST", "RELEASE", "BENCH"]
        .into_iter()
        .map(String::from)
        .chain(
            args.profile
                .as_ref()
                .map(|p| p.to_uppercase().replace('-', "_")),
        )
    {
        cmd.env(format!("CARGO_PROFILE_{profile}_DEBUG"), "true");
        cmd.env(format!("CARGO_PROFILE_{profile}_STRIP"), "none");
    }
    if args.target == Target::Emscripten {
        cmd.envs(emscripten::linker_env(
            args.metric,
            args.contexts,
            args.allocations,
            args.max_live_allocations,
        )?);
    }
    Ok(cmd)
}

/// Runs the doc tests that `args` select (`cargo test --doc`), each through `runner` (the
/// target's runner, a program and its arguments, which rustdoc calls with the doc test's
/// module and its arguments after them), the harness getting `harness`. cargo's and the
/// doc tests' output pass through; returns whether they all passed.
pub fn run_doctests(
    args: &BuildRequest,
    runner: &[String],
    harness: &[String],
) -> Result<bool, Error> {
    let mut cmd = cargo_command(args, &["--doc"])?;
    // As a `--config` array (JSON strings are TOML strings): paths with spaces stay whole,
    // and it takes precedence over a runner of the user's environment or config.
    let runner = serde_json::to_string(runner).expect("strings serialize");
    cmd.arg("--config")
        .arg(format!("target.{}.runner = {runner}", args.target.triple()));
    if !harness.is_empty() {
        cmd.arg("--").args(harness);
    }
    let status = cmd.status().context("cannot run cargo")?;
    Ok(status.success())
}

/// The workspace's metadata: its packages and target directory.
fn metadata(args: &BuildRequest) -> anyhow::Result<cargo_metadata::Metadata> {
    let mut cmd = cargo_metadata::MetadataCommand::new();
    cmd.cargo_path(cargo()).no_deps();
    if let Some(path) = &args.manifest_path {
        cmd.manifest_path(path);
    }
    cmd.exec().context("cannot read the workspace's metadata")
}
