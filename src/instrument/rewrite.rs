//! The rewrite of one function: call-site ids before its calls, the entry probe, and, when
//! a cost is measured, its body in a block whose every exit (returns, branches to the
//! body, tail calls, exceptions) reaches the exit probe.

use std::collections::HashSet;
use walrus::ir::{
    Block, Br, Const, GlobalGet, GlobalSet, Instr, InstrLocId, InstrSeqId, InstrSeqType, LocalGet,
    LocalSet, LocalTee, Value,
};

use walrus::{LocalFunction, Module, ValType};

use super::counting::{ends_segment, InstructionCounter, Segment, SegmentCounters};
use super::plan::Plan;
use super::probes;
use super::sites::{is_call, is_direct, sequences};

/// How an exception that leaves a function reaches its exit probe, in a module that uses
/// exceptions: a handler that catches everything, runs the exit probe and throws again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unwind {
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
    pub(super) fn of(module: &Module) -> Option<Unwind> {
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
pub(super) fn rewrite_function(
    func: &mut LocalFunction,
    plan: &Plan,
    setting: Setting,
    profiler: &probes::Profiler,
    locals: ProbeLocals,
    segments: &mut Option<SegmentCounters>,
) {
    let Setting {
        body_ty,
        unwind,
        reentry,
        escaping,
    } = setting;
    let timing = match &profiler.probes {
        probes::MetricProbes::Timed(timing) => Some(timing),
        probes::MetricProbes::Count(..) => None,
    };
    let counter = match (timing.and_then(|t| t.clock), locals.pending) {
        (Some(probes::Reading::Instructions(global)), Some(local)) => {
            Some(InstructionCounter { global, local })
        }
        _ => None,
    };
    let body = timing.map(|_| func.builder_mut().dangling_instr_seq(body_ty).id());
    let mut rewrite = FunctionRewrite {
        func,
        plan,
        body_ty,
        profiler,
        locals,
        timing,
        counter,
        body,
        reentry,
        escaping,
    };
    rewrite.sequences(segments);
    match (body, &profiler.probes) {
        (Some(body), probes::MetricProbes::Timed(timing)) => {
            rewrite.wrap_timed(body, timing, unwind)
        }
        (None, probes::MetricProbes::Count(counter, active)) => {
            rewrite.wrap_counted(counter, *active, unwind)
        }
        _ => unreachable!("a timed function has a body block, a counted one none"),
    }
}

/// One function's rewrite in progress.
struct FunctionRewrite<'a> {
    func: &'a mut LocalFunction,
    plan: &'a Plan,
    body_ty: InstrSeqType,
    profiler: &'a probes::Profiler,
    locals: ProbeLocals,
    /// The cost metric's probes (none for the calls metric).
    timing: Option<&'a probes::Timing>,
    /// The instructions metric's counter.
    counter: Option<InstructionCounter>,
    /// The block the body moves into, with a cost metric.
    body: Option<InstrSeqId>,
    /// A leaf's stub, through which its inline entry probe re-enters it.
    reentry: Option<walrus::FunctionId>,
    /// The functions that may be entered otherwise than by a direct call.
    escaping: &'a HashSet<walrus::FunctionId>,
}

