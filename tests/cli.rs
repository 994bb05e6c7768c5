//! The commands' behaviour: exit codes, arguments, help. (Bad input: tests/bad_input.rs.)

mod common;

use cargo_wasmprof::profile::Profile;
use common::{fib_calls, fib_command, output, validate, wasmprof};

#[test]
fn run_profiles_any_module_and_keeps_its_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("fib.wasm");
    std::fs::write(&module, fib_command()).unwrap();
    let out = output(wasmprof().arg("run").arg(&module).current_dir(dir.path()));
    assert_eq!(out.status.code(), Some(3), "the program's exit code");
    let profile = Profile::read(&dir.path().join("fib.wasmprof.json")).unwrap();
    assert_eq!(profile.function_named("fib").unwrap().calls, fib_calls(12));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Flat profile"));

    let plain = output(wasmprof().args(["run", "--no-instrument"]).arg(&module));
    assert_eq!(plain.status.code(), Some(3));
}

#[test]
fn an_instrumented_module_runs_and_profiles_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fib.wasm");
    let instrumented = dir.path().join("fib.prof.wasm");
    std::fs::write(&input, fib_command()).unwrap();
    let out = output(
        wasmprof()
            .arg("instrument")
            .arg(&input)
            .arg("-o")
            .arg(&instrumented),
    );
    assert!(out.status.success());
    let bytes = std::fs::read(&instrumented).unwrap();
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&bytes)
        .expect("the written module validates");
    // The module carries its tables: `run` profiles it without the original.
    std::fs::remove_file(&input).unwrap();
    let json = dir.path().join("p.json");
    let out = output(
        wasmprof()
            .args(["run", "--no-report", "-o"])
            .arg(&json)
            .arg(&instrumented),
    );
    assert_eq!(out.status.code(), Some(3));
    let profile = Profile::read(&json).unwrap();
    assert_eq!(profile.function_named("fib").unwrap().calls, fib_calls(12));
}

/// The embedded host compiles through wasmtime's compilation cache, where the wasmtime
/// CLI keeps it (`$XDG_CACHE_HOME/wasmtime`, its configuration read from
/// `$XDG_CONFIG_HOME/wasmtime`): the first run of a module writes its entry, the plain
/// module's and the instrumented one's, and the second finds them and writes none (the
/// entries as they were), with the first run's counts. The instrumented module is kept
/// too (`$XDG_CACHE_HOME/cargo-wasmprof/instrumented`): the second run takes it from
/// there, and a third, after the entry was cut short, makes it again, whole.
#[test]
fn a_module_instrumented_and_compiled_once_loads_from_the_caches() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("fib.wasm");
    std::fs::write(&module, fib_command()).unwrap();
    let cache = dir.path().join("cache");
    let run = |args: &[&str]| {
        output(
            wasmprof()
                .env("XDG_CACHE_HOME", &cache)
                .env("XDG_CONFIG_HOME", dir.path().join("config"))
                .current_dir(dir.path())
                .args(args)
                .arg(&module),
        )
    };
    // The compiled modules (beside each, a `.stats` file that a worker thread updates).
    let entries = || -> Vec<(std::path::PathBuf, std::time::SystemTime)> {
        let mut entries: Vec<_> = walk(&cache.join("wasmtime/modules"))
            .into_iter()
            .filter(|f| f.extension().is_none())
            .map(|f| {
                let written = std::fs::metadata(&f).unwrap().modified().unwrap();
                (f, written)
            })
            .collect();
        entries.sort();
        entries
    };
    let instrumented = || walk(&cache.join("cargo-wasmprof/instrumented"));
    let mut first = Vec::new();
    for round in 1..=3 {
        let json = dir.path().join(format!("p{round}.json"));
        let profiled = run(&["run", "--no-report", "-o", json.to_str().unwrap()]);
        assert_eq!(profiled.status.code(), Some(3));
        let profile = Profile::read(&json).unwrap();
        assert_eq!(profile.function_named("fib").unwrap().calls, fib_calls(12));
        let stderr = String::from_utf8_lossy(&profiled.stderr);
        assert_eq!(
            stderr.contains("call sites) from the cache"),
            round == 2,
            "round {round}: {stderr}"
        );
        let kept = instrumented();
        assert_eq!(kept.len(), 1, "one instrumented module: {kept:?}");
        let whole = std::fs::read(&kept[0]).unwrap();
        validate(&whole);
        let plain = run(&["run", "--no-instrument"]);
        assert_eq!(plain.status.code(), Some(3));
        let now = entries();
        assert_eq!(
            now.len(),
            2,
            "the instrumented module and the plain one: {now:?}"
        );
        if round == 1 {
            first = now;
        } else {
            assert_eq!(now, first, "found, not compiled and written again");
        }
        if round == 2 {
            std::fs::write(&kept[0], &whole[..whole.len() / 2]).unwrap();
        }
    }
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn arguments_after_the_module_go_to_the_program() {
    // A program that exits with its argument count: `run` must not take `--quiet` or
    // `--color` for itself.
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("argc.wasm");
    let argc = r#"
      (module
        (import "wasi_snapshot_preview1" "args_sizes_get" (func $sizes (param i32 i32) (result i32)))
        (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
        (memory (export "memory") 1)
        (func (export "_start")
          (drop (call $sizes (i32.const 0) (i32.const 4)))
          (call $exit (i32.load (i32.const 0)))))"#;
    std::fs::write(&module, wat::parse_str(argc).unwrap()).unwrap();
    let out = output(
        wasmprof()
            .args(["run", "-q", "--no-report"])
            .arg(&module)
            .args(["--quiet", "--color", "never", "-q"])
            .current_dir(dir.path()),
    );
    assert_eq!(out.status.code(), Some(5), "argv[0] and four arguments");
}

#[test]
fn help_explains_the_commands() {
    let out = output(wasmprof().arg("--help"));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for command in ["test", "run", "instrument", "report"] {
        assert!(text.contains(command));
    }
    // cargo passes the subcommand's name first.
    let out = output(wasmprof().args(["wasmprof", "test", "--help"]));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--package",
        "--features",
        "--release",
        "--manifest-path",
        "--top",
        "--max-contexts",
    ] {
        assert!(text.contains(flag), "test --help lists {flag}");
    }
}
