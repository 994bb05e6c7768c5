//! What unwinds through the profiler's frames under node: C++ exceptions, longjmp, JS
//! exceptions, a stack overflow in the glue; every frame is closed and costs stay exact.

use super::*;

/// C++ exceptions built with -fwasm-exceptions (the legacy proposal, which node 20 runs)
/// unwind through instrumented frames: each frame runs its exit probe on the way, so the
/// profile is complete and what runs after the catch belongs to main.
#[test]
fn cpp_exceptions_unwind_through_the_profiler() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    for n in nodes() {
        let out = built().join(format!("exceptions-{}.json", n.major));
        let (code, stdout) = node(&n, "exceptions", &[], Some(&out));
        assert_eq!(code, 0);
        assert!(
            stdout.contains("sum: -9"),
            "the program computes what it did: {stdout}"
        );
        let p = n.profile(&out);
        check_invariants(&p);
        assert!(p.complete, "every activation ended");
        assert_eq!(calls(&p, "dive(int)"), 15);
        assert_eq!(arc(&p, "dive(int)", "dive(int)"), 12);
        assert_eq!(arc(&p, "catcher(int)", "dive(int)"), 3);
        // clang's DWARF names the program's main `main`, like Emscripten's wrapper; the
        // linker's name tells them apart.
        assert_eq!(arc(&p, "__original_main", "catcher(int)"), 3);
        assert_eq!(arc(&p, "__original_main", "after(int)"), 1);
        assert_eq!(context_callers(&p, "after(int)"), ["__original_main"]);
        let total = |name: &str| p.function_named(name).unwrap().cost.total_ns;
        // The default metric samples: dive's samples are all under catcher.
        assert!(total("dive(int)") <= total("catcher(int)"));
    }
}

/// `cargo wasmprof run --metric instructions build/PROGRAM.js ARGS` under node `n` in the
/// fixture directory (which instruments the program's module again, for that metric): the
/// profile, checked, and how the run went.
fn instructions_run(n: &NodeBin, program: &str, args: &[&str]) -> (Profile, Output) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(format!("{program}.json"));
    let run = output(
        wasmprof()
            .current_dir(built())
            .env(cargo_wasmprof::host::NODE_VAR, &n.path)
            .args(["run", "--metric", "instructions", "--no-report", "-o"])
            .arg(&out)
            .arg(format!("build/{program}.js"))
            .args(args),
    );
    let profile = n.profile(&out);
    check_invariants(&profile);
    (profile, run)
}

/// [`instructions_run`] of a program that succeeds: the profile, and its stdout.
fn instructions_profile(n: &NodeBin, program: &str, args: &[&str]) -> (Profile, String) {
    let (profile, run) = instructions_run(n, program, args);
    assert!(run.status.success(), "{program} runs");
    (profile, String::from_utf8_lossy(&run.stdout).into_owned())
}

/// The self instructions of each context of `name` that calls `name` again: the frames
/// of a recursion above its deepest.
fn recursing_contexts(p: &Profile, name: &str) -> Vec<u64> {
    let f = p.function_named(name).unwrap().id;
    p.contexts
        .iter()
        .filter(|c| c.function == Some(f))
        .filter(|c| {
            p.contexts
                .iter()
                .any(|child| child.parent == Some(c.id) && child.function == Some(f))
        })
        .map(|c| c.cost.self_instructions.unwrap())
        .collect()
}

