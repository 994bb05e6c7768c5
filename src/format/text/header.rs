//! The text report's first lines: what ran, its wall time, its functions and calls, and
//! its samples: how many, where each landed (the program, the probes, outside the
//! program's functions), and what that makes of the times.

use std::fmt::Write as _;

use super::{short_path, Units, BOLD};
use crate::format::units::{count, percent};
use crate::meta::Sampler;
use crate::profile::{Profile, Sampling, FEW_SAMPLES};

/// The report's first lines; `by_samples`, whether the sections list what the samples found
/// ([`FlatRows::by_samples`]).
pub(super) fn header(out: &mut String, p: &Profile, units: Units<'_>, by_samples: bool) {
    // A merged profile's modules, the first few: the profile lists them all.
    const SHOWN: usize = 4;
    let mut modules: Vec<String> = p
        .modules
        .iter()
        .take(SHOWN)
        .map(|m| short_path(m))
        .collect();
    if p.modules.len() > SHOWN {
        modules.push(format!("and {} more", p.modules.len() - SHOWN));
    }
    let _ = writeln!(
        out,
        "{BOLD}cargo-wasmprof profile{BOLD:#}: {}",
        modules.join(", ")
    );
    totals(out, p, units);
    if !p.threads.is_empty() {
        let lost: Vec<u32> = p.runs.iter().flat_map(|r| r.threads_lost.clone()).collect();
        let _ = writeln!(
            out,
            "threads: {}; every figure is their sum, exact per thread{}",
            p.threads.len(),
            match lost.as_slice() {
                [] => ", --threads shows each".to_string(),
                lost => format!(
                    "; threads {lost:?} could not be read when the program ended (in a host call, or still running in a JS host): their counts are missing"
                ),
            }
        );
    }
    if let Some(view) = &p.view {
        let part = match units.has_cost() {
            false => format!(
                "{} of {} calls",
                p.functions.iter().map(|f| f.calls).sum::<u64>(),
                view.whole
            ),
            true => format!(
                "{} of {} ({:.2}%)",
                units.amount(units.total),
                units.amount(view.whole),
                percent(units.total, view.whole)
            ),
        };
        let _ = writeln!(out, "view: {}: {part}", view.description);
    }
    if let Some(s) = &p.sampling {
        // A server's samples grow with its load; a component has no instructions metric.
        let exact = match (p.exact_costs_flag(), &p.requests) {
            (Some(flag), _) => format!("{flag} gives exact costs"),
            (None, Some(_)) => "a longer load gives more samples".to_string(),
            (None, None) => "a longer run gives more samples".to_string(),
        };
        sampled(out, s, &exact, by_samples);
        served(out, p, s);
    }
}

/// A server's line: the CPU its requests took (the Requests table's), beside the share of
/// it the samples in the program stand for, so that the figures can be read together.
fn served(out: &mut String, p: &Profile, s: &Sampling) {
    let Some(requests) = p.requests.as_ref().filter(|r| !r.routes.is_empty()) else {
        return;
    };
    let answered: u64 = requests.routes.iter().map(|r| r.requests).sum();
    let cpu: u64 = requests.routes.iter().map(|r| r.cpu_ns).sum();
    let _ = writeln!(
        out,
        "      requests: {} answered, {} of CPU in their workers (instantiation included); the samples in the program stand for {:.1}% of it",
        count(answered),
        crate::format::units::time(cpu),
        percent(s.sampled_ns, cpu)
    );
}

/// The header's line of totals: the runs' wall time, an exact cost's sum (a sampled
/// time's is the samples' line's), every function called and every call, the runtime's
/// included.
fn totals(out: &mut String, p: &Profile, units: Units<'_>) {
    let calls: u64 = p.functions.iter().map(|f| f.calls).sum();
    let wall: u64 = p.runs.iter().map(|r| r.wall_ns).sum();
    let wall = match (wall, p.runs.len()) {
        // A server's runs stand for its requests, which the requests line sums.
        _ if p.requests.is_some() => String::new(),
        (0, _) => String::new(),
        (ns, 1) => format!("{} of wall time; ", crate::format::units::time(ns)),
        (ns, n) => format!(
            "{} of wall time in {n} runs; ",
            crate::format::units::time(ns)
        ),
    };
    let cost = match units.has_cost() && p.sampling.is_none() {
        true => format!("{} in ", units.amount(units.total)),
        false => String::new(),
    };
    let _ = writeln!(
        out,
        "{wall}{cost}{} functions called {} times in all{}",
        count(p.functions.len() as u64),
        count(calls),
        if p.complete {
            ""
        } else {
            " (partial: the run ended inside some functions)"
        }
    );
}