impl FunctionRewrite<'_> {
    /// What adds the function's pending instructions to the shared counter, at `at`.
    fn flush(&self, at: InstrLocId) -> Vec<(Instr, InstrLocId)> {
        self.counter.map(|c| c.flush(at)).unwrap_or_default()
    }

    /// The exit probe, in a block of its own (a sequence has one place in the tree), where
    /// the activation ends `how`; an allocator's allocation probe before it, while its
    /// node runs.
    fn exit_probe(&mut self, at: InstrLocId, how: Exit) -> Vec<(Instr, InstrLocId)> {
        let Some(timing) = self.timing else {
            return Vec::new();
        };
        let mut probe = self.allocator_exit(how);
        probe.extend(self.flush(at));
        let mut seq = self.func.builder_mut().dangling_instr_seq(None);
        if self.plan.thunk {
            timing.repair(&mut seq, self.locals.timed);
        }
        timing.exit(&mut seq, self.locals.timed);
        probe.push((Instr::Block(Block { seq: seq.id() }), at));
        probe
    }

    /// An allocator's probe where its activation ends `how`: one allocator call less deep,
    /// and, when it returns, what it did recorded (its result, on the stack, kept in a
    /// local first).
    fn allocator_exit(&mut self, how: Exit) -> Vec<(Instr, InstrLocId)> {
        let (Some(kind), Some(alloc)) = (self.plan.alloc, &self.profiler.alloc) else {
            return Vec::new();
        };
        let (args, result) = (self.locals.alloc_args.clone(), self.locals.alloc_result);
        let mut probe = Vec::new();
        let mut seq = self.func.builder_mut().dangling_instr_seq(None);
        match how {
            Exit::Unwound => alloc.unwound(&mut seq),
            Exit::Returned => {
                if let Some(local) = result {
                    probe.push((Instr::LocalTee(LocalTee { local }), self::probe()));
                }
                alloc.leave(&mut seq, kind, &args, result);
            }
        }
        probe.push((Instr::Block(Block { seq: seq.id() }), self::probe()));
        probe
    }

    /// Every instruction sequence rewritten: site ids before calls, the counter flushed
    /// where others read it, `return` a branch out of the body, the exit probe before tail
    /// calls, the wait probe around waits, and each straight-line segment counted.
    fn sequences(&mut self, segments: &mut Option<SegmentCounters>) {
        let entry = self.func.entry_block();
        let mut next_site = self.plan.site_ids.iter();
        for &seq in &self.plan.seqs {
            let old = std::mem::take(&mut self.func.block_mut(seq).instrs);
            let mut new = Vec::with_capacity(old.len() + 8);
            let mut segment = Segment::default();
            for (mut instr, loc) in old {
                if let Some(body) = self.body {
                    retarget(&mut instr, entry, body);
                }
                if is_call(&instr) {
                    let site = *next_site.next().unwrap_or(&0);
                    if let (true, Some(arcs)) = (is_direct(site), &self.profiler.site_arcs) {
                        let mut seq = self.func.builder_mut().dangling_instr_seq(None);
                        arcs.count(&mut seq, site);
                        let seq = seq.id();
                        segment.instrs.push((Instr::Block(Block { seq }), probe()));
                    }
                    if site != 0 && self.announces(&instr) {
                        segment.instrs.push((i32_const(site), probe()));
                        segment.instrs.push((
                            Instr::GlobalSet(GlobalSet {
                                global: self.profiler.site,
                            }),
                            probe(),
                        ));
                    }
                    // The callee reads the counter at its entry.
                    segment.instrs.extend(self.flush(probe()));
                }
                let ends_segment = ends_segment(&instr);
                segment.original += 1;
                if segments.is_some() {
                    // An instruction walrus has no offset for has no line either.
                    segment.offsets.push(if loc.is_default() {
                        u32::MAX
                    } else {
                        loc.data()
                    });
                }
                self.instruction(instr, loc, &mut segment);
                if ends_segment {
                    segment.flush_into(&mut new, self.counter, segments);
                }
            }
            segment.flush_into(&mut new, self.counter, segments);
            self.func.block_mut(seq).instrs = new;
        }
        debug_assert!(
            next_site.next().is_none(),
            "every numbered call site was rewritten"
        );
    }

    /// Whether the direct sites count their own calls and nothing else at an entry needs a
    /// site's id: the calls probes on the profiler's own memory, where a function entered
    /// only by direct calls gets no entry probe.
    fn counted_at_sites(&self) -> bool {
        self.profiler.site_arcs.is_some()
            && matches!(self.profiler.probes, probes::MetricProbes::Count(..))
    }

    /// Whether the call `instr` tells its callee its site's id: always, but where the sites
    /// count their own calls and a direct call's callee has no entry probe to take it.
    fn announces(&self, instr: &Instr) -> bool {
        match instr {
            Instr::Call(walrus::ir::Call { func })
            | Instr::ReturnCall(walrus::ir::ReturnCall { func })
                if self.counted_at_sites() =>
            {
                self.escaping.contains(func)
            }
            _ => true,
        }
    }

    /// One instruction, as the rewrite leaves it, into `segment`.
    fn instruction(&mut self, instr: Instr, loc: InstrLocId, segment: &mut Segment) {
        match instr {
            Instr::Return(_) if self.body.is_some() => {
                let block = self.body.expect("checked");
                segment.instrs.push((Instr::Br(Br { block }), loc));
            }
            Instr::ReturnCall(_) | Instr::ReturnCallIndirect(_) | Instr::ReturnCallRef(_) => {
                segment
                    .instrs
                    .extend(self.exit_probe(probe(), Exit::Unwound));
                segment.instrs.push((instr, loc));
            }
            Instr::AtomicWait(_) if self.profiler.wait.is_some() => {
                let (Some(wait_probe), Some(locals)) = (&self.profiler.wait, self.locals.wait)
                else {
                    unreachable!("a function with waits has the wait probe's locals");
                };
                // The host may read the counter while the thread waits.
                segment.instrs.extend(self.flush(probe()));
                segment.instrs.extend(wait_probe.around(instr, loc, locals));
            }
            Instr::MemoryGrow(_) | Instr::Call(_) if self.locals.grow_delta.is_some() => {
                let (Some(alloc), Some(delta)) = (&self.profiler.alloc, self.locals.grow_delta)
                else {
                    unreachable!("a function with a delta local has the allocation probes");
                };
                segment.instrs.extend(match self.plan.thunk {
                    true => alloc.around_host_growth((instr, loc), delta),
                    false => alloc.around_grow((instr, loc), delta),
                });
            }
            other => segment.instrs.push((other, loc)),
        }
    }

    /// The calls metric: the counting, then the body as it was (an import's thunk marks
    /// its import running meanwhile).
    fn wrap_counted(
        self,
        counter: &probes::CallCounter,
        active: walrus::GlobalId,
        unwind: Option<Unwind>,
    ) {
        // A function entered only at direct sites, which count its calls, needs no probe.
        let probed = !self.counted_at_sites() || self.escaping.contains(&self.plan.id);
        let func = self.func;
        let entry = func.entry_block();
        let original = std::mem::take(&mut func.block_mut(entry).instrs);
        let timed = self.locals.timed;
        if probed {
            counter.count_call(
                &mut func.builder_mut().func_body(),
                self.plan.f,
                [timed.parent, timed.node],
            );
        }
        if self.plan.thunk {
            mark_running(
                func,
                original,
                self.plan.f,
                active,
                timed.scratch,
                self.body_ty,
                unwind,
            );
        } else {
            func.block_mut(entry).instrs.extend(original);
        }
    }

    /// A cost metric: the entry sequence becomes the entry probe, the body block and the
    /// exit probe; with `unwind`, a handler runs the exit probe when an exception leaves.
    fn wrap_timed(mut self, body: InstrSeqId, timing: &probes::Timing, unwind: Option<Unwind>) {
        let entry = self.func.entry_block();
        let moved = std::mem::take(&mut self.func.block_mut(entry).instrs);
        self.func.block_mut(body).instrs = moved;
        let at = InstrLocId::default();
        let params = self.func.args.clone();
        let reentry = self.reentry.map(|stub| probes::Reentry {
            stub,
            params: params.clone(),
        });
        let place = match (&reentry, self.plan.inline_entry) {
            (Some(reentry), _) => probes::EntryPlace::Leaf(reentry),
            (None, true) => probes::EntryPlace::Inline,
            (None, false) => probes::EntryPlace::Call,
        };
        let mut entry_probe = self.func.builder_mut().dangling_instr_seq(None);
        timing.entry(&mut entry_probe, self.plan.f, self.locals.timed, place);
        if let (Some(_), Some(alloc)) = (self.plan.alloc, &self.profiler.alloc) {
            alloc.enter(&mut entry_probe, &params, &self.locals.alloc_args);
        }
        let mut probe = vec![(
            Instr::Block(Block {
                seq: entry_probe.id(),
            }),
            at,
        )];
        match unwind {
            None => {
                probe.push((Instr::Block(Block { seq: body }), at));
                probe.extend(self.exit_probe(at, Exit::Returned));
            }
            Some(Unwind::Standard) => probe.extend(self.standard_handler(body)),
            Some(Unwind::Legacy) => {
                // try (result ..) body catch_all exit probe; rethrow 0 end
                // exit probe
                let cleanup = self.exit_probe(at, Exit::Unwound);
                let body = vec![(Instr::Block(Block { seq: body }), at)];
                probe.push(legacy_try(self.func, body, self.body_ty, cleanup));
                probe.extend(self.exit_probe(at, Exit::Returned));
            }
        }
        self.func.block_mut(entry).instrs = probe;
    }

    /// The body in the standard exceptions proposal's handler that runs the exit probe on
    /// either way out:
    ///
    /// ```text
    /// block $caught (result exnref)
    ///   try_table (result ..) (catch_all_ref $caught) body end
    ///   exit probe; return
    /// end
    /// exit probe; throw_ref
    /// ```
    fn standard_handler(&mut self, body: InstrSeqId) -> Vec<(Instr, InstrLocId)> {
        let at = InstrLocId::default();
        let exnref = ValType::Ref(walrus::RefType::EXNREF);
        let builder = self.func.builder_mut();
        let try_seq = builder.dangling_instr_seq(self.body_ty).id();
        let caught = builder
            .dangling_instr_seq(InstrSeqType::Simple(Some(exnref)))
            .id();
        self.func.block_mut(try_seq).instrs = vec![(Instr::Block(Block { seq: body }), at)];
        let catches = vec![walrus::ir::TryTableCatch::CatchAllRef { label: caught }];
        let mut normal = vec![(
            Instr::TryTable(walrus::ir::TryTable {
                seq: try_seq,
                catches,
            }),
            at,
        )];
        normal.extend(self.exit_probe(at, Exit::Returned));
        normal.push((Instr::Return(walrus::ir::Return {}), at));
        self.func.block_mut(caught).instrs = normal;
        let mut handler = vec![(Instr::Block(Block { seq: caught }), at)];
        handler.extend(self.exit_probe(at, Exit::Unwound));
        handler.push((Instr::ThrowRef(walrus::ir::ThrowRef {}), at));
        handler
    }
}

