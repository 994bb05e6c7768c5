//! The report's allocations section: the program's own code first, each row a function
//! of the program with what the allocator calls under it made (the innermost of the
//! program's functions on a context's path is charged; a context with none on its path is
//! the runtime's or the harness's, one row), and how far the figures go.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{location, Units, BOLD};
use crate::format::units::{bytes, count};
use crate::format::Weight;
use crate::profile::{Allocs, Profile};

/// The section, when the profile records allocations: the whole run's figures, then the
/// rows by bytes allocated, or by bytes held at the end with `--weight held-bytes` (and
/// any that hold the most at the end or at the peak, or grew the memory, past `top`).
pub(super) fn allocations(
    out: &mut String,
    p: &Profile,
    units: Units<'_>,
    (top, by): (usize, Weight),
) {
    let Some(summary) = &p.allocations else {
        return;
    };
    if summary.not_recorded.is_some() {
        return;
    }
    let total = p.total_allocs();
    let at_peak = summary.at_peak_bytes > 0;
    let _ = writeln!(
        out,
        "\n{BOLD}Allocations{BOLD:#} (exact: every call of the allocator's entry points and every memory.grow)"
    );
    summary_line(out, summary, &total, p.runs.len());
    if total.is_empty() {
        return;
    }
    let rows = rows(p, by);
    let shown = shown(&rows, top);
    let at_peak_column = |text: String| {
        if at_peak {
            format!(" {text:>11}")
        } else {
            String::new()
        }
    };
    let _ = writeln!(
        out,
        "\n{:>11} {:>8} {:>11} {:>8}{} {:>6}  allocated under",
        "allocated",
        "allocs",
        "held at end",
        "held",
        at_peak_column("at peak".into()),
        "grown"
    );
    for &i in &shown {
        let (who, a) = &rows[i];
        let name = match who {
            Some(f) => {
                let f = &p.functions[*f];
                format!("{}{}", units.name(&f.name), location(f))
            }
            None => "[the runtime and the harness: no function of the program on the path]".into(),
        };
        let _ = writeln!(
            out,
            "{:>11} {:>8} {:>11} {:>8}{} {:>6}  {name}",
            bytes(a.alloc_bytes),
            count(a.allocs),
            bytes(a.held_bytes),
            count(a.held),
            at_peak_column(bytes(a.at_peak_bytes)),
            a.grown_pages,
        );
    }
    let more = rows.len() - shown.len();
    if more > 0 {
        let only_freed = (0..rows.len())
            .filter(|i| !shown.contains(i) && only_freed(&rows[*i].1))
            .count();
        let which = match only_freed {
            0 => String::new(),
            n if n == more => ", under which blocks were only freed".to_string(),
            n => format!(", {n} of them under which blocks were only freed"),
        };
        let _ = writeln!(
            out,
            "{:>11}  [{more} more{which}: --top all lists them]",
            ""
        );
    }
}

/// Whether under a function blocks were only freed: nothing allocated, held or grown, so
/// nothing in the section's columns.
fn only_freed(a: &Allocs) -> bool {
    a.allocs == 0 && a.grown_pages == 0
}

