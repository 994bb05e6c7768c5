//! The embedded host: runs a WASI command module in wasmtime the way cargo's runner would
//! (inherited stdio and environment, the arguments, the working directory preopened), gives
//! an instrumented module its clock (exact time) or samples it while it runs (sampled time,
//! with the [`super::sampler`]), and collects the profiler's memory afterwards, also when
//! the program traps or calls `proc_exit`.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use anyhow::Context as _;
use wasmtime::{Caller, Linker, Store};
use wasmtime_wasi::p1::WasiP1Ctx;

use super::instance::{
    collect, compile, frames_of, link_host, populate_for_writing, provide_memories, snapshot,
    wasi_context, Compiled, Ending, HostLinks, RunEnd,
};
use super::marks::{self, Marks};
use super::sampler::{current_cpu, SampleTarget, Sampler, Targets};
use super::stacks::{CodeMap, Exits, Sampling as StackSampling, SoFar, StackSampler};
use super::{cached_by_stamp, say_instrumented, Host, Outcome, Prepared, RunConfig};
use crate::cache;
use crate::clock::Clock;
use crate::error::{Error, HostError};
use crate::fsutil::relative;
use crate::instrument::{self, Options};
use crate::meta::{self, Meta};
use crate::profile::StackSamples;
use crate::status::Status;

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
        let prepared = |wasm, meta| Prepared {
            path: path.to_path_buf(),
            wasm,
            meta,
        };
        if options.is_some_and(|o| o.metric.facts().sampled && o.sampler == meta::Sampler::V8) {
            return Err(Error::input(
                path,
                "`--sampler v8` is V8's own sampler, for programs that run under node; \
                 the embedded wasmtime samples the stacks (`--sampler stacks`)",
            ));
        }
        let stamp = match options.map(|options| cached_by_stamp(path, options, status)) {
            Some(ControlFlow::Break(found)) => return Ok(found),
            Some(ControlFlow::Continue(stamp)) => stamp,
            None => None,
        };
        let wasm = std::fs::read(path).map_err(|e| Error::input(path, e))?;
        if let Some(why) = not_hosted(&wasm) {
            return Err(Error::input(path, why));
        }
        let carried = match Meta::from_module(&wasm) {
            Ok(meta) => meta,
            Err(e) if options.is_some() && e.is::<meta::OtherVersion>() => {
                return Err(Error::input(path, e));
            }
            Err(_) => None, // not a module the instrumenter made: it says what is wrong
        };
        if carried.as_ref().is_some_and(|meta| meta.host_exceptions) {
            return Err(Error::input(path, instrumented_for_js(path)));
        }
        let Some(options) = options else {
            return Ok(prepared(wasm, None));
        };
        if let Some(meta) = carried {
            return Ok(prepared(wasm, Some(meta)));
        }
        let started = Instant::now();
        let spinner = status.spinner("Instrumenting", relative(path));
        let (done, cached) = instrument::instrument_cached(&wasm, options, stamp.as_ref())
            .map_err(|e| Error::instrument(path, e))?;
        drop(spinner);
        say_instrumented(status, path, &done, started, cached);
        if !cached {
            compile_ahead(&done);
        }
        Ok(prepared(done.wasm, Some(done.meta)))
    }

    fn run(&self, program: &Prepared, config: &RunConfig) -> Result<Outcome, HostError> {
        run_module(&program.wasm, program.meta.as_ref(), config).map_err(HostError::refused)
    }

    fn calibrated(&self) -> bool {
        true
    }
}

/// Compiles the module just instrumented into the profiler's cache, where its run finds it:
/// `test` prepares several binaries at once, and compiling one beside the others'
/// instrumenting keeps both cores busy, where a run's compiling alone keeps fewer. A
/// component is compiled when it runs, and so is everything without a cache. What fails
/// here fails again, and is said, when the module runs.
fn compile_ahead(done: &instrument::Instrumented) {
    if cache::enabled() && !instrument::component::is_component(&done.wasm) {
        let _ = compile(
            &done.wasm,
            Some(&done.meta),
            starts_threads(&done.wasm),
            false,
        );
    }
}

