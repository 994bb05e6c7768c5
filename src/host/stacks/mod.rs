//! The stack sampler of the sampled time metric ([`meta::Sampler::Stacks`]), for the embedded
//! host on Linux: each wasm thread gets a POSIX timer on the wall clock (or, sampled on its
//! CPU time, perf's task clock: [`timer`]) that interrupts that thread alone every interval
//! (with no dense phase at first: each sample costs the program a signal), at an unbiased
//! moment; the signal handler records where the
//! thread was, the interrupted PC and the return addresses of the wasm frames above it
//! (Cranelift keeps frame pointers; an innermost frame interrupted in its prologue or at
//! its return, where the frame pointer is its caller's, gives its return address from the
//! stack or the link register; the walk stops at the first address outside the module's
//! code), into a ring buffer of the thread's, preallocated ([`ring`]). A thread found in
//! host code that its wasm code called (an import, or wasmtime's own `memory.grow`,
//! `memory.copy`, `memory.atomic.wait`, ...) is walked from the frame through which it
//! called out, which wasmtime notes ([`exits`]).
//!
//! Off the hot path, a drain thread reads the rings and maps each address to what it is
//! ([`CodeMap`]): the function (wasmtime's `Module::functions`, then the module's frame
//! table), the instruction (`Module::address_map`), and what that instruction is in the
//! original module ([`meta::ADDRESSES_SECTION`]): a source line of the program's code, or
//! the probes' code, whose samples are left out and counted. A sample in host code is the
//! innermost wasm frame's: an import's (its thunk's frame), or the function whose
//! instruction the host runs, at that instruction's line. A sample outside the module's
//! code with no wasm frame under it is wasmtime's own (entering or leaving the module).
//! Each thread's samples come out as [`StackSamples`]: the stacks (function ids), their
//! leaf lines, their counts and times; the decoder places them in the calling-context
//! tree, or makes the tree of them.

mod code_map;
mod exits;
mod ring;
mod timer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub(super) use code_map::CodeMap;
pub(super) use exits::Exits;

use ring::{Record, Ring};
use timer::Timer;
pub use timer::{cpu_timer_fallback, CPU_TIMER_VAR};

use crate::meta;
use crate::profile::{StackSample, StackSamples};

/// How often the drain thread empties the rings.
const DRAIN_EVERY: Duration = Duration::from_millis(2);

/// A run's stack sampling: the code map, the threads it samples, and the thread that
/// drains their rings.
pub(super) struct StackSampler {
    shared: Arc<Shared>,
    interval: Duration,
    clock: Clock,
    drainer: Option<JoinHandle<()>>,
}

/// What a sampler's interval counts, and each sample's time is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::host) enum Clock {
    /// The wall clock: a thread waiting in a host call is sampled there.
    Wall,
    /// The sampled thread's own CPU time: a thread that waits gets no sample meanwhile.
    ThreadCpu,
}

impl Clock {
    fn id(self) -> libc::clockid_t {
        match self {
            Clock::Wall => libc::CLOCK_MONOTONIC,
            Clock::ThreadCpu => libc::CLOCK_THREAD_CPUTIME_ID,
        }
    }
}

/// What the sampled threads and the drain thread share.
struct Shared {
    map: CodeMap,
    threads: Mutex<Vec<Arc<Thread>>>,
    stop: AtomicBool,
}

/// A sampled thread: its ring, its timer (until the thread stops), and what the drain
/// thread has read of it.
struct Thread {
    ring: Ring,
    timer: Mutex<Option<Timer>>,
    tally: Mutex<Tally>,
}

impl Thread {
    /// Reads the samples recorded since the last call into the tally.
    fn drain(&self, map: &CodeMap) {
        let mut tally = self.tally.lock().expect("not poisoned");
        self.ring.drain(|record| tally.add(map, record));
    }
}

impl StackSampler {
    /// Starts sampling the threads that will run the module whose code `map` maps, every
    /// `interval` of the wall clock; each thread joins with
    /// [`StackSampler::sample_this_thread`].
    pub(super) fn start(map: CodeMap, interval: Duration) -> StackSampler {
        StackSampler::start_on(map, interval, Clock::Wall)
    }

