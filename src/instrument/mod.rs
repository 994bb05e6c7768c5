//! The instrumenter: rewrites a module so that it records its own profile.
//!
//! - Function ids are the original function indices (imports first), a flat compact space.
//! - Each imported function gets a thunk, a defined function that calls it; every call,
//!   table slot and `ref.func` of the import goes through the thunk, which is instrumented
//!   like any function, so calls into the host are counted and timed with exact arcs.
//! - Before every call the caller stores the call-site id in a global; the callee's entry
//!   probe takes it (0 when nobody set it: an entry from the host).
//! - Each function's body moves into a block; `return` becomes a branch out of it, the exit
//!   probe follows it, and tail calls run the exit probe just before they leave.
//!
//! The rewritten module is validated with wasmparser before it is returned.
//!
//! This file walks the steps; each lives in a module of its own: `check` (what is refused,
//! and validation), `thunks` (import thunks), `sites` (call-site numbering), `rewrite`
//! (one function's probes), `counting` (the instructions metric), `probes` (the probes'
//! code and the profiler's state), `in_place` (a module file made instrumented, keeping
//! its original), `one_memory` (the variant a JS host's module carries for hosts that allow
//! one memory), `inlining_budget` (what keeps V8 inlining the program as in its plain run),
//! `state_import` (an instrumented module's state imported from another
//! module name, for a browser page), `cache` (instrumented modules kept for the next run).

mod addresses;
mod allocators;
mod bindgen;
mod cache;
mod check;
pub mod component;
mod counting;
mod frames;
mod in_place;
mod inlining_budget;
mod lines;
mod one_memory;
mod plan;
mod probes;
mod rewrite;
mod sections;
mod sites;
mod state_import;
mod thunks;

use std::collections::HashSet;

use walrus::ir::InstrSeqType;
use walrus::{FunctionId, FunctionKind, Module};

pub use crate::error::InstrumentError;
use crate::layout::{live_slots, Layout};
use crate::meta::{self, Meta, Metric, Sampler, StateLocation};
use crate::symbols::SymbolTable;
pub use cache::{cached_for_file, instrument_cached, FileStamp};
pub use check::validate;
use check::{check_input, check_proposals};
use frames::add_frame_table;
pub use in_place::{instrument_in_place, original_path};
use plan::{plan, Plan};
pub use probes::{EntryProbes, SiteCounters, INLINE_ENTRY_BELOW};
use rewrite::{rewrite_function, ProbeLocals, Setting, Unwind};
use sections::Rewritten;
pub use state_import::{import_state_from, StateImport};
use thunks::{add_import_thunks, host_functions, redirect_to_thunks};

/// What can be chosen about the instrumentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Room for this many calling contexts; entries beyond it are folded per function.
    pub max_contexts: u32,
    /// What to measure besides calls and arcs.
    pub metric: Metric,
    /// Keep the calling-context tree, for exact calls per calling context (the sampled time
    /// metric then places its samples in it). The sampled time metric keeps it only when
    /// asked (or when it records allocations, or samples by the word, which name a
    /// context): without it, its probes count calls per function and per arc alone, and its
    /// contexts are those its samples found ([`Options::keeps_contexts`]).
    pub contexts: bool,
    /// Where the profiler keeps its state.
    pub state: StateLocation,
    /// The host throws exceptions of its own through the module's imports (JavaScript's:
    /// Emscripten's longjmp, C++ throws without wasm exceptions). Each import's thunk then
    /// gets a handler, in the legacy exceptions form that node 20 runs (wasmtime does not),
    /// so that its activation is closed and the running import known while one passes.
    pub host_exceptions: bool,
    /// How the host samples the sampled time metric: with [`Sampler::Stacks`] the probes
    /// publish no context word, each import's thunk says that it runs, and the module maps
    /// its code's addresses ([`meta::ADDRESSES_SECTION`]).
    pub sampler: Sampler,
    /// With the state in the module's own memory, the module also carries the program
    /// instrumented with its state in a state module, for the JS hosts that allow a module
    /// one memory ([`meta::ONE_MEMORY_SECTION`]); the JS runtime chooses when it starts.
    pub one_memory_variant: bool,
    /// Record the program's allocations (its allocators' calls, found by name, and its
    /// memory's growth) in the calling contexts, where the metric and the state allow.
    pub allocations: bool,
    /// Room in the live table for this many allocations live at once; past it, allocations
    /// are counted but not followed to their frees.
    pub max_live_allocations: u32,
    /// The module is for V8 (node, browsers): it gets the empty functions that keep V8's
    /// inlining budget as the original module's, which the probes' larger bodies would cut
    /// (see `inlining_budget`).
    pub inlining_budget: bool,
    /// Where the entry probes go: inline in small functions, or a call in every function.
    pub entries: EntryProbes,
    /// Where the direct call sites count their calls, where they do.
    pub site_counters: SiteCounters,
    /// The module was built without optimization (cargo's opt-level 0): its meta says so,
    /// for the report to fold the standard library's inlinable functions into their callers.
    pub unoptimized: bool,
}

