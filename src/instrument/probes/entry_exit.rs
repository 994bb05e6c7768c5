//! The probes as code: what an entry and an exit probe emit for each metric, inline in a
//! function or as a call of the state module, and the arc counting every entry does.

use walrus::ir::{BinaryOp, Instr, InstrSeqId};
use walrus::{FunctionBuilder, FunctionId, GlobalId, InstrSeqBuilder, LocalId, MemoryId, Module};

use super::mem::Mem;
use super::tables::{node_addr, push_is_direct, site_child};
use super::Func;
use crate::layout::{self, Layout};

/// The calls metric's entry probe.
pub enum CallCounter {
    /// Loads and stores on the profiler's memory, inline.
    Inline(ArcCounter),
    /// A call of the state module's `count_call(f: i32)`.
    Call(FunctionId),
}

impl CallCounter {
    /// Emits the counting of a call of function `f` and its arc, using `locals` as scratch:
    /// the arc alone, since a direct call's count is its site's and `dyn_arc` counts the
    /// other calls in f's counter.
    pub fn count_call(&self, b: &mut InstrSeqBuilder, f: u32, locals: [LocalId; 2]) {
        match self {
            CallCounter::Inline(counter) => counter.count_arc(b, Func::Const(f), locals),
            CallCounter::Call(count_call) => {
                b.i32_const(f as i32).call(*count_call);
            }
        }
    }
}

/// What measures the cost of an activation.
pub struct Timing {
    /// Where the probes' work runs.
    pub probes: TimedProbes,
    /// Where the cost is read; `None` for the sampled time metric, whose probes read no
    /// clock (a sampler outside the program credits time to the current context).
    pub clock: Option<Reading>,
    /// `unwind_to(node: i32)`: closes, at the current reading, every activation above
    /// `node` that an unwinding left open, and makes `node` current.
    pub unwind_to: FunctionId,
}

/// Where the entry and exit probes' work runs.
pub enum TimedProbes {
    /// On the module's own profiler memory: the exit probe inline in each function, the
    /// entry probe inline in a small function (see [`super::inline_entry`]) and a call of
    /// `enter` in the others; the inline entry's rare path (an entry from elsewhere than a
    /// direct site, a context node that is not its parent's first child) calls `dyn_arc`
    /// and `find_child`, or, in a leaf, goes through `enter` by the leaf's [`Reentry`]
    /// stub.
    Own {
        /// The inline probes' work.
        ops: Box<TimedOps>,
        /// `enter(f: i32) -> i64`, as [`TimedProbes::Call`]'s, in the module itself.
        enter: FunctionId,
        /// `enter_from_stub(f: i32) -> i64`, what a leaf's [`Reentry`] stub calls: `enter`
        /// without the mark and the lookups the leaf's probe made.
        enter_from_stub: FunctionId,
        /// The context node `enter` entered from.
        parent: GlobalId,
    },
    /// In the state module's functions.
    Call {
        /// `enter(f: i32) -> i64`: counts the arc and the call, moves to the callee's
        /// context node, and returns the clock's reading, which it also keeps in the node.
        enter: FunctionId,
        /// The context node `enter` entered from: the current one, once an entry from
        /// the host has closed what an unwinding left open.
        parent: GlobalId,
        /// `exit(parent: i32, node: i32, t0: i64)`: adds the activation's cost and
        /// returns to the parent's context.
        exit: FunctionId,
        /// The current context node.
        cur: GlobalId,
    },
}

