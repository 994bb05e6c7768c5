//! How figures read, in one place for every view: times in the unit that keeps them
//! short, counts with k, M and G, shares of a whole, and source paths as a person reads
//! them.

use crate::meta::Metric;

/// A value of `metric` as text: a time for the time metric, else a count (instructions,
/// calls).
pub fn value(metric: Metric, v: u64) -> String {
    match metric {
        Metric::Time | Metric::ExactTime => time(v),
        Metric::Instructions | Metric::Calls => count(v),
    }
}

/// A source path as a person wants to read it: relative to the working directory when
/// under it, and the standard library's `/rustc/<commit>/library/...` as `library/...`.
pub fn short_path(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("/rustc/") {
        if let Some((_, lib)) = rest.split_once('/') {
            return lib.to_string();
        }
    }
    crate::fsutil::relative(std::path::Path::new(path))
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

/// A count, shortened with k, M and G past four digits.
pub fn count(n: u64) -> String {
    match n {
        0..10_000 => n.to_string(),
        10_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2}M", n as f64 / 1e6),
        _ => format!("{:.2}G", n as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_pick_their_unit() {
        assert_eq!(time(999), "999 ns");
        assert_eq!(time(1_500), "1.50 µs");
        assert_eq!(time(2_345_678), "2.35 ms");
        assert_eq!(time(3_000_000_000), "3.000 s");
    }

    #[test]
    fn counts_are_shortened() {
        assert_eq!(count(9_999), "9999");
        assert_eq!(count(12_345), "12.3k");
        assert_eq!(count(1_375_400), "1.38M");
        assert_eq!(count(45_600_000), "45.60M");
    }

    #[test]
    fn standard_library_paths_are_shortened() {
        assert_eq!(
            short_path(
                "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/ops/function.rs"
            ),
            "library/core/src/ops/function.rs"
        );
    }
}
