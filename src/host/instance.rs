//! A WASI program in wasmtime, as both ways of running one use it (a single-threaded
//! program in `embedded`, each thread of a wasi-threads program in `threads`): the module
//! compiled ([`compile`]), what the host links into it besides WASI ([`HostLinks`],
//! [`link_host`]), the program's WASI context, how a run ended ([`Ending`]), and the
//! profiler's state read back out of an instance once its code has stopped ([`collect`]).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use wasmtime::{AsContext, AsContextMut, Caller, Engine, Linker, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use super::compiled::{self, engine_config, BACKTRACE_FRAMES};
use super::sampler::{self, SampleTarget};
use super::stacks::CodeMap;
use super::RunConfig;
use crate::clock::Clock;
use crate::layout::{self, Layout};
use crate::meta::{self, Meta, Sampler};
use crate::profile::{Dump, StackSamples};

/// Exit status the wasmtime CLI uses for a trap on Unix (128 + SIGABRT).
pub const TRAP_EXIT_CODE: i32 = 134;

/// The most bytes of the profiler's memory [`populate_for_writing`] faults in: the regions
/// before the context nodes are a few hundred KiB for a test binary, but a module with
/// hundreds of thousands of indirect call sites gets a dynamic-arc table of up to 64 MiB.
const POPULATE_AT_MOST: usize = 16 << 20;