/// The calling contexts a profile keeps unless told otherwise: 4 M, at most 192 MB of the
/// profiler's own memory, which it takes only as the tree grows.
pub const DEFAULT_MAX_CONTEXTS: u32 = 4_000_000;

impl Default for Options {
    fn default() -> Self {
        Options {
            max_contexts: DEFAULT_MAX_CONTEXTS,
            metric: Metric::default(),
            contexts: false,
            state: StateLocation::OwnMemory,
            host_exceptions: false,
            sampler: Sampler::Stacks,
            one_memory_variant: false,
            allocations: false,
            max_live_allocations: crate::layout::MAX_LIVE,
            inlining_budget: false,
            entries: EntryProbes::BySize,
            site_counters: SiteCounters::Memory,
            unoptimized: false,
        }
    }
}

impl Options {
    /// These options for a JS host (node, a browser): the state in the module's own memory,
    /// as in wasmtime, where the host allows a module two memories (node 22 and later,
    /// current browsers), the variant with a state module carried for those that allow one
    /// (node 20); handlers for the JS exceptions that the glue throws through imports
    /// (longjmp, C++ exceptions); V8's own sampler; V8's inlining budget kept.
    pub fn for_js_host(self) -> Options {
        Options {
            state: StateLocation::OwnMemory,
            one_memory_variant: true,
            host_exceptions: true,
            sampler: Sampler::V8,
            inlining_budget: true,
            site_counters: SiteCounters::Globals,
            ..self
        }
    }

    /// These options for a module that starts threads the JS way (Emscripten's
    /// `-pthread`): V8's sampler samples the one thread whose inspector starts it, so such
    /// a module keeps the word sampler, which samples every thread's context.
    fn for_threads(&self, threads: check::Threads) -> Options {
        match (threads, self.sampler) {
            (check::Threads::Emscripten, Sampler::V8) => Options {
                sampler: Sampler::Word,
                ..self.clone()
            },
            _ => self.clone(),
        }
    }

    /// These options for a wasm-bindgen module, whose glue, not our runtime, instantiates it:
    /// [`Options::for_js_host`]'s, with the state in a state module, which every host runs
    /// (nothing chooses a variant at start-up), and no exception handlers of ours in the
    /// thunks (bindgen tells how the module handles exceptions by the instructions it
    /// finds, a legacy `try` meaning a panic=unwind build, and would generate other glue for
    /// its `catch` imports); the word sampler (bindgen renumbers the functions and drops
    /// the sections that would map V8's frames back to them).
    pub fn for_wasm_bindgen(self) -> Options {
        Options {
            host_exceptions: false,
            state: StateLocation::StateModule,
            one_memory_variant: false,
            sampler: Sampler::Word,
            ..self.for_js_host()
        }
    }

    /// Whether the probes keep the calling-context tree: the metrics whose cost they
    /// measure do; the sampled time metric where asked, where it records allocations (each
    /// in its context), and with the word sampler (whose samples name a context).
    pub fn keeps_contexts(&self) -> bool {
        match self.metric {
            Metric::Calls => false,
            Metric::ExactTime | Metric::Instructions => true,
            Metric::Time => self.contexts || self.allocations || self.sampler == Sampler::Word,
        }
    }

    /// Whether the module is sampled by its stacks: its code's addresses are mapped.
    pub fn samples_stacks(&self) -> bool {
        self.metric.facts().sampled && self.sampler == Sampler::Stacks
    }

