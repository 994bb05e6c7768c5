//! The embedded host: runs a WASI command module in wasmtime the way cargo's runner would
//! (inherited stdio and environment, the arguments, the working directory preopened), gives
//! an instrumented module its clock (exact time) or samples it while it runs (sampled time,
//! with the [`super::sampler`]), and collects the profiler's memory afterwards, also when
//! the program traps or calls `proc_exit`.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::Context as _;
use wasmtime::{Engine, Linker, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use super::sampler::{self, SampleTarget, Sampler, Targets};
use super::{Host, Outcome, Prepared, RunConfig};
use crate::clock::Clock;
use crate::error::{Error, HostError};
use crate::fsutil::relative;
use crate::instrument::{self, Options};
use crate::meta::{self, Meta};
use crate::profile::Dump;
use crate::status::Status;

/// Exit status the wasmtime CLI uses for a trap on Unix (128 + SIGABRT).
pub const TRAP_EXIT_CODE: i32 = 134;

/// wasmtime, embedded: runs WASI (preview 1) command modules.
#[derive(Debug, Clone, Copy, Default)]
pub struct Embedded;

impl Embedded {
    /// Compiles and runs the module `wasm` (see [`Host::run`]).
    pub fn run_module(&self, wasm: &[u8], config: &RunConfig) -> Result<Outcome, HostError> {
        run_module(wasm, None, config).map_err(HostError::refused)
    }
}

impl Host for Embedded {
    /// Instruments the module in memory; a module that carries the profiler is taken as
    /// it is.
    fn prepare(
        &self,
        path: &Path,
        options: Option<&Options>,
        status: Status,
    ) -> Result<Prepared, Error> {
        let wasm = std::fs::read(path).map_err(|e| Error::input(path, e))?;
        let prepared = |wasm, meta| Prepared {
            path: path.to_path_buf(),
            wasm,
            meta,
        };
        let Some(options) = options else {
            return Ok(prepared(wasm, None));
        };
        if let Ok(Some(meta)) = Meta::from_module(&wasm) {
            return Ok(prepared(wasm, Some(meta)));
        }
        let started = Instant::now();
        let spinner = status.spinner("Instrumenting", relative(path));
        let done =
            instrument::instrument(&wasm, options).map_err(|e| Error::instrument(path, e))?;
        drop(spinner);
        status.step(
            "Instrumented",
            format!(
                "{} ({} functions, {} call sites) in {:.2}s",
                relative(path),
                done.meta.functions.len(),
                done.meta.direct_sites.len() + done.meta.indirect_sites.len(),
                started.elapsed().as_secs_f64()
            ),
        );
        Ok(prepared(done.wasm, Some(done.meta)))
    }

    fn run(&self, program: &Prepared, config: &RunConfig) -> Result<Outcome, HostError> {
        run_module(&program.wasm, program.meta.as_ref(), config).map_err(HostError::refused)
    }

    fn calibrated(&self) -> bool {
        true
    }
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
    /// Its profiler memory is shared and sampled (the sampled time metric).
    pub(super) sampled: bool,
    /// It imports the sampler's test hook.
    pub(super) hooked: bool,
}

/// Compiles and runs `wasm`. An instrumented module (one that exports the profiler's memory,
/// or carries a state module) has its state collected, and gets its clock if it imports one.
/// `meta` is the module's, when the caller has it already (else it is read from the module
/// if it is profiled). A module that starts threads (wasi-threads) runs in
/// [`super::threads`].
fn run_module(wasm: &[u8], meta: Option<&Meta>, config: &RunConfig) -> anyhow::Result<Outcome> {
    let threaded = starts_threads(wasm);
    let mut engine_config = wasmtime::Config::new();
    // Single-threaded programs may use a shared memory, and the sampled time metric's
    // profiler memory is one.
    engine_config.shared_memory(true).wasm_threads(true);
    // A threaded program ends by the host raising the epoch (see `threads`).
    engine_config.epoch_interruption(threaded);
    let engine = Engine::new(&engine_config)
        .map_err(anyhow::Error::from)
        .context("cannot set up wasmtime")?;
    let module = Module::new(&engine, wasm)
        .map_err(anyhow::Error::from)
        .context("wasmtime could not compile the module")?;
    anyhow::ensure!(
        module.get_export("_start").is_some(),
        "the module exports no `_start` function, so it is not a WASI command"
    );
    let state_module = meta::custom_section(wasm, meta::STATE_SECTION)?
        .map(|bytes| Module::new(&engine, bytes))
        .transpose()
        .map_err(anyhow::Error::from)
        .context("wasmtime could not compile the profiler's state module")?;
    let profiled = state_module.is_some() || module.get_export(meta::MEMORY_EXPORT).is_some();
    // The meta of a profiled module, read from it when the caller has none.
    let read = match meta {
        None if profiled => Meta::from_module(wasm).ok().flatten(),
        _ => None,
    };
    let meta = meta.or(read.as_ref());
    // A shared profiler memory: the sampled metric, whose sampler needs the layout.
    let shared = |m: &Module| matches!(m.get_export(meta::MEMORY_EXPORT), Some(wasmtime::ExternType::Memory(ty)) if ty.is_shared());
    let links = HostLinks {
        profiled,
        timed: module
            .imports()
            .any(|i| i.module() == meta::CLOCK_MODULE && i.name() == meta::CLOCK_NAME),
        instructions: meta.is_some_and(|m| m.metric == crate::meta::Metric::Instructions),
        sampled: meta.is_some_and(|m| m.metric == crate::meta::Metric::Time)
            && state_module.as_ref().map_or(shared(&module), shared),
        hooked: module
            .imports()
            .any(|i| (i.module(), i.name()) == sampler::HOOK),
    };
    if links.sampled {
        meta.context("the instrumented module has no meta")?;
    }
    if threaded {
        anyhow::ensure!(
            state_module.is_none(),
            "a threaded module cannot keep the profiler's state in a state module"
        );
        return super::threads::run(engine, module, meta, config, links);
    }

    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    let clock = Clock::start(config.clock);
    // The sampled metric's sample target, once the profiler's shared memory exists.
    let target: Arc<OnceLock<SampleTarget>> = Arc::default();
    link_host(&mut linker, &links, clock, &target)?;
    let mut store = Store::new(&engine, wasi_context(config)?);
    provide_memories(&mut linker, &mut store, &module)?;

    let started = Instant::now();
    // The state module first: the program imports its probes, memory and globals.
    let state_instance = match &state_module {
        Some(state_module) => {
            let instance = linker
                .instantiate(&mut store, state_module)
                .map_err(anyhow::Error::from)
                .context("cannot instantiate the profiler's state module")?;
            linker.instance(&mut store, meta::STATE_MODULE, instance)?;
            Some(instance)
        }
        None => None,
    };
    let instance = linker
        .instantiate(&mut store, &module)
        .map_err(anyhow::Error::from)
        .context("cannot instantiate the module")?;
    let state_instance = state_instance.unwrap_or(instance);
    let start = instance
        .get_typed_func::<(), ()>(&mut store, "_start")
        .map_err(anyhow::Error::from)
        .context("`_start` must take and return nothing")?;
    let targets = Targets::default();
    if let (true, Some(layout), Some(wasmtime::Extern::SharedMemory(memory))) = (
        links.sampled,
        meta.map(|m| m.layout),
        state_instance.get_export(&mut store, meta::MEMORY_EXPORT),
    ) {
        let sample = SampleTarget::new(memory, layout);
        let _ = target.set(sample.clone());
        targets.add(0, sample);
    }
    let sampler = (links.sampled && !config.sample_interval.is_zero())
        .then(|| Sampler::start(targets, config.sample_interval));
    let result = start.call(&mut store, ());
    let wall_ns = started.elapsed().as_nanos() as u64;
    let ended = clock.reader()() as u64;
    if let Some(sampler) = sampler {
        sampler.stop();
    }

    let (exit_code, trap) = match &result {
        Ok(()) => (0, None),
        Err(error) => match error.downcast_ref::<I32Exit>() {
            Some(exit) => (exit.0, None),
            None => (TRAP_EXIT_CODE, Some(trap_message(error))),
        },
    };
    let frames = frames_of(&result, meta);
    let state = collect(&mut store, &state_instance, &links, clock, ended, frames)?;
    Ok(Outcome {
        exit_code,
        trap,
        state,
        wall_ns,
        threads: Vec::new(),
        lost_threads: Vec::new(),
    })
}

/// Where a trap or an exit left the program, from wasmtime's backtrace, as function ids
/// outermost first: the profile's open stack where the metric keeps no context tree.
pub(super) fn frames_of(result: &wasmtime::Result<()>, meta: Option<&Meta>) -> Vec<u32> {
    let backtrace: Vec<u32> = match result {
        Err(error) => error
            .downcast_ref::<wasmtime::WasmBacktrace>()
            .map(|bt| bt.frames().iter().map(|f| f.func_index()).collect())
            .unwrap_or_default(),
        Ok(()) => Vec::new(),
    };
    meta.map_or_else(Vec::new, |meta| {
        meta.frame_functions(backtrace.into_iter().rev())
    })
}

/// Whether `wasm` imports wasi-threads' `thread-spawn`.
fn starts_threads(wasm: &[u8]) -> bool {
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload {
            Ok(wasmparser::Payload::ImportSection(reader)) => {
                return reader
                    .into_imports()
                    .flatten()
                    .any(|import| (import.module, import.name) == meta::THREAD_SPAWN)
            }
            Ok(wasmparser::Payload::CodeSectionStart { .. }) | Err(_) => return false,
            Ok(_) => {}
        }
    }
    false
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
    let mut argv = vec![config.program.clone()];
    argv.extend(config.args.iter().cloned());
    let mut wasi = WasiCtxBuilder::new();
    if config.inherit_stdio {
        wasi.inherit_stdio();
    }
    Ok(wasi
        .inherit_env()
        .args(&argv)
        .preopened_dir(&config.dir, ".", FsPerms::ReadWrite)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("cannot open {} for the program", config.dir.display()))?
        .build_p1())
}

