//! C and C++ through `wasmprof-emcc` under node: a Makefile's build, exact counts and
//! demangled names against the code and against gprof of the native build, exits, traps,
//! an uncaught JS exception, modularized programs, a program linked without an extension,
//! emcc's own errors.

use super::*;

#[test]
fn a_makefile_build_profiles_c_under_node() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let dir = built();
    for program in ["calls", "shapes"] {
        let wasm = std::fs::read(dir.join(format!("build/{program}.wasm"))).unwrap();
        validate(&wasm);
        let original = dir.join(format!("build/{program}.orig.wasm"));
        assert!(original.exists(), "the original is kept beside it");
    }
    for n in nodes() {
        let (code, stdout) = node(&n, "calls", &[], None);
        assert_eq!(code, 0);
        let p = n.profile(&dir.join("calls.wasmprof.json")); // the default profile file
        the_calls_fixtures_counts(&p, &stdout);
    }
    // The report reads it like any other profile: every function (a run this short may
    // have no sample in the program's own), each at its place in the source.
    let out = output(
        wasmprof()
            .args(["report", "--top", "all"])
            .arg(dir.join("calls.wasmprof.json")),
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("calls.c:"));
}

/// What fixtures/emcc/calls.c does, in the profile `p` of a run that printed `stdout`.
fn the_calls_fixtures_counts(p: &Profile, stdout: &str) {
    check_invariants(p);
    assert!(p.complete);
    // Recursion: fib(20) as the program's comment says.
    assert_eq!(calls(p, "fib"), fib_calls(20));
    assert_eq!(arc(p, "fib", "fib"), fib_calls(20) - 1);
    assert_eq!(arc(p, "main", "fib"), 1);
    // Mutual recursion: is_even(10).
    assert_eq!(calls(p, "is_even"), 6);
    assert_eq!(calls(p, "is_odd"), 5);
    assert_eq!(arc(p, "is_odd", "is_even"), 5);
    // A table of function pointers: call_indirect arcs from apply.
    for op in ["add", "sub", "mul"] {
        assert_eq!(arc(p, "apply", op), 3, "apply -> {op}");
    }
    // libc calling back into user code: qsort's comparator, counted by the program too.
    let comparisons = printed(stdout, "by_value calls:");
    assert_eq!(calls(p, "by_value"), comparisons);
    let from_libc: u64 = p
        .arcs
        .iter()
        .filter(|a| a.callee == "by_value" && a.caller != "main")
        .map(|a| a.count)
        .sum();
    assert_eq!(
        from_libc, comparisons,
        "every comparison comes from qsort's code"
    );
    // Imports implemented in JS, and the host's entry into the module.
    assert!(p.arcs.iter().any(|a| a.callee.ends_with("fd_write")));
    assert!(p.arcs.iter().any(|a| a.caller == HOST));
    // Source locations from the original module's DWARF.
    let fib = p.function_named("fib").unwrap();
    let source = built().join("calls.c");
    assert!(fib.file.as_deref().unwrap().ends_with("calls.c"));
    assert_eq!(fib.line, Some(line_of(&source, "int fib(")));
    // The wrappers' default metric is the sampled time (a run this short may end before
    // the sampler's first sample).
    assert_eq!(p.metric, cargo_wasmprof::meta::Metric::Time);
    assert!(p.sampling.is_some());
}

#[test]
fn cpp_virtual_calls_and_templates_have_exact_counts_and_demangled_names() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    for n in nodes() {
        let out = built().join(format!("shapes.test-{}.json", n.major));
        let (code, _) = node(&n, "shapes", &[], Some(&out));
        assert_eq!(code, 0);
        shapes_counts(&n.profile(&out));
    }
}

