//! The bad-input corpus: odd, broken and unusual modules and files. Each gives a correct
//! profile or one clear error line that names the file, a non-zero exit, no panic, and no
//! output file (complete or partial).

mod common;

use std::path::Path;
use std::process::Output;

use cargo_wasmprof::instrument::{self, InstrumentError, Options};
use cargo_wasmprof::profile::{Profile, HOST};
use common::{
    arc, calls, check_invariants, fib_calls, fib_command, output, profile_module, validate,
    wasmprof,
};

/// Asserts that `out` failed with one `error: <file>: <problem>` line and no panic.
fn assert_clean_failure(out: &Output, file: &Path, problem: &str) {
    assert!(!out.status.success());
    assert_ne!(out.status.code(), Some(101), "no panic");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    assert!(
        lines[0].starts_with(&format!("error: {}: ", file.display())),
        "names the file: {err}"
    );
    assert!(lines[0].contains(problem), "says {problem:?}: {err}");
}

/// `instrument` refuses `bytes` with `problem`, and leaves nothing but its input.
fn instrument_fails(bytes: &[u8], problem: &str) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.wasm");
    let out_file = dir.path().join("out.wasm");
    std::fs::write(&input, bytes).unwrap();
    let out = output(
        wasmprof()
            .arg("instrument")
            .arg(&input)
            .arg("-o")
            .arg(&out_file),
    );
    assert_clean_failure(&out, &input, problem);
    assert!(!out_file.exists(), "no output file");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "nothing but the input is left");
}

/// `run` of `wasm` fails with `problem`.
fn run_fails(wasm: &[u8], problem: &str) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.wasm");
    std::fs::write(&input, wasm).unwrap();
    let out = output(wasmprof().args(["run", "-q", "--no-report"]).arg(&input));
    assert_clean_failure(&out, &input, problem);
}

/// Instruments `wat`'s module and checks its profile's invariants; returns it.
fn profiles(wat: &str) -> Profile {
    let (p, _) = profile_module(&wat::parse_str(wat).unwrap());
    check_invariants(&p);
    p
}

#[test]
fn an_empty_file() {
    instrument_fails(b"", "not a WebAssembly module");
}

#[test]
fn a_text_file() {
    instrument_fails(b"hello, this is text\n", "not a WebAssembly module");
}

#[test]
fn random_bytes() {
    let noise: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    instrument_fails(&noise, "not a WebAssembly module");
}

#[test]
fn random_bytes_after_a_wasm_header() {
    let mut bytes = b"\0asm\x01\0\0\0".to_vec();
    bytes.extend((0..4096u32).map(|i| (i.wrapping_mul(2246822519) >> 11) as u8));
    instrument_fails(&bytes, "not a valid module");
}

#[test]
fn a_module_of_a_future_version() {
    instrument_fails(b"\0asm\x02\0\0\0", "not a valid module");
}

/// A module cut at each section boundary, and in the middle of each section: the prefix is
/// either a valid module (then it is instrumented, and the result validates) or refused as
/// invalid; the CLI says so in one line.
#[test]
fn a_module_truncated_at_every_section_boundary() {
    let wasm = fib_command();
    let mut cuts = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(&wasm) {
        if let Some((_, range)) = payload.unwrap().as_section() {
            cuts.extend([range.start, (range.start + range.end) / 2, range.end]);
        }
    }
    assert!(cuts.len() >= 12, "the module has sections to cut at");
    for &cut in &cuts {
        match instrument::instrument(&wasm[..cut], &Options::default()) {
            Ok(done) => validate(&done.wasm),
            Err(InstrumentError::Invalid(_) | InstrumentError::NotWasm) => {}
            Err(other) => panic!("cut at {cut}: {other}"),
        }
    }
    instrument_fails(&wasm[..wasm.len() - 9], "not a valid module");
}