impl Timing {
    /// Emits the entry probe of function `f` into `b`, placed as `place` says where the
    /// probes are on the module's own memory (a call of the state module's `enter`
    /// otherwise): `parent` gets the current context node, `node` the activation's own,
    /// `t0` the clock (kept in the node too); `scratch` is a spare i32 local.
    pub fn entry(&self, b: &mut InstrSeqBuilder, f: u32, l: TimedLocals, place: EntryPlace) {
        let (enter, cur, parent) = match (&self.probes, place) {
            (TimedProbes::Own { ops, .. }, EntryPlace::Inline) => {
                ops.enter(b, Func::Const(f), [l.parent, l.node, l.scratch]);
                self.start(ops, b, l);
                return;
            }
            (TimedProbes::Own { ops, parent, .. }, EntryPlace::Leaf(reentry)) => {
                ops.enter_leaf(b, f, [l.parent, l.node, l.scratch], *parent, reentry);
                self.start(ops, b, l);
                return;
            }
            (
                TimedProbes::Own {
                    ops, enter, parent, ..
                },
                _,
            ) => (*enter, ops.cur, *parent),
            (
                TimedProbes::Call {
                    enter, cur, parent, ..
                },
                _,
            ) => (*enter, *cur, *parent),
        };
        b.i32_const(f as i32).call(enter).local_set(l.t0);
        b.global_get(parent).local_set(l.parent);
        b.global_get(cur).local_set(l.node);
    }

    /// An inline entry's clock reading, when there is a clock.
    fn start(&self, ops: &TimedOps, b: &mut InstrSeqBuilder, l: TimedLocals) {
        if let Some(clock) = self.clock {
            ops.start(b, clock, l.scratch, l.t0);
        }
    }

    /// Adds the stub through which `func`, function `f`, gets back into itself when its
    /// inline entry probe's common path does not apply (see [`Reentry`]): it runs
    /// `enter_from_stub`, says so in the site global ([`layout::REENTRY_SITE`]) and
    /// tail-calls `func` with the arguments it was given. `None` where the probes call out
    /// anyway: the state module's, and those that read the host's clock.
    pub fn reentry_stub(
        &self,
        module: &mut Module,
        f: u32,
        func: FunctionId,
    ) -> Option<FunctionId> {
        let TimedProbes::Own {
            ops,
            enter_from_stub,
            ..
        } = &self.probes
        else {
            return None;
        };
        if let Some(Reading::Host(_)) = self.clock {
            return None;
        }
        let ty = module.types.get(module.funcs.get(func).ty());
        let (params, results) = (ty.params().to_vec(), ty.results().to_vec());
        let args: Vec<LocalId> = params.iter().map(|&t| module.locals.add(t)).collect();
        let mut builder = FunctionBuilder::new(&mut module.types, &params, &results);
        builder.name("__wasmprof_reenter".into());
        let mut b = builder.func_body();
        b.i32_const(f as i32).call(*enter_from_stub).drop();
        b.i32_const(layout::REENTRY_SITE as i32)
            .global_set(ops.counter.site);
        for &arg in &args {
            b.local_get(arg);
        }
        b.return_call(func);
        Some(builder.finish(args, &mut module.funcs))
    }

    /// Emits, for an import's thunk, the repair of the context after the import returned
    /// or threw: when the current node is not the thunk's own, the host unwound frames
    /// above it (a longjmp, a JS exception) whose exit probes never ran; they are closed
    /// now, so their cost up to this moment is theirs.
    pub fn repair(&self, b: &mut InstrSeqBuilder, l: TimedLocals) {
        let cur = match &self.probes {
            TimedProbes::Own { ops, .. } => ops.cur,
            TimedProbes::Call { cur, .. } => *cur,
        };
        b.global_get(cur).local_get(l.node).binop(BinaryOp::I32Ne);
        b.if_else(
            None,
            |unwound| {
                unwound.local_get(l.node).call(self.unwind_to);
            },
            |_| {},
        );
    }