/// What fixtures/emcc/shapes.cpp does, in its profile `p`.
fn shapes_counts(p: &Profile) {
    check_invariants(p);
    assert_eq!(calls(p, "Square::area() const"), 4);
    assert_eq!(calls(p, "Circle::area() const"), 2);
    let total_area = p
        .functions
        .iter()
        .find(|f| f.name.starts_with("total_area("))
        .expect("total_area");
    assert_eq!(arc(p, &total_area.name, "Square::area() const"), 4);
    assert_eq!(arc(p, &total_area.name, "Circle::area() const"), 2);
    assert_eq!(calls(p, "int bigger<int>(int, int)"), 4);
    assert_eq!(calls(p, "double bigger<double>(double, double)"), 2);
    assert_eq!(calls(p, "int largest<int>(int const*, int)"), 1);
    assert_eq!(calls(p, "double largest<double>(double const*, int)"), 1);
}

#[test]
fn exit_3_leaves_the_profile_and_exits_3() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    for n in nodes() {
        let out = built().join(format!("calls.exit-{}.json", n.major));
        let (code, _) = node(&n, "calls", &["12", "exit"], Some(&out));
        assert_eq!(code, 3, "the program's exit code");
        let p = n.profile(&out); // a profile after exit(3)
        assert_eq!(p.runs[0].exit_code, 3);
        assert!(!p.complete);
        assert_eq!(
            p.runs[0].open_stack.first().map(String::as_str),
            Some("main")
        );
        assert!(p.runs[0].open_stack.iter().any(|f| f == "leave"));
        assert_eq!(calls(&p, "fib"), fib_calls(12));
    }
}

/// `-sMODULARIZE`: the glue is a factory that the page or script calls; the runtime goes
/// inside it with --pre-js and works the same.
#[test]
fn a_modularized_program_profiles_itself() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "-O1",
        "-o",
        "mod.js",
        "-sMODULARIZE",
        "-sEXPORT_NAME=createCalls",
    ];
    let link = wasmprof_emcc(dir.path(), &[], "calls.c", &args);
    assert!(link.status.success());
    validate(&std::fs::read(dir.path().join("mod.wasm")).unwrap());
    std::fs::write(
        dir.path().join("main.js"),
        "require('./mod.js')({ arguments: ['15'] });\n",
    )
    .unwrap();
    for n in nodes() {
        let p = node_profile(
            &n,
            dir.path(),
            &["main.js"],
            &format!("mod-{}.json", n.major),
        );
        check_invariants(&p);
        assert_eq!(calls(&p, "fib"), fib_calls(15));
        assert_eq!(arc(&p, "apply", "mul"), 3);
    }
}

/// emcc writes the JS of `-o prog` (no extension) to `prog` and the module to `prog.wasm`:
/// `cargo wasmprof run prog` runs it under node, and `run prog.wasm`, a module made for a
/// JS host, fails with one line that names the program to run instead.
#[test]
fn a_program_linked_without_an_extension_runs_by_its_name() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let link = wasmprof_emcc(dir.path(), &[], "calls.c", &["-O1", "-o", "calls"]);
    assert!(link.status.success());
    validate(&std::fs::read(dir.path().join("calls.wasm")).unwrap());
    for n in nodes() {
        let out = dir.path().join(format!("calls-{}.json", n.major));
        let run = output(
            wasmprof()
                .current_dir(dir.path())
                .env(cargo_wasmprof::host::NODE_VAR, &n.path)
                .args(["run", "--no-report", "-o"])
                .arg(&out)
                .args(["calls", "15"]),
        );
        assert!(run.status.success(), "node {}", n.major);
        let p = n.profile(&out);
        check_invariants(&p);
        assert_eq!(calls(&p, "fib"), fib_calls(15));
    }
    let refused = output(
        wasmprof()
            .current_dir(dir.path())
            .args(["run", "calls.wasm"]),
    );
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: calls.wasm: instrumented for a JS host")
            && err.contains("`cargo wasmprof run calls`"),
        "{err}"
    );
}

