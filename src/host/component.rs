//! The embedded host's components: a WASI command component (`wasi:cli/command`, what
//! `cargo build --target wasm32-wasip2` makes of a binary or a test) run as the wasmtime
//! CLI runs it (WASI 0.2, inherited stdio and environment, the arguments, the working
//! directory preopened), its main core module instrumented as a core module is
//! (`instrument::component`).
//!
//! What differs from a core module: wasmtime hands out none of a component's core
//! instances, so the profiler's memory is one the host itself made for wasmtime
//! ([`super::caught_memories`]), found among those the instantiation made by its type and
//! its header, and read after the run however it ended; the current context is where the
//! backtrace of a trap or an exit leaves the program in the tree
//! (`profile::context_of`), the root after a clean run. Only the metrics that need no host
//! function of the profiler's run here (the instrumenter refuses the others): the sampled
//! time, with the stack sampler, and the calls.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::bindings as p2;
use wasmtime_wasi::p2::bindings::sync::Command;
use wasmtime_wasi::p3::bindings as p3;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::caught_memories::{Catching, Caught, Creator};
use super::compiled::{self, engine_config};
use super::instance::{backtrace_functions, populate_for_writing, wasi_builder, Ending};
use super::stacks::{Clock, CodeMap, Exits, Sampling, StackSampler};
use super::{Outcome, RunConfig};
use crate::instrument::component;
use crate::layout;
use crate::meta::{self, Meta};
use crate::profile::{self, Dump, StackSamples};

/// A component's store: its WASI context and resources.
pub(super) struct ComponentCtx {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
}

impl WasiView for ComponentCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Compiles and runs the component `wasm`, a WASI 0.2 or 0.3 command; `meta` is its
/// instrumented module's, when it carries the profiler.
pub(super) fn run_component(
    wasm: &[u8],
    meta: Option<&Meta>,
    config: &RunConfig,
) -> anyhow::Result<Outcome> {
    let world = command_world(wasm)?;
    let mut compiled = CompiledComponent::new(wasm, meta)?;
    let mut store = Store::new(
        &compiled.engine,
        ComponentCtx {
            wasi: wasi_builder(config)?.build(),
            table: ResourceTable::new(),
        },
    );
    let exits = Exits::of_store(&mut store);
    let sampler = compiled.sampler(config);
    let started = Instant::now();
    let catching = Catching::begin();
    // What runs once the component is instantiated, before its `run`: the profiler found
    // among the memories the instantiation made, the sampler started on this thread.
    let begin = || -> anyhow::Result<_> {
        let profiler = compiled.profiler(catching.end())?;
        let sampling = (sampler.as_ref())
            .map(|sampler| sampler.sample_this_thread(exits))
            .transpose()?;
        Ok((profiler, sampling))
    };
    let (ran, profiler, sampling) = match world {
        World::Wasi02 => run_02(&mut store, &compiled, begin)?,
        world => run_async(&mut store, &compiled, world, begin)?,
    };
    let result = match ran {
        Ok(Ok(())) => Ok(()),
        Ok(Err(())) => Err(wasmtime_wasi::I32Exit(1).into()),
        Err(error) => Err(error),
    };
    let wall_ns = started.elapsed().as_nanos() as u64;
    let stacks = sampling.map(|sampling| sampling.finish());
    drop(sampler);

    let (exit_code, trap) = Ending::of(&result).exit();
    let dump = match profiler {
        // SAFETY: the store that owns the memory is alive, and its code has stopped.
        Some(profiler) => Some(unsafe { profiler.dump(&result, stacks) }?),
        None => None,
    };
    Ok(Outcome::of_one_thread(exit_code, trap, dump, wall_ns))
}

/// Which WASI a command component's `run` is of, and whether it imports WASI 0.3.
#[derive(Clone, Copy, PartialEq, Eq)]
enum World {
    /// `wasi:cli/run@0.2`, with WASI 0.2 alone: a synchronous call.
    Wasi02,
    /// `wasi:cli/run@0.2` of a program that calls WASI 0.3's functions too (a test binary
    /// of a crate that uses them): an async call, WASI 0.2 and 0.3 linked.
    Wasi02With03,
    /// `wasi:cli/run@0.3`: an async function, run on the store's event loop.
    Wasi03,
}

/// The world of the command component `wasm`; a WASI 0.3 service is refused, since
/// `serve` serves it (and `embedded` has refused the other worlds of WASI 0.3).
fn command_world(wasm: &[u8]) -> anyhow::Result<World> {
    Ok(match component::wasi_03(wasm) {
        component::Wasi03::Command => World::Wasi03,
        component::Wasi03::Imports => World::Wasi02With03,
        component::Wasi03::Service(service) => anyhow::bail!(
            "a WASI 0.3 service (it exports `{service}`), no command: `cargo wasmprof serve` \
             serves it"
        ),
        component::Wasi03::None | component::Wasi03::Other(_) => World::Wasi02,
    })
}