    /// [`StackSampler::start`], every `interval` of `clock`.
    pub(in crate::host) fn start_on(
        map: CodeMap,
        interval: Duration,
        clock: Clock,
    ) -> StackSampler {
        let shared = Arc::new(Shared {
            map,
            threads: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let drainer = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                while !shared.stop.load(Ordering::Relaxed) {
                    // Parked, not asleep: `drop` wakes it, and a run's end need not wait
                    // out the rest of its interval (a millisecond on average).
                    std::thread::park_timeout(DRAIN_EVERY);
                    let threads = shared.threads.lock().expect("not poisoned").clone();
                    for thread in threads {
                        thread.drain(&shared.map);
                    }
                }
            })
        };
        StackSampler {
            shared,
            interval,
            clock,
            drainer: Some(drainer),
        }
    }

    /// Samples the calling thread from now on, until the returned sampling finishes; where
    /// it is in host code, its wasm frames are walked from the last exit that its store's
    /// `exits` note.
    pub(super) fn sample_this_thread(&self, exits: Option<Exits>) -> anyhow::Result<Sampling> {
        let thread = Arc::new(Thread {
            ring: Ring::new(self.shared.map.text(), exits, self.clock.id())?,
            timer: Mutex::new(None),
            tally: Mutex::default(),
        });
        thread.ring.attach();
        ring::install_handler();
        match Timer::start(self.interval, self.clock.id()) {
            Ok(timer) => {
                thread.ring.set_rearm(timer.rearmed_fd());
                timer.enable();
                *thread.timer.lock().expect("not poisoned") = Some(timer);
            }
            Err(e) => {
                thread.ring.detach();
                return Err(e);
            }
        }
        self.shared
            .threads
            .lock()
            .expect("not poisoned")
            .push(Arc::clone(&thread));
        Ok(Sampling {
            thread,
            shared: Arc::clone(&self.shared),
            dropped_before: (0, 0),
        })
    }
}

impl Drop for StackSampler {
    /// Stops the drain thread (each thread's [`Sampling`] has finished by then).
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(drainer) = self.drainer.take() {
            drainer.thread().unpark();
            let _ = drainer.join();
        }
    }
}

/// The sampling of one thread, on that thread.
pub(super) struct Sampling {
    thread: Arc<Thread>,
    shared: Arc<Shared>,
    /// The samples that found the ring full, and their time, up to the last
    /// [`Sampling::take`].
    dropped_before: (u64, u64),
}

impl Sampling {
    /// Runs `wait`, in which the thread blocks for work, with its task clock off: its CPU
    /// clock stands still while it sleeps anyway, and perf then switches no running event at
    /// each of its context switches (an hrtimer cancelled and started again: a server's
    /// workers switch at every request).
    pub(super) fn idle<T>(&self, wait: impl FnOnce() -> T) -> T {
        let each = |f: fn(&Timer)| {
            let timer = self.thread.timer.lock().expect("not poisoned");
            timer.iter().for_each(f);
        };
        each(Timer::disable);
        let woken = wait();
        each(Timer::enable);
        woken
    }

    /// What the sampling has found so far, for the thread itself to read while it runs.
    pub(super) fn so_far(&self) -> SoFar {
        SoFar {
            thread: Arc::clone(&self.thread),
            shared: Arc::clone(&self.shared),
        }
    }

    /// Walks the thread's host calls from the exits of `exits` from now on: a thread that
    /// runs one store after another, each store's while it runs.
    pub(in crate::host) fn set_exits(&self, exits: Option<Exits>) {
        self.thread.ring.set_exits(exits);
    }

    /// Stops sampling the thread (on the thread itself) and gives its samples (since the
    /// last [`Sampling::take`]).
    pub(super) fn finish(mut self) -> StackSamples {
        self.stop();
        self.shared
            .threads
            .lock()
            .expect("not poisoned")
            .retain(|t| !Arc::ptr_eq(t, &self.thread));
        self.take()
    }

