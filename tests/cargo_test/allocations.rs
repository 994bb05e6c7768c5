//! The allocation profile of the `allocs` fixture, whose functions allocate known sizes:
//! exact allocations, frees and bytes per function and per calling context, what is held
//! at the end, the memory grown, in the report and in `go tool pprof`.

use super::*;
use cargo_wasmprof::profile::Allocs;
use common::{allocs_under, freed_allocs, ignoring_growth, kept_allocs};

/// One `cargo wasmprof test --allocations --format text,pprof` of the `allocs` fixture.
fn allocs_run() -> &'static CallsRun {
    static RUN: OnceLock<CallsRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let run = test_run("allocs", &["--allocations", "--format", "text,pprof"]);
        assert!(run.out.status.success(), "{}", stderr(&run.out));
        run
    })
}

#[test]
fn each_function_allocates_what_its_code_says() {
    let p = allocs_run().profile("allocs-allocs-lib.json");
    check_invariants(&p);
    let under = |name| ignoring_growth(allocs_under(&p, name));
    // Vec::<u8>::with_capacity(1000), ten times, each dropped.
    assert_eq!(under("allocs::ten_vectors"), freed_allocs(10, 10_000));
    // Box<[u64; 16]>, five times, each kept (so live at the peak too, which the mebibyte
    // below makes).
    assert_eq!(under("allocs::five_boxes"), kept_allocs(5, 5 * 128));
    // malloc(4096) and free.
    assert_eq!(under("allocs::c_malloc"), freed_allocs(1, 4096));
    // One mebibyte, which the memory had no room for: 16 pages grown at least; live at
    // the peak, which it makes (the rest of the run allocates a few KiB).
    let one = Allocs {
        at_peak: 1,
        at_peak_bytes: 1 << 20,
        ..freed_allocs(1, 1 << 20)
    };
    assert_eq!(under("allocs::one_mebibyte"), one);
    let mib = allocs_under(&p, "allocs::one_mebibyte");
    assert!(mib.grown_pages >= 16, "{mib:?}");
    // The allocator's own context is charged, under its caller, once (malloc calls no
    // other allocator entry point here; __rust_alloc calls malloc on wasip1, which is not
    // counted again).
    let malloc = p.function_named("malloc").expect("malloc").id;
    let c_malloc = p.function_named("allocs::c_malloc").unwrap().id;
    let direct: Vec<&Allocs> = p
        .contexts
        .iter()
        .filter(|c| {
            c.function == Some(malloc)
                && c.parent
                    .is_some_and(|parent| p.contexts[parent as usize].function == Some(c_malloc))
        })
        .filter_map(|c| c.alloc.as_ref())
        .collect();
    assert_eq!(direct.len(), 1);
    assert_eq!((direct[0].allocs, direct[0].alloc_bytes), (1, 4096));
    let summary = p.allocations.as_ref().expect("allocations recorded");
    assert_eq!(summary.not_recorded, None);
    assert!(summary.peak_bytes >= 1 << 20, "{summary:?}");
    // The blocks live at the peak: exactly its bytes.
    assert_eq!(summary.at_peak_bytes, summary.peak_bytes, "{summary:?}");
    // The memory at the end: what the module starts with, and every page grown.
    let wasm = std::fs::read(allocs_run().dir.path().join(&p.runs[0].module)).unwrap();
    assert_eq!(
        summary.memory_pages,
        common::initial_pages(&wasm) + p.total_allocs().grown_pages
    );
    for name in [
        "malloc",
        "free",
        "__rustc::__rust_alloc",
        "__rustc::__rust_dealloc",
    ] {
        assert!(
            summary.allocators.iter().any(|a| a == name),
            "{name}: {summary:?}"
        );
    }
}