    /// Emits the exit probe into `b`, with the locals of the function's entry probe
    /// (`t0` ends up holding the activation's cost).
    pub fn exit(&self, b: &mut InstrSeqBuilder, l: TimedLocals) {
        match &self.probes {
            TimedProbes::Own { ops, .. } => {
                if let Some(clock) = self.clock {
                    b.instr(clock.read())
                        .local_get(l.t0)
                        .binop(BinaryOp::I64Sub)
                        .local_set(l.t0);
                }
                let dt = self.clock.map(|_| l.t0);
                ops.exit(b, [l.parent, l.node, l.scratch], dt);
            }
            TimedProbes::Call { exit, .. } => {
                b.local_get(l.parent).local_get(l.node).local_get(l.t0);
                b.call(*exit);
            }
        }
    }
}

/// The locals of a function that its timed probes use.
#[derive(Clone, Copy)]
pub struct TimedLocals {
    /// The context node current at entry (the caller's).
    pub parent: LocalId,
    /// This activation's context node.
    pub node: LocalId,
    /// The clock at entry.
    pub t0: LocalId,
    /// Scratch.
    pub scratch: LocalId,
}

/// Where a function's entry probe goes, on the module's own memory.
#[derive(Clone, Copy)]
pub enum EntryPlace<'a> {
    /// A call of `enter`: a larger function's.
    Call,
    /// Inline, its rare path a call of `find_child`: a small function that calls others.
    Inline,
    /// Inline, calling nothing: a small function that calls nothing, which gets back into
    /// itself as [`Reentry`] says.
    Leaf(&'a Reentry),
}

/// How a leaf whose entry probe is inline gets back into itself when the probe's common
/// path does not apply: it tail-calls its stub ([`Timing::reentry_stub`]), which runs
/// `enter_from_stub` and tail-calls the function again with the same arguments. So the
/// probe calls nothing, and the leaf stays a leaf: Cranelift saves the callee-saved
/// registers a function uses in its prologue whenever it has a call, taken or not, and
/// those saves and their restores, outside the probes' marks, were charged to the program:
/// the small function of the accuracy benchmark's calls part (BENCHMARKS.md's history:
/// "A leaf's entry that calls nothing").
pub struct Reentry {
    /// The stub, of the function's type.
    pub stub: FunctionId,
    /// The function's parameters, passed on to the stub.
    pub params: Vec<LocalId>,
}

/// The timed probes' work on the profiler's memory, for a function id known when the code
/// is generated (inline probes) or held in a local (the state module's `enter`, `exit`).
#[derive(Clone, Copy)]
pub struct TimedOps {
    pub(super) mem: MemoryId,
    pub(super) layout: Layout,
    pub(super) cur: GlobalId,
    pub(super) counter: ArcCounter,
    /// `find_child(parent: i32, f: i32, site: i32) -> i32`: the entry's rare path.
    pub(super) find_child: FunctionId,
    /// With the sampled time metric, the word the sampler reads.
    pub(super) sample: Option<SampleWord>,
}

impl TimedOps {
    /// Reads the clock into `t0` and keeps it in the node at address `addr`, where the
    /// activation's cost can be closed from if its exit probe never runs.
    pub(super) fn start(
        &self,
        b: &mut InstrSeqBuilder,
        clock: Reading,
        addr: LocalId,
        t0: LocalId,
    ) {
        b.local_get(addr).instr(clock.read()).local_tee(t0);
        Mem(self.mem).store64(b, self.layout.nodes_off + layout::NODE_T0);
    }

    /// Counts the arc into `f`, moves the current context node (left in `parent`) to its
    /// child for `f` (left in `node`) and counts the call there. The inline probe looks
    /// first among the parent's children at the first, where a function that keeps calling
    /// the same callee finds it (two loads and a comparison); else `find_child` looks in
    /// the site's slot, the child cache and the list. (`enter`, the probe out of line,
    /// looks in the site's slot before the first child: see `build_enter`.)
    pub(super) fn enter(
        &self,
        b: &mut InstrSeqBuilder,
        f: Func,
        [parent, node, addr]: [LocalId; 3],
    ) {
        self.mark_probes(b);
        // The call site stays in `addr` for `find_child`.
        self.counter.count_arc(b, f, [addr, node]);
        b.global_get(self.cur).local_set(parent);
        b.block(None, |found| {
            let found_id = found.id();
            self.first_child(found, f, [parent, node], found_id);
            found.local_get(parent);
            f.push(found);
            found.local_get(addr);
            found.call(self.find_child).local_set(node);
        });
        self.entered(b, [node, addr]);
    }

