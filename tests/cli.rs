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

/// The embedded host keeps what a run made in the profiler's cache
/// (`$XDG_CACHE_HOME/cargo-wasmprof/instrumented`), and nothing in wasmtime's: the
/// instrumented module, each module compiled (the plain one and the instrumented one), the
/// sampler's map of the compiled code, and, for a file that has not changed for a second, the record of its
/// stamp. The second run finds them all and makes none again, with the first run's counts;
/// a third, after the instrumented module was cut short, makes it again, whole.
#[test]
fn a_module_instrumented_and_compiled_once_loads_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("fib.wasm");
    std::fs::write(&module, fib_command()).unwrap();
    let cache = dir.path().join("cache");
    let run = |args: &[&str]| {
        output(
            wasmprof()
                .env("XDG_CACHE_HOME", &cache)
                .current_dir(dir.path())
                .args(args)
                .arg(&module),
        )
    };
    // The files of the cache: extension, inode (a file written again, whole or not at
    // all, is a new one), contents; in the order of the first two.
    let kept = || -> Vec<(String, u64, Vec<u8>)> {
        let mut files: Vec<_> = walk(&cache.join("cargo-wasmprof/instrumented"))
            .into_iter()
            .map(|f| {
                let extension = f.extension().unwrap().to_string_lossy().into_owned();
                let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&f).unwrap());
                (extension, inode, std::fs::read(&f).unwrap())
            })
            .collect();
        files.sort_by(|a, b| (&a.0, &a.2).cmp(&(&b.0, &b.2)));
        files
    };
    // A record is made of a file that has not changed for a second.
    std::thread::sleep(std::time::Duration::from_millis(1100));
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
        let plain = run(&["run", "--no-instrument"]);
        assert_eq!(plain.status.code(), Some(3));
        let now = kept();
        let extensions: Vec<&str> = now.iter().map(|(e, _, _)| e.as_str()).collect();
        assert_eq!(
            extensions,
            ["cwasm", "cwasm", "file", "map", "meta", "wasm"]
        );
        assert!(
            !cache.join("wasmtime").exists(),
            "nothing in wasmtime's cache"
        );
        let instrumented = now[5].2.clone();
        validate(&instrumented);
        match round {
            1 => first = now,
            2 => assert_eq!(now, first, "all found, none written again"),
            // The instrumented module made again, the same, and its record and its meta
            // written again; the compiled modules and the code map found.
            _ => {
                for ((extension, inode, bytes), was) in now.iter().zip(&first) {
                    assert_eq!((extension, bytes), (&was.0, &was.2));
                    if extension == "cwasm" || extension == "map" {
                        assert_eq!(*inode, was.1, "the {extension} written again");
                    }
                }
            }
        }
        if round == 2 {
            let entry = walk(&cache.join("cargo-wasmprof/instrumented"))
                .into_iter()
                .find(|f| f.extension().is_some_and(|e| e == "wasm"))
                .unwrap();
            std::fs::write(&entry, &instrumented[..instrumented.len() / 2]).unwrap();
        }
    }
}

/// A module file's record names its instrumented module by the file's stamp, which every
/// write moves: a file written again in place, at the same length and with its time of
/// modification set back, is instrumented anew, not taken for the module it held.
#[test]
fn a_module_file_written_again_in_place_is_instrumented_anew() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("fib.wasm");
    // The same program, told apart by a custom section's one byte.
    let version = |byte: u8| {
        let mut wasm = fib_command();
        wasm.extend([0, 3, 1, b'v', byte]);
        wasm
    };
    std::fs::write(&module, version(b'1')).unwrap();
    let written = std::fs::metadata(&module).unwrap().modified().unwrap();
    let run = || {
        let out = output(
            wasmprof()
                .env("XDG_CACHE_HOME", dir.path().join("cache"))
                .args(["run", "--no-report", "-o"])
                .arg(dir.path().join("p.json"))
                .arg(&module),
        );
        assert_eq!(out.status.code(), Some(3));
        String::from_utf8_lossy(&out.stderr).contains("call sites) from the cache")
    };
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(!run(), "the first run instruments it");
    assert!(run(), "the second finds it");
    let file = std::fs::File::options().write(true).open(&module).unwrap();
    std::io::Write::write_all(&mut &file, &version(b'2')).unwrap();
    file.set_modified(written).unwrap();
    drop(file);
    assert_eq!(
        std::fs::metadata(&module).unwrap().modified().unwrap(),
        written
    );
    assert!(!run(), "the module written again is instrumented anew");
}

/// `perf` names the functions of a module that `run` runs through the perf map that
/// `WASMPROF_PERF_MAP` asks for, also when the compiled code is read from the cache (the
/// second run): the samples `perf record` takes in the code of a module that spins in one
/// function are nearly all that function's.
#[test]
fn perf_names_a_runs_functions_through_the_perf_map() {
    if !common::have(&["perf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("spin.wasm");
    let spin = r#"
      (module
        (func $spin (local i64)
          (loop $again
            (local.set 0 (i64.add (local.get 0) (i64.const 1)))
            (br_if $again (i64.lt_u (local.get 0) (i64.const 300000000)))))
        (func (export "_start") (call $spin)))"#;
    std::fs::write(&module, wat::parse_str(spin).unwrap()).unwrap();
    for round in 1..=2 {
        let data = dir.path().join(format!("perf-{round}.data"));
        let recorded = output(
            std::process::Command::new("perf")
                .args(["record", "-q", "-e", "cpu-clock", "-F", "2000", "-o"])
                .arg(&data)
                .arg("--")
                .arg(env!("CARGO_BIN_EXE_cargo-wasmprof"))
                .args(["run", "--no-instrument"])
                .arg(&module)
                .env(cargo_wasmprof::host::PERF_MAP_VAR, "1")
                .env("XDG_CACHE_HOME", dir.path().join("cache")),
        );
        assert!(recorded.status.success(), "perf records the run");
        let script = std::process::Command::new("perf")
            .args(["script", "-F", "ip,sym", "-i"])
            .arg(&data)
            .output()
            .unwrap();
        let symbols = String::from_utf8_lossy(&script.stdout);
        // `IP SYMBOL`, the module's functions `wasm[ID] NAME`.
        let in_module: Vec<&str> = symbols
            .lines()
            .filter_map(|line| line.trim().split_once(' ').map(|(_, symbol)| symbol))
            .filter(|symbol| symbol.starts_with("wasm["))
            .collect();
        let spinning = in_module.iter().filter(|s| s.ends_with(" spin")).count();
        // A sample may find `_start`'s call, hardly ever: all but a few are `spin`'s.
        assert!(
            spinning >= 100 && spinning * 100 >= in_module.len() * 98,
            "round {round}: {spinning} of {} samples in the module's code named `spin`",
            in_module.len()
        );
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
