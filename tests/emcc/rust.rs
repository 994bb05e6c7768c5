//! Rust through `--target wasm32-unknown-emscripten`: the crate's own functions get the
//! same counts and arcs as on wasm32-wasip1.

use super::*;

/// Whether the toolchain has the standard library for `target`; under CI it must.
fn have_rust_target(target: &str) -> bool {
    let sysroot = output(Command::new("rustc").args(["--print", "sysroot"]));
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    if Path::new(&sysroot)
        .join("lib/rustlib")
        .join(target)
        .exists()
    {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have the {target} target (.ci/run adds it)"
    );
    eprintln!("skipped: the {target} target is not installed");
    false
}

/// The calls and arcs of the crate's own functions that ran: what must not depend on the
/// target. (Generic code of std instantiated for the crate's types may differ: the
/// emscripten target unwinds, so a slice's drop glue is a function of its own there.)
/// Names that clash are told apart by function index, which differs between the targets;
/// the index is left out.
fn crate_counts(p: &Profile) -> Vec<(String, u64)> {
    let own = |name: &str| name.starts_with("calls::") || name.starts_with("<calls::");
    let plain = |name: &str| match name.find(" [func ") {
        Some(at) => name[..at].to_string(),
        None => name.to_string(),
    };
    let mut counts: Vec<(String, u64)> = p
        .functions
        .iter()
        .filter(|f| f.calls > 0 && own(&f.name))
        .map(|f| (plain(&f.name), f.calls))
        .chain(
            p.arcs
                .iter()
                .filter(|a| own(&a.caller) && own(&a.callee))
                .map(|a| {
                    let arc = format!("{} -> {}", plain(&a.caller), plain(&a.callee));
                    (arc, a.count)
                }),
        )
        .collect();
    counts.sort();
    counts
}

/// `cargo wasmprof test --target wasm32-unknown-emscripten`: cargo links through
/// wasmprof-emcc, which wraps the linker the crate configured; the tests run under node;
/// the profiles have the same counts and arcs as on wasm32-wasip1.
#[test]
fn rust_through_emscripten_matches_wasip1() {
    if !have(&["emcc", "node"]) || !have_rust_target("wasm32-unknown-emscripten") {
        return;
    }
    let dir = common::copy_fixture("calls");
    let root = dir.path();
    // The user's own linker for the target: a script that notes its arguments, then links.
    std::fs::create_dir_all(root.join("tools")).unwrap();
    std::fs::create_dir_all(root.join(".cargo")).unwrap();
    let linker = root.join("tools/my-emcc");
    std::fs::write(
        &linker,
        "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/linker.log\"\nexec emcc \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&linker, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        root.join(".cargo/config.toml"),
        "[target.wasm32-unknown-emscripten]\nlinker = \"tools/my-emcc\"\n",
    )
    .unwrap();

    let nodes = nodes();
    for n in &nodes {
        let em = output(
            wasmprof()
                .args(["wasmprof", "test", "--target", "wasm32-unknown-emscripten"])
                .env(cargo_wasmprof::host::NODE_VAR, &n.path)
                .current_dir(root),
        );
        assert!(em.status.success(), "the tests pass under node {}", n.major);
        let stdout = String::from_utf8_lossy(&em.stdout);
        assert!(stdout.contains("test tests::fib_of_20 ... ok"));
        assert!(stdout.contains("Flat profile"));
        n.profile(&root.join("target/wasmprof/wasm32-unknown-emscripten/calls-calls-lib.json"));
    }
    let log =
        std::fs::read_to_string(root.join("tools/linker.log")).expect("the user's linker ran");
    assert!(log.contains("--pre-js"), "through the wrapper: {log}");
    let deps = root.join("target/wasm32-unknown-emscripten/debug/deps");
    let mut modules = 0;
    for entry in std::fs::read_dir(&deps).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".wasm") && !name.ends_with(".orig.wasm") {
            validate(&std::fs::read(&path).unwrap());
            modules += 1;
        }
    }
    assert_eq!(modules, 2, "the lib's and the integration test's modules");

    let wasi = output(
        wasmprof()
            .args(["wasmprof", "test", "--no-report"])
            .current_dir(root),
    );
    assert!(wasi.status.success());
    for name in ["calls-calls-lib.json", "calls-integration-test.json"] {
        let on_wasi = Profile::read(&root.join("target/wasmprof").join(name)).unwrap();
        let on_em = Profile::read(
            &root
                .join("target/wasmprof/wasm32-unknown-emscripten")
                .join(name),
        )
        .unwrap();
        check_invariants(&on_em);
        assert!(on_em.modules[0].ends_with(".js"), "{:?}", on_em.modules);
        assert_eq!(crate_counts(&on_em), crate_counts(&on_wasi), "{name}");
    }
    let em_lib = "target/wasmprof/wasm32-unknown-emscripten/calls-calls-lib.json";
    let lib = Profile::read(&root.join(em_lib)).unwrap();
    assert_eq!(calls(&lib, "calls::fib"), fib_calls(20));
    assert_eq!(arc(&lib, "calls::fib", "calls::fib"), fib_calls(20) - 1);
    // Through trait objects, so through call_indirect.
    let closure = "calls::total_area2::{closure#0}";
    assert_eq!(
        arc(&lib, closure, "<calls::Square as calls::Shape>::area2"),
        2
    );
    assert_eq!(
        arc(&lib, closure, "<calls::Triangle as calls::Shape>::area2"),
        1
    );

    // Another metric: cargo does not link again, so the module is made again from its
    // original.
    let again = output(
        wasmprof()
            .args([
                "wasmprof",
                "test",
                "--target",
                "wasm32-unknown-emscripten",
                "--metric",
                "instructions",
                "--lib",
                "--no-report",
            ])
            .current_dir(root),
    );
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("Instrumented"));
    let lib = Profile::read(&root.join(em_lib)).unwrap();
    assert_eq!(lib.metric, cargo_wasmprof::meta::Metric::Instructions);
    assert_eq!(calls(&lib, "calls::fib"), fib_calls(20));
}

