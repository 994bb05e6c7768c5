//! wasi-threads in the embedded host: a module that imports `wasi.thread-spawn` (what
//! `wasm32-wasip1-threads` builds) runs each thread in an instance of its own, on an OS
//! thread of its own, all sharing the program's imported shared memory, as the wasi-threads
//! proposal specifies. Each instance has its own profiler memory and globals, so each
//! thread records its own profile, and the program's shared memory is never touched.
//!
//! Why here and not `wasmtime-wasi-threads`: that crate is published up to 46.0.3, for
//! wasmtime 46, and cargo-wasmprof pins wasmtime 48 (the newest that builds on our rustc);
//! moving back two releases would cost the fixes and the WASI preview-1 implementation we
//! use. What it does is small, and doing it ourselves lets the host end a program the
//! way a profiler must: collect every thread's state, also of threads that never end.
//!
//! How a program ends: when `_start` returns or exits, or any thread traps or calls
//! `proc_exit`, the whole program ends (wasi-threads' rule). The host then raises
//! wasmtime's epoch, so every thread that runs wasm traps at its next function entry or
//! loop header and collects its own state. A thread blocked in `memory.atomic.wait` (an
//! idle pool worker, a `join`) would never get there: its wait probe (see
//! `instrument::runtime::wait`) noted where it stands before it blocked, so the host reads
//! its state from its profiler memory while it waits (exact: a waiting thread changes
//! nothing), then wakes it with `memory.atomic.notify` so that it traps and its OS thread
//! ends. A thread blocked in a host call (reading stdin) that does not return within
//! [`STOP_GRACE`] is reported as lost.
//!
//! WASI state: each thread gets a WASI context built as the main thread's (the same
//! arguments, environment, stdio and preopened directory), so printing and reading files
//! work on every thread; a file descriptor opened on one thread is not open on another
//! (wasmtime-wasi's preview-1 context cannot be shared between stores).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use wasmtime::{Engine, InstancePre, Linker, Module, SharedMemory, Store};
use wasmtime_wasi::p1::WasiP1Ctx;

use super::instance::{
    collect, frames_of, link_host, populate_for_writing, shared_bytes, shared_u32, shared_u64,
    wasi_context, Compiled, Ending, HostLinks, RunEnd,
};
use super::sampler::{SampleTarget, Sampler, Targets};
use super::stacks::{Exits, StackSampler};
use super::{Marks, Outcome, RunConfig};
use crate::clock::Clock;
use crate::layout::{self, Layout};
use crate::meta::{self, Meta};
use crate::profile::{Dump, StackSamples, ThreadDump};

/// How long the host waits, once the program has ended, for its threads to stop.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// wasi-threads' largest thread id (ids are positive and below 2^29).
const MAX_TID: u32 = 0x1FFF_FFFF;

/// What every thread's instance is made from, and the threads' states.
struct Program {
    engine: Engine,
    module: Module,
    /// The program's imported memories (shared): `(module, name, memory)`.
    memories: Vec<(String, String, SharedMemory)>,
    config: RunConfig,
    links: HostLinks,
    layout: Layout,
    meta: Option<Meta>,
    clock: Clock,
    next_tid: AtomicU32,
    /// Every thread, in the order they started (the main thread's first).
    threads: Mutex<Vec<Arc<WasmThread>>>,
    /// Set once the program has ended: epoch traps after it are the host's doing.
    ending: AtomicBool,
    /// The first end: the main thread's return or exit, or any thread's trap or exit.
    ended: Mutex<Option<mpsc::Sender<Ending>>>,
    /// The sampled metric's targets: one per live thread.
    targets: Targets,
    /// The module linked to WASI, the clock, `thread-spawn` and the shared memories: every
    /// thread's instance is made from it.
    pre: OnceLock<InstancePre<WasiP1Ctx>>,
    /// The stack sampler, which samples each thread on it.
    stacks: Option<StackSampler>,
}