/// The whole run's figures (of several `runs`, each a process of its own: their sums, and
/// the largest peak and memory), in one line.
fn summary_line(
    out: &mut String,
    summary: &crate::profile::Allocations,
    total: &Allocs,
    runs: usize,
) {
    let peak = match summary.peak() {
        None => "the peak of live bytes is not known (a threaded program: each thread's probes see the blocks their thread allocated)".to_string(),
        Some(peak) if summary.untracked > 0 => format!(
            "peak {} live of the blocks the live table followed",
            bytes(peak)
        ),
        Some(peak) => format!("peak {} live", bytes(peak)),
    };
    // Of several runs, one run's peak: each is a process of its own.
    let peak = match &summary.peak_module {
        Some(module) if summary.peak().is_some() => format!(
            "{peak} in {module}, the largest of the runs' peaks (its blocks are the \"at peak\" column)"
        ),
        _ => peak,
    };
    let memory = bytes(summary.memory_pages << 16);
    let memory = match runs {
        0 | 1 => format!(", to {memory}"),
        runs => format!(" over the {runs} runs, to {memory} in the largest"),
    };
    let _ = writeln!(
        out,
        "{} allocations of {}, {} frees of {}; {} still held at the end ({}{}); {peak}; memory grown by {} page{}{memory}",
        count(total.allocs),
        bytes(total.alloc_bytes),
        count(total.frees),
        bytes(total.freed_bytes),
        count(total.held),
        bytes(total.held_bytes),
        match summary.held_is_upper_bound() {
            true => ", at most: a thread's frees of another's blocks are not matched",
            false => "",
        },
        total.grown_pages,
        if total.grown_pages == 1 { "" } else { "s" },
    );
}

/// The rows shown: the first `top` (of all, else of those that allocated or grew the
/// memory), and the largest holders (at the end, at the peak) and grower whatever their
/// rank.
fn shown(rows: &[(Option<usize>, Allocs)], top: usize) -> Vec<usize> {
    let mut shown: Vec<usize> = (0..rows.len())
        .filter(|&i| top == usize::MAX || !only_freed(&rows[i].1))
        .take(top)
        .collect();
    let keys: [fn(&Allocs) -> u64; 3] = [|a| a.held_bytes, |a| a.at_peak_bytes, |a| a.grown_pages];
    for key in keys {
        if let Some(best) = (0..rows.len())
            .filter(|&i| key(&rows[i].1) > 0)
            .max_by_key(|&i| key(&rows[i].1))
        {
            if !shown.contains(&best) {
                shown.push(best);
            }
        }
    }
    shown
}

/// Each function of the program that allocations are charged to (`None`: the runtime's and
/// the harness's), with their sum, by bytes allocated (then held, then grown), or `by`
/// bytes held (then allocated), largest first.
fn rows(p: &Profile, by: Weight) -> Vec<(Option<usize>, Allocs)> {
    let program = crate::harness::program_functions(p);
    let mut owner: Vec<Option<usize>> = vec![None; p.contexts.len()];
    let mut sums: HashMap<Option<usize>, Allocs> = HashMap::new();
    // Parents come before their children: a context's owner is its function, if the
    // program's, else its parent's owner.
    for (j, c) in p.contexts.iter().enumerate() {
        let own = c
            .function
            .map(|f| f as usize)
            .filter(|&f| program.get(f).copied().unwrap_or(false));
        owner[j] = own.or_else(|| c.parent.and_then(|parent| owner[parent as usize]));
        if let Some(a) = &c.alloc {
            sums.entry(owner[j]).or_default().add(a);
        }
    }
    let mut rows: Vec<(Option<usize>, Allocs)> = sums.into_iter().collect();
    rows.sort_by_key(|(who, a)| {
        let key = match by {
            Weight::HeldBytes => (a.held_bytes, a.alloc_bytes, a.grown_pages),
            Weight::Cost | Weight::AllocBytes => (a.alloc_bytes, a.held_bytes, a.grown_pages),
        };
        (std::cmp::Reverse(key), who.map_or(usize::MAX, |f| f))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_under_which_blocks_were_only_freed_wait_for_top_all() {
        let allocated = Allocs {
            allocs: 1,
            alloc_bytes: 8,
            ..Allocs::default()
        };
        let grew = Allocs {
            grown_pages: 1,
            ..Allocs::default()
        };
        let freed = Allocs {
            frees: 1,
            freed_bytes: 8,
            ..Allocs::default()
        };
        let rows = [(Some(0), freed), (Some(1), allocated), (Some(2), grew)];
        assert_eq!(shown(&rows, 25), [1, 2]);
        assert_eq!(shown(&rows, 1), [1, 2], "the grower whatever its rank");
        assert_eq!(shown(&rows, usize::MAX), [0, 1, 2]);
    }
}