/// Why the embedded wasmtime does not run the component `wasm`, where it exports WASI
/// 0.3's interfaces (the async world) but neither a command's `wasi:cli/run@0.3` nor a
/// service's `wasi:http/handler@0.3`: which interface, and what may run it instead. (A
/// WASI 0.2 command that imports WASI 0.3 runs.)
fn not_hosted(wasm: &[u8]) -> Option<String> {
    if !crate::instrument::component::is_component(wasm) {
        return None;
    }
    use crate::instrument::component::Wasi03;
    let Wasi03::Other(name) = crate::instrument::component::wasi_03(wasm) else {
        return None;
    };
    Some(format!(
        "a WASI 0.3 component that exports `{name}`: the embedded wasmtime hosts WASI 0.3's \
         `wasi:cli/run` commands (`run`, `test`) and `wasi:http/handler` services (`serve`), \
         not this world; `wasmtime run` or `wasmtime serve` (47 or later) may run it, \
         unprofiled"
    ))
}

/// Why a module that `wasmprof-emcc` (or `run` of a JS program) instrumented for a JS
/// host does not run here: what runs it is the JS program beside it, named when found.
fn instrumented_for_js(path: &Path) -> String {
    let program = ["js", "mjs", "cjs", ""]
        .into_iter()
        .map(|ext| path.with_extension(ext))
        .find(|js| js.as_path() != path && js.is_file());
    let run = match program {
        Some(js) => format!("`cargo wasmprof run {}`", relative(&js)),
        None => "`cargo wasmprof run` of the JS program that loads it".into(),
    };
    format!(
        "instrumented for a JS host (node, browsers), where Emscripten's glue runs it; run it with {run}"
    )
}

/// Compiles and runs `wasm`. An instrumented module (one that exports the profiler's memory,
/// or carries a state module) has its state collected, and gets its clock if it imports one.
/// `meta` is the module's, when the caller has it already (else it is read from the module
/// if it is profiled). A module that starts threads (wasi-threads) runs in
/// [`super::threads`].
fn run_module(wasm: &[u8], meta: Option<&Meta>, config: &RunConfig) -> anyhow::Result<Outcome> {
    if instrument::component::is_component(wasm) {
        #[cfg(unix)]
        return super::component::run_component(wasm, meta, config);
        #[cfg(not(unix))]
        anyhow::bail!("components run in the embedded wasmtime on Unix hosts only");
    }
    let threaded = starts_threads(wasm);
    let compiled = compile(wasm, meta, threaded, config.sample_plain)?;
    super::perf_map::write_if_asked(&compiled.module, compiled.meta.as_ref())?;
    if threaded {
        anyhow::ensure!(
            compiled.state_module.is_none(),
            "a threaded module cannot keep the profiler's state in a state module"
        );
        return super::threads::run(compiled, config);
    }
    run_single(compiled, config)
}

