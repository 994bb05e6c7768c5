//! The report's notes: what the figures leave out (runs that ended inside functions, a
//! full tree or arc table) and how far to trust them (the probes' cost in exact times, a
//! browser's coarse clock, V8's compiling at first calls, samples that found the probes
//! or came late).

use std::fmt::Write as _;

use super::Units;
use crate::format::units::{percent, time};
use crate::meta::Sampler;
use crate::profile::{Profile, UNCAUGHT_JS_EXCEPTION};

/// The notes, after a blank line when there are any.
pub(super) fn notes(out: &mut String, p: &Profile, units: Units) {
    let mut notes = Vec::new();
    open_stacks(&mut notes, p, units);
    exact_times(&mut notes, p);
    lazy_compilation(&mut notes, p);
    sampling(&mut notes, p);
    full_tables(&mut notes, p);
    allocations(&mut notes, p);
    if !notes.is_empty() {
        out.push('\n');
    }
    for note in notes {
        let _ = writeln!(out, "note: {note}");
    }
}

/// Each run that ended inside functions: where, and what its open calls' costs are.
fn open_stacks(notes: &mut Vec<String>, p: &Profile, units: Units) {
    for run in p.runs.iter().filter(|r| !r.open_stack.is_empty()) {
        const SHOWN: usize = 8;
        let stack = &run.open_stack;
        let shown: Vec<String> = stack[stack.len().saturating_sub(SHOWN)..]
            .iter()
            .map(|name| units.name(name))
            .collect();
        // How it ended, if not by an exit: how the note says it, and what the host handled.
        let ending = run.trap.as_ref().map(|trap| {
            if trap.starts_with(UNCAUGHT_JS_EXCEPTION) {
                ("on an uncaught JS exception", "the exception")
            } else {
                ("trapped", "the trap")
            }
        });
        notes.push(format!(
            "{} ended inside {} (exit code {}{}); {}: {}{}",
            run.module,
            stack
                .last()
                .map_or("?".to_string(), |name| units.name(name)),
            run.exit_code,
            ending.map_or(String::new(), |(how, _)| format!(", {how}")),
            match ending {
                Some((_, what)) if by_word(p) => format!(
                    "the open calls' time is sampled up to the end, the host's handling of {what} in the innermost's"
                ),
                _ if p.sampling.is_some() => "the open calls' time is sampled up to the end".into(),
                _ if !p.metric.facts().probes.tree => "the host's backtrace".into(),
                _ => "the open calls' costs are missing".into(),
            },
            if stack.len() > SHOWN { "... -> " } else { "" },
            shown.join(" -> ")
        ));
    }
}

/// Whether the word sampler sampled `p`: it credits whatever runs to the context the word
/// last named, the host's work after a trap too.
fn by_word(p: &Profile) -> bool {
    p.sampling
        .as_ref()
        .is_some_and(|s| s.sampler == crate::meta::Sampler::Word)
}

/// Exact times: the probes' cost subtracted or not (and why), and a browser's coarse clock.
fn exact_times(notes: &mut Vec<String>, p: &Profile) {
    if let Some(cost) = p.compensation {
        notes.push(format!(
            "times exclude the probes' own cost, measured at start-up: {:.1} ns per call in the callee, {:.1} ns per call in the caller (--no-compensation keeps the raw times)",
            cost.in_callee_ns, cost.in_caller_ns
        ));
    }
    let clocked = p.metric.facts().probes.clock;
    if clocked && p.compensation.is_none() {
        let why = p
            .uncompensated
            .as_deref()
            .unwrap_or("it was not measured for this run");
        notes.push(format!("times include the probes' own cost, a clock read at every entry and exit (not subtracted: {why}); --metric time samples without it"));
    }
    // (Sampled times are sums of intervals of about 100 µs: a clock of 5 µs does them
    // little harm.)
    if clocked
        && p.runs
            .iter()
            .any(|r| r.clock == crate::js_runtime::BROWSER_CLOCK)
    {
        notes.push("times come from a browser's performance.now(), which browsers coarsen (Chromium: to 5 µs in a cross-origin isolated page, 100 µs in others), so short calls' times are rough; --metric instructions gives exact costs".to_string());
    }
}

/// Whether a run of `p` was under a JS host (node or a browser), by the clock it read.
fn js_host(p: &Profile) -> bool {
    p.runs.iter().any(|r| {
        r.clock == crate::js_runtime::NODE_CLOCK || r.clock == crate::js_runtime::BROWSER_CLOCK
    })
}

/// Times under a JS host: V8 compiles a function when it is first called (node and
/// Chromium compile wasm lazily), and that time falls to the caller, which has no probe
/// around the compiling. (wasmtime compiles the whole module before it runs.)
fn lazy_compilation(notes: &mut Vec<String>, p: &Profile) {
    let timed = p.metric.facts().probes.clock || p.sampling.is_some_and(|s| s.samples > 0);
    if timed && js_host(p) {
        notes.push("V8 compiles each wasm function when it is first called, and that time counts as its caller's own, so a function that calls many others for the first time can read milliseconds for little work, most in short runs (under node 20, node --no-wasm-lazy-compilation compiles them all before main)".to_string());
    }
}