#[test]
fn a_trap_leaves_the_profile_with_the_open_stack() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    for n in nodes() {
        let out = built().join(format!("calls.trap-{}.json", n.major));
        let mut cmd = n.command();
        cmd.current_dir(built())
            .args(["build/calls.js", "12", "trap"])
            .env("WASMPROF_OUT", &out);
        let run = output(&mut cmd);
        assert!(!run.status.success());
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            stderr.contains("RuntimeError: unreachable"),
            "the program's own error output stays: {stderr}"
        );
        let p = n.profile(&out); // a profile after the trap
        assert!(!p.complete);
        assert_eq!(p.runs[0].trap.as_deref(), Some("unreachable"));
        assert_eq!(
            p.runs[0].open_stack.last().map(String::as_str),
            Some("crash")
        );
        assert_eq!(calls(&p, "fib"), fib_calls(12));
    }
}

/// The calls metric keeps no context tree: the open stack at a trap is the JS error's
/// stack, mapped back to the functions through the module's `wasmprof.frames` table.
/// A JS exception, not a trap, that nothing catches (fixtures/emcc/throws.c): node ends the
/// process with no 'exit' event, with the plain build's exit code and error output, and the
/// profile is there, of a run that ended on it, inside the import that threw.
#[test]
fn an_uncaught_js_exception_leaves_the_profile() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plain = output(
        Command::new("emcc")
            .current_dir(dir.path())
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/emcc/throws.c"))
            .args(["-O1", "-o", "plain.js"]),
    );
    assert!(plain.status.success());
    let link = wasmprof_emcc(dir.path(), &[], "throws.c", &["-O1", "-o", "throws.js"]);
    assert!(link.status.success());
    validate(&std::fs::read(dir.path().join("throws.wasm")).unwrap());
    for n in nodes() {
        let run = |args: &[&str], out: &Path| {
            output(
                n.command()
                    .current_dir(dir.path())
                    .args(args)
                    .env("WASMPROF_OUT", out),
            )
        };
        let out = dir.path().join(format!("throws-{}.json", n.major));
        let expected = run(
            &[common::no_fetch().as_slice(), &["plain.js"]].concat(),
            &out,
        );
        let profiled = run(&["throws.js"], &out);
        assert_ne!(expected.status.code(), Some(0));
        assert_eq!(
            profiled.status.code(),
            expected.status.code(),
            "node {}",
            n.major
        );
        let error = String::from_utf8_lossy(&profiled.stderr);
        assert!(error.contains("Error: no such thing: 7"), "{error}");
        let p = n.profile(&out);
        check_invariants(&p);
        assert_eq!(calls(&p, "fib"), fib_calls(10));
        assert!(!p.complete);
        let ended = &p.runs[0];
        assert_eq!(
            ended.trap.as_deref(),
            Some("uncaught JS exception: Error: no such thing: 7")
        );
        assert_eq!(ended.open_stack.first().map(String::as_str), Some("main"));
        assert_eq!(
            ended.open_stack.last().map(String::as_str),
            Some("env.fail"),
            "{:?}",
            ended.open_stack
        );
        assert!(ended.open_stack.iter().any(|f| f == "deeper"));
    }
}

#[test]
fn the_calls_metric_takes_a_traps_stack_from_the_js_error() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    link_calls(dir.path(), "calls");
    for n in nodes() {
        let out = dir.path().join(format!("trap-{}.json", n.major));
        let run = output(
            n.command()
                .current_dir(dir.path())
                .args(["build/calls.js", "12", "trap"])
                .env("WASMPROF_OUT", &out),
        );
        assert!(!run.status.success());
        let p = n.profile(&out); // a profile after the trap
        assert_eq!(p.metric, cargo_wasmprof::meta::Metric::Calls);
        assert!(!p.complete);
        let stack = &p.runs[0].open_stack;
        assert_eq!(stack.last().map(String::as_str), Some("crash"), "{stack:?}");
        assert!(stack.iter().any(|f| f == "main"), "{stack:?}");
        assert_eq!(calls(&p, "fib"), fib_calls(12));
    }
}