/// The header's lines on the samples: which sampler took them, how many, where each
/// landed (the program, the probes, outside the module), and what that makes of the times
/// (and, of too few, whether the sections list what they found).
fn sampled(out: &mut String, s: &Sampling, exact: &str, by_samples: bool) {
    let by = match s.sampler {
        Sampler::Stacks => "the stack sampler",
        Sampler::Word => "the word sampler",
        Sampler::V8 if s.in_page => "V8's sampler (the page's JS Self-Profiling)",
        Sampler::V8 => "V8's sampler",
    };
    if let Some(none) = s.no_sampler.filter(|_| s.samples == 0) {
        let _ = writeln!(
            out,
            "time: not sampled: {}; the sections show calls alone, which are exact; {exact}",
            none.why()
        );
        return;
    }
    let all = s.samples + s.in_probes + s.idle;
    // Where every sample landed, so that they add up: the program's, and those left out.
    let mut others = Vec::new();
    if s.in_probes > 0 {
        others.push(format!("{} in the probes", count(s.in_probes)));
    }
    if s.idle > 0 {
        // A CPU clock samples no thread that waits: outside the program is the host's work
        // (instantiation, WASI, HTTP, the event loop of async calls).
        let whose = match s.cpu {
            true => "the host's own work",
            false => "the host, or idle",
        };
        others.push(format!(
            "{} outside the program's functions ({whose})",
            count(s.idle)
        ));
    }
    let landed = format!(
        "{} in the program ({}){}",
        count(s.samples),
        crate::format::units::time(s.sampled_ns),
        match others.is_empty() {
            true => String::new(),
            false => format!("; left out: {}", others.join(", ")),
        }
    );
    let _ = match s.samples {
        0 => writeln!(
            out,
            "time: {} by {by}, none in the program ({}): the sections show calls alone, which are exact; {exact}",
            crate::format::units::plural(all, "sample"),
            few_samples_why(s),
        ),
        n if n < FEW_SAMPLES => writeln!(
            out,
            "time: {} by {by}: {landed}; {}: the times say nothing, the sections {}; {exact}; calls and arcs are exact",
            crate::format::units::plural(all, "sample"),
            few_samples_why(s),
            match by_samples {
                true => "list what the samples found",
                false => "rank by calls",
            }
        ),
        _ => writeln!(
            out,
            "time: {} samples by {by}, one every {}: {landed}\n      a time from n samples is within about 1/sqrt(n) of it, `~` marks those from under {FEW_SAMPLES}; calls and arcs are exact",
            count(all),
            crate::format::units::time(s.interval_ns().round() as u64),
        ),
    };
}

/// Why a run got too few samples to say anything: it was short, or, when most of its
/// samples came late, the sampler seldom got a CPU (a busy machine; a run of several
/// milliseconds should get hundreds), or, for a server's workers sampled on their CPU
/// time by POSIX timers, those timers' tick.
pub(super) fn few_samples_why(s: &Sampling) -> &'static str {
    if s.late * 2 > s.samples + s.in_probes + s.idle {
        "the sampler seldom got a CPU (most of its samples came late: the machine was busy)"
    } else if s.cpu && s.tick {
        // Measured on Linux: a CPU-time timer fires at the scheduler's tick (HZ=250 gave
        // 0.24-0.25 samples per CPU ms at a 1 ms interval).
        "the workers' CPU-time timers fire at most at the kernel's tick (every 4 ms at \
         250 Hz), so a short load gets few samples: a longer one gets more"
    } else if s.cpu {
        "the load was too short to sample"
    } else {
        "the run was too short to sample"
    }
}