#[test]
fn the_report_and_go_tool_pprof_show_them() {
    let run = allocs_run();
    let out = stdout(&run.out);
    let section = out
        .split_once("Allocations (exact")
        .unwrap_or_else(|| panic!("an allocations section in\n{out}"))
        .1;
    let row = section
        .lines()
        .find(|l| l.contains("allocs::five_boxes"))
        .unwrap_or_else(|| panic!("a row for five_boxes in\n{out}"));
    // allocated, allocs, held at end, held.
    let figures: Vec<&str> = row.split_whitespace().take(6).collect();
    assert_eq!(figures, ["640", "B", "5", "640", "B", "5"], "{row}");
    // Two runs, two processes: the peak is the larger one's, the lib's mebibyte (against
    // many_blocks' 800 KB), and the blocks at the peak are that run's alone.
    let summary = section.lines().nth(1).unwrap_or_default();
    let lib = p_module(&run.profile("allocs-allocs-lib.json"));
    assert!(
        summary.contains(&format!("live in {lib}, the largest of the runs' peaks")),
        "{summary}"
    );
    assert!(summary.contains(" pages over the 2 runs, to "), "{summary}");
    let mib = section
        .lines()
        .find(|l| l.contains("allocs::one_mebibyte"))
        .unwrap_or_else(|| panic!("a row for one_mebibyte in\n{out}"));
    // allocated, allocs, held at end, held, at peak.
    let figures: Vec<&str> = mib.split_whitespace().take(8).collect();
    assert_eq!(figures[6..], ["1.00", "MiB"], "{mib}");
    let many = section
        .lines()
        .find(|l| l.contains("allocs::many_blocks"))
        .unwrap_or_else(|| panic!("a row for many_blocks in\n{out}"));
    // allocated, allocs, held at end, held, at peak: nothing of this run's at the peak.
    let figures: Vec<&str> = many.split_whitespace().take(8).collect();
    // many_blocks(100,000): a box each and the vector that holds them.
    assert_eq!(figures[5..], ["100,001", "0", "B"], "{many}");
    if !have(&["go"]) {
        return;
    }
    let file = run.dir.path().join("target/wasmprof/report.pb.gz");
    let top = output(
        Command::new("go")
            .args([
                "tool",
                "pprof",
                "-top",
                "-cum",
                "-unit=B",
                "-nodefraction=0",
            ])
            .arg("-sample_index=inuse_space")
            .arg(&file),
    );
    assert!(top.status.success());
    let top = stdout(&top);
    let row = top
        .lines()
        .find(|l| l.trim_end().ends_with(" allocs::five_boxes"))
        .unwrap_or_else(|| panic!("five_boxes in\n{top}"));
    // flat flat% sum% cum cum% name: what it holds is all under it.
    assert_eq!(row.split_whitespace().nth(3), Some("640B"), "{row}");
}

/// The module a one-run profile is of.
fn p_module(p: &Profile) -> String {
    p.modules.first().cloned().expect("a module")
}

/// `cargo wasmprof report PROFILE --format F --weight W`'s output.
fn report(run: &CallsRun, args: &[&str]) -> Output {
    output(
        wasmprof()
            .args(["wasmprof", "report"])
            .arg(
                run.dir
                    .path()
                    .join("target/wasmprof/allocs-allocs-lib.json"),
            )
            .args(args),
    )
}

