//! The sampler of the sampled time metric ([`Metric::Time`]), for the embedded host: a
//! thread beside the program's that, every interval, reads the sample word the probes keep
//! ([`layout::HDR_WHERE`]: which context node runs, or [`layout::IN_PROBES`]) and credits
//! the time since its previous sample to that node, in the node's sample fields. The
//! program's thread makes no host call and reads no clock for it.
//!
//! Why a thread and a shared memory rather than wasmtime's epoch callback on the
//! program's own thread: the callback runs at function entries and loop headers, before
//! the entry probe has moved to the callee's context, so a leaf function without loops
//! would never be found running and its time would land on its caller. The thread sees
//! the word at any instruction. The profiler's memory is a wasm shared memory then, so
//! both threads access it soundly: the probes with plain stores, the sampler with atomics
//! (it writes only the sample fields, which the probes never touch in this metric).
//!
//! The same accounting runs under node, in the worker of `templates/wasmprof-runtime.js`.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::layout::{self, Layout};
#[cfg(doc)]
use crate::meta::Metric;
use crate::sampling::{self, DENSE_PHASE};

/// Import module and name of the test hook: a module that imports `() -> ()` under these
/// names gets a sample taken, of [`HOOK_SAMPLE_NS`], whenever it calls it, so that tests
/// can check where samples land without timing anything.
pub const HOOK: (&str, &str) = ("wasmprof-test", "sample");
/// The time one hook sample stands for.
pub const HOOK_SAMPLE_NS: u64 = 1000;

/// The profiler's shared memory, as the sampler sees it.
#[derive(Clone)]
pub(super) struct SampleTarget {
    memory: wasmtime::SharedMemory,
    layout: Layout,
}

impl SampleTarget {
    /// The sampler's view of `memory`, laid out as `layout` says.
    pub(super) fn new(memory: wasmtime::SharedMemory, layout: Layout) -> SampleTarget {
        SampleTarget { memory, layout }
    }

    fn data(&self) -> &[UnsafeCell<u8>] {
        self.memory.data()
    }

    fn word32(&self, at: u32) -> Option<&AtomicU32> {
        let cell = self.data().get(at as usize..at as usize + 4)?;
        let ptr = cell.as_ptr() as *const AtomicU32;
        // SAFETY: four bytes of the shared memory, which lives as long as `self.memory`
        // and which every thread accesses only as wasm's shared memory allows; aligned
        // (checked).
        (ptr.align_offset(4) == 0).then(|| unsafe { &*ptr })
    }

    fn word64(&self, at: u32) -> Option<&AtomicU64> {
        let cell = self.data().get(at as usize..at as usize + 8)?;
        let ptr = cell.as_ptr() as *const AtomicU64;
        // SAFETY: as in `word32`.
        (ptr.align_offset(8) == 0).then(|| unsafe { &*ptr })
    }

    fn bump(&self, at: u32, by: u64) {
        if let Some(word) = self.word64(at) {
            word.fetch_add(by, Ordering::Relaxed);
        }
    }

    /// Takes one sample that stands for `ns` nanoseconds: credits them to the context node
    /// the sample word names, or counts the sample as the probes' or as idle; `late`
    /// counts it as having come late too.
    pub(super) fn take(&self, ns: u64, late: bool) {
        let Some(word) = self.word32(layout::HDR_WHERE) else {
            return;
        };
        let node = word.load(Ordering::Relaxed);
        self.bump(layout::HDR_SAMPLES, 1);
        if late {
            self.bump(layout::HDR_LATE_SAMPLES, 1);
        }
        let l = &self.layout;
        if node == layout::IN_PROBES {
            self.bump(layout::HDR_PROBE_SAMPLES, 1);
        } else if node == 0 || node >= l.max_nodes() {
            self.bump(layout::HDR_IDLE_SAMPLES, 1);
        } else {
            let at = l.node_at(node);
            self.bump(at + layout::NODE_SAMPLES, 1);
            self.bump(at + layout::NODE_SAMPLE_NS, ns);
        }
    }
}

/// Makes this thread's sleeps as precise as the kernel allows (Linux's default timer slack
/// adds 50 µs to each).
fn least_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this thread's slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// The CPU this thread runs on now, where the system says (Linux).
pub(super) fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu takes nothing and returns a CPU number or -1.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Keeps this thread off `cpu` where it may run on another (Linux): the sampler's thread
/// off the program's. A new thread starts on its parent's CPU, and the spin of the dense
/// phase never sleeps, so the scheduler could leave the two on one CPU for a whole short
/// run; the sampler then ran only when the program's time slice ended, a few samples in a
/// run of 8 ms (BENCHMARKS.md, "Run time in the embedded wasmtime").
fn keep_off_cpu(cpu: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: a CPU set of this thread's, read, changed and set back with its own size.
    unsafe {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut set) != 0
            || cpu >= 8 * size
            || !libc::CPU_ISSET(cpu, &set)
            || libc::CPU_COUNT(&set) < 2
        {
            return;
        }
        libc::CPU_CLR(cpu, &mut set);
        libc::sched_setaffinity(0, size, &set);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
}

