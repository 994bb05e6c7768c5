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

mod runtime;

use std::collections::{BTreeMap, HashMap};

use walrus::ir::{
    BinaryOp, Binop, Block, Br, Const, GlobalGet, GlobalSet, Instr, InstrLocId, InstrSeqId,
    InstrSeqType, LocalGet, LocalSet, Value, VisitorMut,
};
use walrus::{FunctionBuilder, FunctionId, FunctionKind, LocalFunction, Module, ValType};

use crate::layout::{Layout, INDIRECT_SITE};
use crate::meta::{self, FunctionMeta, Meta, Metric, SiteMeta, StateLocation};
use crate::symbols::SymbolTable;

/// What can be chosen about the instrumentation.
#[derive(Debug, Clone)]
pub struct Options {
    /// Room for this many calling contexts; entries beyond it are folded per function.
    pub max_contexts: u32,
    /// What to measure besides calls and arcs.
    pub metric: Metric,
    /// Where the profiler keeps its state.
    pub state: StateLocation,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_contexts: 1 << 18,
            metric: Metric::Time,
            state: StateLocation::OwnMemory,
        }
    }
}

impl Options {
    /// Whether a module that carries `meta` was instrumented with these options.
    pub fn made(&self, meta: &Meta) -> bool {
        let l = &meta.layout;
        meta.metric == self.metric
            && meta.state == self.state
            && l.nodes_cap == Layout::new(l.functions, 0, 0, self.max_contexts).nodes_cap
    }
}

/// An instrumented module and the tables it carries.
pub struct Instrumented {
    /// The instrumented module's bytes.
    pub wasm: Vec<u8>,
    /// The tables written into its `wasmprof` section.
    pub meta: Meta,
}

/// Why a module could not be instrumented.
#[derive(Debug, thiserror::Error)]
pub enum InstrumentError {
    /// Not a WebAssembly binary at all.
    #[error("not a WebAssembly module (no \\0asm header)")]
    NotWasm,
    /// A component, not a core module.
    #[error("a WebAssembly component, not a core module; only core modules can be instrumented")]
    Component,
    /// Already carries the profiler.
    #[error("already instrumented by cargo-wasmprof")]
    AlreadyInstrumented,
    /// The module does not parse or validate.
    #[error("not a valid module: {0}")]
    Invalid(String),
    /// The module uses something the instrumenter cannot handle: the reason.
    #[error("{0}")]
    Unsupported(String),
    /// The rewritten module failed validation: a bug in the instrumenter.
    #[error("instrumentation produced an invalid module (a bug in cargo-wasmprof): {0}")]
    Produced(String),
}

/// Instruments `original`, a core module's bytes. The same input gives the same output.
pub fn instrument(original: &[u8], options: &Options) -> Result<Instrumented, InstrumentError> {
    check_input(original)?;
    // A second thread checks the proposals while walrus parses, then reads the symbols
    // while the module is rewritten and emitted: nothing but the tables appended at the
    // end needs them.
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
            Some(SymbolTable::load(original))
        });
        let module = walrus::ModuleConfig::new().parse(original);
        let Ok(checked) = proposals.recv() else {
            // The thread panicked before it sent the check's result: pass the panic on.
            match symbols.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(_) => unreachable!("the thread sends before it ends"),
            }
        };
        checked?;
        let module = module.map_err(invalid)?;
        let rewritten = rewrite(module, options)?;
        let symbols = match symbols.join() {
            Ok(Some(loaded)) => loaded.map_err(invalid)?,
            Ok(None) => unreachable!("the proposals were accepted"),
            Err(panic) => std::panic::resume_unwind(panic),
        };
        Ok(rewritten.finish(options, &symbols))
    })
}

fn invalid(e: anyhow::Error) -> InstrumentError {
    InstrumentError::Invalid(format!("{e:#}"))
}

/// The rewritten module, and what its tables need from the rewrite.
struct Rewritten {
    wasm: Vec<u8>,
    layout: Layout,
    /// Whether each function, by index, is an import.
    imported: Vec<bool>,
    sites: Sites,
}

