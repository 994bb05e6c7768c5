//! The sampled time metric's schedule, one definition for every sampler: the word
//! samplers (the embedded host's sampler thread, `host::sampler`, and the JS runtime's
//! sampler worker, `templates/wasmprof-runtime.js`, which gets these through `js_runtime`)
//! and the embedded host's stack sampler (`host::stacks`).
//!
//! The word sampler samples densely at first ([`DENSE_PHASE`], every interval divided by
//! [`DENSE_DIVISOR`] but not under its floor), so that a run of a millisecond or two still
//! gets a usable estimate, then every interval ([`default_interval`] unless the user
//! chooses); the others keep their interval throughout (each of the stack sampler's
//! samples costs the program a signal, and V8 takes one interval). Each sample is credited with the time that actually passed since the
//! previous one; a word sample that waited much longer than it should ([`is_late`]) is
//! counted as late: the sampler did not get a CPU in time.

use std::time::Duration;

use crate::meta::Sampler;

/// The word sampler's interval unless the user chooses one: 10 kHz, so that a test binary
/// that runs for 10 ms still gets about a hundred samples. A word sample costs the program
/// nothing: another thread reads the word.
pub const WORD_INTERVAL: Duration = Duration::from_micros(100);

/// The stack sampler's interval unless the user chooses one: 1 kHz. Each of its samples
/// interrupts the program (a signal, a stack walk: 10-30 us on the machines of
/// BENCHMARKS.md), 1-3% of its time at this interval; a dense phase at 200 us took 10-15%
/// of a run of 20 ms (BENCHMARKS.md, "Run time in the embedded wasmtime").
pub const STACKS_INTERVAL: Duration = Duration::from_millis(1);

/// V8's sampler's interval unless the user chooses one: V8 keeps the one it is started
/// with (no dense phase), so a short run gets its samples from this one.
pub const V8_INTERVAL: Duration = Duration::from_micros(250);

/// The interval of `sampler` unless the user chooses one.
pub fn default_interval(sampler: Sampler) -> Duration {
    match sampler {
        Sampler::Word => WORD_INTERVAL,
        Sampler::Stacks => STACKS_INTERVAL,
        Sampler::V8 => V8_INTERVAL,
    }
}

/// How long a run is sampled densely at first.
pub const DENSE_PHASE: Duration = Duration::from_millis(20);

/// How many times more often the dense phase samples than the interval says.
pub const DENSE_DIVISOR: u32 = 10;

/// The word samplers' shortest wait between samples in the dense phase.
pub const DENSE_FLOOR: Duration = Duration::from_micros(5);

/// A sample is late when its wait took more than [`LATE_FACTOR`] times the wait it asked
/// for, plus [`LATE_SLACK`]. The JS hosts' sampler, which sleeps in its dense phase too,
/// judges every sample against the interval instead: a sleep of 10 µs lasts what the
/// system gives (templates/wasmprof-sampler.js).
pub const LATE_FACTOR: u32 = 4;

/// See [`LATE_FACTOR`].
pub const LATE_SLACK: Duration = Duration::from_micros(100);

/// The wait between samples of `sampler` in the dense phase, for an `interval` (the word
/// sampler's; the others keep their interval throughout).
pub fn dense_wait(sampler: Sampler, interval: Duration) -> Duration {
    match sampler {
        Sampler::Word => (interval / DENSE_DIVISOR).max(DENSE_FLOOR).min(interval),
        Sampler::Stacks | Sampler::V8 => interval,
    }
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
        let word = |us| dense_wait(Sampler::Word, Duration::from_micros(us));
        assert_eq!(word(100), Duration::from_micros(10));
        assert_eq!(word(10), DENSE_FLOOR);
        // The stack sampler's samples cost the program: it keeps its interval.
        let stacks = |us| dense_wait(Sampler::Stacks, Duration::from_micros(us));
        assert_eq!(stacks(1000), Duration::from_millis(1));
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