/// Faults in, writable, the pages of the profiler's memory (`accessible` bytes from `base`)
/// below its context nodes (`below`), before the program runs: Linux's
/// `MADV_POPULATE_WRITE`, which leaves every value as it is; nothing elsewhere. The probes
/// touch most of those pages first with a read (an increment, a lookup), which maps the
/// kernel's zero page, and the write after it replaces that page: a second fault and a
/// flush of every CPU's TLB entries for the page, which interrupts the CPU of the word
/// sampler's thread too (BENCHMARKS.md, "Run time in the embedded wasmtime": a 0.5 ms test
/// binary took 1.9 ms with `time` for those flushes, 0.8 ms with its pages faulted in).
/// The live table's later chunks, above the nodes, are written first by the probes that
/// grow it, on every host (`instrument::probes::live_growth`).
pub(super) fn populate_for_writing(base: *const u8, accessible: usize, below: u32) {
    let len = accessible.min(below as usize).min(POPULATE_AT_MOST);
    #[cfg(target_os = "linux")]
    if !base.is_null() && len > 0 {
        // SAFETY: `base` is the start of a wasm memory's accessible bytes, page-aligned,
        // and `len` stays inside them; MADV_POPULATE_WRITE changes no byte. A kernel
        // without it (before 5.14) returns EINVAL, and the probes fault the pages in.
        unsafe {
            libc::madvise(base as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (base, len);
}

/// How a call into the program (`_start`, a thread's entry point) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ending {
    /// It returned.
    Returned,
    /// It called `proc_exit` with this code.
    Exited(i32),
    /// It trapped (or wasmtime stopped it), with this message.
    Trapped(String),
}

impl Ending {
    /// How `result` ended.
    pub(super) fn of(result: &wasmtime::Result<()>) -> Ending {
        match result {
            Ok(()) => Ending::Returned,
            Err(error) => match error.downcast_ref::<I32Exit>() {
                Some(exit) => Ending::Exited(exit.0),
                None => Ending::Trapped(trap_message(error)),
            },
        }
    }

    /// The program's exit code and trap message, had it ended this way.
    pub(super) fn exit(&self) -> (i32, Option<String>) {
        match self {
            Ending::Returned => (0, None),
            Ending::Exited(code) => (*code, None),
            Ending::Trapped(trap) => (TRAP_EXIT_CODE, Some(trap.clone())),
        }
    }
}

/// A module compiled for a run: the engine, the module and its state module (if it
/// carries one), its meta, and what the host links into it.
pub(super) struct Compiled {
    pub(super) engine: Engine,
    pub(super) module: Module,
    pub(super) state_module: Option<Module>,
    pub(super) meta: Option<Meta>,
    pub(super) links: HostLinks,
    /// For the stack sampler, what the module's code addresses are.
    pub(super) code_map: Option<CodeMap>,
}

/// Compiles `wasm` (and its state module) in an engine of its own: with the epoch
/// interruption a `threaded` program's end needs (see `threads`). The code map is made for
/// a module whose stacks are sampled, and for an uninstrumented one whose run will be
/// (`sample_plain`).
pub(super) fn compile(
    wasm: &[u8],
    meta: Option<&Meta>,
    threaded: bool,
    sample_plain: bool,
) -> anyhow::Result<Compiled> {
    let mut engine_config = engine_config();
    // Single-threaded programs may use a shared memory, and the sampled time metric's
    // profiler memory is one.
    engine_config.shared_memory(true).wasm_threads(true);
    engine_config.epoch_interruption(threaded);
    let engine = Engine::new(&engine_config)
        .map_err(anyhow::Error::from)
        .context("cannot set up wasmtime")?;
    let compiled::Kept { code: module, file } = compiled::module(&engine, wasm)?;
    anyhow::ensure!(
        module.get_export("_start").is_some(),
        "the module exports no `_start` function, so it is not a WASI command"
    );
    let state_module = meta::custom_section(wasm, meta::STATE_SECTION)?
        .map(|bytes| compiled::module(&engine, bytes).map(|kept| kept.code))
        .transpose()
        .context("wasmtime could not compile the profiler's state module")?;
    let profiled = state_module.is_some() || module.get_export(meta::MEMORY_EXPORT).is_some();
    // The meta of a profiled module, read from it when the caller has none.
    let meta = match meta {
        Some(meta) => Some(meta.clone()),
        None if profiled => Meta::from_module(wasm).ok().flatten(),
        None => None,
    };
    let links = HostLinks::of(&module, state_module.as_ref(), meta.as_ref())?;
    let code_map = match (links.stacks, &meta) {
        (true, Some(meta)) => Some(CodeMap::new(&module, wasm, meta, file.as_deref())?),
        (_, None) if sample_plain => Some(CodeMap::plain(&module)?),
        _ => None,
    };
    Ok(Compiled {
        engine,
        module,
        state_module,
        meta,
        links,
        code_map,
    })
}

/// What the host links into an instrumented module besides WASI, and what it reads back.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct HostLinks {
    /// The module carries the profiler (its memory is exported, or a state module's).
    pub(super) profiled: bool,
    /// It imports the clock (exact time).
    pub(super) timed: bool,
    /// It counts instructions (the instructions metric).
    pub(super) instructions: bool,
    /// Its profiler memory is shared and read by the word sampler (the sampled time metric,
    /// [`Sampler::Word`]).
    pub(super) sampled: bool,
    /// Its stacks are sampled (the sampled time metric, [`Sampler::Stacks`]).
    pub(super) stacks: bool,
    /// It imports the sampler's test hook.
    pub(super) hooked: bool,
    /// Its profiler memory's layout (the meta's), by which a copy of the state stops at
    /// its end ([`Layout::state_end`]), as the JS runtime's dump does.
    pub(super) layout: Option<Layout>,
}

impl HostLinks {
    /// What `module` (and its `state_module`, which holds the profiler's memory when there
    /// is one) needs and leaves, with its `meta`. A sampled module must come with its meta:
    /// the sampler needs the layout.
    pub(super) fn of(
        module: &Module,
        state_module: Option<&Module>,
        meta: Option<&Meta>,
    ) -> anyhow::Result<HostLinks> {
        let imports = |pair: (&str, &str)| module.imports().any(|i| (i.module(), i.name()) == pair);
        let memory = state_module
            .unwrap_or(module)
            .get_export(meta::MEMORY_EXPORT);
        let shared = matches!(&memory, Some(wasmtime::ExternType::Memory(ty)) if ty.is_shared());
        let facts = meta.map(|m| m.metric.facts());
        let links = HostLinks {
            profiled: state_module.is_some() || memory.is_some(),
            timed: imports((meta::CLOCK_MODULE, meta::CLOCK_NAME)),
            instructions: facts.is_some_and(|f| f.probes.counter),
            sampled: facts.is_some_and(|f| f.sampled)
                && meta.is_some_and(|m| m.sampler == Sampler::Word)
                && shared,
            stacks: facts.is_some_and(|f| f.sampled)
                && meta.is_some_and(|m| m.sampler == Sampler::Stacks),
            hooked: imports(sampler::HOOK),
            layout: meta.map(|m| m.layout),
        };
        if links.sampled {
            meta.context("the instrumented module has no meta")?;
        }
        Ok(links)
    }

    /// How many of a profiler memory's `len` bytes hold its state, its header counting
    /// `nodes` nodes: up to the state's end; all of them without a layout.
    fn state_len(&self, len: usize, nodes: u32) -> usize {
        self.layout.map_or(len, |layout| {
            usize::try_from(layout.state_end(nodes)).map_or(len, |end| end.min(len))
        })
    }
}

/// Where a trap or an exit left the program, from wasmtime's backtrace, as function ids
/// outermost first: the profile's open stack where the metric keeps no context tree.
pub(super) fn frames_of(result: &wasmtime::Result<()>, meta: Option<&Meta>) -> Vec<u32> {
    let Some(meta) = meta else {
        return Vec::new();
    };
    backtrace_functions(result, meta, |_| true)
}

/// The frames of `result`'s backtrace that `ours` keeps, as function ids, outermost first,
/// led by [`meta::NO_FUNCTION`] where wasmtime cut the backtrace short.
pub(super) fn backtrace_functions(
    result: &wasmtime::Result<()>,
    meta: &Meta,
    ours: impl Fn(&wasmtime::FrameInfo) -> bool,
) -> Vec<u32> {
    let Some(backtrace) = result
        .as_ref()
        .err()
        .and_then(|error| error.downcast_ref::<wasmtime::WasmBacktrace>())
    else {
        return Vec::new();
    };
    let frames = backtrace.frames();
    let indices = frames.iter().filter(|f| ours(f)).map(|f| f.func_index());
    let mut functions = meta.frame_functions(indices.rev());
    if frames.len() >= BACKTRACE_FRAMES {
        functions.insert(0, meta::NO_FUNCTION);
    }
    functions
}

/// Links WASI preview 1 and, as the module needs them, the clock and the sampler's test
/// hook (which samples `target`, once set).
pub(super) fn link_host(
    linker: &mut Linker<WasiP1Ctx>,
    links: &HostLinks,
    clock: Clock,
    target: &Arc<OnceLock<SampleTarget>>,
) -> anyhow::Result<()> {
    wasmtime_wasi::p1::add_to_linker_sync(linker, |cx| cx)?;
    if links.timed {
        linker.func_wrap(meta::CLOCK_MODULE, meta::CLOCK_NAME, clock.reader())?;
    }
    if links.hooked {
        let target = Arc::clone(target);
        linker.func_wrap(sampler::HOOK.0, sampler::HOOK.1, move || {
            if let Some(target) = target.get() {
                target.take(sampler::HOOK_SAMPLE_NS, false);
            }
        })?;
    }
    Ok(())
}

/// The WASI context of a run: inherited stdio (unless not asked for) and environment, the
/// arguments, the working directory preopened as `.`.
pub(super) fn wasi_context(config: &RunConfig) -> anyhow::Result<WasiP1Ctx> {
    Ok(wasi_builder(config)?.build_p1())
}

/// The WASI context's builder for a run, as [`wasi_context`] says, for either version.
pub(super) fn wasi_builder(config: &RunConfig) -> anyhow::Result<WasiCtxBuilder> {
    let mut argv = vec![config.program.clone()];
    argv.extend(config.args.iter().cloned());
    let mut wasi = WasiCtxBuilder::new();
    if config.inherit_stdio {
        wasi.inherit_stdio();
    }
    wasi.inherit_env()
        .args(&argv)
        .preopened_dir(&config.dir, ".", FsPerms::ReadWrite)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("cannot open {} for the program", config.dir.display()))?;
    Ok(wasi)
}