impl Rewritten {
    /// Writes the tables, with the names and source positions from `symbols`, into the
    /// module's `wasmprof` section.
    fn finish(self, options: &Options, symbols: &SymbolTable) -> Instrumented {
        let functions = symbols
            .functions()
            .iter()
            .zip(&self.imported)
            .map(|(symbol, &import)| FunctionMeta {
                symbol: symbol.clone(),
                import,
            })
            .collect();
        let locate = |sites: &[Site]| sites.iter().map(|site| site.locate(symbols)).collect();
        let meta = Meta {
            version: meta::VERSION,
            metric: options.metric,
            state: options.state,
            layout: self.layout,
            functions,
            direct_sites: locate(&self.sites.direct),
            indirect_sites: locate(&self.sites.indirect),
        };
        // A custom section may come last: appending it leaves the module as it was.
        let mut wasm = self.wasm;
        let data = serde_json::to_vec(&meta).expect("meta serializes");
        wasm_encoder::Section::append_to(
            &wasm_encoder::CustomSection {
                name: meta::SECTION.into(),
                data: data.into(),
            },
            &mut wasm,
        );
        Instrumented { wasm, meta }
    }
}

/// Adds the runtime and the probes to `module`; emits and validates the result.
fn rewrite(mut module: Module, options: &Options) -> Result<Rewritten, InstrumentError> {
    // Function ids: walrus allocates functions in index order when it parses.
    let original_funcs: Vec<FunctionId> = module.funcs.iter().map(|f| f.id()).collect();
    debug_assert!(original_funcs
        .iter()
        .enumerate()
        .all(|(i, id)| id.index() == i));
    let function_count = original_funcs.len() as u32;
    let mut imported = vec![false; original_funcs.len()];

    let thunks = add_import_thunks(&mut module, &original_funcs);
    for import in thunks.keys() {
        imported[import.index()] = true;
    }
    redirect_to_thunks(&mut module, &thunks);

    // Number the call sites of every defined function (thunks hold no sites of their own).
    let thunk_for: HashMap<FunctionId, u32> = thunks
        .iter()
        .map(|(&import, &thunk)| (thunk, import.index() as u32))
        .collect();
    let mut sites = Sites::default();
    let mut plans = Vec::new();
    for &id in &original_funcs {
        if let FunctionKind::Local(func) = &module.funcs.get(id).kind {
            let f = id.index() as u32;
            let seqs = sequences(func);
            let site_ids = sites.number(func, &seqs, f, &thunk_for);
            plans.push(Plan {
                id,
                f,
                site_ids,
                seqs,
            });
        }
    }
    for (&import, &thunk) in &thunks {
        let FunctionKind::Local(func) = &module.funcs.get(thunk).kind else {
            unreachable!("a thunk is a defined function");
        };
        plans.push(Plan {
            id: thunk,
            f: import.index() as u32,
            site_ids: Vec::new(),
            seqs: sequences(func),
        });
    }

    let layout = Layout::new(
        function_count,
        sites.direct.len() as u32,
        sites.indirect.len() as u32,
        options.max_contexts,
    );
    let rt = match options.state {
        StateLocation::OwnMemory => runtime::add(&mut module, &layout, options.metric),
        StateLocation::StateModule => {
            let (rt, state) = runtime::import_state_module(&mut module, &layout, options.metric);
            validate(&state).map_err(InstrumentError::Produced)?;
            module.customs.add(walrus::RawCustomSection {
                name: meta::STATE_SECTION.to_string(),
                data: state,
            });
            rt
        }
    };
    let unwind = Unwind::of(&module);
    for plan in &plans {
        let id = plan.id;
        let locals = ProbeLocals {
            timed: runtime::TimedLocals {
                parent: module.locals.add(ValType::I32),
                node: module.locals.add(ValType::I32),
                t0: module.locals.add(ValType::I64),
                scratch: module.locals.add(ValType::I32),
            },
            pending: (options.metric == Metric::Instructions)
                .then(|| module.locals.add(ValType::I64)),
        };
        let results = module.types.results(module.funcs.get(id).ty()).to_vec();
        let body_ty = match results.as_slice() {
            [] => InstrSeqType::Simple(None),
            [one] => InstrSeqType::Simple(Some(*one)),
            many => InstrSeqType::MultiValue(module.types.add(&[], many)),
        };
        let FunctionKind::Local(func) = &mut module.funcs.get_mut(id).kind else {
            unreachable!("planned functions are defined functions");
        };
        rewrite_function(func, plan, body_ty, &rt, unwind, locals);
    }
    let wasm = module.emit_wasm();
    validate(&wasm).map_err(InstrumentError::Produced)?;
    Ok(Rewritten {
        wasm,
        layout,
        imported,
        sites,
    })
}