/// Runs a single-threaded program: its state module first (the program imports its
/// probes, memory and globals), then `_start`, sampled if the metric is; then collects
/// the profiler's state, whatever way the program ended.
fn run_single(compiled: Compiled, config: &RunConfig) -> anyhow::Result<Outcome> {
    let Compiled {
        engine,
        module,
        state_module,
        meta,
        links,
        code_map,
    } = compiled;
    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    let clock = Clock::start(config.clock);
    // The word sampler's target, once the profiler's shared memory exists.
    let target: Arc<OnceLock<SampleTarget>> = Arc::default();
    link_host(&mut linker, &links, clock, &target)?;
    let mut store = Store::new(&engine, wasi_context(config)?);
    provide_memories(&mut linker, &mut store, &module)?;
    let marks: Arc<Mutex<Marks>> = Arc::default();
    // The stack sampler's samples so far, which a mark takes, once it samples.
    let so_far: Arc<OnceLock<SoFar>> = Arc::default();
    if names_benchmarks(&links, meta.as_ref(), state_module.is_some()) {
        let so_far = Arc::clone(&so_far);
        let take = move |caller: &mut Caller<'_, WasiP1Ctx>| {
            snapshot(caller, &links, clock, so_far.get().map(SoFar::samples))
        };
        marks::watch(&mut linker, &mut store, &module, take, Arc::clone(&marks))?;
    }

    let started = Instant::now();
    // A plain module sampled for the check is sampled as the stack sampler samples.
    let sampler = meta.as_ref().map_or(meta::Sampler::Stacks, |m| m.sampler);
    let planned = PlannedSampling::spawn(&links, code_map, config, sampler);
    let (instance, state_instance) =
        instantiate(&mut linker, &mut store, &module, state_module.as_ref())?;
    let start = instance
        .get_typed_func::<(), ()>(&mut store, "_start")
        .map_err(anyhow::Error::from)
        .context("`_start` must take and return nothing")?;
    let exits = Exits::of(&mut store, start.func());
    let memory = state_instance.get_export(&mut store, meta::MEMORY_EXPORT);
    let profiler = memory.as_ref().zip(meta.as_ref());
    if let Some((memory, meta)) = profiler {
        let (base, accessible) = profiler_memory_span(&store, memory);
        populate_for_writing(base, accessible, meta.layout.nodes_off);
    }
    let sampling = planned.start(profiler, exits, &target)?;
    if let RunSampling::Stacks(_, sampling) = &sampling {
        let _ = so_far.set(sampling.so_far());
    }
    let result = start.call(&mut store, ());
    let wall_ns = started.elapsed().as_nanos() as u64;
    let ended = clock.reader()() as u64;
    let mut stacks = sampling.stop();
    let plain_samples = stacks.take_if(|_| meta.is_none());

    let (exit_code, trap) = Ending::of(&result).exit();
    let end = RunEnd {
        ended,
        frames: frames_of(&result, meta.as_ref()),
        stacks,
    };
    let dump = collect(&mut store, &state_instance, &links, clock, end)?;
    let marks = std::mem::take(&mut *marks.lock().expect("not poisoned")).finished();
    Ok(Outcome {
        marks,
        plain_samples,
        ..Outcome::of_one_thread(exit_code, trap, dump, wall_ns)
    })
}

/// Whether the run marks each benchmark its harness names ([`marks`]): a module profiled
/// with its state in its own memory and a measuring loop among its functions (criterion's
/// `Bencher::iter`).
fn names_benchmarks(links: &HostLinks, meta: Option<&Meta>, state_module: bool) -> bool {
    links.profiled
        && !state_module
        && meta.is_some_and(|meta| {
            meta.functions
                .iter()
                .any(|f| crate::harness::is_harness_loop(&f.symbol.name))
        })
}

/// Instantiates the state module (when there is one: the program imports its probes,
/// memory and globals) and the module; the module's instance, and the one that holds the
/// profiler's state.
fn instantiate(
    linker: &mut Linker<WasiP1Ctx>,
    store: &mut Store<WasiP1Ctx>,
    module: &wasmtime::Module,
    state_module: Option<&wasmtime::Module>,
) -> anyhow::Result<(wasmtime::Instance, wasmtime::Instance)> {
    let state_instance = match state_module {
        Some(state_module) => {
            let instance = linker
                .instantiate(&mut *store, state_module)
                .map_err(anyhow::Error::from)
                .context("cannot instantiate the profiler's state module")?;
            linker.instance(&mut *store, meta::STATE_MODULE, instance)?;
            Some(instance)
        }
        None => None,
    };
    let instance = linker
        .instantiate(&mut *store, module)
        .map_err(anyhow::Error::from)
        .context("cannot instantiate the module")?;
    Ok((instance, state_instance.unwrap_or(instance)))
}