/// What the host knows of how a thread's run ended, besides the profiler's memory: the
/// clock's reading then, where a trap left it (function ids, outermost first), and what
/// the stack sampler took.
pub(super) struct RunEnd {
    pub(super) ended: u64,
    pub(super) frames: Vec<u32>,
    pub(super) stacks: Option<StackSamples>,
}

/// The profiler's state in `instance` (the instrumented module or its state module) once
/// its code has stopped: the memory, the current context, and what closes the open
/// activations (the instruction counter, or the clock's reading), with what `end` says.
/// `None` for a module that is not profiled.
pub(super) fn collect<T: 'static>(
    store: &mut Store<T>,
    instance: &wasmtime::Instance,
    links: &HostLinks,
    clock: Clock,
    end: RunEnd,
) -> anyhow::Result<Option<Dump>> {
    if !links.profiled {
        return Ok(None);
    }
    let exports = STATE_EXPORTS.map(|name| instance.get_export(&mut *store, name));
    dump_of(store, exports, links, clock, end).map(Some)
}

/// The profiler's state while the program runs, read in a host call from `caller` (the
/// instrumented module, which holds its state): its open activations closed at this moment,
/// with the stack sampler's `stacks` so far.
pub(super) fn snapshot<T: 'static>(
    caller: &mut Caller<'_, T>,
    links: &HostLinks,
    clock: Clock,
    stacks: Option<StackSamples>,
) -> anyhow::Result<Dump> {
    let end = RunEnd {
        ended: clock.reader()() as u64,
        frames: Vec::new(),
        stacks,
    };
    let exports = STATE_EXPORTS.map(|name| caller.get_export(name));
    dump_of(caller, exports, links, clock, end)
}