    /// A leaf's inline entry probe, which calls nothing (see [`Reentry`]): when the call
    /// comes from a direct site and `f`'s context node is the current node's first child
    /// (where a function that keeps calling the same callee finds it) or the one the site's
    /// slot remembers (where a function calls its callees in turn), two loads and a
    /// comparison each, it counts the arc (unless the site counts it), moves to that node
    /// (left in `node`, the parent in `parent`) and counts the call there. Otherwise it
    /// changes nothing and tail-calls `reentry`'s stub, whose `enter_from_stub` does the
    /// rest (the child cache, the list, an entry from an indirect site or the host) and
    /// which calls the function again: the probe then finds [`layout::REENTRY_SITE`] in the
    /// site global, the node `enter_from_stub` made current and its parent in
    /// `parent_global`.
    pub(super) fn enter_leaf(
        &self,
        b: &mut InstrSeqBuilder,
        f: u32,
        [parent, node, addr]: [LocalId; 3],
        parent_global: GlobalId,
        reentry: &Reentry,
    ) {
        self.mark_probes(b);
        let site = self.counter.site;
        b.block(None, |entered| {
            let entered_id = entered.id();
            entered.block(None, |missed| {
                let miss = missed.id();
                // The site stays in `addr` until the arc is counted.
                missed.global_get(site).local_tee(addr);
                push_is_direct(missed);
                missed.if_else(
                    None,
                    |direct| {
                        direct.global_get(self.cur).local_set(parent);
                        direct.block(None, |found| {
                            let (f, found_id) = (Func::Const(f), found.id());
                            self.first_child(found, f, [parent, node], found_id);
                            self.site_child(found, f, [parent, addr, node], found_id);
                            found.br(miss);
                        });
                        direct.i32_const(0).global_set(site);
                        if !self.counter.at_sites {
                            self.counter.count_direct(direct, [addr, addr]);
                        }
                        self.entered(direct, [node, addr]);
                    },
                    |other| {
                        other
                            .local_get(addr)
                            .i32_const(layout::REENTRY_SITE as i32)
                            .binop(BinaryOp::I32Ne)
                            .br_if(miss);
                        other.i32_const(0).global_set(site);
                        other.global_get(parent_global).local_set(parent);
                        other.global_get(self.cur).local_set(node);
                        node_addr(other, &self.layout, node);
                        other.local_set(addr);
                        self.mark_context(other, node);
                    },
                );
                missed.br(entered_id);
            });
            for &param in &reentry.params {
                entered.local_get(param);
            }
            entered.return_call(reentry.stub);
        });
    }

    /// Leaves (`found`) with `node` the first child of `parent` when it is f's.
    pub(super) fn first_child(
        &self,
        b: &mut InstrSeqBuilder,
        f: Func,
        [parent, node]: [LocalId; 2],
        found: InstrSeqId,
    ) {
        let mem = Mem(self.mem);
        let nodes = self.layout.nodes_off;
        node_addr(b, &self.layout, parent);
        mem.load32(b, nodes + layout::NODE_FIRST_CHILD);
        b.local_tee(node);
        b.if_else(
            None,
            |first| {
                node_addr(first, &self.layout, node);
                mem.load32(first, nodes + layout::NODE_FUNC);
                f.push(first);
                first.binop(BinaryOp::I32Eq).br_if(found);
            },
            |_| {},
        );
    }