/// Where the profiler's memory starts, and its accessible bytes.
fn profiler_memory_span(store: &Store<WasiP1Ctx>, memory: &wasmtime::Extern) -> (*const u8, usize) {
    match memory {
        wasmtime::Extern::Memory(memory) => (memory.data_ptr(store), memory.data_size(store)),
        wasmtime::Extern::SharedMemory(memory) => {
            (memory.data().as_ptr().cast(), memory.data().len())
        }
        _ => (std::ptr::null(), 0),
    }
}

/// The sampling of a single-threaded run of the sampled time metric: the word sampler's
/// thread, or the stack sampler on the program's thread.
enum RunSampling {
    /// Not sampled.
    Off,
    /// The word sampler.
    Word(Sampler),
    /// The stack sampler, sampling this thread.
    Stacks(StackSampler, StackSampling),
}

/// The sampling a single-threaded run asks for, its thread started before the module is
/// instantiated: the word sampler's takes about as long to come up ([`Sampler::spawn`]).
/// [`PlannedSampling::start`] gives it the program's thread to sample.
enum PlannedSampling {
    /// Not sampled.
    Off,
    /// The word sampler: its thread, and the threads it samples (none with no interval:
    /// the test hook samples alone).
    Word(Option<(Sampler, Targets)>),
    /// The stack sampler, its drain thread running.
    Stacks(StackSampler),
}

impl PlannedSampling {
    /// The sampling the module's `links` ask for, at `config`'s interval (its sampler's,
    /// `sampler`, unless another is asked for), its thread started; the stack sampler's
    /// maps addresses through `code_map`.
    fn spawn(
        links: &HostLinks,
        code_map: Option<CodeMap>,
        config: &RunConfig,
        sampler: meta::Sampler,
    ) -> Self {
        let interval = config.interval(sampler);
        match code_map {
            Some(map) if !interval.is_zero() => {
                PlannedSampling::Stacks(StackSampler::start(map, interval))
            }
            _ if links.sampled => PlannedSampling::Word((!interval.is_zero()).then(|| {
                let targets = Targets::default();
                // This thread runs the program.
                let sampler = Sampler::spawn(targets.clone(), interval, current_cpu());
                (sampler, targets)
            })),
            _ => PlannedSampling::Off,
        }
    }

    /// Starts sampling this thread, which runs the program: its stacks, walked from the
    /// host code its wasm code called through its store's `exits`; or the word of the
    /// `profiler` (its memory, laid out as its meta says), which the word
    /// sampler's test hook samples through `target` too.
    fn start(
        self,
        profiler: Option<(&wasmtime::Extern, &Meta)>,
        exits: Option<Exits>,
        target: &Arc<OnceLock<SampleTarget>>,
    ) -> anyhow::Result<RunSampling> {
        match self {
            PlannedSampling::Off => Ok(RunSampling::Off),
            PlannedSampling::Stacks(sampler) => {
                let sampling = sampler.sample_this_thread(exits)?;
                Ok(RunSampling::Stacks(sampler, sampling))
            }
            PlannedSampling::Word(thread) => {
                let Some((wasmtime::Extern::SharedMemory(memory), meta)) = profiler else {
                    return Ok(RunSampling::Off);
                };
                // The test hook samples through the target, with or without the thread.
                let sample = SampleTarget::new(memory.clone(), meta.layout);
                let _ = target.set(sample.clone());
                let Some((sampler, targets)) = thread else {
                    return Ok(RunSampling::Off);
                };
                targets.add(0, sample);
                sampler.wait_until_up();
                Ok(RunSampling::Word(sampler))
            }
        }
    }
}

impl RunSampling {
    /// Stops sampling; the stack sampler's samples.
    fn stop(self) -> Option<StackSamples> {
        match self {
            RunSampling::Off => None,
            RunSampling::Word(sampler) => {
                sampler.stop();
                None
            }
            // The sampler's drain thread stops after the thread's sampling has finished.
            RunSampling::Stacks(_sampler, sampling) => Some(sampling.finish()),
        }
    }
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