/// One function to rewrite: its walrus id, its function id, the ids of its call sites, and
/// its instruction sequences (found once, for the numbering and the rewrite).
struct Plan {
    id: FunctionId,
    f: u32,
    site_ids: Vec<u32>,
    seqs: Vec<InstrSeqId>,
}

/// Refuses what is not a core module, one we already instrumented, and one whose names are
/// the profiler's own. ([`check_proposals`] runs beside walrus's parse.)
fn check_input(bytes: &[u8]) -> Result<(), InstrumentError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(InstrumentError::NotWasm);
    }
    if wasmparser::Parser::is_component(bytes) {
        return Err(InstrumentError::Component);
    }
    match meta::custom_section(bytes, meta::SECTION) {
        Ok(Some(_)) => return Err(InstrumentError::AlreadyInstrumented),
        Ok(None) => {}
        Err(e) => return Err(InstrumentError::Invalid(format!("{e:#}"))),
    }
    check_names(bytes)
}

/// Proposals the instrumenter does not handle, with the name a user knows them by.
const NOT_HANDLED: &[(wasmparser::WasmFeatures, &str)] = {
    use wasmparser::WasmFeatures as F;
    &[
        (F::GC, "garbage collection (GC)"),
        (F::STACK_SWITCHING, "stack switching"),
        (F::SHARED_EVERYTHING_THREADS, "shared-everything threads"),
        (F::CUSTOM_PAGE_SIZES, "custom page sizes"),
        (F::WIDE_ARITHMETIC, "wide arithmetic"),
        (F::MEMORY_CONTROL, "memory control"),
        (F::CUSTOM_DESCRIPTORS, "custom descriptors"),
        (F::COMPACT_IMPORTS, "compact imports"),
    ]
};

/// Validates the module with the proposals the instrumenter handles (the standard ones up
/// to Wasm 3.0 but GC, plus legacy exceptions); a module that needs another one is refused
/// with its name.
fn check_proposals(bytes: &[u8]) -> Result<(), InstrumentError> {
    use wasmparser::{Validator, WasmFeatures};
    let validate = |features: WasmFeatures| {
        Validator::new_with_features(features)
            .validate_all(bytes)
            .map(|_| ())
    };
    let mut handled = WasmFeatures::all();
    for &(feature, _) in NOT_HANDLED {
        handled.remove(feature);
    }
    let Err(error) = validate(handled) else {
        return Ok(());
    };
    for &(feature, name) in NOT_HANDLED {
        if validate(handled | feature).is_ok() {
            return Err(InstrumentError::Unsupported(format!(
                "uses the {name} proposal, which cargo-wasmprof cannot instrument yet"
            )));
        }
    }
    Err(InstrumentError::Invalid(error.to_string()))
}