/// One thread: its id, its profiler memory, and its state once collected.
struct WasmThread {
    tid: u32,
    profiler: SharedMemory,
    /// What the thread left: collected by itself when it stopped, or by the host from its
    /// profiler memory while it waited.
    state: Mutex<Option<ThreadDump>>,
    /// The thread's wasm code has stopped running (returned or trapped) and its state is
    /// in `state`.
    stopped: AtomicBool,
}

/// Runs a threaded instrumented module (or, without a meta, a plain one) to its end.
pub(super) fn run(compiled: Compiled, config: &RunConfig) -> anyhow::Result<Outcome> {
    let sampled = compiled.links.sampled;
    let (program, ends) = Program::new(compiled, config)?;
    let pre = program.link()?;
    let _ = program.pre.set(pre);
    let interval = program.interval();
    let sampler = (sampled && !interval.is_zero())
        .then(|| Sampler::start(program.targets.clone(), interval, None));
    let started = Instant::now();
    // The main thread: `_start` on a thread of its own, so that the host can end the
    // program whatever it blocks in.
    let (ready, is_ready) = mpsc::channel();
    {
        let program = Arc::clone(&program);
        std::thread::spawn(move || program.thread(0, None, ready));
    }
    // The main thread's instance is ready, or it failed to instantiate.
    is_ready
        .recv()
        .context("the program's main thread ended early")??;
    let (exit_code, trap) = ends
        .recv()
        .context("the program's threads ended without a word")?
        .exit();
    let wall_ns = started.elapsed().as_nanos() as u64;
    program.ending.store(true, Ordering::SeqCst);
    program.engine.increment_epoch();
    let lost = program.stop_all();
    if let Some(sampler) = sampler {
        sampler.stop();
    }
    let all = program.threads.lock().expect("not poisoned").clone();
    let mut states: Vec<ThreadDump> = all
        .iter()
        .filter_map(|thread| thread.state.lock().expect("not poisoned").take())
        .collect();
    states.sort_by_key(|s| s.tid);
    let main = states
        .iter()
        .find(|s| s.tid == 0)
        .and_then(|s| s.dump.clone());
    Ok(Outcome {
        exit_code,
        trap,
        dump: main,
        wall_ns,
        threads: states,
        lost_threads: lost,
        ran: None,
        marks: Marks::default(),
        plain_samples: None,
    })
}

impl Program {
    /// The sampling interval of the program's sampler.
    fn interval(&self) -> std::time::Duration {
        let sampler = self.meta.as_ref().map_or(Default::default(), |m| m.sampler);
        self.config.interval(sampler)
    }