#[test]
fn components_that_cannot_be_profiled() {
    // No core module: nothing to instrument; plain, no `wasi:cli/run` to call.
    let empty = wat::parse_str("(component)").unwrap();
    instrument_fails(&empty, "a component without a core module");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.wasm");
    std::fs::write(&input, &empty).unwrap();
    let out = output(
        wasmprof()
            .args(["run", "-q", "--no-instrument"])
            .arg(&input),
    );
    assert_clean_failure(&out, &input, "as a WASI command");
    // A composition: a nested component with code of its own.
    let nested = wat::parse_str("(component (component (core module (func))))").unwrap();
    instrument_fails(&nested, "nests components with code");
    // Its core module instrumented already.
    let module = instrument::instrument(&fib_command(), &Options::default()).unwrap();
    let mut component = b"\0asm\x0d\0\x01\0".to_vec();
    component.push(1);
    let mut size = module.wasm.len();
    loop {
        let byte = (size & 0x7f) as u8;
        size >>= 7;
        component.push(if size == 0 { byte } else { byte | 0x80 });
        if size == 0 {
            break;
        }
    }
    component.extend_from_slice(&module.wasm);
    instrument_fails(&component, "already instrumented");
    // A metric that needs a host function of the profiler's.
    let plain = wat::parse_str("(component (core module (func)))").unwrap();
    let exact = Options {
        metric: cargo_wasmprof::meta::Metric::ExactTime,
        ..Options::default()
    };
    let Err(refused) = instrument::instrument(&plain, &exact) else {
        panic!("exact-time is refused for a component");
    };
    assert!(refused.to_string().contains("exact-time"), "{refused}");
}

/// A WASI 0.3 component that `run` does not run (a `wasi:http/handler@0.3` service, which
/// `serve` serves), or whose world no command hosts, is refused in one line that names the
/// interface and what runs it, profiled or plain, not with wasmtime's words.
#[test]
fn a_wasi_03_component_no_command_hosts_is_refused_in_our_words() {
    let exporting = |name: &str| {
        wat::parse_str(format!(
            r#"(component
                 (core module $m (func (export "run") (result i32) i32.const 0))
                 (core instance $i (instantiate $m))
                 (func $run (result (result)) (canon lift (core func $i "run")))
                 (instance $api (export "run" (func $run)))
                 (export "{name}" (instance $api)))"#
        ))
        .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let unknown = "wasi:messaging/incoming-handler@0.3.0";
    for (name, says) in [
        (
            "wasi:http/handler@0.3.0",
            "a WASI 0.3 service (it exports `wasi:http/handler@0.3.0`), no command: `cargo wasmprof serve` serves it",
        ),
        (unknown, "a WASI 0.3 component that exports `wasi:messaging"),
    ] {
        let input = dir.path().join("p3.wasm");
        std::fs::write(&input, exporting(name)).unwrap();
        for plain in [false, true] {
            let out = output(
                wasmprof()
                    .args(["run", "-q", "--no-report"])
                    .args(plain.then_some("--no-instrument"))
                    .arg(&input),
            );
            assert_clean_failure(&out, &input, says);
        }
    }
    // Refused before the server listens.
    let input = dir.path().join("unknown.wasm");
    std::fs::write(&input, exporting(unknown)).unwrap();
    let out = output(
        wasmprof()
            .args(["serve", "-q", "--addr", "127.0.0.1:0"])
            .arg(&input),
    );
    assert_clean_failure(&out, &input, "a WASI 0.3 component that exports");
    // A WASI 0.2 command is not taken for one.
    let p2 = exporting("wasi:cli/run@0.2.6");
    use cargo_wasmprof::instrument::component::{wasi_03, Wasi03};
    assert_eq!(wasi_03(&p2), Wasi03::None);
}

#[test]
fn an_already_instrumented_module() {
    let done = instrument::instrument(&fib_command(), &Options::default()).unwrap();
    instrument_fails(&done.wasm, "already instrumented");
}