/// What starts once a command is instantiated: the profiler found, the sampling begun.
type Begun<'a> = (Option<Profiler<'a>>, Option<Sampling>);

/// What a command's run left: how its `run` returned, and what `begin` started.
type Ran<'a> = (
    wasmtime::Result<Result<(), ()>>,
    Option<Profiler<'a>>,
    Option<Sampling>,
);

/// Instantiates a WASI 0.2 command, calls `begin`, then its `run`.
fn run_02<'a>(
    store: &mut Store<ComponentCtx>,
    compiled: &CompiledComponent<'a>,
    begin: impl FnOnce() -> anyhow::Result<Begun<'a>>,
) -> anyhow::Result<Ran<'a>> {
    let mut linker: Linker<ComponentCtx> = Linker::new(&compiled.engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    let command = Command::instantiate(&mut *store, &compiled.component, &linker)
        .map_err(anyhow::Error::from)
        .context("cannot instantiate the component as a WASI command (`wasi:cli/run`)")?;
    let (profiler, sampling) = begin()?;
    let ran = command.wasi_cli_run().call_run(&mut *store);
    Ok((ran, profiler, sampling))
}

/// Instantiates a command that uses WASI 0.3, with WASI 0.2 linked beside 0.3 (the
/// wasm32-wasip2 target's libc imports 0.2), calls `begin`, then runs its `run` to
/// completion on the store's event loop, on this thread, as `wasmtime run` does.
fn run_async<'a>(
    store: &mut Store<ComponentCtx>,
    compiled: &CompiledComponent<'a>,
    world: World,
    begin: impl FnOnce() -> anyhow::Result<Begun<'a>>,
) -> anyhow::Result<Ran<'a>> {
    let mut linker: Linker<ComponentCtx> = Linker::new(&compiled.engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi::p3::add_to_linker(&mut linker)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the event loop of a WASI 0.3 program")?;
    let component = &compiled.component;
    let cannot = "cannot instantiate the component as a WASI command (`wasi:cli/run`)";
    runtime.block_on(async {
        if world == World::Wasi02With03 {
            let command = p2::Command::instantiate_async(&mut *store, component, &linker)
                .await
                .map_err(anyhow::Error::from)
                .context(cannot)?;
            let (profiler, sampling) = begin()?;
            let ran = command.wasi_cli_run().call_run(&mut *store).await;
            return Ok((ran, profiler, sampling));
        }
        let command = p3::Command::instantiate_async(&mut *store, component, &linker)
            .await
            .map_err(anyhow::Error::from)
            .context(cannot)?;
        let (profiler, sampling) = begin()?;
        let ran = store
            .run_concurrent(async move |store| command.wasi_cli_run().call_run(store).await)
            .await;
        Ok((ran.and_then(|ran| ran), profiler, sampling))
    })
}

/// A component compiled for runs: its engine, and, for one that carries the profiler,
/// its meta and the stack sampler's map of its instrumented module's code.
pub(super) struct CompiledComponent<'a> {
    pub(super) engine: Engine,
    pub(super) component: Component,
    pub(super) meta: Option<&'a Meta>,
    code_map: Option<CodeMap>,
}

impl<'a> CompiledComponent<'a> {
    /// Compiles `wasm`, profiled with `meta` if it carries the profiler.
    pub(super) fn new(wasm: &[u8], meta: Option<&'a Meta>) -> anyhow::Result<Self> {
        let engine = engine(meta.is_some())?;
        let compiled::Kept {
            code: component,
            file,
        } = compiled::component(&engine, wasm)?;
        let code_map = match meta {
            Some(meta) if meta.sampler == meta::Sampler::Stacks && meta.metric.facts().sampled => {
                let module = component::profiled_module(wasm)?;
                Some(CodeMap::of_component(
                    &component,
                    module.index,
                    module.bytes.start,
                    &wasm[module.bytes.clone()],
                    meta,
                    file.as_deref(),
                )?)
            }
            _ => None,
        };
        Ok(CompiledComponent {
            engine,
            component,
            meta,
            code_map,
        })
    }

    /// The stack sampler for a run at `config`'s interval, its drain thread started; none
    /// where the component is not stack-sampled. It maps the code of this compilation:
    /// one sampler per run.
    pub(super) fn sampler(&mut self, config: &RunConfig) -> Option<StackSampler> {
        self.sampler_on(config.interval(meta::Sampler::Stacks), Clock::Wall)
    }

    /// The stack sampler, every `interval` of `clock`, as [`CompiledComponent::sampler`].
    pub(super) fn sampler_on(&mut self, interval: Duration, clock: Clock) -> Option<StackSampler> {
        self.code_map
            .take()
            .filter(|_| !interval.is_zero())
            .map(|map| StackSampler::start_on(map, interval, clock))
    }

