//! How figures read, in one place for every view: times in the unit that keeps them
//! short (or, in a table's column, one unit for the whole column, [`Scale`]), exact counts
//! whole with thousands separators, shares of a whole, and source paths as a person reads
//! them.

use std::collections::HashMap;

use crate::meta::{Metric, Unit};
pub use crate::source::short_path;

/// A value of `metric` as text: a time for the time metrics, else an exact count
/// (instructions, calls).
pub fn value(metric: Metric, v: u64) -> String {
    match metric.facts().unit {
        Unit::Nanoseconds => time(v),
        Unit::Instructions | Unit::Calls => count(v),
    }
}

/// An average of `metric` (a cost per call or per iteration): below 100 with the decimals
/// an average has (`0.31 ns`, `12.5`), else as [`value`] writes it.
pub fn average(metric: Metric, v: f64) -> String {
    match metric.facts().unit {
        Unit::Nanoseconds if v < 10.0 => format!("{v:.2} ns"),
        Unit::Nanoseconds if v < 100.0 => format!("{v:.1} ns"),
        Unit::Instructions | Unit::Calls if v < 100.0 => format!("{v:.1}"),
        _ => value(metric, v.round() as u64),
    }
}

/// A cost of `metric` as an amount in words: `1.20 ms`, `3,400,000 instructions`; nothing
/// for the calls metric, whose costs are its calls.
pub fn amount(metric: Metric, v: u64) -> String {
    match metric.facts().unit {
        Unit::Nanoseconds => time(v),
        Unit::Instructions => format!("{} instructions", count(v)),
        Unit::Calls => String::new(),
    }
}

/// How wide a name may be in the text report unless `--full-names` is given.
pub const NAME_WIDTH: usize = 100;

/// `name` in at most about `width` characters: the generic arguments nested deepest are
/// elided first (`drop_in_place<Parser<…>>`), a qualified path's `<T as Trait>` kept
/// longest; past that, the middle of the name. The full name is in every other format.
pub fn elide(name: &str, width: usize) -> String {
    if name.chars().count() <= width {
        return name.to_string();
    }
    let depth = max_depth(name);
    for keep in (0..depth).rev() {
        let shorter = elide_below(name, keep);
        if shorter.chars().count() <= width {
            return shorter;
        }
    }
    let shortest = elide_below(name, 0);
    if shortest.chars().count() <= width {
        return shortest;
    }
    // A merged profile's ` [file:line]` suffix stays whole; the middle of the name goes.
    let (base, suffix) = match shortest.rfind(" [") {
        Some(at) if shortest.ends_with(']') && width >= 2 * (shortest.len() - at) => {
            shortest.split_at(at)
        }
        _ => (shortest.as_str(), ""),
    };
    let room = width.saturating_sub(suffix.chars().count());
    let chars: Vec<char> = base.chars().collect();
    let head = room * 2 / 3;
    let tail = room.saturating_sub(head + 1);
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out.push_str(suffix);
    out
}

/// Of `names`, those that [`elide`] would make alike, each with the fewest levels of
/// generic arguments that tell them apart (whole where none do), so that no two rows of a
/// report read the same.
pub fn distinct_elisions<'a>(
    names: impl IntoIterator<Item = &'a str>,
    width: usize,
) -> HashMap<&'a str, String> {
    let mut alike: HashMap<String, Vec<&str>> = HashMap::new();
    for name in names {
        let group = alike.entry(elide(name, width)).or_default();
        if !group.contains(&name) {
            group.push(name);
        }
    }
    let mut out = HashMap::new();
    for group in alike.into_values().filter(|g| g.len() > 1) {
        let deepest = group.iter().map(|n| max_depth(n)).max().unwrap_or(0);
        let shown = (0..deepest)
            .map(|keep| {
                group
                    .iter()
                    .map(|n| elide_below(n, keep))
                    .collect::<Vec<_>>()
            })
            .find(|shown| {
                let mut unique = shown.clone();
                unique.sort();
                unique.dedup();
                unique.len() == shown.len()
            })
            .unwrap_or_else(|| group.iter().map(|n| n.to_string()).collect());
        out.extend(group.into_iter().zip(shown));
    }
    out
}

/// The brackets of generic arguments in `name`, as +1 (`<`) and -1 (`>`), 0 for other
/// characters; the `>` of `->` (a `fn` type's result) is no bracket.
fn brackets(chars: &[char]) -> Vec<i8> {
    chars
        .iter()
        .enumerate()
        .map(|(i, &c)| match c {
            '<' => 1,
            '>' if i == 0 || chars[i - 1] != '-' => -1,
            _ => 0,
        })
        .collect()
}