#[test]
fn the_stack_views_weigh_contexts_by_bytes() {
    let run = allocs_run();
    for (weight, bytes) in [("alloc-bytes", 10 * 1000), ("held-bytes", 0)] {
        let folded = report(run, &["--format", "folded", "--weight", weight]);
        assert!(folded.status.success());
        let under: u64 = stdout(&folded)
            .lines()
            .filter(|l| l.contains(";allocs::ten_vectors;"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(under, bytes, "{weight}");
    }
    let held = report(run, &["--format", "folded", "--weight", "held-bytes"]);
    let boxes: u64 = stdout(&held)
        .lines()
        .filter(|l| l.contains(";allocs::five_boxes;"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(boxes, 5 * 128);
    let speedscope = report(run, &["--format", "speedscope", "--weight", "alloc-bytes"]);
    let file: serde_json::Value = serde_json::from_slice(&speedscope.stdout).unwrap();
    assert_eq!(file["profiles"][0]["unit"], "bytes");
    // A .cpuprofile holds time only.
    let cpuprofile = report(run, &["--format", "cpuprofile", "--weight", "alloc-bytes"]);
    assert!(!cpuprofile.status.success());
    assert!(stderr(&cpuprofile).contains("a .cpuprofile holds time"));
}

/// The allocations section ranks the program's functions by bytes allocated, or by bytes
/// held at the end with `--weight held-bytes`.
#[test]
fn the_allocations_section_ranks_by_bytes_allocated_or_held() {
    let run = allocs_run();
    let order = |args: &[&str]| -> Vec<String> {
        let out = report(run, args);
        assert!(out.status.success());
        let text = stdout(&out);
        let section = text.split_once("Allocations (exact").unwrap().1.to_string();
        section
            .lines()
            .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("allocs::")))
            .map(str::to_string)
            .collect()
    };
    // 1 MiB, 10,000, 4,096 and 640 bytes allocated; only five_boxes' 640 held.
    let by_allocated = ["one_mebibyte", "ten_vectors", "c_malloc", "five_boxes"];
    assert_eq!(order(&[]), by_allocated.map(|f| format!("allocs::{f}")));
    let by_held = ["five_boxes", "one_mebibyte", "ten_vectors", "c_malloc"];
    assert_eq!(
        order(&["--weight", "held-bytes"]),
        by_held.map(|f| format!("allocs::{f}"))
    );
}

/// The default records no allocations, and a report weighed by bytes says so; the calls
/// metric, asked for them, says why it cannot.
#[test]
fn without_allocations_none_are_recorded_and_the_calls_metric_says_why() {
    let run = test_run("allocs", &["--no-report"]);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    let p = run.profile("allocs-allocs-lib.json");
    assert!(p.contexts.iter().all(|c| c.alloc.is_none()));
    let why = p.allocations.and_then(|a| a.not_recorded);
    assert_eq!(
        why.as_deref(),
        Some("not asked for (--allocations records them)")
    );
    let by_bytes = report(&run, &["--format", "folded", "--weight", "alloc-bytes"]);
    assert!(!by_bytes.status.success());
    assert!(
        stderr(&by_bytes).contains(
            "this profile recorded no allocations: not asked for (--allocations records them)"
        ),
        "{}",
        stderr(&by_bytes)
    );
    let run = test_run("allocs", &["--metric", "calls", "--allocations"]);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    let out = stdout(&run.out);
    assert!(
        out.contains(
            "note: allocations are not recorded: the calls metric keeps no calling contexts"
        ),
        "{out}"
    );
}

/// `many_blocks(100_000)` keeps 100,001 blocks live at once, more than the live table has
/// room for at the start (768): it grows (eight times), and every block is followed, held
/// at the end and live at its run's peak.
#[test]
fn the_live_table_grows_to_follow_every_block() {
    let p = allocs_run().profile("allocs-many_blocks-test.json");
    check_invariants(&p);
    assert_eq!(
        ignoring_growth(allocs_under(&p, "allocs::many_blocks")),
        kept_allocs(100_001, 100_000 * 4 + 100_000 * 4)
    );
    let summary = p.allocations.as_ref().expect("allocations recorded");
    assert_eq!(
        (summary.untracked, summary.unmatched_frees),
        (0, 0),
        "{summary:?}"
    );
}

/// `--max-live-allocations 2` leaves a live table of 4 slots, room for 3 blocks at once:
/// `five_boxes` keeps 5, so at least 2 find it full. They are still counted where they
/// were made, and the report says how many were not followed and which flag makes room,
/// and that the peak is of the blocks it followed.
#[test]
fn a_full_live_table_counts_what_it_cannot_follow_and_says_so() {
    let run = test_run("allocs", &["--allocations", "--max-live-allocations", "2"]);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    let p = run.profile("allocs-allocs-lib.json");
    let allocations = p.allocations.clone().expect("allocations recorded");
    assert!(allocations.untracked >= 2, "{allocations:?}");
    let boxes = allocs_under(&p, "allocs::five_boxes");
    assert_eq!((boxes.allocs, boxes.alloc_bytes), (5, 5 * 128));
    let out = stdout(&run.out);
    assert!(
        out.contains("found the live table full") && out.contains("--max-live-allocations"),
        "{out}"
    );
    // The peak is of the blocks followed, and says so.
    assert!(
        out.contains("live of the blocks the live table followed"),
        "{out}"
    );
}