    /// The program `compiled` is, run as `config` says, with its imported shared memories
    /// made; and where it hears how it ended.
    fn new(
        compiled: Compiled,
        config: &RunConfig,
    ) -> anyhow::Result<(Arc<Program>, mpsc::Receiver<Ending>)> {
        let Compiled {
            engine,
            module,
            meta,
            links,
            code_map,
            ..
        } = compiled;
        let memories = module
            .imports()
            .filter_map(|import| match import.ty() {
                wasmtime::ExternType::Memory(ty) if ty.is_shared() => Some(
                    SharedMemory::new(&engine, ty)
                        .map(|m| (import.module().to_string(), import.name().to_string(), m)),
                ),
                _ => None,
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(anyhow::Error::from)?;
        let layout = meta
            .as_ref()
            .map_or(Layout::new(0, 0, 0, 0, 0, 0), |m| m.layout);
        let (ended, ends) = mpsc::channel();
        let interval = config.interval(meta.as_ref().map_or(Default::default(), |m| m.sampler));
        let program = Arc::new(Program {
            engine,
            module,
            memories,
            config: config.clone(),
            links,
            layout,
            meta,
            clock: Clock::start(config.clock),
            next_tid: AtomicU32::new(1),
            threads: Mutex::new(Vec::new()),
            ending: AtomicBool::new(false),
            ended: Mutex::new(Some(ended)),
            targets: Targets::default(),
            pre: OnceLock::new(),
            stacks: code_map
                .filter(|_| !interval.is_zero())
                .map(|map| StackSampler::start(map, interval)),
        });
        Ok((program, ends))
    }

    /// Runs one thread: the main thread (`tid` 0: `_start`) or a spawned one
    /// (`wasi_thread_start(tid, arg)`), then collects its state and, if it ended the
    /// program, says so. `ready` hears once the instance exists (or why it does not).
    fn thread(
        self: Arc<Self>,
        tid: u32,
        arg: Option<i32>,
        ready: mpsc::Sender<anyhow::Result<()>>,
    ) {
        let (mut store, instance, thread) = match self.instantiate(tid) {
            Ok(made) => {
                let _ = ready.send(Ok(()));
                made
            }
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let entry = match arg {
            None => "_start",
            Some(_) => meta::THREAD_START,
        };
        let sampling = match (&self.stacks, instance.get_func(&mut store, entry)) {
            (Some(sampler), Some(func)) => sampler
                .sample_this_thread(Exits::of(&mut store, &func))
                .ok(),
            _ => None,
        };
        let result = match arg {
            None => instance
                .get_typed_func::<(), ()>(&mut store, entry)
                .and_then(|start| start.call(&mut store, ())),
            Some(arg) => instance
                .get_typed_func::<(i32, i32), ()>(&mut store, entry)
                .and_then(|start| start.call(&mut store, (tid as i32, arg))),
        };
        let stacks = sampling.map(|s| s.finish());
        let stopped_by_host = self.ending.load(Ordering::SeqCst);
        let ending = Ending::of(&result);
        // A trap once the program has ended is the host's epoch, not the thread's own.
        let trap = match &ending {
            Ending::Trapped(trap) if !stopped_by_host => Some(trap.clone()),
            _ => None,
        };
        let how = match (&ending, stopped_by_host) {
            (Ending::Returned, _) => "returned".to_string(),
            (_, true) => "stopped at the program's end".to_string(),
            (Ending::Exited(code), false) => format!("exited with {code}"),
            (Ending::Trapped(trap), false) => format!("trapped: {trap}"),
        };
        let ended = (how, trap.clone(), stacks);
        self.keep_state(&thread, &mut store, &instance, &result, ended);
        // Only now: the host, ending the program, waits for every thread's state.
        thread.stopped.store(true, Ordering::SeqCst);
        self.targets.remove(tid);
        if let Some(end) = program_end(tid, ending, trap) {
            if let Some(ended) = self.ended.lock().expect("not poisoned").take() {
                let _ = ended.send(end);
            }
        }
    }

    /// Keeps the state `thread` left in `instance` once its code has stopped (`result`,
    /// ended as `how` says, with its `trap` and the stack sampler's samples), unless the
    /// host read it while the thread waited: that one is the state at the program's end,
    /// before the host woke the thread, and gets only the samples.
    fn keep_state(
        &self,
        thread: &WasmThread,
        store: &mut Store<WasiP1Ctx>,
        instance: &wasmtime::Instance,
        result: &wasmtime::Result<()>,
        (how, trap, stacks): (String, Option<String>, Option<StackSamples>),
    ) {
        let mut state = thread.state.lock().expect("not poisoned");
        if let Some(read) = state.as_mut() {
            if let Some(dump) = read.dump.as_mut() {
                dump.stacks = dump.stacks.take().or(stacks);
            }
            return;
        }
        let end = RunEnd {
            ended: self.clock.reader()() as u64,
            frames: frames_of(result, self.meta.as_ref()),
            stacks,
        };
        let dump = collect(store, instance, &self.links, self.clock, end);
        *state = Some(ThreadDump {
            tid: thread.tid,
            dump: dump.ok().flatten(),
            how,
            trap,
        });
    }

    /// The module linked once for every thread. `thread-spawn` reaches the program through
    /// a weak reference (the program holds the linked module); the sampler's test hook
    /// samples the thread that calls it, through its caller's profiler memory.
    fn link(self: &Arc<Self>) -> anyhow::Result<InstancePre<WasiP1Ctx>> {
        let mut linker: Linker<WasiP1Ctx> = Linker::new(&self.engine);
        let links = HostLinks {
            hooked: false,
            ..self.links
        };
        link_host(&mut linker, &links, self.clock, &Arc::default())?;
        if self.links.hooked {
            let layout = self.layout;
            linker.func_wrap(
                super::sampler::HOOK.0,
                super::sampler::HOOK.1,
                move |mut caller: wasmtime::Caller<'_, WasiP1Ctx>| {
                    if let Some(wasmtime::Extern::SharedMemory(memory)) =
                        caller.get_export(meta::MEMORY_EXPORT)
                    {
                        SampleTarget::new(memory, layout)
                            .take(super::sampler::HOOK_SAMPLE_NS, false);
                    }
                },
            )?;
        }
        let program = Arc::downgrade(self);
        linker.func_wrap(
            meta::THREAD_SPAWN.0,
            meta::THREAD_SPAWN.1,
            move |arg: i32| -> i32 { program.upgrade().map_or(-1, |p| p.spawn(arg)) },
        )?;
        // A shared memory belongs to the engine, not to a store: the one this defines it
        // with only checks its type.
        let scratch = Store::new(
            &self.engine,
            wasmtime_wasi::WasiCtxBuilder::new().build_p1(),
        );
        for (module, name, memory) in &self.memories {
            linker.define(&scratch, module, name, memory.clone())?;
        }
        linker
            .instantiate_pre(&self.module)
            .map_err(anyhow::Error::from)
            .context("cannot link the module")
    }

    /// A store and an instance for thread `tid`, registered.
    fn instantiate(
        self: &Arc<Self>,
        tid: u32,
    ) -> anyhow::Result<(Store<WasiP1Ctx>, wasmtime::Instance, Arc<WasmThread>)> {
        let mut store = Store::new(&self.engine, wasi_context(&self.config)?);
        // Raised when the program ends: every thread then traps at its next check.
        store.set_epoch_deadline(1);
        store.epoch_deadline_trap();
        let instance = self
            .pre
            .get()
            .context("the program is not linked")?
            .instantiate(&mut store)
            .map_err(anyhow::Error::from)
            .context("cannot instantiate the module")?;
        let profiler = match instance.get_export(&mut store, meta::MEMORY_EXPORT) {
            Some(wasmtime::Extern::SharedMemory(m)) => m,
            _ => SharedMemory::new(&self.engine, wasmtime::MemoryType::shared(1, 1))
                .map_err(anyhow::Error::from)?,
        };
        let data = profiler.data();
        populate_for_writing(data.as_ptr().cast(), data.len(), self.layout.nodes_off);
        if self.links.sampled {
            self.targets
                .add(tid, SampleTarget::new(profiler.clone(), self.layout));
        }
        let thread = Arc::new(WasmThread {
            tid,
            profiler,
            state: Mutex::new(None),
            stopped: AtomicBool::new(false),
        });
        self.threads
            .lock()
            .expect("not poisoned")
            .push(Arc::clone(&thread));
        Ok((store, instance, thread))
    }

    /// `wasi.thread-spawn(arg)`: a new thread running `wasi_thread_start(tid, arg)`; its id,
    /// or -1 when none can start (the program is ending, the ids are used up, the instance
    /// fails).
    fn spawn(self: &Arc<Self>, arg: i32) -> i32 {
        if self.ending.load(Ordering::SeqCst) {
            return -1;
        }
        let tid = self.next_tid.fetch_add(1, Ordering::SeqCst);
        if tid > MAX_TID {
            return -1;
        }
        let (ready, is_ready) = mpsc::channel();
        let program = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("wasm thread {tid}"))
            .spawn(move || program.thread(tid, Some(arg), ready));
        match spawned.ok().and_then(|_| is_ready.recv().ok()) {
            Some(Ok(())) => tid as i32,
            _ => -1,
        }
    }

    /// Once the program has ended: reads the state of every thread that waits, wakes it,
    /// and waits up to [`STOP_GRACE`] for every thread to stop. Returns the ids of the
    /// threads whose state it could not get (blocked in a host call).
    fn stop_all(&self) -> Vec<u32> {
        // A module without the profiler leaves nothing to collect, and its waits have no
        // probe that says where they wait: its blocked threads stay blocked, as they would
        // in a process that exits.
        if !self.links.profiled {
            return Vec::new();
        }
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            let all = self.threads.lock().expect("not poisoned").clone();
            let mut pending = Vec::new();
            for thread in &all {
                if thread.stopped.load(Ordering::SeqCst) {
                    continue;
                }
                let mut state = thread.state.lock().expect("not poisoned");
                if state.is_none() {
                    *state = self.read_waiting(thread);
                }
                let waiting_on = state
                    .is_some()
                    .then(|| waiting_address(&thread.profiler))
                    .flatten();
                drop(state);
                // Wake it, so that it traps and its OS thread ends.
                if let Some(addr) = waiting_on {
                    for (_, _, memory) in &self.memories {
                        let _ = memory.atomic_notify(addr, u32::MAX);
                    }
                }
                pending.push(thread.tid);
            }
            if pending.is_empty() {
                return Vec::new();
            }
            if Instant::now() >= deadline {
                // Threads never stopped: those the host read while they waited are whole.
                return all
                    .iter()
                    .filter(|s| pending.contains(&s.tid))
                    .filter(|s| s.state.lock().expect("not poisoned").is_none())
                    .map(|s| s.tid)
                    .collect();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The state of a thread that is blocked in a wait, read from its profiler memory;
    /// `None` when it is not waiting (or woke while it was read).
    fn read_waiting(&self, thread: &WasmThread) -> Option<ThreadDump> {
        let before = waiting_word(&thread.profiler)?;
        if before % 2 == 0 {
            return None;
        }
        let memory = shared_bytes(&thread.profiler, &self.links);
        // The word changes the moment the thread wakes: unchanged, the copy is whole.
        if waiting_word(&thread.profiler)? != before {
            return None;
        }
        let word = |at: u32, n: usize| {
            let at = at as usize;
            memory.get(at..at + n).map(|b| {
                let mut buf = [0u8; 8];
                buf[..n].copy_from_slice(b);
                u64::from_le_bytes(buf)
            })
        };
        let cur = word(layout::HDR_WAIT_CUR, 4)? as u32;
        let end = match self.links.instructions {
            true => word(layout::HDR_WAIT_INSTRUCTIONS, 8)?,
            false => self.clock.reader()() as u64,
        };
        Some(ThreadDump {
            tid: thread.tid,
            how: "waiting when the program ended".to_string(),
            trap: None,
            dump: Some(Dump {
                memory,
                cur,
                ticks_per_ns: self.clock.ticks_per_ns(),
                clock: if self.links.timed {
                    self.clock.name()
                } else {
                    "none"
                }
                .to_string(),
                end: (self.links.timed || self.links.instructions).then_some(end),
                frames: Vec::new(),
                // The thread's own samples join its state when it stops.
                stacks: None,
                no_sampler: None,
            }),
        })
    }
}

/// How thread `tid`'s `ending` (its own `trap`, not the host's epoch) ends the program, if it
/// does: the main thread's return, any thread's exit or trap.
fn program_end(tid: u32, ending: Ending, trap: Option<String>) -> Option<Ending> {
    match ending {
        Ending::Returned if tid == 0 => Some(Ending::Returned),
        Ending::Exited(code) => Some(Ending::Exited(code)),
        Ending::Trapped(_) => trap.map(|trap| {
            Ending::Trapped(match tid {
                0 => trap,
                tid => format!("thread {tid}: {trap}"),
            })
        }),
        Ending::Returned => None,
    }
}

/// The wait probe's word: odd while the thread waits, changed by each wait and wake.
fn waiting_word(memory: &SharedMemory) -> Option<u32> {
    shared_u32(memory, layout::HDR_WAITING)
}

/// The address a waiting thread waits on (written before the wait probe's word, which was
/// read before).
fn waiting_address(memory: &SharedMemory) -> Option<u64> {
    shared_u64(memory, layout::HDR_WAIT_ADDR)
}
