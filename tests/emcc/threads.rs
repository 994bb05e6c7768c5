//! Emscripten's `-pthread` under node: exact counts and samples per thread, and every
//! thread's profile when one traps.

use super::*;

/// fixtures/emcc/threads.c linked by plain emcc (`make OUT=plain`), for its output and
/// exit code without the profiler.
fn plain_threads() -> PathBuf {
    static PLAIN: OnceLock<PathBuf> = OnceLock::new();
    PLAIN
        .get_or_init(|| {
            let out = output(
                Command::new("make")
                    .current_dir(built())
                    .args(["OUT=plain", "plain/threads.js"]),
            );
            assert!(out.status.success(), "make builds the plain threads.js");
            built().join("plain/threads.js")
        })
        .clone()
}

/// `node PROGRAM ARGS` under node `n` in the fixture directory, for a plain build (its
/// glue's `fetch` removed: see `common::no_fetch`): exit code and stdout.
fn node_output(n: &NodeBin, program: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = output(
        n.command()
            .current_dir(built())
            .args(common::no_fetch())
            .arg(program)
            .args(args),
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `cargo wasmprof run --metric METRIC build/threads.js ARGS` under node `n`: exit code,
/// stdout, profile. One at a time: each run instruments the program's module in place for
/// its metric.
fn threads_run(n: &NodeBin, metric: &str, args: &[&str]) -> (Option<i32>, String, Profile) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("threads.json");
    let run = output(
        wasmprof()
            .current_dir(built())
            .env(cargo_wasmprof::host::NODE_VAR, &n.path)
            .args(["run", "--metric", metric, "--no-report", "-o"])
            .arg(&out)
            .args((metric != "calls").then_some("--allocations"))
            .arg("build/threads.js")
            .args(args),
    );
    let profile = n.profile(&out); // a profile of every run
    if metric != "calls" {
        check_invariants(&profile); // of the context tree, which the calls metric lacks
    }
    (
        run.status.code(),
        String::from_utf8_lossy(&run.stdout).into_owned(),
        profile,
    )
}

/// `step`'s calls in each thread of a profile of threads.js: the main thread's, and the
/// workers' by id.
fn steps_per_thread(p: &Profile) -> (u64, Vec<u64>) {
    let steps = |q: &Profile| q.function_named("step").map_or(0, |f| f.calls);
    let main = p
        .threads
        .iter()
        .find(|t| t.id == 0)
        .expect("the main thread");
    let workers = p.threads.iter().filter(|t| t.id != 0);
    (
        steps(&main.profile),
        workers.map(|t| steps(&t.profile)).collect(),
    )
}

/// fixtures/emcc/threads.c, three pthreads of 100, 200 and 300 steps, then one of 50 in a
/// worker that ran one of them, then 7 steps on the main thread: under every metric each
/// thread's profile has its exact counts (the reused worker's two pthreads apart), the
/// merged profile their sum, and the output and exit code are the plain build's. A thread
/// of n steps allocates 16 * n bytes in `work` and frees them: each thread's allocations,
/// recorded thread by thread where the metric keeps contexts.
#[test]
fn pthreads_have_exact_counts_per_thread_under_node() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let sum: u64 = [100u64, 200, 300, 50, 7]
        .iter()
        .map(|n| n * (n - 1) / 2)
        .sum();
    for n in nodes() {
        let (plain_code, plain_stdout) = node_output(&n, &plain_threads(), &[]);
        assert_eq!(plain_stdout, format!("sum {sum}\n"));
        for metric in ["calls", "instructions", "exact-time", "time"] {
            let (code, stdout, p) = threads_run(&n, metric, &[]);
            let metric = format!("node {}, {metric}", n.major);
            assert_eq!((code, &stdout), (plain_code, &plain_stdout), "{metric}");
            assert_eq!(p.threads.len(), 5, "{metric}: main and four pthreads");
            assert!(p.complete, "{metric}");
            assert!(p.runs[0].threads_lost.is_empty());
            let (main, mut workers) = steps_per_thread(&p);
            workers.sort_unstable();
            assert_eq!((main, workers), (7, vec![50, 100, 200, 300]), "{metric}");
            assert_eq!(calls(&p, "step"), 657, "{metric}");
            assert_eq!(calls(&p, "work"), 5, "{metric}");
            for t in &p.threads {
                assert_eq!(t.how, "returned", "{metric}: thread {}", t.id);
            }
            if !metric.ends_with("calls") {
                let in_work = |q: &Profile| {
                    let a = common::allocs_under(q, "work");
                    (a.alloc_bytes, a.held_bytes)
                };
                let main = p.threads.iter().find(|t| t.id == 0).unwrap();
                assert_eq!(in_work(&main.profile), (16 * 7, 0), "{metric}");
                let mut workers: Vec<(u64, u64)> = p
                    .threads
                    .iter()
                    .filter(|t| t.id != 0)
                    .map(|t| in_work(&t.profile))
                    .collect();
                workers.sort_unstable();
                let sizes = [50, 100, 200, 300].map(|n| (16 * n, 0));
                assert_eq!(workers, sizes, "{metric}");
                let summary = p.allocations.as_ref().unwrap();
                assert!(summary.per_thread && summary.peak().is_none(), "{metric}");
            }
            if metric.ends_with("instructions") {
                // step's body is straight-line code: the same instructions every call.
                let per_call = self_instructions(&p, "step") / 657;
                for t in &p.threads {
                    let q = &t.profile;
                    let step = q.function_named("step").unwrap();
                    assert_eq!(
                        step.cost.self_instructions,
                        Some(step.calls * per_call),
                        "thread {}",
                        t.id
                    );
                }
            }
        }
    }
}