    /// Whether the module counts each straight-line segment's runs, for per-line costs:
    /// with the instructions metric, where the profiler has a memory of its own.
    pub fn counts_lines(&self) -> bool {
        self.metric.facts().probes.counter && self.state == StateLocation::OwnMemory
    }

    /// Whether the module carries its variant for hosts that allow one memory: asked for,
    /// and its own state not in a state module already.
    fn carries_one_memory_variant(&self) -> bool {
        self.one_memory_variant && self.state == StateLocation::OwnMemory
    }

    /// Whether these options produced `meta`: a module that carries it was instrumented
    /// with the same metric, state location, import handlers, functions for V8's inlining
    /// budget and room for contexts.
    pub fn produced(&self, meta: &Meta) -> bool {
        let l = &meta.layout;
        meta.metric == self.metric
            && meta.contexts == self.keeps_contexts()
            && meta.state == self.state
            && meta.host_exceptions == self.host_exceptions
            && meta.one_memory_variant == self.carries_one_memory_variant()
            && meta.inlining_budget == self.inlining_budget
            && (!self.metric.facts().sampled || meta.sampler == self.sampler)
            && (meta.allocations.not_recorded.as_deref() == Some(meta::Allocations::NOT_ASKED))
                != self.allocations
            && l.live_slots_max == live_slots(meta.records_allocations(), self.max_live_allocations)
            && l.nodes_cap
                == Layout::new(l.functions, 0, 0, 0, self.max_contexts, l.live_slots_max).nodes_cap
    }
}

/// An instrumented module and the meta it carries.
pub struct Instrumented {
    /// The instrumented module's bytes.
    pub wasm: Vec<u8>,
    /// The meta written into its `wasmprof` section.
    pub meta: Meta,
}