    /// The profiler of an instance, among the `memories` its instantiation made (none for
    /// a component that does not carry it), faulted in for writing.
    pub(super) fn profiler(&self, memories: Vec<Caught>) -> anyhow::Result<Option<Profiler<'a>>> {
        let Some(meta) = self.meta else {
            return Ok(None);
        };
        let memory = profiler_memory(&memories, &meta.layout)
            .context("the component's instrumented module made no profiler memory")?;
        let (base, accessible) = memory.span();
        populate_for_writing(base, accessible, meta.layout.nodes_off);
        Ok(Some(Profiler { memory, meta }))
    }
}

/// The profiler of a component instance: its memory, and the meta of its module.
pub(super) struct Profiler<'a> {
    memory: Caught,
    meta: &'a Meta,
}

impl Profiler<'_> {
    /// Marks the profiler's memory for its thread's pool, where its state is all the probes
    /// wrote (not where they record allocations: the live table grows above the nodes).
    ///
    /// # Safety
    /// As [`Profiler::state`].
    pub(super) unsafe fn reuse_memory(&self) {
        if !self.meta.records_allocations() {
            // SAFETY: as the caller promises.
            let written = unsafe { self.state() }.len();
            self.memory.reuse(written);
        }
    }

    /// The profiler's state: its memory up to its last node.
    ///
    /// # Safety
    /// The store that owns the memory must be alive, and no wasm code may run in it.
    pub(super) unsafe fn state(&self) -> &[u8] {
        // SAFETY: as the caller promises.
        let bytes = unsafe { self.memory.bytes() };
        &bytes[..state_len(bytes, &self.meta.layout)]
    }

    /// The dump of the profiler's state once a call that ended with `result` has returned,
    /// with the stack sampler's `stacks`: the current context is where the backtrace of a
    /// trap or an exit leaves the program in the tree, the root after a clean return.
    ///
    /// # Safety
    /// The store that owns the memory must be alive, and no wasm code may run in it.
    pub(super) unsafe fn dump(
        &self,
        result: &wasmtime::Result<()>,
        stacks: Option<StackSamples>,
    ) -> anyhow::Result<Dump> {
        let frames = frames_of(result, self.meta);
        // SAFETY: as the caller promises.
        let bytes = unsafe { self.state() };
        Ok(Dump {
            memory: bytes.to_vec(),
            cur: profile::context_of(bytes, self.meta, &frames)?,
            ticks_per_ns: 1.0,
            clock: "none".to_string(),
            end: None,
            frames,
            stacks,
            no_sampler: None,
        })
    }
}

/// An engine for components. A profiled component's memories are made by the host
/// ([`Creator`]), without wasmtime's copy-on-write images of their data, which need
/// memories of its own making.
fn engine(profiled: bool) -> anyhow::Result<Engine> {
    let mut config = engine_config();
    config
        .wasm_component_model(true)
        .wasm_component_model_async(true);
    if profiled {
        config
            .with_host_memory(std::sync::Arc::new(Creator))
            .memory_init_cow(false);
    }
    Engine::new(&config)
        .map_err(anyhow::Error::from)
        .context("cannot set up wasmtime")
}

/// The profiler's memory among the `memories` an instantiation made: of the type `layout`
/// gives it, its header written.
fn profiler_memory(memories: &[Caught], layout: &layout::Layout) -> Option<Caught> {
    memories
        .iter()
        .filter(|m| {
            m.ty.minimum() == u64::from(layout.initial_pages)
                && m.ty.maximum() == Some(u64::from(layout.pages))
        })
        .find(|m| {
            // SAFETY: just made, and no code has run in the store since.
            let bytes = unsafe { m.bytes() };
            bytes.get(..4) == Some(&layout::MAGIC.to_le_bytes()[..])
        })
        .cloned()
}

/// How many of the profiler memory's `bytes` hold its state: up to the end of its last
/// node, as a core module's copy stops.
fn state_len(bytes: &[u8], layout: &layout::Layout) -> usize {
    let at = layout::HDR_NODE_COUNT as usize;
    let nodes = bytes
        .get(at..at + 4)
        .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("four bytes")));
    usize::try_from(layout.state_end(nodes)).map_or(bytes.len(), |end| end.min(bytes.len()))
}

/// Where a trap or an exit left the instrumented module, from wasmtime's backtrace: its
/// frames (the other modules' left out), as function ids, outermost first.
fn frames_of(result: &wasmtime::Result<()>, meta: &Meta) -> Vec<u32> {
    backtrace_functions(result, meta, |f| {
        f.module().get_export(meta::MEMORY_EXPORT).is_some()
    })
}
