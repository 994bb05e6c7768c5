//! The report's notes: what the figures leave out (runs that ended inside functions, a
//! full tree or arc table) and how far to trust them (the probes' cost in exact times, a
//! browser's coarse clock, V8's compiling at first calls, samples that found the probes
//! or came late).

use std::fmt::Write as _;

use super::Units;
use crate::format::units::{percent, time};
use crate::meta::Sampler;
use crate::profile::{Profile, FEW_SAMPLES, UNCAUGHT_JS_EXCEPTION};

/// The notes, after a blank line when there are any.
pub(super) fn notes(out: &mut String, p: &Profile, units: Units<'_>) {
    let mut notes = Vec::new();
    open_stacks(&mut notes, p, units);
    exact_times(&mut notes, p);
    lazy_compilation(&mut notes, p);
    sampling(&mut notes, p);
    full_tables(&mut notes, p);
    allocations(&mut notes, p);
    no_sources(&mut notes, p);
    if !notes.is_empty() {
        out.push('\n');
    }
    for note in notes {
        let _ = writeln!(out, "note: {note}");
    }
}

/// Each run that ended inside functions: where, in the program's own code first (the
/// runtime's frames inside it, a panic's handling, folded into one), and what its open
/// calls' costs are.
fn open_stacks(notes: &mut Vec<String>, p: &Profile, units: Units<'_>) {
    for run in p.runs.iter().filter(|r| !r.open_stack.is_empty()) {
        const SHOWN: usize = 8;
        let stack = &run.open_stack;
        // The innermost frame of the program's own code, and the runtime's frames inside it.
        let own = crate::harness::innermost_own(p, stack);
        let (outer, inner) = match own {
            Some(at) => stack.split_at(at + 1),
            None => (&stack[..], &[][..]),
        };
        let mut shown: Vec<String> = outer[outer.len().saturating_sub(SHOWN)..]
            .iter()
            .map(|name| units.name(name))
            .collect();
        if let Some(innermost) = inner.last() {
            shown.push(format!(
                "[{} of the runtime, down to {}]",
                crate::format::units::plural(inner.len() as u64, "frame"),
                units.name(innermost)
            ));
        }
        let place = outer.last().map_or("?".to_string(), |name| {
            match p.function_named(name).map(super::location) {
                Some(at) if !at.is_empty() => format!("{} {}", units.name(name), at.trim_start()),
                _ => units.name(name),
            }
        });
        // How it ended, if not by an exit: how the note says it, and what the host handled.
        let ending = run.trap.as_ref().map(|trap| {
            if trap.starts_with(UNCAUGHT_JS_EXCEPTION) {
                ("on an uncaught JS exception", "the exception")
            } else {
                ("trapped", "the trap")
            }
        });
        notes.push(format!(
            "{} ended inside {place} (exit code {}{}); {}: {}{}",
            run.module,
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
            if outer.len() > SHOWN { "... -> " } else { "" },
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
            "times exclude the probes' cost measured at start-up ({:.1} + {:.1} ns a call); --no-compensation keeps the raw times",
            cost.in_callee_ns, cost.in_caller_ns
        ));
    }
    let clocked = p.metric.facts().probes.clock;
    if clocked && p.compensation.is_none() {
        let why = p
            .uncompensated
            .as_deref()
            .unwrap_or("it was not measured for this run");
        notes.push(format!("times include the probes' clock reads ({why}); the default metric, time, samples without them"));
    }
    // (Sampled times are sums of intervals of about 100 µs: a clock of 5 µs does them
    // little harm.)
    if clocked
        && p.runs
            .iter()
            .any(|r| r.clock == crate::profile::BROWSER_CLOCK)
    {
        notes.push(format!("times come from a browser's coarsened performance.now() (5-100 µs), so short calls' times are rough{}", exact_costs(p)));
    }
}

/// "; FLAG gives exact costs", where the host of `p` takes a flag that does.
fn exact_costs(p: &Profile) -> String {
    p.exact_costs_flag()
        .map_or(String::new(), |flag| format!("; {flag} gives exact costs"))
}

/// Whether a run of `p` was under a JS host (node or a browser), by the clock it read.
fn js_host(p: &Profile) -> bool {
    p.runs.iter().any(crate::profile::RunInfo::under_js)
}

/// Times under a JS host: V8 compiles a function when it is first called (node and
/// Chromium compile wasm lazily), and that time falls to the caller, which has no probe
/// around the compiling. (wasmtime compiles the whole module before it runs.)
fn lazy_compilation(notes: &mut Vec<String>, p: &Profile) {
    let timed = p.metric.facts().probes.clock || p.sampling.is_some_and(|s| s.samples > 0);
    if timed && js_host(p) {
        notes.push("V8 compiles each function at its first call and that time counts as the caller's, so a caller of many functions can read high in short runs; node --no-wasm-lazy-compilation compiles them first".to_string());
    }
}