/// Instruments `original`, a core module's bytes. The same input gives the same output.
pub fn instrument(original: &[u8], options: &Options) -> Result<Instrumented, InstrumentError> {
    if component::is_component(original) {
        return instrument_component(original, options);
    }
    if !options.carries_one_memory_variant() {
        return instrument_once(original, options);
    }
    let variant = Options {
        state: StateLocation::StateModule,
        one_memory_variant: false,
        ..options.clone()
    };
    let (done, variant) = std::thread::scope(|scope| {
        let variant = scope.spawn(|| instrument_once(original, &variant));
        let done = instrument_once(original, options);
        match variant.join() {
            Ok(variant) => (done, variant),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    let mut done = done?;
    one_memory::carry(&mut done.wasm, &variant?.wasm);
    Ok(done)
}

/// [`instrument`] of a component: its main core module instrumented, in its place. Only
/// what needs no host function of the profiler's (the component's instances provide the
/// module its original imports alone) and runs in the embedded wasmtime.
fn instrument_component(
    original: &[u8],
    options: &Options,
) -> Result<Instrumented, InstrumentError> {
    let refuse = |what: &str| {
        Err(InstrumentError::Unsupported(format!(
            "a component: {what} (components are profiled with the sampled `time` of the \
             stack sampler, the default, or with `--metric calls`)"
        )))
    };
    match options.metric {
        Metric::ExactTime => return refuse("`exact-time` reads a clock from the host"),
        Metric::Instructions => {
            return refuse("`instructions` reads its counter from a global the host cannot reach")
        }
        Metric::Time if options.sampler != Sampler::Stacks => {
            return refuse("only the stack sampler samples a component")
        }
        Metric::Time | Metric::Calls => {}
    }
    if options.state != StateLocation::OwnMemory || options.carries_one_memory_variant() {
        return refuse("its profiler keeps its state in a memory of its own");
    }
    let main = component::main_module(original)?;
    let mut done = instrument(&original[main.bytes.clone()], options)?;
    done.wasm = component::with_module(original, &main, &done.wasm);
    component::validate(&done.wasm)?;
    Ok(done)
}

/// [`instrument`], the one module `options` ask for.
fn instrument_once(original: &[u8], options: &Options) -> Result<Instrumented, InstrumentError> {
    check_input(original)?;
    // A second thread checks the proposals while walrus parses, then reads the symbols
    // while the module is rewritten: nothing before the marking of the stack sampler's
    // stretches of code, just before the module is emitted, needs them.
    std::thread::scope(|scope| {
        let (proposals_tx, proposals) = std::sync::mpsc::channel();
        let symbols = scope.spawn(move || {
            let checked = check_proposals(original);
            let refused = checked.is_err();
            // The receiver is only gone when the main thread has already failed.
            let _ = proposals_tx.send(checked);
            if refused {
                return None;
            }
            // Per-line costs name the functions inlined at each line.
            Some(SymbolTable::load(original, options.counts_lines()))
        });
        let module = walrus::ModuleConfig::new()
            .preserve_code_transform(options.samples_stacks())
            .parse(original);
        let Ok(checked) = proposals.recv() else {
            // The thread panicked before it sent the check's result: pass the panic on.
            match symbols.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(_) => unreachable!("the thread sends before it ends"),
            }
        };
        checked?;
        let module = module.map_err(invalid)?;
        let budget = options
            .inlining_budget
            .then(|| inlining_budget::SmallBodies::of(original));
        let symbols = || match symbols.join() {
            Ok(Some(loaded)) => loaded.map_err(invalid),
            Ok(None) => unreachable!("the proposals were accepted"),
            Err(panic) => std::panic::resume_unwind(panic),
        };
        rewrite(module, options, budget, symbols)
    })
}

fn invalid(e: anyhow::Error) -> InstrumentError {
    InstrumentError::Invalid(format!("{e:#}"))
}

/// Adds the profiler and the probes to `module`, and the functions that keep V8's inlining
/// budget where the `original` module's small bodies are given; emits and validates the
/// result, with the stack sampler's stretches of code marked by the original module's
/// `symbols`, which it waits for then, and which name and place everything in its meta.
fn rewrite(
    mut module: Module,
    options: &Options,
    original: Option<inlining_budget::SmallBodies>,
    symbols: impl FnOnce() -> Result<SymbolTable, InstrumentError>,
) -> Result<Instrumented, InstrumentError> {
    // Function ids: walrus allocates functions in index order when it parses.
    let original_funcs: Vec<FunctionId> = module.funcs.iter().map(|f| f.id()).collect();
    debug_assert!(original_funcs
        .iter()
        .enumerate()
        .all(|(i, id)| id.index() == i));
    let threads = check::threads(&module, options.state)?;
    let options = &options.for_threads(threads);
    // A wasm-bindgen module: what its bindgen step interprets stays as it is, and the shims
    // it makes imports get thunks (see `bindgen`'s doc comment for why).
    let bindgen = bindgen::Bindgen::of(&module);
    let (imported, host) = host_functions(&module, &original_funcs, &bindgen.shims);
    let threaded = threads != check::Threads::None;
    let left_alone = &bindgen.left_alone;
    let allocs = allocators::plan(&module, options, left_alone);
    let thunks = add_import_thunks(&mut module, &original_funcs, &bindgen);
    redirect_to_thunks(&mut module, &thunks, left_alone);
    let (sites, plans) = plan(
        &module,
        &original_funcs,
        left_alone,
        &thunks,
        &allocs,
        options.entries,
    );

    let segment_count = segment_count(&module, &plans, options);
    let layout = Layout::new(
        original_funcs.len() as u32,
        sites.direct.len() as u32,
        sites.indirect.len() as u32,
        segment_count,
        options.max_contexts,
        live_slots(allocs.records(), options.max_live_allocations),
    );
    let profiler = add_profiler(&mut module, &layout, options, &host, threaded)?;
    let escaping = plan::escaping(&module);
    let segments = rewrite_functions(&mut module, &plans, &profiler, &layout, options, &escaping);
    debug_assert_eq!(segments.len(), segment_count as usize);
    // For the stack sampler, each stretch of code gets a place walrus's code transform
    // records.
    let symbols = symbols()?;
    let catch = options.samples_stacks().then(|| {
        addresses::mark_code(&mut module, &symbols);
        addresses::Catch::default()
    });
    add_frame_table(&mut module, &original_funcs, &thunks, catch.clone());
    if let Some(original) = original {
        inlining_budget::keep(&mut module, original);
    }
    let wasm = module.emit_wasm();
    validate(&wasm).map_err(InstrumentError::Produced)?;
    let frames = meta::frames(&wasm).map_err(|e| InstrumentError::Produced(e.to_string()))?;
    let rewritten = Rewritten {
        wasm,
        layout,
        imported,
        sites,
        frames,
        segments,
        code_map: catch.map(|catch| catch.take()),
        allocations: allocs.meta,
        options: options.clone(),
    };
    Ok(rewritten.finish(&symbols))
}

/// How many segments of the program's code (not the thunks') count their runs in the
/// profiler's own memory: with the instructions metric, each, for per-line costs.
fn segment_count(module: &Module, plans: &[Plan], options: &Options) -> u32 {
    if !options.counts_lines() {
        return 0;
    }
    plans
        .iter()
        .filter(|plan| !plan.thunk)
        .map(|plan| match &module.funcs.get(plan.id).kind {
            FunctionKind::Local(func) => counting::count_segments(func, &plan.seqs),
            _ => 0,
        })
        .sum()
}

/// Adds the profiler to `module` where `options` say: its own memory, or a state module
/// carried in a custom section (validated) whose exports the module imports.
fn add_profiler(
    module: &mut Module,
    layout: &Layout,
    options: &Options,
    host: &probes::HostFunctions,
    threaded: bool,
) -> Result<probes::Profiler, InstrumentError> {
    Ok(match options.state {
        StateLocation::OwnMemory => probes::add(module, layout, options, host, threaded),
        StateLocation::StateModule => {
            let (profiler, state) =
                probes::import_state_module(module, layout, options, host, threaded);
            validate(&state).map_err(InstrumentError::Produced)?;
            module.customs.add(walrus::RawCustomSection {
                name: meta::STATE_SECTION.to_string(),
                data: state,
            });
            profiler
        }
    })
}

/// Rewrites every planned function with its probes; returns, per counted segment (the
/// instructions metric's per-line costs), its function id and its original instructions'
/// offsets.
fn rewrite_functions(
    module: &mut Module,
    plans: &[Plan],
    profiler: &probes::Profiler,
    layout: &Layout,
    options: &Options,
    escaping: &HashSet<FunctionId>,
) -> Vec<(u32, Vec<u32>)> {
    let unwind = Unwind::of(module);
    // A host that throws through imports (JS: a longjmp, a C++ throw without wasm
    // exceptions): each thunk gets a handler, so that its activation is closed, and the
    // running import known, while an exception passes.
    let thunk_unwind = match unwind {
        None if options.host_exceptions => Some(Unwind::Legacy),
        other => other,
    };
    let mut segment_offsets: Vec<Vec<u32>> = Vec::new();
    let mut segment_functions: Vec<u32> = Vec::new();
    for plan in plans {
        let locals = ProbeLocals::add(&mut module.locals, plan, profiler, options);
        let results = module
            .types
            .results(module.funcs.get(plan.id).ty())
            .to_vec();
        let body_ty = match results.as_slice() {
            [] => InstrSeqType::Simple(None),
            [one] => InstrSeqType::Simple(Some(*one)),
            many => InstrSeqType::MultiValue(module.types.add(&[], many)),
        };
        let reentry = match &profiler.probes {
            probes::MetricProbes::Timed(timing) if plan.inline_entry && plan.leaf => {
                timing.reentry_stub(module, plan.f, plan.id)
            }
            _ => None,
        };
        let setting = Setting {
            body_ty,
            unwind: if plan.thunk { thunk_unwind } else { unwind },
            reentry,
            escaping,
        };
        let FunctionKind::Local(func) = &mut module.funcs.get_mut(plan.id).kind else {
            unreachable!("planned functions are defined functions");
        };
        let next = segment_offsets.len() as u32;
        let mut counters = match (options.counts_lines() && !plan.thunk, profiler.memory) {
            (true, Some(memory)) => Some(counting::SegmentCounters {
                memory,
                offset: layout.segments_off,
                next,
                segments: &mut segment_offsets,
            }),
            _ => None,
        };
        rewrite_function(func, plan, setting, profiler, locals, &mut counters);
        segment_functions.resize(segment_offsets.len(), plan.f);
    }
    segment_functions.into_iter().zip(segment_offsets).collect()
}
