//! How a profile's sampled times were taken: by which sampler, how many samples, and
//! what they leave out.

use serde::{Deserialize, Serialize};

/// How the sampled time metric's times were taken: each sample found one context running
/// and stands for the time since the sampler's previous sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sampling {
    /// Which sampler took them: the machine's stacks (the probes' code told by its
    /// address), or the context word the probes publish.
    #[serde(default)]
    pub sampler: crate::meta::Sampler,
    /// Samples that found a function running: the times are theirs.
    pub samples: u64,
    /// The time those samples stand for, in nanoseconds: the sum of every self time.
    pub sampled_ns: u64,
    /// Samples that found the probes' own work running: left out of every time, so the
    /// times are the program's.
    pub in_probes: u64,
    /// Samples that found no function of the module running (the host before the entry
    /// point or after the exit, or, with the stack sampler, wasmtime's own code outside any
    /// import).
    pub idle: u64,
    /// Samples (of all of the above) that came late: the sampler waited for a CPU, so they
    /// fell where the program let it run (often a host call that blocked).
    #[serde(default)]
    pub late: u64,
    /// With the stack sampler, samples it could not place in the calling-context tree (a
    /// stack too deep to keep whole, one the tree has no path for, or one it had no room
    /// for), and their time: left out of the functions' times, said in the report.
    #[serde(default)]
    pub unplaced: u64,
    /// See [`Sampling::unplaced`].
    #[serde(default)]
    pub unplaced_ns: u64,
    /// Why no sampler ran, when none could (a JS host that cannot start the sampler's
    /// worker): the times are then empty for that reason, not for a short run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_sampler: Option<NoSampler>,
    /// CPU time, not wall time: each thread sampled by its own CPU clock (a server's workers).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cpu: bool,
    /// With `cpu`: the threads were sampled by POSIX CPU-time timers, which fire at the
    /// kernel's tick, not at the interval asked for (perf's task clock could not open).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tick: bool,
    /// V8's sampler ran in a page, through the JS Self-Profiling API (every 10 ms at best in
    /// Chromium).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_page: bool,
}

/// Why a JS host ran the sampled time metric without its sampler, as the runtime found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoSampler {
    /// A page (or a worker of it) that is not cross-origin isolated: no other thread can
    /// share the profiler's memory.
    NotIsolated,
    /// A context that cannot start a worker (a shared or a service worker in Chromium).
    NoWorker,
    /// Starting the worker failed (the runtime printed why).
    WorkerFailed,
    /// V8's sampler could not start: a page that does not allow JS self-profiling (its
    /// `Document-Policy`), or a worker.
    NoV8Sampler,
    /// The page's sampler ran, but the profile was taken before it stopped
    /// (`wasmprof.profile()` rather than `wasmprof.stop()`).
    NotStopped,
}

impl NoSampler {
    /// Why, in words.
    pub fn why(self) -> &'static str {
        match self {
            NoSampler::NotIsolated => {
                "the page is not cross-origin isolated, so no worker could share its memory"
            }
            NoSampler::NoWorker => "it ran where no worker can start (a shared or service worker)",
            NoSampler::WorkerFailed => "the sampler's worker did not start",
            NoSampler::NoV8Sampler => {
                "V8's sampler runs in a page only when the page is served with \
                 `Document-Policy: js-profiling` (or link with WASMPROF_CONTEXTS=1 for the \
                 word sampler, in a cross-origin isolated page)"
            }
            NoSampler::NotStopped => {
                "the page's samples come with `await wasmprof.stop()`, and the profile was \
                 taken with `wasmprof.profile()`"
            }
        }
    }
}

impl Sampling {
    /// The mean time between samples, in nanoseconds (0 without samples).
    pub fn interval_ns(&self) -> f64 {
        match self.samples {
            0 => 0.0,
            n => self.sampled_ns as f64 / n as f64,
        }
    }

    /// Adds `other`'s samples in.
    pub fn add(&mut self, other: &Sampling) {
        // (The merged profiles were sampled alike; the default is the word sampler.)
        if other.sampler != crate::meta::Sampler::default() {
            self.sampler = other.sampler;
        }
        self.samples += other.samples;
        self.sampled_ns += other.sampled_ns;
        self.in_probes += other.in_probes;
        self.idle += other.idle;
        self.late += other.late;
        self.unplaced += other.unplaced;
        self.unplaced_ns += other.unplaced_ns;
        self.no_sampler = self.no_sampler.or(other.no_sampler);
        self.cpu |= other.cpu;
        self.tick |= other.tick;
        self.in_page |= other.in_page;
    }
}

/// Fewer self samples than this make a self time too imprecise to rank by: its relative
/// standard error, 1/sqrt(n), is above 30%.
pub const FEW_SAMPLES: u64 = 11;