/// `called` of each function in gprof's call graph (`1+21890` counts 21891).
fn gprof_calls(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter(|l| l.starts_with('['))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let (called, name) = (words.get(4)?, words.get(5)?);
            if name.starts_with('<') {
                return None; // a cycle as a whole
            }
            let total = called
                .split('+')
                .map(|n| n.parse::<u64>().ok())
                .sum::<Option<u64>>()?;
            Some((name.to_string(), total))
        })
        .collect()
}

#[test]
fn gprof_of_the_native_build_agrees_on_call_counts() {
    if !have(&["emcc", "node", "make", "gcc", "gprof"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = built().join("calls.c");
    let native = dir.path().join("calls-native");
    let gcc = output(
        Command::new("gcc")
            .args(["-pg", "-O1", "-o"])
            .arg(&native)
            .arg(&source),
    );
    assert!(gcc.status.success());
    assert!(output(Command::new(&native).current_dir(dir.path()))
        .status
        .success());
    let gprof = output(
        Command::new("gprof")
            .args(["-b", "-q"])
            .arg(&native)
            .arg(dir.path().join("gmon.out")),
    );
    let oracle = gprof_calls(&String::from_utf8_lossy(&gprof.stdout));
    let names: Vec<&str> = oracle.iter().map(|(n, _)| n.as_str()).collect();
    for expected in ["fib", "is_even", "is_odd", "add", "sub", "mul", "apply"] {
        assert!(names.contains(&expected), "gprof lists {expected}");
    }

    for n in nodes() {
        let out = built().join(format!("calls.gprof-{}.json", n.major));
        assert_eq!(node(&n, "calls", &[], Some(&out)).0, 0);
        let p = n.profile(&out);
        for (name, count) in &oracle {
            assert_eq!(
                calls(&p, name),
                *count,
                "{name}: wasm profile against gprof"
            );
        }
    }
}

#[test]
fn an_emcc_error_passes_through_unchanged() {
    if !have(&["emcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.c"),
        "int main(void) { return nope; }\n",
    )
    .unwrap();
    let run = |cmd: &mut Command| {
        let out = output(
            cmd.current_dir(dir.path())
                .args(["-c", "broken.c", "-o", "broken.o"]),
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (real_code, real_err) = run(&mut Command::new("emcc"));
    assert_ne!(real_code, Some(0));
    // The subcommand form, and the wrapper as a link step: the same code, the same message.
    let (code, err) = run(wasmprof().args(["emcc", "--"]));
    assert_eq!(code, real_code);
    assert!(err.contains("use of undeclared identifier 'nope'"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("error")).count(),
        real_err.lines().filter(|l| l.contains("error")).count()
    );
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_wasmprof-emcc"))
            .current_dir(dir.path())
            .args(["missing.o", "-o", "prog.js"]),
    );
    assert_ne!(out.status.code(), Some(0), "a failed link stays failed");
    assert!(!dir.path().join("prog.orig.wasm").exists());
}

/// fixtures/emcc/allocs.c: exact allocations and bytes per function under both nodes,
/// whether the profiler's state is in the module's own memory (node 26) or in the state
/// module (node 20), more blocks live at once than the live table starts with, and the
/// memory grown from JS.
#[test]
fn allocations_have_exact_bytes_under_both_nodes() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    use cargo_wasmprof::profile::Allocs;
    for n in nodes() {
        let file = built().join(format!("allocs-{}.json", n.major));
        let (code, stdout) = node(&n, "allocs", &[], Some(&file));
        assert_eq!((code, stdout.trim()), (0, "done"));
        let p = n.profile(&file);
        check_invariants(&p);
        let summary = p.allocations.clone().expect("the allocations' summary");
        assert_eq!(summary.not_recorded, None, "node {}", n.major);
        let under = |name| common::ignoring_growth(common::allocs_under(&p, name));
        assert_eq!(under("malloc_and_free"), common::freed_allocs(1, 4096));
        // Kept, so live at the peak that grow_the_heap makes.
        assert_eq!(under("five_kept"), common::kept_allocs(5, 5 * 128));
        // calloc(10, 100), then realloc to 2000: a free of the first block and an
        // allocation of the second, then the free of that.
        assert_eq!(
            under("calloc_realloc"),
            common::freed_allocs(2, 1000 + 2000)
        );
        // 100,000 blocks kept: every one followed, the live table grown for them.
        assert_eq!(
            under("many_kept"),
            common::kept_allocs(100_000, 100_000 * 16)
        );
        assert_eq!((summary.untracked, summary.unmatched_frees), (0, 0));
        // 32 MiB: the memory (16 MiB at the start) grown from JS by 256 pages at least.
        let grown = common::allocs_under(&p, "grow_the_heap");
        assert_eq!(
            under("grow_the_heap"),
            Allocs {
                at_peak: 1,
                at_peak_bytes: 32 << 20,
                ..common::freed_allocs(1, 32 << 20)
            }
        );
        assert!(grown.grown_pages >= 256, "{grown:?}");
        let wasm = std::fs::read(built().join("build/allocs.orig.wasm")).unwrap();
        assert_eq!(
            summary.memory_pages,
            common::initial_pages(&wasm) + p.total_allocs().grown_pages
        );
        // Emscripten's dlmalloc names them dlmalloc, dlfree, ...: `malloc` is an alias.
        use cargo_wasmprof::meta::AllocKind;
        for kind in [
            AllocKind::Malloc,
            AllocKind::Free,
            AllocKind::Calloc,
            AllocKind::Realloc,
        ] {
            assert!(
                summary
                    .allocators
                    .iter()
                    .any(|a| AllocKind::of_name(a) == Some(kind)),
                "{kind:?}: {summary:?}"
            );
        }
    }
}

/// Without `WASMPROF_ALLOCATIONS` at link time (`--allocations`), the profile records no
/// allocations and says so.
#[test]
fn the_wrapper_leaves_allocations_out_unless_asked() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("build")).unwrap();
    let args = ["-O1", "-sALLOW_MEMORY_GROWTH", "-o", "build/allocs.js"];
    let link = wasmprof_emcc(dir.path(), &[], "allocs.c", &args);
    assert!(link.status.success(), "wasmprof-emcc links");
    let p = node_profile(&nodes()[0], dir.path(), &["build/allocs.js"], "allocs.json");
    let why = p.allocations.and_then(|a| a.not_recorded);
    assert_eq!(
        why.as_deref(),
        Some("not asked for (--allocations records them)")
    );
    assert!(p.contexts.iter().all(|c| c.alloc.is_none()));
}