    /// Leaves (`found`) with `node` the child that direct site `s`'s slot remembers, when it
    /// is `parent`'s for `f`.
    pub(super) fn site_child(
        &self,
        b: &mut InstrSeqBuilder,
        f: Func,
        [parent, s, node]: [LocalId; 3],
        found: InstrSeqId,
    ) {
        site_child(b, &self.layout, &Mem(self.mem), [parent, s, node], f, found);
    }

    /// The entry's end, once the activation's node is in `node`: counts the call there,
    /// makes the node current and says so to the sampler; leaves the node's address in
    /// `addr`.
    pub(super) fn entered(&self, b: &mut InstrSeqBuilder, [node, addr]: [LocalId; 2]) {
        node_addr(b, &self.layout, node);
        b.local_set(addr);
        Mem(self.mem).add64(b, addr, self.layout.nodes_off + layout::NODE_COUNT, |b| {
            b.i64_const(1);
        });
        b.local_get(node).global_set(self.cur);
        self.mark_context(b, node);
    }

    /// Adds the activation's cost `dt` (when it is measured) to its node's inclusive cost,
    /// and returns to the parent's context. What the decoder cannot sum from the tree, the
    /// cost of a child that went to a fold node, goes to the parent's cost in children.
    pub(super) fn exit(
        &self,
        b: &mut InstrSeqBuilder,
        [parent, node, addr]: [LocalId; 3],
        dt: Option<LocalId>,
    ) {
        // Marked too, short as it is: half a nanosecond a call, credited to a function of
        // 2 ns, was 8 points of a share in the accuracy benchmark.
        self.mark_probes(b);
        if let Some(dt) = dt {
            self.add_cost(b, [parent, node, addr], dt);
        }
        b.local_get(parent).global_set(self.cur);
        self.mark_context(b, parent);
    }

    /// With the sampled metric, says that the probes' own work runs.
    pub(super) fn mark_probes(&self, b: &mut InstrSeqBuilder) {
        SampleWord::mark_probes(self.sample, b);
    }

    /// With the sampled metric, says that the context node in local `node` runs.
    fn mark_context(&self, b: &mut InstrSeqBuilder, node: LocalId) {
        SampleWord::mark_context(self.sample, b, node);
    }

    /// The exit probe's accounting: `dt` into the node, and into its parent's cost in
    /// children when the node is a fold node.
    fn add_cost(&self, b: &mut InstrSeqBuilder, [parent, node, addr]: [LocalId; 3], dt: LocalId) {
        let mem = Mem(self.mem);
        let nodes = self.layout.nodes_off;
        node_addr(b, &self.layout, node);
        b.local_set(addr);
        mem.add64(b, addr, nodes + layout::NODE_INCL, |b| {
            b.local_get(dt);
        });
        b.local_get(node)
            .i32_const(self.layout.first_context_node() as i32)
            .binop(BinaryOp::I32LtU);
        b.if_else(
            None,
            |folded| {
                node_addr(folded, &self.layout, parent);
                folded.local_set(addr);
                mem.add64(folded, addr, nodes + layout::NODE_CHILD, |b| {
                    b.local_get(dt);
                });
            },
            |_| {},
        );
    }
}

/// The sampled time metric's sample word, [`layout::HDR_WHERE`] in the profiler's (shared)
/// memory: the probes store there which context node runs, and [`layout::IN_PROBES`] while
/// their own work runs, so that the sampler, which reads it from another thread, leaves
/// the probes' time out.
///
/// Each store is followed by an atomic load of the word, whose value is dropped: without
/// it Cranelift removes a store that a later store to the word overwrites with no load in
/// between (a leaf function's entry mark, overwritten by its exit's), and the sampler never
/// sees that function run. The entry's first mark needs its load too, though the lookup's
/// loads follow it: without that one, the samples of the entry probe's work went to the
/// caller (BENCHMARKS.md, "Run time in the embedded wasmtime"). The loads cost about a tenth
/// of fib's run; an atomic store would fence.
#[derive(Clone, Copy)]
pub(super) struct SampleWord(pub(super) MemoryId);