/// The profilers' memories a sampler samples: one per live thread of the program, by
/// thread id.
#[derive(Clone, Default)]
pub(super) struct Targets(Arc<Mutex<Vec<(u32, SampleTarget)>>>);

impl Targets {
    /// Samples thread `tid`'s `target` from now on.
    pub(super) fn add(&self, tid: u32, target: SampleTarget) {
        self.0.lock().expect("not poisoned").push((tid, target));
    }

    /// Stops sampling thread `tid`.
    pub(super) fn remove(&self, tid: u32) {
        self.0
            .lock()
            .expect("not poisoned")
            .retain(|(t, _)| *t != tid);
    }

    /// Takes a sample of every thread; whether there was any.
    fn take(&self, ns: u64, late: bool) -> bool {
        let targets = self.0.lock().expect("not poisoned");
        for (_, target) in targets.iter() {
            target.take(ns, late);
        }
        !targets.is_empty()
    }
}

/// A running sampler thread. Dropped without [`Sampler::stop`] (the program could not
/// start), it tells its thread to stop and leaves it to end alone.
pub(super) struct Sampler {
    stop: Arc<AtomicBool>,
    up: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling `targets` (each thread's) every `interval`, on the schedule of
    /// [`crate::sampling`]. In the dense phase it waits by spinning; then it sleeps between
    /// samples, with the timer slack at its least on Linux (where a sleep would otherwise
    /// last 50 µs more). Measured on this project's 2-vCPU machines: sleeps of 10 µs slowed
    /// programs by up to half (the woken thread competes for the program's CPU), spinning
    /// for 20 ms and sleeps of 100 µs did not measurably; but a spin that never yields kept
    /// wasmtime-wasi's blocking helper threads (file system calls) off the CPU, so a `stat`
    /// took 1 ms instead of 0.15: the spin yields. It keeps off `program_cpu`, the CPU of
    /// the program's thread when there is one ([`keep_off_cpu`]). It returns once the
    /// thread runs ([`Sampler::spawn`], then [`Sampler::wait_until_up`]).
    pub(super) fn start(
        targets: Targets,
        interval: Duration,
        program_cpu: Option<usize>,
    ) -> Sampler {
        let sampler = Sampler::spawn(targets, interval, program_cpu);
        sampler.wait_until_up();
        sampler
    }

    /// Starts the thread as [`Sampler::start`] does, without waiting for it to run: a
    /// thread took 60-200 µs to come up on the M3 machine of BENCHMARKS.md, which the
    /// program's thread can spend instantiating the module; `targets` can be added to later.
    pub(super) fn spawn(
        targets: Targets,
        interval: Duration,
        program_cpu: Option<usize>,
    ) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let up = Arc::new(AtomicBool::new(false));
        let is_up = Arc::clone(&up);
        let thread = std::thread::spawn(move || {
            least_timer_slack();
            if let Some(cpu) = program_cpu {
                keep_off_cpu(cpu);
            }
            is_up.store(true, Ordering::Release);
            let mut began = Instant::now();
            let dense = sampling::dense_wait(crate::meta::Sampler::Word, interval);
            let mut last = began;
            while !stopped.load(Ordering::Relaxed) {
                let in_dense_phase = last - began < DENSE_PHASE;
                let wait = if in_dense_phase { dense } else { interval };
                let now = if wait == dense {
                    // The dense phase's waits end with it: a long interval's tenth would
                    // otherwise spin past it (100 ms for an interval of a second).
                    let mut deadline = last + dense;
                    if in_dense_phase {
                        deadline = deadline.min(began + DENSE_PHASE);
                    }
                    let mut now = Instant::now();
                    while now < deadline && !stopped.load(Ordering::Relaxed) {
                        std::thread::yield_now();
                        now = Instant::now();
                    }
                    now
                } else {
                    std::thread::sleep(interval);
                    Instant::now()
                };
                let elapsed = now.duration_since(last);
                if !targets.take(elapsed.as_nanos() as u64, sampling::is_late(wait, elapsed)) {
                    // The dense phase starts with the first thread to sample.
                    began = now;
                }
                last = now;
            }
        });
        Sampler {
            stop,
            up,
            thread: Some(thread),
        }
    }

    /// Waits until the thread runs. The program starts once the sampler runs: a new thread
    /// may otherwise get its first time slice after a short run has ended. This thread
    /// waits without sleeping: woken by the sampler, the scheduler would place it on the
    /// sampler's CPU, and it had kept it there for whole short runs.
    pub(super) fn wait_until_up(&self) {
        let Some(thread) = &self.thread else { return };
        while !self.up.load(Ordering::Acquire) && !thread.is_finished() {
            std::thread::yield_now();
        }
    }

    /// Stops the thread and waits for it.
    pub(super) fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