/// `WASMPROF_MAX_LIVE_ALLOCATIONS=N` at link time, as `--max-live-allocations N`: the module's
/// live table grows to room for N; a value that is not a number in range is one error line.
#[test]
fn the_wrapper_makes_room_for_the_live_allocations_asked() {
    if !have(&["emcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let link = |value: &str| {
        let env = [
            ("WASMPROF_ALLOCATIONS", "1"),
            ("WASMPROF_MAX_LIVE_ALLOCATIONS", value),
        ];
        wasmprof_emcc(dir.path(), &env, "allocs.c", &["-O1", "-o", "allocs.wasm"])
    };
    assert!(link("90000").status.success(), "wasmprof-emcc links");
    let wasm = std::fs::read(dir.path().join("allocs.wasm")).unwrap();
    validate(&wasm);
    let meta = cargo_wasmprof::meta::Meta::from_module(&wasm)
        .unwrap()
        .unwrap();
    // 90,000 is past 3/4 of 2^16 slots (49,152) and within 3/4 of 2^17 (98,304): the
    // table starts with 2^10 and grows to 2^17 at most.
    assert_eq!(
        (meta.layout.live_slots, meta.layout.live_slots_max),
        (1 << 10, 1 << 17)
    );
    let refused = link("lots");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("WASMPROF_MAX_LIVE_ALLOCATIONS=lots: expected a number from 1 to"),
        "{stderr}"
    );
}