/// What an instance exports of the profiler's state: its memory, the current context node,
/// the instruction counter (the instructions metric).
const STATE_EXPORTS: [&str; 3] = [
    meta::MEMORY_EXPORT,
    meta::CUR_EXPORT,
    meta::INSTRUCTIONS_EXPORT,
];

/// The dump of the profiler's state as its `exports` ([`STATE_EXPORTS`]) hold it in
/// `store`, with what `end` says.
fn dump_of(
    mut store: impl AsContextMut,
    [memory, cur, instructions]: [Option<wasmtime::Extern>; 3],
    links: &HostLinks,
    clock: Clock,
    end: RunEnd,
) -> anyhow::Result<Dump> {
    let memory = memory
        .and_then(|memory| memory_bytes(&mut store, &memory, links))
        .context("the instrumented module exports no profiler memory")?;
    let mut global =
        |export: Option<wasmtime::Extern>| Some(export?.into_global()?.get(&mut store));
    let cur = global(cur)
        .and_then(|value| value.i32())
        .context("the instrumented module exports no current-context global")?;
    // What closes the activations still open: the instruction counter, or the clock.
    let reading = match global(instructions).and_then(|value| value.i64()) {
        Some(count) => Some(count as u64),
        None => links.timed.then_some(end.ended),
    };
    Ok(Dump {
        memory,
        cur: cur as u32,
        ticks_per_ns: clock.ticks_per_ns(),
        clock: if links.timed { clock.name() } else { "none" }.to_string(),
        end: reading,
        frames: end.frames,
        stacks: end.stacks,
        no_sampler: None,
    })
}

/// The bytes of the profiler's memory that `instance` (the instrumented module, or its
/// state module) exports, a plain or (with the sampled time metric) a shared one.
pub fn profiler_memory<T: 'static>(
    store: &mut Store<T>,
    instance: &wasmtime::Instance,
) -> Option<Vec<u8>> {
    let memory = instance.get_export(&mut *store, meta::MEMORY_EXPORT)?;
    memory_bytes(store, &memory, &HostLinks::default())
}

/// A copy of the profiler's state in `memory`, a plain or a shared memory: its bytes up to
/// the end of its last node where `links` knows the layout, else all of them.
fn memory_bytes(
    store: impl AsContext,
    memory: &wasmtime::Extern,
    links: &HostLinks,
) -> Option<Vec<u8>> {
    match memory {
        wasmtime::Extern::Memory(memory) => {
            let data = memory.data(&store);
            let at = layout::HDR_NODE_COUNT as usize;
            let nodes = data
                .get(at..at + 4)
                .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("four bytes")));
            Some(data[..links.state_len(data.len(), nodes)].to_vec())
        }
        wasmtime::Extern::SharedMemory(memory) => Some(shared_bytes(memory, links)),
        _ => None,
    }
}

/// The u32 at byte `at` of a shared memory, read atomically: a word another thread stores
/// (a probe's, the wait probe's). `None` past the memory's end or where it is not aligned.
pub(super) fn shared_u32(memory: &wasmtime::SharedMemory, at: u32) -> Option<u32> {
    let cell = memory.data().get(at as usize..at as usize + 4)?;
    let ptr = cell.as_ptr() as *const AtomicU32;
    // SAFETY: four aligned bytes (checked) of a shared memory that outlives the borrow,
    // which every thread accesses only as wasm's shared memory allows.
    (ptr.align_offset(4) == 0).then(|| unsafe { &*ptr }.load(Ordering::SeqCst))
}

/// The u64 at byte `at` of a shared memory, read atomically, as [`shared_u32`] reads a u32.
pub(super) fn shared_u64(memory: &wasmtime::SharedMemory, at: u32) -> Option<u64> {
    let cell = memory.data().get(at as usize..at as usize + 8)?;
    let ptr = cell.as_ptr() as *const AtomicU64;
    // SAFETY: as in `shared_u32`, eight bytes.
    (ptr.align_offset(8) == 0).then(|| unsafe { &*ptr }.load(Ordering::SeqCst))
}