/// Appends an import's thunk `body` to its entry sequence between the setting of `active`
/// to the import's id + 1 and its restoring (from `saved`), so that an entry from the host
/// while the import runs is counted as the import's arc. With a legacy `unwind` (a JS host),
/// a handler restores it too when an exception passes.
fn mark_running(
    func: &mut LocalFunction,
    body: Vec<(Instr, InstrLocId)>,
    f: u32,
    active: walrus::GlobalId,
    saved: walrus::LocalId,
    body_ty: InstrSeqType,
    unwind: Option<Unwind>,
) {
    let at = InstrLocId::default();
    let restore = [
        (Instr::LocalGet(LocalGet { local: saved }), at),
        (Instr::GlobalSet(GlobalSet { global: active }), at),
    ];
    let mut out = vec![
        (Instr::GlobalGet(GlobalGet { global: active }), at),
        (Instr::LocalSet(LocalSet { local: saved }), at),
        (i32_const(f + 1), at),
        (Instr::GlobalSet(GlobalSet { global: active }), at),
    ];
    if unwind == Some(Unwind::Legacy) {
        out.push(legacy_try(func, body, body_ty, restore.to_vec()));
    } else {
        out.extend(body);
    }
    out.extend(restore);
    let entry = func.entry_block();
    func.block_mut(entry).instrs.extend(out);
}

