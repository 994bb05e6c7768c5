//! `--target wasm32-wasip1-threads`: exact counts per thread and together.

use super::*;

/// fixtures/threads on wasm32-wasip1-threads: four std threads call `step` 100, 200, 300
/// and 400 times, rayon's pool calls `square` 1000 times, four threads allocate a `buffer`
/// each; the binary's `main` runs three workers (100 + 200 + 300 `step`s), a rayon sum of
/// 500 `square`s and a thread of 7.
#[test]
fn threads_have_exact_counts_each_and_together() {
    let target = ["--target", "wasm32-wasip1-threads"];
    let run = test_run(
        "threads",
        &[
            &target[..],
            &[
                "--metric",
                "instructions",
                "--allocations",
                "--format",
                "text,speedscope,firefox,pprof",
                "--threads",
            ],
        ]
        .concat(),
    );
    assert!(run.out.status.success());
    assert!(stdout(&run.out).contains("test result: ok. 3 passed"));
    let lib = run.profile("wasm32-wasip1-threads/threads-threads-lib.json");
    let per_thread = |name: &str| -> Vec<u64> {
        lib.threads
            .iter()
            .map(|t| calls_in(&t.profile, name))
            .filter(|&n| n > 0)
            .collect()
    };
    let mut steps = per_thread("threads::step");
    steps.sort();
    assert_eq!(
        steps,
        [100, 200, 300, 400],
        "one worker per thread, each its own count"
    );
    assert_eq!(calls(&lib, "threads::step"), 1000);
    assert_eq!(per_thread("threads::square").iter().sum::<u64>(), 1000);
    assert_eq!(calls(&lib, "threads::square"), 1000);
    assert_eq!(lib.threads[0].id, 0);
    // Every function's calls and self instructions are the sum of the threads'.
    for f in &lib.functions {
        let name = f.name.split(" [").next().unwrap();
        let threads: Vec<&cargo_wasmprof::profile::Function> = lib
            .threads
            .iter()
            .flat_map(|t| &t.profile.functions)
            .filter(|g| {
                g.name.split(" [").next().unwrap() == name && g.file == f.file && g.line == f.line
            })
            .collect();
        assert_eq!(
            f.calls,
            threads.iter().map(|g| g.calls).sum::<u64>(),
            "{}",
            f.name
        );
        assert_eq!(
            f.cost.self_instructions,
            Some(
                threads
                    .iter()
                    .map(|g| g.cost.self_instructions.unwrap_or(0))
                    .sum()
            ),
            "{}",
            f.name
        );
    }
    // Allocations, thread by thread: `buffer` allocates 1000, 2000 and 3000 bytes on three
    // threads that drop them, and 4096 on one that hands them to the test's thread. Each
    // thread's probes match the frees they see with their own thread's blocks: the 4096
    // bytes stay held where they were allocated, and their free is an unmatched one.
    let mut buffers: Vec<u64> = lib
        .threads
        .iter()
        .filter(|t| t.profile.function_named("threads::buffer").is_some())
        .map(|t| common::allocs_under(&t.profile, "threads::buffer").alloc_bytes)
        .filter(|&b| b > 0)
        .collect();
    buffers.sort();
    assert_eq!(buffers, [1000, 2000, 3000, 4096]);
    let buffer = common::allocs_under(&lib, "threads::buffer");
    assert_eq!((buffer.allocs, buffer.alloc_bytes), (4, 10096));
    assert_eq!((buffer.held, buffer.held_bytes), (1, 4096));
    let summary = lib.allocations.as_ref().expect("allocations recorded");
    assert!(
        summary.not_recorded.is_none() && summary.per_thread,
        "{summary:?}"
    );
    assert!(summary.unmatched_frees >= 1, "{summary:?}");
    assert_eq!(summary.peak(), None);
    let report = stdout(&run.out);
    assert!(
        report.contains("the peak of live bytes is not known (a threaded program"),
        "{report}"
    );
    assert!(
        report.contains("at most: a thread's frees of another's blocks are not matched"),
        "{report}"
    );
    assert!(
        report.contains(&format!("threads: {}", lib.threads.len())),
        "{report}"
    );
    assert!(report.contains("Threads (each thread's cost"), "{report}");
    assert!(report.contains("thread 4: "), "{report}");
    // speedscope: the whole run, then a profile per thread; Firefox: a thread per thread.
    let reports = run.dir.path().join("target/wasmprof/wasm32-wasip1-threads");
    let json = |file: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(reports.join(file)).unwrap()).unwrap()
    };
    let speedscope = json("report.speedscope.json");
    let threads = lib.threads.len()
        + cargo_wasmprof::profile::Profile::read(&reports.join("threads-threads-bin.json"))
            .unwrap()
            .threads
            .len();
    assert_eq!(
        speedscope["profiles"].as_array().unwrap().len(),
        1 + threads
    );
    let firefox = json("report.firefox.json");
    assert_eq!(firefox["threads"].as_array().unwrap().len(), threads);
    // pprof: each thread's samples labelled with it.
    let tags = output(
        Command::new("go")
            .args(["tool", "pprof", "-tags", "-sample_index=calls"])
            .arg(reports.join("report.pb.gz")),
    );
    let tags = stdout(&tags);
    for t in &lib.threads {
        assert!(tags.contains(&format!(": {}\n", t.label())), "{tags}");
    }

    // `run` of the binary: the program's output and exit code as without the profiler.
    let wasm = run
        .dir
        .path()
        .join("target/wasm32-wasip1-threads/debug/threads.wasm");
    let build = output(
        Command::new("cargo")
            .args(["build", "--target", "wasm32-wasip1-threads"])
            .current_dir(run.dir.path()),
    );
    assert!(build.status.success());
    let plain = output(
        wasmprof()
            .args(["wasmprof", "run", "--no-instrument"])
            .arg(&wasm),
    );
    let merged = run.dir.path().join("run.json");
    let profiled = output(
        wasmprof()
            .args(["wasmprof", "run", "--metric", "calls", "--no-report", "-o"])
            .arg(&merged)
            .arg(&wasm),
    );
    assert_eq!(plain.status.code(), Some(0));
    assert_eq!(profiled.status.code(), Some(0));
    assert_eq!(stdout(&plain), stdout(&profiled));
    assert!(stdout(&plain).contains("joined: true"));
    let p = Profile::read(&merged).unwrap();
    assert_eq!(calls(&p, "threads::step"), 100 + 200 + 300 + 7);
    assert_eq!(calls(&p, "threads::square"), 500);
    assert_eq!(calls(&p, "threads::work"), 4);
    let mut works: Vec<u64> = p
        .threads
        .iter()
        .map(|t| calls_in(&t.profile, "threads::step"))
        .filter(|&n| n > 0)
        .collect();
    works.sort();
    assert_eq!(works, [7, 100, 200, 300]);
}

/// The calls of `name` in `p`, 0 when it was never called there.
fn calls_in(p: &Profile, name: &str) -> u64 {
    p.function_named(name).map_or(0, |f| f.calls)
}