/// A copy of a shared profiler memory's state (its bytes up to the end of its last node,
/// where `links` knows the layout), read eight at a time with atomic loads, so that a
/// thread (the word sampler, another of the program's) may write them meanwhile. It
/// writes into a buffer of that size, a word at a time: a thread's profiler memory is a
/// megabyte or more, and a threaded program's threads copy theirs as they end, while the
/// program still runs.
pub(super) fn shared_bytes(memory: &wasmtime::SharedMemory, links: &HostLinks) -> Vec<u8> {
    let all = memory.data();
    let nodes = shared_u32(memory, layout::HDR_NODE_COUNT).unwrap_or(0);
    let data = &all[..links.state_len(all.len(), nodes)];
    // A wasm memory starts on a page, so its words are aligned.
    debug_assert_eq!(data.as_ptr().align_offset(8), 0);
    let mut bytes = vec![0u8; data.len()];
    let words = data.chunks_exact(8);
    let tail = words.remainder().len();
    for (out, word) in bytes.chunks_exact_mut(8).zip(words) {
        // SAFETY: eight aligned bytes of the shared memory, which lives as long as
        // `memory`; every thread accesses them only as wasm's shared memory allows.
        let value = unsafe { &*(word.as_ptr() as *const AtomicU64) }.load(Ordering::Relaxed);
        out.copy_from_slice(&value.to_le_bytes());
    }
    for i in data.len() - tail..data.len() {
        // SAFETY: as above, one byte.
        bytes[i] = unsafe { &*(data[i].get() as *const AtomicU8) }.load(Ordering::Relaxed);
    }
    bytes
}

/// Gives the module the memories it imports (wasm32-wasip1-threads programs import their
/// shared memory as `env.memory`), each of the type it asks for.
pub(super) fn provide_memories(
    linker: &mut Linker<WasiP1Ctx>,
    store: &mut Store<WasiP1Ctx>,
    module: &Module,
) -> anyhow::Result<()> {
    for import in module.imports() {
        let wasmtime::ExternType::Memory(ty) = import.ty() else {
            continue;
        };
        let memory: wasmtime::Extern = if ty.is_shared() {
            wasmtime::SharedMemory::new(module.engine(), ty)?.into()
        } else {
            wasmtime::Memory::new(&mut *store, ty)?.into()
        };
        linker.define(&*store, import.module(), import.name(), memory)?;
    }
    Ok(())
}

/// The trap's reason in one line (`wasm `unreachable` instruction executed`); the
/// profile's open stack says where, with demangled names.
pub(super) fn trap_message(error: &wasmtime::Error) -> String {
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => error
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_memory_is_copied_whole_or_up_to_its_last_node() {
        let mut config = wasmtime::Config::new();
        config.wasm_threads(true).shared_memory(true);
        let engine = Engine::new(&config).expect("an engine");
        let memory = wasmtime::SharedMemory::new(&engine, wasmtime::MemoryType::shared(4, 4))
            .expect("a shared memory");
        let byte = |i: usize| (i * 7 % 251) as u8;
        for (i, cell) in memory.data().iter().enumerate() {
            // SAFETY: no other thread has the memory.
            unsafe { *cell.get() = byte(i) };
        }
        let bytes = shared_bytes(&memory, &HostLinks::default());
        assert_eq!(bytes.len(), 4 * 65536);
        assert!(bytes.iter().enumerate().all(|(i, &b)| b == byte(i)));
        // With the layout known, up to the end of the last node the header counts.
        let count = &memory.data()[layout::HDR_NODE_COUNT as usize..][..4];
        for (cell, b) in count.iter().zip(3u32.to_le_bytes()) {
            // SAFETY: as above.
            unsafe { *cell.get() = b };
        }
        // A module of one function: its nodes start past the fixed regions (the child cache
        // alone is 64 KiB), three of them end the state.
        let layout = Layout::new(1, 1, 0, 0, 16, 0);
        let links = HostLinks {
            layout: Some(layout),
            ..HostLinks::default()
        };
        let end = (layout.nodes_off as usize + 3 * layout.node_size as usize).next_multiple_of(8);
        assert!(end < bytes.len());
        let state = shared_bytes(&memory, &links);
        assert_eq!(state.len(), end);
        assert_eq!(state[..8], bytes[..8]);
        assert_eq!(state[16..], bytes[16..end]);
    }
}
