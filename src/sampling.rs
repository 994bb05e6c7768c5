//! The sampled time metric's schedule, one definition for every sampler: the embedded
//! host's sampler thread (`host::sampler`) and the JS runtime's sampler worker
//! (`templates/wasmprof-runtime.js`, which gets these through `js_runtime`).
//!
//! A sampler samples densely at first ([`DENSE_PHASE`], every interval divided by
//! [`DENSE_DIVISOR`] but not under [`DENSE_FLOOR`]), so that a run of a millisecond or two
//! still gets a usable estimate, then every interval ([`DEFAULT_INTERVAL`] unless the user
//! chooses). Each sample is credited with the time that actually passed since the previous
//! one; a sample that waited much longer than it should ([`is_late`]) is counted as late:
//! the sampler did not get a CPU in time.

use std::time::Duration;

/// The interval unless the user chooses one: 10 kHz, so that a test binary that runs for
/// 10 ms still gets about a hundred samples.
pub const DEFAULT_INTERVAL: Duration = Duration::from_micros(100);

/// How long a run is sampled densely at first.
pub const DENSE_PHASE: Duration = Duration::from_millis(20);

/// How many times more often the dense phase samples than the interval says.
pub const DENSE_DIVISOR: u32 = 10;

/// The dense phase's shortest wait between samples.
pub const DENSE_FLOOR: Duration = Duration::from_micros(5);

/// A sample is late when its wait took more than [`LATE_FACTOR`] times the wait it asked
/// for, plus [`LATE_SLACK`].
pub const LATE_FACTOR: u32 = 4;

/// See [`LATE_FACTOR`].
pub const LATE_SLACK: Duration = Duration::from_micros(100);

/// The wait between samples in the dense phase, for an `interval`.
pub fn dense_wait(interval: Duration) -> Duration {
    (interval / DENSE_DIVISOR).max(DENSE_FLOOR)
}

/// Whether a sample that asked to wait `wait` and waited `waited` came late.
pub fn is_late(wait: Duration, waited: Duration) -> bool {
    waited > LATE_FACTOR * wait + LATE_SLACK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dense_phase_samples_ten_times_as_often_down_to_its_floor() {
        assert_eq!(dense_wait(DEFAULT_INTERVAL), Duration::from_micros(10));
        assert_eq!(dense_wait(Duration::from_micros(10)), DENSE_FLOOR);
        assert!(!is_late(
            Duration::from_micros(10),
            Duration::from_micros(140)
        ));
        assert!(is_late(
            Duration::from_micros(10),
            Duration::from_micros(141)
        ));
    }
}