/// The deepest nesting of `<...>` in `name`.
fn max_depth(name: &str) -> usize {
    let chars: Vec<char> = name.chars().collect();
    let (mut depth, mut max) = (0i32, 0i32);
    for b in brackets(&chars) {
        depth = (depth + i32::from(b)).max(0);
        max = max.max(depth);
    }
    max as usize
}

/// `name` with what lies inside `<...>` nested deeper than `keep` levels replaced by `…`;
/// at the outermost level (`keep` 0), a `<T as Trait>` qualified path keeps its text.
fn elide_below(name: &str, keep: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    let brackets = brackets(&chars);
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    // How many levels the group open at depth 1 shows (one more for `<T as Trait>`).
    let mut level = keep;
    for (i, &c) in chars.iter().enumerate() {
        match brackets[i] {
            1 => {
                if depth == 0 {
                    let qualified =
                        keep == 0 && group_is_qualified(&chars[i + 1..], &brackets[i + 1..]);
                    level = keep + usize::from(qualified);
                }
                depth += 1;
                if depth <= level + 1 {
                    out.push('<');
                }
                if depth == level + 1 {
                    out.push('…');
                }
            }
            -1 => {
                if depth <= level + 1 {
                    out.push('>');
                }
                depth = depth.saturating_sub(1);
            }
            _ if depth <= level => out.push(c),
            _ => {}
        }
    }
    out
}

/// Whether the `<...>` group that `rest` follows is `<T as Trait>`: ` as ` at its own level.
fn group_is_qualified(rest: &[char], brackets: &[i8]) -> bool {
    let mut depth = 0i32;
    for (i, &c) in rest.iter().enumerate() {
        depth += i32::from(brackets[i]);
        if depth < 0 {
            return false;
        }
        if depth == 0 && c == ' ' && rest[i..].starts_with(&[' ', 'a', 's', ' ']) {
            return true;
        }
    }
    false
}

/// `part` as a percentage of `whole` (0 of nothing).
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// A duration in nanoseconds, in the unit that keeps it short.
pub fn time(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.2} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// An exact count, whole, its digits grouped in thousands: `257,537,196`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One unit for every figure of a table's column, as gprof prints seconds: times in the
/// unit that keeps the column's largest figure (the run's total) short, with two decimals,
/// the unit named once in the column's header; exact counts whole. A figure per call or
/// per iteration is not on a scale: it carries its own unit ([`average`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// The unit's name (`ms`), empty for counts.
    unit: &'static str,
    /// Nanoseconds in one unit; 0 for counts.
    ns: f64,
}

impl Scale {
    /// The scale of a column of `metric` whose largest figure is `largest`.
    pub fn of(metric: Metric, largest: u64) -> Scale {
        let (unit, ns) = match metric.facts().unit {
            Unit::Instructions | Unit::Calls => ("", 0.0),
            Unit::Nanoseconds => match largest {
                0..10_000 => ("ns", 1.0),
                10_000..10_000_000 => ("µs", 1e3),
                10_000_000..100_000_000_000 => ("ms", 1e6),
                _ => ("s", 1e9),
            },
        };
        Scale { unit, ns }
    }

    /// A column's header: `name` and the unit its figures are in (`self ms`).
    pub fn header(&self, name: &str) -> String {
        match self.unit {
            "" => name.to_string(),
            unit => format!("{name} {unit}"),
        }
    }

    /// A figure of the column, without its unit.
    pub fn show(&self, v: u64) -> String {
        match self.unit {
            "" => count(v),
            "ns" => v.to_string(),
            _ => format!("{:.2}", v as f64 / self.ns),
        }
    }
}

/// An amount of memory: exact bytes below 10,000, else in KiB, MiB or GiB.
pub fn bytes(n: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    match n {
        0..10_000 => format!("{n} B"),
        10_000..MIB => format!("{:.1} KiB", n as f64 / KIB as f64),
        MIB..GIB => format!("{:.2} MiB", n as f64 / MIB as f64),
        _ => format!("{:.2} GiB", n as f64 / GIB as f64),
    }
}