/// The profiler's state in `instance` (the instrumented module or its state module) once
/// its code has stopped: the memory, the current context, and what closes the open
/// activations (the instruction counter, or the clock's reading `ended`). `None` for a
/// module that is not profiled.
pub(super) fn collect<T: 'static>(
    store: &mut Store<T>,
    instance: &wasmtime::Instance,
    links: &HostLinks,
    clock: Clock,
    ended: u64,
    frames: Vec<u32>,
) -> anyhow::Result<Option<Dump>> {
    if !links.profiled {
        return Ok(None);
    }
    let memory = profiler_memory(store, instance)
        .context("the instrumented module exports no profiler memory")?;
    let cur = instance
        .get_global(&mut *store, meta::CUR_EXPORT)
        .and_then(|g| g.get(&mut *store).i32())
        .context("the instrumented module exports no current-context global")?;
    // What closes the activations still open: the instruction counter, or the clock.
    let instructions = instance
        .get_global(&mut *store, meta::INSTRUCTIONS_EXPORT)
        .and_then(|g| g.get(&mut *store).i64());
    let end = match instructions {
        Some(count) => Some(count as u64),
        None => links.timed.then_some(ended),
    };
    Ok(Some(Dump {
        memory,
        cur: cur as u32,
        ticks_per_ns: clock.ticks_per_ns(),
        clock: if links.timed { clock.name() } else { "none" }.to_string(),
        end,
        frames,
    }))
}

/// The bytes of the profiler's memory that `instance` (the instrumented module, or its
/// state module) exports, a plain or (with the sampled time metric) a shared one; read
/// once the program has returned and no sampler runs.
pub fn profiler_memory<T: 'static>(
    store: &mut Store<T>,
    instance: &wasmtime::Instance,
) -> Option<Vec<u8>> {
    match instance.get_export(&mut *store, meta::MEMORY_EXPORT)? {
        wasmtime::Extern::Memory(memory) => Some(memory.data(&*store).to_vec()),
        wasmtime::Extern::SharedMemory(memory) => Some(shared_bytes(&memory)),
        _ => None,
    }
}

/// A copy of a shared memory's bytes, taken when no thread writes them (the program has
/// returned and no sampler runs, or its one thread waits).
pub(super) fn shared_bytes(memory: &wasmtime::SharedMemory) -> Vec<u8> {
    let data = memory.data();
    // SAFETY: the memory's bytes, which live as long as `memory`; no thread writes them
    // while they are copied (the callers' condition).
    let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, data.len()) };
    bytes.to_vec()
}

/// Gives the module the memories it imports (wasm32-wasip1-threads programs import their
/// shared memory as `env.memory`), each of the type it asks for.
fn provide_memories(
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