/// Refuses modules whose import or export names are the profiler's own, and modules built
/// for threads (wasi-threads' `thread-spawn`), whose other threads are instances the host
/// would not collect.
fn check_names(bytes: &[u8]) -> Result<(), InstrumentError> {
    use wasmparser::Payload;
    let invalid = |e: wasmparser::BinaryReaderError| InstrumentError::Invalid(e.to_string());
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.map_err(invalid)? {
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.map_err(invalid)?;
                    if import.module == meta::STATE_MODULE {
                        return Err(InstrumentError::Unsupported(format!(
                            "imports `{}.{}`: module `{}` is the profiler's own import \
                             namespace",
                            import.module,
                            import.name,
                            meta::STATE_MODULE
                        )));
                    }
                    if import.name == "thread-spawn" {
                        return Err(InstrumentError::Unsupported(format!(
                            "a threaded module (it imports `{}.thread-spawn`, as \
                             wasm32-wasip1-threads builds do): threads are not supported yet",
                            import.module
                        )));
                    }
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.map_err(invalid)?;
                    if export.name.starts_with("__wasmprof_") {
                        return Err(InstrumentError::Unsupported(format!(
                            "exports `{}`: names starting with `__wasmprof_` are the \
                             profiler's own",
                            export.name
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Validates a module with every feature wasmparser knows.
pub fn validate(wasm: &[u8]) -> Result<(), String> {
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(wasm)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Adds a thunk for every imported function: a defined function that calls the import.
/// Returns import -> thunk, in index order (so that the output is deterministic).
fn add_import_thunks(
    module: &mut Module,
    funcs: &[FunctionId],
) -> BTreeMap<FunctionId, FunctionId> {
    let mut thunks = BTreeMap::new();
    for &id in funcs {
        let FunctionKind::Import(_) = module.funcs.get(id).kind else {
            continue;
        };
        let ty = module.funcs.get(id).ty();
        let (params, results) = module.types.params_results(ty);
        let (params, results) = (params.to_vec(), results.to_vec());
        let args: Vec<_> = params.iter().map(|&t| module.locals.add(t)).collect();
        let mut builder = FunctionBuilder::new(&mut module.types, &params, &results);
        let mut body = builder.func_body();
        for &arg in &args {
            body.local_get(arg);
        }
        body.call(id);
        let thunk = builder.finish(args, &mut module.funcs);
        let name = module.funcs.get(id).name.clone();
        module.funcs.get_mut(thunk).name = name.map(|n| format!("{n} (wasmprof thunk)"));
        thunks.insert(id, thunk);
    }
    thunks
}

/// Points every call, `ref.func`, table slot, global initializer, export and start function
/// that names an import at its thunk instead (only the thunks' own calls keep the import), so that a call
/// of a re-exported import from the host is counted too, as `<host>` -> the import.
fn redirect_to_thunks(module: &mut Module, thunks: &BTreeMap<FunctionId, FunctionId>) {
    let swap = |id: &mut FunctionId| {
        if let Some(&thunk) = thunks.get(id) {
            *id = thunk;
        }
    };
    let thunk_ids: std::collections::HashSet<FunctionId> = thunks.values().copied().collect();
    for (id, func) in module.funcs.iter_local_mut() {
        if thunk_ids.contains(&id) {
            continue;
        }
        let entry = func.entry_block();
        walrus::ir::dfs_pre_order_mut(&mut Redirect(&swap), func, entry);
    }
    for element in module.elements.iter_mut() {
        match &mut element.items {
            walrus::ElementItems::Functions(ids) => ids.iter_mut().for_each(&swap),
            walrus::ElementItems::Expressions(_, exprs) => {
                for expr in exprs {
                    redirect_const(expr, &swap);
                }
            }
        }
    }
    let globals: Vec<_> = module.globals.iter().map(|g| g.id()).collect();
    for id in globals {
        if let walrus::GlobalKind::Local(expr) = &mut module.globals.get_mut(id).kind {
            redirect_const(expr, &swap);
        }
    }
    for export in module.exports.iter_mut() {
        if let walrus::ExportItem::Function(id) = &mut export.item {
            swap(id);
        }
    }
    if let Some(start) = &mut module.start {
        swap(start);
    }
}

fn redirect_const(expr: &mut walrus::ConstExpr, swap: &impl Fn(&mut FunctionId)) {
    match expr {
        walrus::ConstExpr::RefFunc(id) => swap(id),
        walrus::ConstExpr::Extended(ops) => {
            for op in ops {
                if let walrus::ConstOp::RefFunc(id) = op {
                    swap(id);
                }
            }
        }
        _ => {}
    }
}

struct Redirect<'a, F: Fn(&mut FunctionId)>(&'a F);

impl<F: Fn(&mut FunctionId)> VisitorMut for Redirect<'_, F> {
    fn visit_instr_mut(&mut self, instr: &mut Instr, _: &mut InstrLocId) {
        match instr {
            Instr::Call(walrus::ir::Call { func })
            | Instr::ReturnCall(walrus::ir::ReturnCall { func })
            | Instr::RefFunc(walrus::ir::RefFunc { func }) => (self.0)(func),
            _ => {}
        }
    }
}

/// The call sites found so far, numbered in two compact spaces.
#[derive(Default)]
struct Sites {
    direct: Vec<Site>,
    indirect: Vec<Site>,
}

/// One call site, as the rewrite finds it.
struct Site {
    /// Function id of the function that holds the call.
    caller: u32,
    /// Function id of the callee, for direct calls.
    callee: Option<u32>,
    /// The call's offset in the original module, when walrus knows it.
    offset: Option<u32>,
}

impl Site {
    /// The site's table entry, with its source position from `symbols`.
    fn locate(&self, symbols: &SymbolTable) -> SiteMeta {
        SiteMeta {
            caller: self.caller,
            callee: self.callee,
            pos: self
                .offset
                .and_then(|offset| symbols.location(offset.into())),
        }
    }
}

impl Sites {
    /// Numbers the call sites of `func` (function id `caller`), in the order
    /// [`rewrite_function`] meets them.
    fn number(
        &mut self,
        func: &LocalFunction,
        seqs: &[InstrSeqId],
        caller: u32,
        thunk_for: &HashMap<FunctionId, u32>,
    ) -> Vec<u32> {
        // A thunk stands for its import.
        let callee_id = |id: FunctionId| thunk_for.get(&id).copied().unwrap_or(id.index() as u32);
        let mut ids = Vec::new();
        for &seq in seqs {
            for (instr, loc) in &func.block(seq).instrs {
                let (direct, callee) = match instr {
                    Instr::Call(c) => (true, Some(callee_id(c.func))),
                    Instr::ReturnCall(c) => (true, Some(callee_id(c.func))),
                    Instr::CallIndirect(_)
                    | Instr::ReturnCallIndirect(_)
                    | Instr::CallRef(_)
                    | Instr::ReturnCallRef(_) => (false, None),
                    _ => continue,
                };
                let site = Site {
                    caller,
                    callee,
                    offset: (!loc.is_default()).then(|| loc.data()),
                };
                if direct {
                    self.direct.push(site);
                    ids.push(self.direct.len() as u32);
                } else {
                    ids.push(INDIRECT_SITE | self.indirect.len() as u32);
                    self.indirect.push(site);
                }
            }
        }
        ids
    }
}

/// Every instruction sequence of `func`, in a fixed order.
fn sequences(func: &LocalFunction) -> Vec<InstrSeqId> {
    let mut found = Vec::new();
    let mut stack = vec![func.entry_block()];
    while let Some(id) = stack.pop() {
        found.push(id);
        for (instr, _) in func.block(id).instrs.iter().rev() {
            match instr {
                Instr::Block(b) => stack.push(b.seq),
                Instr::Loop(l) => stack.push(l.seq),
                Instr::IfElse(i) => {
                    stack.push(i.alternative);
                    stack.push(i.consequent);
                }
                Instr::TryTable(t) => stack.push(t.seq),
                Instr::Try(t) => {
                    for catch in t.catches.iter().rev() {
                        match catch {
                            walrus::ir::LegacyCatch::Catch { handler, .. }
                            | walrus::ir::LegacyCatch::CatchAll { handler } => stack.push(*handler),
                            walrus::ir::LegacyCatch::Delegate { .. } => {}
                        }
                    }
                    stack.push(t.seq);
                }
                _ => {}
            }
        }
    }
    found
}

/// How an exception that leaves a function reaches its exit probe, in a module that uses
/// exceptions: a handler that catches everything, runs the exit probe and throws again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unwind {
    /// `try_table (catch_all_ref)` and `throw_ref`: the standard exceptions proposal, as
    /// wasmtime runs it.
    Standard,
    /// `try`, `catch_all` and `rethrow`: the legacy proposal, as Emscripten emits it and
    /// node 20 runs it.
    Legacy,
}

impl Unwind {
    /// The handler a module needs: none without tags (no wasm exception can be thrown);
    /// the legacy form when the module uses legacy instructions (its host runs them), else
    /// the standard form.
    fn of(module: &Module) -> Option<Unwind> {
        module.tags.iter().next()?;
        let legacy = module.funcs.iter_local().any(|(_, func)| {
            sequences(func).into_iter().any(|seq| {
                func.block(seq)
                    .instrs
                    .iter()
                    .any(|(instr, _)| matches!(instr, Instr::Try(_) | Instr::Rethrow(_)))
            })
        });
        Some(if legacy {
            Unwind::Legacy
        } else {
            Unwind::Standard
        })
    }
}

/// Adds the probes to one function: site ids before calls and the entry probe; when a cost
/// is measured, the body in a block whose exits all reach the exit probe (and, with
/// `unwind`, a handler that runs it when an exception leaves the function); for the
/// instructions metric, an increment of the local `pending` at the start of every
/// straight-line segment, added to the shared counter before calls and exits.
fn rewrite_function(
    func: &mut LocalFunction,
    &Plan {
        f,
        ref site_ids,
        ref seqs,
        ..
    }: &Plan,
    body_ty: InstrSeqType,
    rt: &runtime::Runtime,
    unwind: Option<Unwind>,
    ProbeLocals { timed, pending }: ProbeLocals,
) {
    let entry = func.entry_block();
    let timing = match &rt.probes {
        runtime::Probes::Timed(timing) => Some(timing),
        runtime::Probes::Count(_) => None,
    };
    let body = timing.map(|_| func.builder_mut().dangling_instr_seq(body_ty).id());
    let counter = match (timing.map(|t| t.clock), pending) {
        (Some(runtime::Clock::Instructions(global)), Some(local)) => {
            Some(Counter { global, local })
        }
        _ => None,
    };
    let flush = |at: InstrLocId| counter.map(|c| c.flush(at)).unwrap_or_default();
    // The exit probe, in a block of its own (a sequence has one place in the tree).
    let exit_probe = |func: &mut LocalFunction, at: InstrLocId| -> Vec<(Instr, InstrLocId)> {
        let Some(timing) = timing else {
            return Vec::new();
        };
        let mut probe = flush(at);
        let mut seq = func.builder_mut().dangling_instr_seq(None);
        timing.exit(&mut seq, timed);
        probe.push((Instr::Block(Block { seq: seq.id() }), at));
        probe
    };

    let mut next_site = site_ids.iter();
    for &seq in seqs {
        let old = std::mem::take(&mut func.block_mut(seq).instrs);
        let mut new = Vec::with_capacity(old.len() + 8);
        let mut segment = Segment::default();
        for (mut instr, loc) in old {
            if let Some(body) = body {
                retarget(&mut instr, entry, body);
            }
            if is_call(&instr) {
                let site = *next_site.next().unwrap_or(&0);
                if site != 0 {
                    segment.instrs.push((i32_const(site), loc));
                    segment
                        .instrs
                        .push((Instr::GlobalSet(GlobalSet { global: rt.site }), loc));
                }
                // The callee reads the counter at its entry.
                segment.instrs.extend(flush(loc));
            }
            let ends_segment = ends_segment(&instr);
            segment.original += 1;
            match instr {
                Instr::Return(_) if body.is_some() => {
                    let block = body.expect("checked");
                    segment.instrs.push((Instr::Br(Br { block }), loc));
                }
                Instr::ReturnCall(_) | Instr::ReturnCallIndirect(_) | Instr::ReturnCallRef(_) => {
                    segment.instrs.extend(exit_probe(func, loc));
                    segment.instrs.push((instr, loc));
                }
                other => segment.instrs.push((other, loc)),
            }
            if ends_segment {
                segment.flush_into(&mut new, counter);
            }
        }
        segment.flush_into(&mut new, counter);
        func.block_mut(seq).instrs = new;
    }
    debug_assert!(
        next_site.next().is_none(),
        "every numbered call site was rewritten"
    );

    let (Some(body), runtime::Probes::Timed(timing)) = (body, &rt.probes) else {
        let runtime::Probes::Count(counter) = &rt.probes else {
            unreachable!("a timed function has a body block");
        };
        // Calls only: the counting, then the body as it was.
        let original = std::mem::take(&mut func.block_mut(entry).instrs);
        counter.count_call(
            &mut func.builder_mut().func_body(),
            f,
            [timed.parent, timed.node],
        );
        func.block_mut(entry).instrs.extend(original);
        return;
    };
    // The entry sequence becomes: entry probe, the body block, exit probe.
    let moved = std::mem::take(&mut func.block_mut(entry).instrs);
    func.block_mut(body).instrs = moved;
    let at = InstrLocId::default();
    let mut entry_probe = func.builder_mut().dangling_instr_seq(None);
    timing.entry(&mut entry_probe, f, timed);
    let mut probe = vec![(
        Instr::Block(Block {
            seq: entry_probe.id(),
        }),
        at,
    )];
    match unwind {
        None => {
            probe.push((Instr::Block(Block { seq: body }), at));
            probe.extend(exit_probe(func, at));
        }
        Some(Unwind::Standard) => {
            // block $caught (result exnref)
            //   try_table (result ..) (catch_all_ref $caught) body end
            //   exit probe; return
            // end
            // exit probe; throw_ref
            let exnref = ValType::Ref(walrus::RefType::EXNREF);
            let builder = func.builder_mut();
            let try_seq = builder.dangling_instr_seq(body_ty).id();
            let caught = builder
                .dangling_instr_seq(InstrSeqType::Simple(Some(exnref)))
                .id();
            func.block_mut(try_seq).instrs = vec![(Instr::Block(Block { seq: body }), at)];
            let catches = vec![walrus::ir::TryTableCatch::CatchAllRef { label: caught }];
            let mut normal = vec![(
                Instr::TryTable(walrus::ir::TryTable {
                    seq: try_seq,
                    catches,
                }),
                at,
            )];
            normal.extend(exit_probe(func, at));
            normal.push((Instr::Return(walrus::ir::Return {}), at));
            func.block_mut(caught).instrs = normal;
            probe.push((Instr::Block(Block { seq: caught }), at));
            probe.extend(exit_probe(func, at));
            probe.push((Instr::ThrowRef(walrus::ir::ThrowRef {}), at));
        }
        Some(Unwind::Legacy) => {
            // try (result ..) body catch_all exit probe; rethrow 0 end
            // exit probe
            let builder = func.builder_mut();
            let try_seq = builder.dangling_instr_seq(body_ty).id();
            let handler = builder.dangling_instr_seq(body_ty).id();
            func.block_mut(try_seq).instrs = vec![(Instr::Block(Block { seq: body }), at)];
            let mut rethrow = exit_probe(func, at);
            rethrow.push((
                Instr::Rethrow(walrus::ir::Rethrow { relative_depth: 0 }),
                at,
            ));
            func.block_mut(handler).instrs = rethrow;
            let catches = vec![walrus::ir::LegacyCatch::CatchAll { handler }];
            probe.push((
                Instr::Try(walrus::ir::Try {
                    seq: try_seq,
                    catches,
                }),
                at,
            ));
            probe.extend(exit_probe(func, at));
        }
    }
    func.block_mut(entry).instrs = probe;
}

/// The locals the probes use in one function.
struct ProbeLocals {
    /// The timed probes' locals; the calls metric's probe uses two of them as scratch.
    timed: runtime::TimedLocals,
    /// With the instructions metric, the instructions counted since the last flush: the
    /// function counts in this local and adds it to the shared counter only where someone
    /// reads that, before calls and exits.
    pending: Option<walrus::LocalId>,
}

/// The instructions metric's counting in one function: a local that each straight-line
/// segment adds its length to, and the shared counter it is added to where it is read.
#[derive(Clone, Copy)]
struct Counter {
    global: walrus::GlobalId,
    local: walrus::LocalId,
}

impl Counter {
    /// `local += n`.
    fn add(self, n: i64, at: InstrLocId) -> [(Instr, InstrLocId); 4] {
        [
            (Instr::LocalGet(LocalGet { local: self.local }), at),
            (
                Instr::Const(Const {
                    value: Value::I64(n),
                }),
                at,
            ),
            (
                Instr::Binop(Binop {
                    op: BinaryOp::I64Add,
                }),
                at,
            ),
            (Instr::LocalSet(LocalSet { local: self.local }), at),
        ]
    }

    /// `global += local; local = 0`: before a call (the callee's entry reads the counter)
    /// and before the exit probe.
    fn flush(self, at: InstrLocId) -> Vec<(Instr, InstrLocId)> {
        vec![
            (
                Instr::GlobalGet(GlobalGet {
                    global: self.global,
                }),
                at,
            ),
            (Instr::LocalGet(LocalGet { local: self.local }), at),
            (
                Instr::Binop(Binop {
                    op: BinaryOp::I64Add,
                }),
                at,
            ),
            (
                Instr::GlobalSet(GlobalSet {
                    global: self.global,
                }),
                at,
            ),
            (
                Instr::Const(Const {
                    value: Value::I64(0),
                }),
                at,
            ),
            (Instr::LocalSet(LocalSet { local: self.local }), at),
        ]
    }
}

/// A straight-line run of rewritten instructions and how many original ones it holds.
#[derive(Default)]
struct Segment {
    instrs: Vec<(Instr, InstrLocId)>,
    original: i64,
}

impl Segment {
    /// Appends the segment to `out`, preceded, with an instruction counter, by the
    /// counter's increment by the segment's original instruction count.
    fn flush_into(&mut self, out: &mut Vec<(Instr, InstrLocId)>, counter: Option<Counter>) {
        if let (Some(counter), true) = (counter, self.original > 0) {
            out.extend(counter.add(self.original, InstrLocId::default()));
        }
        out.append(&mut self.instrs);
        self.original = 0;
    }
}

fn i32_const(value: u32) -> Instr {
    Instr::Const(Const {
        value: Value::I32(value as i32),
    })
}

fn is_call(instr: &Instr) -> bool {
    matches!(
        instr,
        Instr::Call(_)
            | Instr::ReturnCall(_)
            | Instr::CallIndirect(_)
            | Instr::ReturnCallIndirect(_)
            | Instr::CallRef(_)
            | Instr::ReturnCallRef(_)
    )
}

/// Whether the instructions after `instr` may not run whenever it does: after a branch, a
/// return or a trap, and after a nested block (which may branch past them).
fn ends_segment(instr: &Instr) -> bool {
    matches!(
        instr,
        Instr::Block(_)
            | Instr::Loop(_)
            | Instr::IfElse(_)
            | Instr::TryTable(_)
            | Instr::Try(_)
            | Instr::Br(_)
            | Instr::BrIf(_)
            | Instr::BrTable(_)
            | Instr::BrOnNull(_)
            | Instr::BrOnNonNull(_)
            | Instr::BrOnCast(_)
            | Instr::BrOnCastFail(_)
            | Instr::Return(_)
            | Instr::ReturnCall(_)
            | Instr::ReturnCallIndirect(_)
            | Instr::ReturnCallRef(_)
            | Instr::Unreachable(_)
            | Instr::Throw(_)
            | Instr::ThrowRef(_)
            | Instr::Rethrow(_)
    )
}

/// Points a branch that targets the function body (`entry`) at the new body block.
fn retarget(instr: &mut Instr, entry: InstrSeqId, body: InstrSeqId) {
    let fix = |id: &mut InstrSeqId| {
        if *id == entry {
            *id = body;
        }
    };
    match instr {
        Instr::Br(b) => fix(&mut b.block),
        Instr::BrIf(b) => fix(&mut b.block),
        Instr::BrTable(b) => {
            b.blocks.iter_mut().for_each(fix);
            fix(&mut b.default);
        }
        Instr::BrOnNull(b) => fix(&mut b.block),
        Instr::BrOnNonNull(b) => fix(&mut b.block),
        Instr::BrOnCast(b) => fix(&mut b.block),
        Instr::BrOnCastFail(b) => fix(&mut b.block),
        Instr::TryTable(t) => {
            for catch in t.catches.iter_mut() {
                match catch {
                    walrus::ir::TryTableCatch::Catch { label, .. }
                    | walrus::ir::TryTableCatch::CatchRef { label, .. }
                    | walrus::ir::TryTableCatch::CatchAll { label }
                    | walrus::ir::TryTableCatch::CatchAllRef { label } => fix(label),
                }
            }
        }
        _ => {}
    }
}