/// `n` things: `1 sample`, `2 samples`.
pub fn plural(n: u64, thing: &str) -> String {
    match n {
        1 => format!("1 {thing}"),
        n => format!("{} {thing}s", count(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_keep_the_decimals_of_small_values() {
        assert_eq!(average(Metric::Time, 0.314), "0.31 ns");
        assert_eq!(average(Metric::Time, 26.74), "26.7 ns");
        assert_eq!(average(Metric::Time, 1234.4), "1.23 µs");
        assert_eq!(average(Metric::Instructions, 12.25), "12.2");
        assert_eq!(average(Metric::Instructions, 19_734.0), "19,734");
    }

    #[test]
    fn long_names_lose_their_deepest_generic_arguments_first() {
        let name = "core::ptr::drop_in_place<regex_syntax::ast::parse::ParserI<&mut regex_syntax::ast::parse::Parser<alloc::vec::Vec<u8>>>>";
        assert_eq!(elide(name, 200), name);
        assert_eq!(
            elide(name, 105),
            "core::ptr::drop_in_place<regex_syntax::ast::parse::ParserI<&mut regex_syntax::ast::parse::Parser<…>>>"
        );
        assert_eq!(
            elide(name, 70),
            "core::ptr::drop_in_place<regex_syntax::ast::parse::ParserI<…>>"
        );
        assert_eq!(elide(name, 30), "core::ptr::drop_in_place<…>");
        // A qualified path keeps its `<T as Trait>`; a fn type's `->` is no bracket.
        let qualified = "<alloc::vec::Vec<T, A> as core::ops::drop::Drop>::drop";
        assert_eq!(
            elide(qualified, 51),
            "<alloc::vec::Vec<…> as core::ops::drop::Drop>::drop"
        );
        let arrow = "call<fn(u8) -> bool, std::collections::HashMap<u8, u8>>";
        assert_eq!(
            elide(arrow, 50),
            "call<fn(u8) -> bool, std::collections::HashMap<…>>"
        );
        // Past that, the middle goes.
        let cut = elide(&"x".repeat(300), 100);
        assert_eq!(cut.chars().count(), 100);
        assert!(cut.contains('…'));
    }

    #[test]
    fn a_merged_names_place_stays_whole() {
        let name = "unicode_segmentation::grapheme::GraphemeCursor::is_boundary_result [unicode-segmentation-1.12.0/src/grapheme.rs:453]";
        let cut = elide(name, 100);
        assert!(cut.chars().count() <= 100, "{cut}");
        assert!(
            cut.ends_with(" [unicode-segmentation-1.12.0/src/grapheme.rs:453]"),
            "{cut}"
        );
        assert!(
            cut.starts_with("unicode_segmentation::") && cut.contains('…'),
            "{cut}"
        );
    }

    #[test]
    fn names_elided_alike_keep_what_tells_them_apart() {
        let a = "<alloc::vec::Vec<u8> as alloc::vec::spec_from_iter_nested::SpecFromIterNested<u8, core::iter::adapters::map::Map<core::str::Chars, textstats::f<alloc::string::String>>>>::from_iter";
        let b = "<alloc::vec::Vec<u8> as alloc::vec::spec_from_iter_nested::SpecFromIterNested<u8, core::iter::adapters::map::Map<core::str::Bytes, textstats::f<alloc::string::String>>>>::from_iter";
        assert_eq!(elide(a, 60), elide(b, 60));
        let shown = distinct_elisions([a, b, a, "main"], 60);
        assert_eq!(shown.len(), 2);
        assert_ne!(shown[a], shown[b]);
        assert!(shown[a].contains("Chars") && shown[b].contains("Bytes"));
        assert!(shown[a].len() < a.len(), "{}", shown[a]);
    }

    #[test]
    fn times_pick_their_unit() {
        assert_eq!(time(999), "999 ns");
        assert_eq!(time(1_500), "1.50 µs");
        assert_eq!(time(2_345_678), "2.35 ms");
        assert_eq!(time(3_000_000_000), "3.000 s");
    }

    #[test]
    fn counts_are_exact_in_groups_of_three_digits() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(9_999), "9,999");
        assert_eq!(count(100_000), "100,000");
        assert_eq!(count(257_537_196), "257,537,196");
    }

    #[test]
    fn a_column_keeps_one_unit_chosen_by_its_largest_figure() {
        let ms = Scale::of(Metric::Time, 1_425_000_000);
        assert_eq!(ms.header("self"), "self ms");
        assert_eq!(ms.show(1_001_260_000), "1001.26");
        assert_eq!(ms.show(571_310_000), "571.31");
        assert_eq!(ms.show(4_000), "0.00");
        assert_eq!(
            Scale::of(Metric::Time, 200_000_000_000).show(1_500_000_000),
            "1.50"
        );
        assert_eq!(Scale::of(Metric::Time, 2_500_000).header("self"), "self µs");
        assert_eq!(Scale::of(Metric::Time, 900).show(12), "12");
        let counts = Scale::of(Metric::Instructions, 59_200);
        assert_eq!(counts.header("self"), "self");
        assert_eq!(counts.show(59_213), "59,213");
    }

    #[test]
    fn memory_is_exact_in_bytes_then_binary_units() {
        assert_eq!(bytes(640), "640 B");
        assert_eq!(bytes(9_999), "9999 B");
        assert_eq!(bytes(10_240), "10.0 KiB");
        assert_eq!(bytes(1 << 20), "1.00 MiB");
        assert_eq!(bytes(3 << 30), "3.00 GiB");
    }
}