/// Sampled times: the samples that found the probes running, and those that came late;
/// under a JS host, which way the word sampler's shares lean.
fn sampling(notes: &mut Vec<String>, p: &Profile) {
    let word_sampled = p
        .sampling
        .is_some_and(|s| s.sampler == Sampler::Word && s.samples > 0);
    if word_sampled && js_host(p) {
        // Measured: BENCHMARKS.md, "Accuracy of time under node".
        notes.push(format!("under a JS host the probes' work counts as the functions' own time, so call-dense functions read several points high{}", exact_costs(p)));
    }
    let through_state_module = p
        .runs
        .iter()
        .any(|r| r.state == Some(crate::meta::StateLocation::StateModule));
    if p.sampling
        .is_some_and(|s| s.sampler == Sampler::V8 && s.samples > 0)
        && through_state_module
    {
        notes.push("node 20 ran the probes in a module of their own, which slows call-dense functions: their times are approximate; node 22 or later runs them inline".to_string());
    }
    if let Some(s) = p.sampling.filter(|s| s.in_probes > 0) {
        let share = percent(s.in_probes, s.samples + s.in_probes + s.idle);
        // Measured (BENCHMARKS.md, "Accuracy of time"): where calls are dense, time moves
        // between a small function, its caller and the probes, each way by machine.
        let lean = match share < 10.0 || s.samples < FEW_SAMPLES {
            true => String::new(),
            false => format!(
                "; with calls this dense, small functions' and their callers' times are the least exact{}",
                p.exact_costs_flag()
                    .map_or(String::new(), |flag| format!("; {flag} is exact"))
            ),
        };
        notes.push(format!(
            "{} ({share:.1}%) found the probes running and were left out{lean}",
            crate::format::units::plural(s.in_probes, "sample"),
        ));
    }
    if p.sampling.is_some_and(|s| s.cpu && s.tick) {
        notes.push("the workers were sampled by POSIX CPU-time timers, which fire at the kernel's tick, not at the interval asked for (perf's task clock did not open: perf events closed by `perf_event_paranoid` or a container, or WASMPROF_CPU_TIMER=posix): fewer samples, each standing for the CPU time since the one before".to_string());
    }
    if let Some(s) = p.sampling.filter(|s| s.unplaced > 0) {
        notes.push(format!(
            "{} ({}) could not be placed in the calling-context tree (too deep, or no room) and were left out",
            crate::format::units::plural(s.unplaced, "sample"),
            time(s.unplaced_ns),
        ));
    }
    if let Some(s) = p
        .sampling
        .filter(|s| s.late * 20 > s.samples + s.in_probes + s.idle)
    {
        notes.push(format!(
            "{:.0}% of the samples came late (the machine was busy), so the times lean toward where the program blocked; a quieter machine gives truer times",
            percent(s.late, s.samples + s.in_probes + s.idle)
        ));
    }
}

/// A profile whose functions have no source at all: the module carried no DWARF.
fn no_sources(notes: &mut Vec<String>, p: &Profile) {
    if !p.functions.is_empty() && p.functions.iter().all(|f| f.file.is_none()) {
        notes.push("no function has a source file or line: the module carries no DWARF line tables (build it with debug info: `-g`, or cargo's `debug = \"line-tables-only\"`; `strip` removes them), so the names come from its name section alone and no line has a cost".into());
    }
}

/// A full calling-context tree or arc table: what was folded or dropped.
fn full_tables(notes: &mut Vec<String>, p: &Profile) {
    if p.folded_entries > 0 {
        notes.push(format!(
            "the calling-context tree was full: {} entries were folded per function, counts exact; --max-contexts N keeps more",
            p.folded_entries
        ));
    }
    if p.arcs_dropped > 0 {
        notes.push(format!(
            "{} calls could not be recorded as arcs: the arc table was full",
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
        notes.push("no allocator by a known name (malloc, __rust_alloc, ...) was found: the allocations show only what grew the memory".into());
    }
    if a.untracked > 0 {
        notes.push(format!(
            "{} allocations ({}) found the live table full: counted, but not in the bytes held or the peak; --max-live-allocations N makes room",
            a.untracked,
            crate::format::units::bytes(a.untracked_bytes)
        ));
    }
    if a.held_is_upper_bound() {
        notes.push(format!(
            "{} frees were of blocks no allocation of their own thread had: a block freed on another thread stays held where it was allocated, so the bytes held are an upper bound",
            a.unmatched_frees
        ));
    } else if a.unmatched_frees > 0 {
        notes.push(format!(
            "{} frees were of blocks no recorded allocation had (untracked, or given out unseen); only those that say their size count their bytes",
            a.unmatched_frees
        ));
    }
}
