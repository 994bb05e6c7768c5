//! The clock an instrumented module reads at every entry and exit.
//!
//! A clock read is the dominant cost of exact timing (see BENCHMARKS.md), so the host uses
//! the cheapest monotonic, precise clock it has: the CPU's time-stamp counter where it is
//! invariant (x86_64 with CPUID's invariant-TSC bit), else `std::time::Instant`. The module
//! records raw ticks; after the run they are converted to nanoseconds with the rate
//! measured against `Instant` over the whole run.

use std::time::Instant;

/// Which clock to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockChoice {
    /// The cheapest precise clock available.
    #[default]
    Auto,
    /// `std::time::Instant`, in nanoseconds.
    Instant,
}

/// A started clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    tsc: bool,
    started: Instant,
    started_ticks: u64,
}

impl Clock {
    /// Starts a clock of the chosen kind.
    pub fn start(choice: ClockChoice) -> Clock {
        let tsc = choice == ClockChoice::Auto && invariant_tsc();
        let started = Instant::now();
        let started_ticks = if tsc { read_tsc() } else { 0 };
        Clock {
            tsc,
            started,
            started_ticks,
        }
    }

    /// The name of the clock, for the profile.
    pub fn name(&self) -> &'static str {
        if self.tsc {
            "tsc"
        } else {
            "instant"
        }
    }

    /// A function that reads the clock, in ticks.
    pub fn reader(&self) -> impl Fn() -> i64 + Send + Sync + 'static {
        let (tsc, started) = (self.tsc, self.started);
        move || {
            if tsc {
                read_tsc() as i64
            } else {
                started.elapsed().as_nanos() as i64
            }
        }
    }

    /// Ticks per nanosecond, measured from the start until now.
    pub fn ticks_per_ns(&self) -> f64 {
        if !self.tsc {
            return 1.0;
        }
        let ns = self.started.elapsed().as_nanos() as f64;
        let ticks = read_tsc().wrapping_sub(self.started_ticks) as f64;
        if ns > 0.0 && ticks > 0.0 {
            ticks / ns
        } else {
            1.0
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    // CPUID leaf 0x8000_0007, EDX bit 8: the TSC runs at a constant rate in every state.
    let max_extended = __cpuid(0x8000_0000).eax;
    max_extended >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
}

#[cfg(not(target_arch = "x86_64"))]
fn invariant_tsc() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn read_tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn read_tsc() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_clocks_measure_nanoseconds() {
        for choice in [ClockChoice::Auto, ClockChoice::Instant] {
            let clock = Clock::start(choice);
            let read = clock.reader();
            let t0 = read();
            std::thread::sleep(std::time::Duration::from_millis(20));
            let t1 = read();
            let ns = (t1 - t0) as f64 / clock.ticks_per_ns();
            assert!(
                (15e6..200e6).contains(&ns),
                "{}: 20 ms measured as {ns} ns",
                clock.name()
            );
        }
    }
}
