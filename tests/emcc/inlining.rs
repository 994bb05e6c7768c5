//! V8 inlines the profiled program as it inlines the plain one: the module keeps the share
//! of small function bodies by which V8 scales its inlining budget
//! (`instrument::inlining_budget`), so the probes' larger bodies do not cut the budget.

use std::collections::BTreeSet;

use cargo_wasmprof::symbols::SymbolTable;

use super::*;

/// The names of `wasm`'s functions, by index, as the profiler reads them.
fn function_names(wasm: &[u8]) -> Vec<String> {
    let symbols = SymbolTable::load(wasm, false).unwrap();
    symbols.functions().iter().map(|s| s.name.clone()).collect()
}

/// The calls V8 inlined in a run of `dir/BUILD/parts.js` under node `n`, as `node
/// --trace-wasm-inlining` prints them, by (caller, callee) name: of the functions that
/// `program` names (the program's own, not the probes').
fn inlined(
    n: &NodeBin,
    dir: &Path,
    build: &str,
    program: &BTreeSet<String>,
) -> BTreeSet<(String, String)> {
    let names = function_names(&std::fs::read(dir.join(build).join("parts.wasm")).unwrap());
    let out = output(
        n.command()
            .current_dir(dir)
            .args(common::no_fetch())
            .arg("--trace-wasm-inlining")
            // Its default parts: runs long enough that V8's optimizing compiler, which
            // prints the trace from a thread of its own, is done before the program is.
            .arg(format!("{build}/parts.js"))
            .env("WASMPROF_OUT", dir.join(format!("{build}.json"))),
    );
    assert!(
        out.status.success(),
        "{build}/parts.js runs under node {}",
        n.major
    );
    let name = |index: &str| names.get(index.parse::<usize>().unwrap()).cloned();
    // "[function 39: inlining direct call #2 to function 22]", and for a call inside an
    // inlined function "[function 22 (inlined): inlining direct tail call #0 to function 68]".
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (caller, callee) = line
                .strip_prefix("[function ")?
                .split_once(": inlining direct ")?;
            let caller = caller.trim_end_matches(" (inlined)");
            let callee = callee.split(" to function ").nth(1)?.trim_end_matches(']');
            Some((name(caller)?, name(callee)?))
        })
        .filter(|(caller, callee)| program.contains(caller) && program.contains(callee))
        .collect()
}

/// `fixtures/emcc/parts.c` linked at `-O2 -g` by `emcc` and by `wasmprof-emcc` (the node
/// benchmark's program): under node 26, each call between the program's functions that V8
/// inlines in the plain module it inlines in the profiled one too (its own `fib` into
/// itself, `small` into `part_calls`).
#[test]
fn v8_inlines_the_profiled_program_where_it_inlines_the_plain_one() {
    if !have(&["emcc"]) {
        return;
    }
    let Some(n) = nodes().into_iter().find(|n| n.major >= 22) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/emcc/parts.c");
    let object = dir.path().join("parts.o");
    let compiled = output(
        Command::new("emcc")
            .args(["-O2", "-c"])
            .arg(&source)
            .arg("-o")
            .arg(&object),
    );
    assert!(compiled.status.success(), "emcc compiles parts.c");
    for (build, linker) in [
        ("plain", "emcc"),
        ("profiled", env!("CARGO_BIN_EXE_wasmprof-emcc")),
    ] {
        std::fs::create_dir_all(dir.path().join(build)).unwrap();
        let linked = output(
            Command::new(linker)
                .current_dir(dir.path())
                .args(["-O2", "-g", "parts.o", "-o"])
                .arg(format!("{build}/parts.js")),
        );
        assert!(linked.status.success(), "{linker} links parts.o");
    }
    validate(&std::fs::read(dir.path().join("profiled/parts.wasm")).unwrap());
    let program: BTreeSet<String> =
        function_names(&std::fs::read(dir.path().join("plain/parts.wasm")).unwrap())
            .into_iter()
            .collect();
    let plain = inlined(&n, dir.path(), "plain", &program);
    assert!(
        !plain.is_empty(),
        "V8 inlined nothing of the plain program: nothing to compare"
    );
    let profiled = inlined(&n, dir.path(), "profiled", &program);
    let missing: Vec<_> = plain.difference(&profiled).collect();
    assert!(
        missing.is_empty(),
        "node {}: V8 inlined {missing:?} in the plain program, not in the profiled one ({profiled:?})",
        n.major
    );
}