/// The sampled metric samples every pthread in its own profile: with `long` each thread
/// takes its steps 100,000 times over (tens of milliseconds), and every pthread's profile
/// has sampled time in `work` or `step`, under both nodes, with the exact counts and the
/// plain build's output. (The main thread's sampler samples them all.)
#[test]
fn pthreads_are_sampled_each_in_its_own_profile() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    for n in nodes() {
        let (plain_code, plain_stdout) = node_output(&n, &plain_threads(), &["long"]);
        let (code, stdout, p) = threads_run(&n, "time", &["long"]);
        let node = format!("node {}", n.major);
        assert_eq!((code, &stdout), (plain_code, &plain_stdout), "{node}");
        let (main, mut workers) = steps_per_thread(&p);
        workers.sort_unstable();
        let steps = [50, 100, 200, 300].map(|n| n * LONG_ROUNDS).to_vec();
        assert_eq!((main, workers), (7 * LONG_ROUNDS, steps), "{node}");
        each_pthread_sampled(&p, &node);
    }
}

/// The thread of 200 steps traps once the other two have returned: the program exits as
/// the plain build does, the profile names the thread and its open stack, and every
/// thread keeps its counts.
#[test]
fn a_trapping_pthread_leaves_every_threads_profile() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    for n in nodes() {
        let (plain_code, plain_stdout) = node_output(&n, &plain_threads(), &["trap"]);
        assert_ne!(plain_code, Some(0));
        for metric in ["calls", "instructions"] {
            let (code, stdout, p) = threads_run(&n, metric, &["trap"]);
            assert_eq!((code, &stdout), (plain_code, &plain_stdout), "{metric}");
            assert!(!p.complete);
            let trapper = p
                .threads
                .iter()
                .find(|t| t.how.starts_with("trapped"))
                .expect("the trapping thread");
            assert_eq!(trapper.how, "trapped: unreachable");
            assert_eq!(
                p.runs[0].trap.as_deref(),
                Some(format!("thread {}: unreachable", trapper.id).as_str())
            );
            assert_eq!(
                p.runs[0].open_stack.last().map(String::as_str),
                Some("work"),
                "{metric}"
            );
            assert_eq!(calls(&trapper.profile, "step"), 200);
            let (main, mut workers) = steps_per_thread(&p);
            workers.sort_unstable();
            assert_eq!((main, workers), (0, vec![100, 200, 300]), "{metric}");
            for t in p.threads.iter().filter(|t| t.id != trapper.id && t.id != 0) {
                assert_eq!(t.how, "returned");
            }
            let main = p.threads.iter().find(|t| t.id == 0).unwrap();
            assert_eq!(main.how, format!("ended by thread {}'s trap", trapper.id));
        }
    }
}