    /// The samples taken since the last call (or since the sampling began), the thread
    /// still sampled: of a thread that serves one request after another, each request's.
    pub(in crate::host) fn take(&mut self) -> StackSamples {
        self.thread.drain(&self.shared.map);
        let tally = std::mem::take(&mut *self.thread.tally.lock().expect("not poisoned"));
        let dropped = self.thread.ring.dropped();
        let (count, ns) = self.dropped_before;
        self.dropped_before = dropped;
        tally.finish((dropped.0 - count, dropped.1 - ns))
    }

    /// Deletes the timer, then detaches the ring: a signal still pending finds none.
    fn stop(&mut self) {
        drop(self.thread.timer.lock().expect("not poisoned").take());
        self.thread.ring.detach();
    }
}

impl Drop for Sampling {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A thread's samples so far, read on the thread while it runs (in a host call), as the
/// marks of the benchmarks a harness names take them.
#[derive(Clone)]
pub(super) struct SoFar {
    thread: Arc<Thread>,
    shared: Arc<Shared>,
}

impl SoFar {
    /// The samples taken so far.
    pub(super) fn samples(&self) -> StackSamples {
        self.thread.drain(&self.shared.map);
        let tally = self.thread.tally.lock().expect("not poisoned").clone();
        tally.finish(self.thread.ring.dropped())
    }
}

/// What a thread's samples add up to so far.
#[derive(Clone, Default)]
struct Tally {
    /// Each distinct sample: (its frames' function ids outermost first, its leaf line,
    /// whether it was in host code) with its count and time.
    stacks: HashMap<(Vec<u32>, u32, bool), (u64, u64)>,
    samples: StackSamples,
}

impl Tally {
    /// One sample, its addresses mapped with `map`.
    fn add(&mut self, map: &CodeMap, record: Record) {
        let Record {
            ns,
            outside,
            host,
            truncated,
            pcs,
        } = record;
        let s = &mut self.samples;
        s.taken += 1;
        if truncated {
            s.truncated += 1;
            s.truncated_ns += ns;
            return;
        }
        // The innermost wasm frame: where the interrupted instruction is, or, in host code
        // (or in a trampoline of wasmtime's on the way to it), the call that left the
        // module's code (a return address is just past its call); then its callers' return
        // addresses.
        let from = |n: usize| pcs.get(n..).unwrap_or_default();
        let at_call = |pcs: &[usize]| pcs.first().and_then(|&ret| map.locate(ret - 1));
        let (leaf, callers) = match (outside, host) {
            (true, _) => (None, from(0)),
            (false, true) => (at_call(pcs), from(1)),
            (false, false) => match pcs.first().and_then(|&pc| map.locate(pc)) {
                Some(place) => (Some(place), from(1)),
                None => (at_call(from(1)), from(2)),
            },
        };
        let Some(leaf) = leaf else {
            s.outside += 1;
            s.outside_ns += ns;
            return;
        };
        if leaf.what == meta::PROBE_CODE {
            s.in_probes += 1;
            return;
        }
        // The callers' frames, up to the first return into code of no function (the
        // trampoline the host entered through).
        let mut frames: Vec<u32> = callers
            .iter()
            .map_while(|&ret| map.locate(ret - 1).map(|caller| caller.function))
            .collect();
        frames.reverse();
        frames.push(leaf.function);
        let entry = self.stacks.entry((frames, leaf.what, host)).or_default();
        entry.0 += 1;
        entry.1 += ns;
    }

    /// The thread's samples, with what the ring dropped.
    fn finish(mut self, (dropped, dropped_ns): (u64, u64)) -> StackSamples {
        self.samples.dropped = dropped;
        self.samples.dropped_ns = dropped_ns;
        let mut stacks: Vec<StackSample> = self
            .stacks
            .into_iter()
            .map(|((frames, line, in_host), (samples, ns))| StackSample {
                frames,
                line,
                in_host,
                samples,
                ns,
            })
            .collect();
        stacks.sort_by(|a, b| (&a.frames, a.line, a.in_host).cmp(&(&b.frames, b.line, b.in_host)));
        self.samples.stacks = stacks;
        self.samples
    }
}