impl SampleWord {
    /// With a sample word (the sampled metric), says that the probes' own work runs.
    pub(super) fn mark_probes(word: Option<SampleWord>, b: &mut InstrSeqBuilder) {
        if let Some(word) = word {
            b.i32_const(0).i32_const(layout::IN_PROBES as i32);
            word.publish(b);
        }
    }

    /// With a sample word, says that the context node in local `node` runs.
    pub(super) fn mark_context(word: Option<SampleWord>, b: &mut InstrSeqBuilder, node: LocalId) {
        if let Some(word) = word {
            b.i32_const(0).local_get(node);
            word.publish(b);
        }
    }

    /// Stores the pushed address and value into the word, and keeps the store.
    fn publish(self, b: &mut InstrSeqBuilder) {
        let mem = Mem(self.0);
        mem.store32(b, layout::HDR_WHERE);
        b.i32_const(0);
        mem.atomic_load32(b, layout::HDR_WHERE);
        b.drop();
    }
}

/// Counts calls and arcs: the part of the entry probe that every metric has.
#[derive(Clone, Copy)]
pub struct ArcCounter {
    pub(super) mem: MemoryId,
    pub(super) layout: Layout,
    pub(super) site: GlobalId,
    /// Whether the direct sites count their own arcs (see [`super::SiteArcs`]), so that the
    /// entry counts only the others.
    pub(super) at_sites: bool,
    /// `dyn_arc(site: i32, f: i32)`: counts an arc from an indirect site or the host.
    pub(super) dyn_arc: FunctionId,
}

impl ArcCounter {
    /// Emits the counting of the arc into `f`: takes the call site (clearing it, so that an
    /// entry nobody announced is the host's) and counts it (a counter per direct site,
    /// unless the site counts it, the dynamic table for the rest). Uses locals `s` and
    /// `addr`.
    pub(super) fn count_arc(&self, b: &mut InstrSeqBuilder, f: Func, [s, addr]: [LocalId; 2]) {
        self.take_site(b, s);
        b.local_get(s);
        push_is_direct(b);
        b.if_else(
            None,
            |direct| {
                if !self.at_sites {
                    self.count_direct(direct, [s, addr]);
                }
            },
            |other| self.count_other(other, f, s),
        );
    }

    /// Takes the call site into `s`, clearing it, so that an entry nobody announced is the
    /// host's.
    pub(super) fn take_site(&self, b: &mut InstrSeqBuilder, s: LocalId) {
        b.global_get(self.site)
            .local_set(s)
            .i32_const(0)
            .global_set(self.site);
    }

    /// Counts the arc of direct call site `s` in its counter, using `addr`.
    pub(super) fn count_direct(&self, b: &mut InstrSeqBuilder, [s, addr]: [LocalId; 2]) {
        Mem(self.mem).add64_element(b, self.layout.direct_arcs_off, s, addr, |b| {
            b.i64_const(1);
        });
    }

    /// Counts the arc into `f` from indirect site `s` or from the host (`s` 0).
    pub(super) fn count_other(&self, b: &mut InstrSeqBuilder, f: Func, s: LocalId) {
        b.local_get(s);
        f.push(b);
        b.call(self.dyn_arc);
    }
}

/// A source of monotonic `i64` readings.
#[derive(Clone, Copy)]
pub enum Reading {
    /// The host's clock import, `() -> i64`.
    Host(FunctionId),
    /// A global that every straight-line run of the program's code adds its instruction
    /// count to.
    Instructions(GlobalId),
}

impl Reading {
    /// The instruction that pushes a reading.
    pub fn read(&self) -> Instr {
        match *self {
            Reading::Host(func) => Instr::Call(walrus::ir::Call { func }),
            Reading::Instructions(global) => Instr::GlobalGet(walrus::ir::GlobalGet { global }),
        }
    }
}