#[test]
fn a_module_that_imports_the_profilers_names() {
    let wasm = wat::parse_str(
        r#"(module (import "wasmprof" "now" (func $now (result i64)))
             (func (export "_start") (drop (call $now))))"#,
    )
    .unwrap();
    instrument_fails(
        &wasm,
        "module `wasmprof` is the profiler's own import namespace",
    );
}

#[test]
fn a_module_that_exports_the_profilers_names() {
    let wasm = wat::parse_str(
        r#"(module (memory (export "__wasmprof_memory") 1) (func (export "_start")))"#,
    )
    .unwrap();
    instrument_fails(&wasm, "exports `__wasmprof_memory`");
}

#[test]
fn a_module_that_needs_the_gc_proposal() {
    let wasm = wat::parse_str(
        r#"(module (type $s (struct (field i32)))
             (func (export "_start") (drop (struct.new $s (i32.const 1)))))"#,
    )
    .unwrap();
    instrument_fails(&wasm, "uses the garbage collection (GC) proposal");
}

/// A wasi-threads module that cannot run as one: each gets one line that says why.
#[test]
fn threaded_modules_that_wasi_threads_cannot_run() {
    let module = |memory: &str, spawn: &str, start: &str| {
        wat::parse_str(format!(
            r#"(module
                 (import "wasi" "thread-spawn" (func {spawn}))
                 {memory}
                 (func (export "wasi_thread_start") {start})
                 (func (export "_start")))"#
        ))
        .unwrap()
    };
    let shared = r#"(import "env" "memory" (memory 1 16 shared))"#;
    let spawn = "(param i32) (result i32)";
    let start = "(param i32 i32)";
    instrument_fails(
        &module(shared, "(param i64) (result i32)", start),
        "the import's type is (i64) -> (i32), not wasi-threads' (i32) -> (i32)",
    );
    instrument_fails(
        &module(r#"(import "env" "memory" (memory 1 16))"#, spawn, start),
        "it imports no shared memory",
    );
    instrument_fails(
        &module("(memory 1 16 shared)", spawn, start),
        "it imports no shared memory",
    );
    instrument_fails(
        &module(shared, spawn, "(param i32)"),
        "it exports no `wasi_thread_start(i32, i32)`",
    );
}

/// Emscripten's -pthread modules (they export `_emscripten_thread_init` for their
/// workers) that the JS runtime cannot profile.
#[test]
fn emscripten_pthread_modules_that_the_js_runtime_cannot_run() {
    // Its threads run in JS workers, each on the imported shared memory: a module whose
    // workers would share no memory is refused.
    let cases = [(
        r#"(module (memory (export "memory") 1 16 shared)
             (func (export "_emscripten_thread_init")) (func (export "_start")))"#,
        "state-module",
        "an Emscripten -pthread module (it exports `_emscripten_thread_init`): it imports \
         no shared memory",
    )];
    for (module, state, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("input.wasm");
        std::fs::write(&input, wat::parse_str(module).unwrap()).unwrap();
        let out_file = dir.path().join("out.wasm");
        let out = output(
            wasmprof()
                .args(["instrument", "--state", state])
                .arg(&input)
                .arg("-o")
                .arg(&out_file),
        );
        assert_clean_failure(&out, &input, message);
        assert!(!out_file.exists());
    }
}

#[test]
fn a_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.wasm");
    let out = output(wasmprof().arg("run").arg(&missing));
    assert_clean_failure(&out, &missing, "No such file");
}

#[test]
fn a_directory_instead_of_a_module() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(wasmprof().arg("run").arg(dir.path()));
    assert_clean_failure(&out, dir.path(), "Is a directory");
}

#[test]
fn an_output_that_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fib.wasm");
    std::fs::write(&input, fib_command()).unwrap();
    // A regular file where the output's directory should be.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let out = output(
        wasmprof()
            .arg("instrument")
            .arg(&input)
            .arg("-o")
            .arg(blocker.join("out.wasm")),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: cannot create") && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "nothing else written"
    );
}