/// `try (body_ty) body catch_all cleanup; rethrow 0 end`: runs `cleanup` when an exception,
/// a wasm one or the host's, leaves `body`, and lets it go on.
fn legacy_try(
    func: &mut LocalFunction,
    body: Vec<(Instr, InstrLocId)>,
    body_ty: InstrSeqType,
    mut cleanup: Vec<(Instr, InstrLocId)>,
) -> (Instr, InstrLocId) {
    let at = InstrLocId::default();
    let builder = func.builder_mut();
    let try_seq = builder.dangling_instr_seq(body_ty).id();
    let handler = builder.dangling_instr_seq(body_ty).id();
    func.block_mut(try_seq).instrs = body;
    cleanup.push((
        Instr::Rethrow(walrus::ir::Rethrow { relative_depth: 0 }),
        at,
    ));
    func.block_mut(handler).instrs = cleanup;
    let catches = vec![walrus::ir::LegacyCatch::CatchAll { handler }];
    (
        Instr::Try(walrus::ir::Try {
            seq: try_seq,
            catches,
        }),
        at,
    )
}

/// What one function's rewrite needs besides its plan, its profiler and its locals.
pub(super) struct Setting<'a> {
    /// The type of its body block: its results.
    pub(super) body_ty: InstrSeqType,
    /// How an exception that leaves it reaches its exit probe.
    pub(super) unwind: Option<Unwind>,
    /// A leaf's stub, through which its inline entry probe re-enters it
    /// ([`probes::Reentry`]).
    pub(super) reentry: Option<walrus::FunctionId>,
    /// The functions that may be entered otherwise than by a direct call
    /// ([`super::plan::escaping`]).
    pub(super) escaping: &'a HashSet<walrus::FunctionId>,
}