/// Sampled times: the samples that found the probes running, and those that came late;
/// under a JS host, which way the word sampler's shares lean.
fn sampling(notes: &mut Vec<String>, p: &Profile) {
    let word_sampled = p
        .sampling
        .is_some_and(|s| s.sampler == Sampler::Word && s.samples > 0);
    if word_sampled && js_host(p) {
        // Measured (BENCHMARKS.md, accuracy of time under node): fixtures/emcc/parts.c.
        notes.push("under a JS host the probes' calls, and what they slow around them, count as the functions' own time, so the shares of call-dense functions lean high (measured on a program of a loop, small calls and a recursion: under node 20 the recursion 12-18 points high and the loop 20-25 points low; under node 26 the medians of several runs 1-6 points off, single runs up to 10); --metric instructions gives exact costs".to_string());
    }
    let through_state_module = p
        .runs
        .iter()
        .any(|r| r.state == Some(crate::meta::StateLocation::StateModule));
    if p.sampling
        .is_some_and(|s| s.sampler == Sampler::V8 && s.samples > 0)
        && through_state_module
    {
        notes.push("node 20 allows a module one memory, so the probes counted through calls of another module, which slow the functions that call much: their times read high (node 22 or later counts in the module itself)".to_string());
    }
    if let Some(s) = p.sampling.filter(|s| s.in_probes > 0) {
        let share = percent(s.in_probes, s.samples + s.in_probes + s.idle);
        // Measured (BENCHMARKS.md, accuracy of time): where calls are dense, time moves
        // between a small function, its caller and the probes, each way by machine.
        let lean = match s.sampler {
            _ if share < 10.0 => "",
            Sampler::Stacks | Sampler::V8 => "; where calls are this dense, the times of small functions and their callers are the least exact (the counting slows them a little, and part of their time is left out with the probes'); --metric instructions gives exact costs",
            Sampler::Word => "; where calls are this dense, the times of small functions and of their callers are the least exact: work outside the probes' marks counts as the caller's (up to several points of the run in runs the machine slowed); --metric instructions gives exact costs",
        };
        notes.push(format!(
            "{} samples ({share:.1}%) found the profiler's probes running and were left out of the times{lean}",
            s.in_probes,
        ));
    }
    if let Some(s) = p.sampling.filter(|s| s.unplaced > 0) {
        notes.push(format!(
            "{} samples ({}) could not be placed in the calling-context tree (stacks deeper than the sampler walks, paths the tree had no room for, samples the sampler had no room for) and were left out of the times",
            s.unplaced,
            time(s.unplaced_ns),
        ));
    }
    if let Some(s) = p
        .sampling
        .filter(|s| s.late * 20 > s.samples + s.in_probes + s.idle)
    {
        notes.push(format!(
            "{:.0}% of the samples came late: the sampler waited for a CPU (the machine was busy), so those fell where the program let it run, often a host call that blocked, and the times lean toward there",
            percent(s.late, s.samples + s.in_probes + s.idle)
        ));
    }
}

/// A full calling-context tree or arc table: what was folded or dropped.
fn full_tables(notes: &mut Vec<String>, p: &Profile) {
    if p.folded_entries > 0 {
        notes.push(format!(
            "the calling-context tree was full: {} entries were folded per function (raise --max-contexts)",
            p.folded_entries
        ));
    }
    if p.arcs_dropped > 0 {
        notes.push(format!(
            "{} calls could not be recorded as arcs (the arc table was full)",
            p.arcs_dropped
        ));
    }
}

/// The allocations: why they are not recorded (unless none were asked for), and what the
/// recorded figures leave out.
fn allocations(notes: &mut Vec<String>, p: &Profile) {
    let Some(a) = &p.allocations else {
        return;
    };
    match a.not_recorded.as_deref() {
        Some(crate::meta::Allocations::NOT_ASKED) => return,
        Some(why) => {
            notes.push(format!("allocations are not recorded: {why}"));
            return;
        }
        None => {}
    }
    if a.allocators.is_empty() {
        notes.push("no allocator entry point by a known name (malloc, free, __rust_alloc, ...) was found: the allocations show only what grew the memory (an allocator of the program's own, under other names, is not seen)".into());
    }
    if a.untracked > 0 {
        notes.push(format!(
            "{} allocations ({}) found the live table full: they are counted where they were made, but not in the bytes held at the end or the peak (--max-live-allocations, or WASMPROF_MAX_LIVE_ALLOCATIONS at an Emscripten link, makes room for more)",
            a.untracked,
            crate::format::units::bytes(a.untracked_bytes)
        ));
    }
    if a.held_is_upper_bound() {
        notes.push(format!(
            "{} frees were of addresses no allocation of their own thread had (each thread's probes match the frees they see with the blocks their thread allocated: a block freed on another thread counts as held where it was allocated, so the bytes held at the end are an upper bound; or an untracked allocation's, or memory the allocator gave out unseen); only those that say their size (__rust_dealloc) count their bytes",
            a.unmatched_frees
        ));
    } else if a.unmatched_frees > 0 {
        notes.push(format!(
            "{} frees were of addresses no recorded allocation had (an untracked allocation's, or memory the allocator gave out unseen); only those that say their size (__rust_dealloc) count their bytes",
            a.unmatched_frees
        ));
    }
}