#[test]
fn a_report_of_something_that_is_not_a_profile() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("other.json");
    std::fs::write(&file, r#"{"hello": 1}"#).unwrap();
    let out = output(wasmprof().arg("report").arg(&file));
    assert_clean_failure(&out, &file, "not a cargo-wasmprof profile");
    std::fs::write(&file, "not json").unwrap();
    let out = output(wasmprof().arg("report").arg(&file));
    assert_clean_failure(&out, &file, "not JSON");
}

#[test]
fn a_truncated_profile_and_a_corrupt_dump() {
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = profile_module(&fib_command());
    let file = dir.path().join("p.json");
    p.write(&file).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    let out = output(wasmprof().arg("report").arg(&file));
    assert_clean_failure(&out, &file, "not JSON");
    let dump = dir.path().join("dump.json");
    std::fs::write(
        &dump,
        r#"{"format": "wasmprof-dump", "version": 1, "memory": "!!!", "cur": 0}"#,
    )
    .unwrap();
    let out = output(wasmprof().arg("report").arg(&dump));
    assert_clean_failure(&out, &dump, "not a valid cargo-wasmprof dump");
}

#[test]
fn a_module_without_code() {
    let wasm = wat::parse_str("(module (memory 1))").unwrap();
    let done = instrument::instrument(&wasm, &Options::default()).unwrap();
    validate(&done.wasm);
    assert!(done.meta.functions.is_empty());
    // Not a command: `run` says so.
    run_fails(&wasm, "not a WASI command");
}

#[test]
fn a_module_without_memory() {
    let p = profiles(
        r#"(module
          (func $f (result i32) (i32.const 1))
          (func (export "_start") (drop (call $f)) (drop (call $f))))"#,
    );
    assert_eq!(calls(&p, "f"), 2);
}

#[test]
fn a_start_function() {
    let p = profiles(
        r#"(module
          (global $g (mut i32) (i32.const 0))
          (func $init (global.set $g (i32.const 1)))
          (start $init)
          (func (export "_start") (if (i32.eqz (global.get $g)) (then unreachable))))"#,
    );
    assert_eq!(calls(&p, "init"), 1);
    assert_eq!(
        arc(&p, HOST, "init"),
        1,
        "the host calls the start function"
    );
    assert_eq!(arc(&p, HOST, "_start"), 1);
}

#[test]
fn an_imported_start_function_and_a_re_exported_import() {
    let p = profiles(
        r#"(module
          (import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))
          (memory (export "memory") 1)
          (func $start (drop (call $yield)))
          (start $start)
          (export "yield" (func $yield))
          (func (export "_start") (drop (call $yield))))"#,
    );
    assert_eq!(calls(&p, "wasi_snapshot_preview1.sched_yield"), 2);
}

/// An imported memory (shared, as wasm32-wasip1-threads programs import theirs) is given
/// by the embedded host; an import it does not have is one line.
#[test]
fn an_imported_shared_memory_and_a_missing_import() {
    let p = profiles(
        r#"(module
          (import "env" "memory" (memory 1 16 shared))
          (func $add (drop (i32.atomic.rmw.add (i32.const 0) (i32.const 1))))
          (func (export "_start") (call $add)))"#,
    );
    assert_eq!(calls(&p, "add"), 1);
    let wasm =
        wat::parse_str(r#"(module (import "env" "missing" (func)) (func (export "_start")))"#)
            .unwrap();
    run_fails(&wasm, "cannot instantiate the module");
}

#[test]
fn a_shared_memory() {
    let p = profiles(
        r#"(module
          (memory 1 1 shared)
          (func $add (drop (i32.atomic.rmw.add (i32.const 0) (i32.const 1))))
          (func (export "_start") (call $add) (call $add)
            (if (i32.ne (i32.atomic.load (i32.const 0)) (i32.const 2)) (then unreachable))))"#,
    );
    assert_eq!(calls(&p, "add"), 2);
    assert!(p.complete);
}