/// The locals the probes use in one function.
pub(super) struct ProbeLocals {
    /// The timed probes' locals; the calls metric's probe uses two of them as scratch.
    pub(super) timed: probes::TimedLocals,
    /// With the instructions metric, the instructions counted since the last flush: the
    /// function counts in this local and adds it to the shared counter only where someone
    /// reads that, before calls and exits.
    pub(super) pending: Option<walrus::LocalId>,
    /// In a threaded module's functions that wait, the wait probe's locals.
    pub(super) wait: Option<probes::WaitLocals>,
    /// In an allocator, where its allocation probe keeps its arguments as they came (its
    /// code may reuse its parameters' locals).
    pub(super) alloc_args: Vec<walrus::LocalId>,
    /// In an allocator that returns a pointer, where its allocation probe keeps it.
    pub(super) alloc_result: Option<walrus::LocalId>,
    /// In a function that grows a memory, where the allocation probes keep the delta.
    pub(super) grow_delta: Option<walrus::LocalId>,
}

impl ProbeLocals {
    /// The locals `plan`'s function needs for `profiler`'s probes, added to `locals`.
    pub(super) fn add(
        locals: &mut walrus::ModuleLocals,
        plan: &Plan,
        profiler: &probes::Profiler,
        options: &super::Options,
    ) -> ProbeLocals {
        let timed = probes::TimedLocals {
            parent: locals.add(ValType::I32),
            node: locals.add(ValType::I32),
            t0: locals.add(ValType::I64),
            scratch: locals.add(ValType::I32),
        };
        let (params, results) = plan.alloc.map_or((0, 0), |kind| kind.arity());
        ProbeLocals {
            timed,
            pending: options
                .metric
                .facts()
                .probes
                .counter
                .then(|| locals.add(ValType::I64)),
            wait: (profiler.wait.is_some() && plan.waits).then(|| probes::WaitLocals::add(locals)),
            alloc_args: (0..params).map(|_| locals.add(ValType::I32)).collect(),
            alloc_result: (results == 1).then(|| locals.add(ValType::I32)),
            grow_delta: plan.grows.then(|| locals.add(ValType::I32)),
        }
    }
}

/// How a function's activation ends, for its exit probe.
#[derive(Clone, Copy)]
enum Exit {
    /// It returns: its results are on the stack.
    Returned,
    /// An exception leaves it, or it tail-calls: no results.
    Unwound,
}

/// Where the probes' instructions are in the original module: nowhere (the stack sampler
/// tells them from the program's code by this).
fn probe() -> InstrLocId {
    InstrLocId::default()
}

fn i32_const(value: u32) -> Instr {
    Instr::Const(Const {
        value: Value::I32(value as i32),
    })
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
