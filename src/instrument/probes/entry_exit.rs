//! The probes as code: what an entry and an exit probe emit for each metric, inline in a
//! function or as a call of the state module, and the arc counting every entry does.

use walrus::ir::{BinaryOp, Instr, InstrSeqId};
use walrus::{FunctionId, GlobalId, InstrSeqBuilder, LocalId, MemoryId};

use super::mem::Mem;
use super::tables::{node_addr, push_is_direct};
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
    /// entry probe inline in a small function (see [`inline_entry`]) and a call of `enter`
    /// in the others; the rare path of the entry (a context node that is not its parent's
    /// first child) calls out either way.
    Own {
        /// The inline probes' work.
        ops: Box<TimedOps>,
        /// `enter(f: i32) -> i64`, as [`TimedProbes::Call`]'s, in the module itself.
        enter: FunctionId,
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
    /// Emits the entry probe of function `f` into `b`, inline when `inline` and the probes
    /// are on the module's own memory: `parent` gets the current context node, `node` the
    /// activation's own, `t0` the clock (kept in the node too); `scratch` is a spare i32
    /// local.
    pub fn entry(&self, b: &mut InstrSeqBuilder, f: u32, l: TimedLocals, inline: bool) {
        let (enter, cur, parent) = match &self.probes {
            TimedProbes::Own { ops, .. } if inline => {
                ops.enter(b, Func::Const(f), [l.parent, l.node, l.scratch]);
                if let Some(clock) = self.clock {
                    ops.start(b, clock, l.scratch, l.t0);
                }
                return;
            }
            TimedProbes::Own { ops, enter, parent } => (*enter, ops.cur, *parent),
            TimedProbes::Call {
                enter, cur, parent, ..
            } => (*enter, *cur, *parent),
        };
        b.i32_const(f as i32).call(enter).local_set(l.t0);
        b.global_get(parent).local_set(l.parent);
        b.global_get(cur).local_set(l.node);
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

/// Functions of fewer instructions than this get the entry probe inline, the others a call
/// of `enter` ([`TimedProbes::Own`]). The inline entry is about 60 instructions, in every
/// function: most of what the probes add to a module's code, which the host compiles
/// before the program runs. A call of `enter` costs a few nanoseconds more a call, which a
/// small function (fib, a getter) would feel and a larger one, doing more per call, less.
/// BENCHMARKS.md ("The entry probe: inline or a call") has the figures.
pub const INLINE_ENTRY_BELOW: u64 = 40;

/// Whether `func`'s entry probe goes inline (where the probes are on the module's own
/// memory).
pub fn inline_entry(func: &walrus::LocalFunction) -> bool {
    func.size() < INLINE_ENTRY_BELOW
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
            push_func(found, f);
            found.local_get(addr);
            found.call(self.find_child).local_set(node);
        });
        self.entered(b, [node, addr]);
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
                push_func(first, f);
                first.binop(BinaryOp::I32Eq).br_if(found);
            },
            |_| {},
        );
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

/// A function id, known when the code is generated or held in a local.
#[derive(Clone, Copy)]
pub(super) enum Func {
    /// A constant.
    Const(u32),
    /// A local.
    Local(LocalId),
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
        push_func(b, f);
        b.call(self.dyn_arc);
    }
}

fn push_func(b: &mut InstrSeqBuilder, f: Func) {
    match f {
        Func::Const(f) => b.i32_const(f as i32),
        Func::Local(f) => b.local_get(f),
    };
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