/// The program's memory cannot grow past its maximum; the profiler's own memory is separate,
/// so the program sees the same `memory.grow` results as without it.
#[test]
fn a_memory_at_its_maximum() {
    let p = profiles(
        r#"(module
          (memory 1 1)
          (func $grow (result i32) (memory.grow (i32.const 1)))
          (func (export "_start") (if (i32.ne (call $grow) (i32.const -1)) (then unreachable))))"#,
    );
    assert!(p.complete, "the program did not trap");
    assert_eq!(calls(&p, "grow"), 1);
}

#[test]
fn several_memories_and_a_64_bit_memory() {
    let p = profiles(
        r#"(module
          (memory $a 1)
          (memory $b i64 1)
          (func $store (i32.store $a (i32.const 0) (i32.const 7)) (i64.store $b (i64.const 8) (i64.const 9)))
          (func (export "_start") (call $store)
            (if (i32.ne (i32.load $a (i32.const 0)) (i32.const 7)) (then unreachable))
            (if (i64.ne (i64.load $b (i64.const 8)) (i64.const 9)) (then unreachable))))"#,
    );
    assert!(p.complete);
    assert_eq!(calls(&p, "store"), 1);
}

#[test]
fn deeply_nested_blocks() {
    let depth = 20_000;
    let text = format!(
        "(module (func $deep {}nop{}) (func (export \"_start\") (call $deep)))",
        "(block ".repeat(depth),
        ")".repeat(depth)
    );
    let p = profiles(&text);
    assert_eq!(calls(&p, "deep"), 1);
}

#[test]
fn a_hundred_thousand_functions() {
    let n = 100_000;
    let mut text = String::from("(module\n");
    for i in 0..n {
        text.push_str(&format!("(func $f{i} (result i32) (i32.const {i}))\n"));
    }
    text.push_str("(func (export \"_start\")\n");
    for i in (0..n).step_by(7) {
        text.push_str(&format!("(drop (call $f{i}))\n"));
    }
    text.push_str("))\n");
    let p = profiles(&text);
    assert_eq!(
        p.functions.len(),
        n / 7 + 2,
        "the called functions and _start"
    );
    assert_eq!(calls(&p, "f99995"), 1);
}

#[test]
fn garbage_dwarf_leaves_the_names_of_the_name_section() {
    let mut wasm = fib_command();
    // A custom section called .debug_info that is not DWARF.
    let mut section = vec![0u8];
    let name = b".debug_info";
    let payload: Vec<u8> = (0..200u8).map(|i| i.wrapping_mul(37)).collect();
    let mut content = vec![name.len() as u8];
    content.extend_from_slice(name);
    content.extend_from_slice(&payload);
    section.push(content.len() as u8 | 0x80);
    section.push((content.len() >> 7) as u8);
    section.extend(content);
    wasm.extend(section);
    let (p, outcome) = profile_module(&wasm);
    assert_eq!(outcome.exit_code, 3);
    assert_eq!(calls(&p, "fib"), fib_calls(12));
}

/// A module that another version of cargo-wasmprof instrumented (its meta of another
/// version) is refused with a line that says so, not taken for an uninstrumented one;
/// `--no-instrument` runs it as it is.
#[test]
fn a_module_instrumented_by_another_version_says_so() {
    let mut wasm = fib_command();
    let name = b"wasmprof";
    let meta = br#"{"version":1,"metric":"time"}"#;
    wasm.extend([0, (1 + name.len() + meta.len()) as u8, name.len() as u8]);
    wasm.extend(name);
    wasm.extend(meta);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.wasm");
    std::fs::write(&file, &wasm).unwrap();
    let out = output(wasmprof().args(["run", "--no-report"]).arg(&file));
    assert_clean_failure(&out, &file, "its tables are of version 1");
    // Run as it is, it runs.
    let plain = output(wasmprof().args(["run", "--no-instrument"]).arg(&file));
    assert_eq!(plain.status.code(), Some(3));
}