/// Doc tests on wasm32-unknown-emscripten run under node through `cargo wasmprof run`, as
/// on wasip1, each with its own profile, named from DWARF: rustc links a doc test with
/// `-g0` (the doc test itself has no debuginfo), which the wrapper overrides. A doc test of
/// `fib(10)` makes 2*F(11)-1 = 177 calls, and one that fails fails the run, as with cargo.
#[test]
fn doc_tests_through_emscripten_are_profiled() {
    if !have(&["emcc", "node"]) || !have_rust_target("wasm32-unknown-emscripten") {
        return;
    }
    let dir = common::copy_fixture("calls");
    let root = dir.path();
    let lib = root.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    let with_doc_test = |expected: u64| {
        source.replacen(
            "/// Naive Fibonacci: fib(n) makes 2*F(n+1)-1 calls of itself.\n",
            &format!(
                "/// Naive Fibonacci: fib(n) makes 2*F(n+1)-1 calls of itself.\n///\n\
                 /// ```\n/// assert_eq!(calls::fib(10), {expected});\n/// ```\n"
            ),
            1,
        )
    };
    std::fs::write(&lib, with_doc_test(55)).unwrap();
    let test = || {
        output(
            wasmprof()
                .args(["wasmprof", "test", "--target", "wasm32-unknown-emscripten"])
                .args(["--doc", "--metric", "calls"])
                .current_dir(root),
        )
    };
    let out = test();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let profiles: Vec<PathBuf> =
        std::fs::read_dir(root.join("target/wasmprof/wasm32-unknown-emscripten"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("-doc-"))
            .collect();
    let [file] = profiles.as_slice() else {
        panic!("one doc test's profile: {profiles:?}");
    };
    let p = Profile::read(file).unwrap();
    assert_eq!(calls(&p, "calls::fib"), fib_calls(10));
    let fib = p.function_named("calls::fib").unwrap();
    assert!(
        fib.file
            .as_deref()
            .is_some_and(|f| f.ends_with("src/lib.rs")),
        "{fib:?}"
    );
    std::fs::write(&lib, with_doc_test(56)).unwrap();
    let out = test();
    assert_eq!(
        out.status.code(),
        Some(101),
        "a failing doc test fails the run"
    );
    // As cargo says it.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: doctest failed, to rerun pass `--doc`"),
        "{err}"
    );
}