#[test]
fn a_longjmp_closes_the_frames_it_unwinds() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let (rounds, depth) = (20u64, 6u64);
    for n in nodes() {
        let (p, stdout) =
            instructions_profile(&n, "longjmp", &[&rounds.to_string(), &depth.to_string()]);
        assert!(stdout.contains(&format!("caught: {rounds}")), "{stdout}");
        assert!(p.complete, "every activation was closed");
        // `guarded` calls `dive` through the trampoline once a round; dive recurses `depth`
        // frames and longjmps out of the deepest.
        assert_eq!(calls(&p, "dive"), rounds * (depth + 1));
        assert_eq!(arc(&p, "env.invoke_vi", "dive"), rounds);
        assert_eq!(arc(&p, HOST, "dive"), 0);
        // The trampoline keeps only its thunk's `local.get, local.get, call`; what it calls
        // after the longjmp (stackRestore) is its callee.
        assert_eq!(self_instructions(&p, "env.invoke_vi"), 3 * rounds);
        assert_eq!(context_callers(&p, "stackRestore"), ["env.invoke_vi"]);
        // Every unwound frame keeps its cost: the frames above the deepest run the same body,
        // so their contexts cost the same, and twice the rounds cost twice as much.
        let mut inner = recursing_contexts(&p, "dive");
        assert_eq!(inner.len() as u64, depth);
        inner.dedup();
        assert_eq!(inner.len(), 1, "the inner frames cost alike: {inner:?}");
        assert!(inner[0] > 0);
        let (twice, _) = instructions_profile(
            &n,
            "longjmp",
            &[&(2 * rounds).to_string(), &depth.to_string()],
        );
        assert_eq!(
            self_instructions(&twice, "dive"),
            2 * self_instructions(&p, "dive")
        );
        // The time metric keeps the same rules.
        let out = built().join(format!("longjmp-time-{}.json", n.major));
        let run = output(
            wasmprof()
                .current_dir(built())
                .env(cargo_wasmprof::host::NODE_VAR, &n.path)
                .args(["run", "--no-report", "-o"])
                .arg(&out)
                .args(["build/longjmp.js", "5", "3"]),
        );
        assert!(run.status.success());
        let timed = n.profile(&out);
        check_invariants(&timed);
        assert_eq!(arc(&timed, "env.invoke_vi", "dive"), 5);
    }
}

#[test]
fn js_exceptions_close_the_frames_they_unwind() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    // fixtures/emcc/exceptions.cpp built with -fexceptions: a throw is a JS exception,
    // and the calls that may throw go through JS trampolines (env.invoke_*).
    for n in nodes() {
        let (p, stdout) = instructions_profile(&n, "jsexceptions", &[]);
        assert!(stdout.contains("sum: -9"), "{stdout}");
        assert!(p.complete, "every activation ended");
        assert_eq!(calls(&p, "dive(int)"), 15);
        assert_eq!(arc(&p, "dive(int)", "dive(int)"), 12);
        // catcher calls dive(4) through the trampoline, three times.
        assert_eq!(arc(&p, "env.invoke_ii", "dive(int)"), 3);
        assert_eq!(arc(&p, HOST, "dive(int)"), 0);
        assert_eq!(self_instructions(&p, "env.invoke_ii"), 3 * 3);
        assert_eq!(context_callers(&p, "after(int)"), ["__original_main"]);
        // The four frames above the deepest run the same body: their contexts cost alike.
        let mut costs = recursing_contexts(&p, "dive(int)");
        assert_eq!(costs.len(), 4);
        costs.dedup();
        assert_eq!(costs.len(), 1, "{costs:?}");
    }
}

#[test]
fn a_stack_overflow_in_the_glue_still_leaves_the_profile() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    // With a tiny native stack, the glue overflows as the program prints, and its own
    // error handler overflows next: node exits with 7. The runtime saves the profile
    // when the overflow leaves the program, before that. (With exact-time: the sampled
    // metric's worker would overflow that stack as it starts, before the program runs.)
    let dir = tempfile::tempdir().unwrap();
    link_calls(dir.path(), "exact-time");
    for n in nodes() {
        let out = dir.path().join(format!("overflow-{}.json", n.major));
        let run = output(
            n.command()
                .current_dir(dir.path())
                .args(["--stack-size=50", "build/calls.js"])
                .env("WASMPROF_OUT", &out),
        );
        assert_eq!(run.status.code(), Some(7));
        let p = n.profile(&out); // the profile was saved
        check_invariants(&p);
        assert!(!p.complete);
        let trap = p.runs[0].trap.as_deref().unwrap_or_default();
        assert!(trap.contains("call stack"), "{trap}");
        assert_eq!(calls(&p, "fib"), fib_calls(20));
    }
}

/// fixtures/emcc/aborts.cpp: abort() three frames down, inside a try whose call goes
/// through a JS trampoline (-fexceptions). The abort's JS error leaves through the
/// trampoline, whose thunk closes the frames it unwinds, and out of main; the run still
/// ends where the abort was: the tree's open activations, extended by the trap's stack.
#[test]
fn an_abort_through_a_trampoline_ends_where_it_was() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    for n in nodes() {
        let (p, run) = instructions_run(&n, "aborts", &[]);
        assert!(!run.status.success(), "{run:?}");
        assert!(!p.complete);
        assert_eq!(calls(&p, "dive(int)"), 3);
        let stack = &p.runs[0].open_stack;
        let want = [
            "catcher(int)",
            "env.invoke_ii",
            "dive(int)",
            "dive(int)",
            "dive(int)",
            "env.abort",
        ]
        .map(String::from);
        assert!(stack.ends_with(&want), "node {}: {stack:?}", n.major);
    }
}
