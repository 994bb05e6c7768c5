//! The profiler's runtime, generated as wasm functions.
//!
//! Every instrumented function calls `enter` once at entry and, when a cost is measured,
//! `exit` once at every exit. They update the state described in [`crate::layout`] with
//! plain loads and stores on the profiler's own memory; the only host call is the clock
//! read of the time metric.
//!
//! The runtime lives where [`StateLocation`] says: inside the instrumented module, with a
//! memory of its own ([`add`]), or in a state module that the instrumented module imports
//! its probes and globals from ([`import_state_module`]), for hosts that allow a module
//! only one memory. The probes are the same code either way.

use walrus::ir::{BinaryOp, Instr, LoadKind, MemArg, StoreKind, UnaryOp};
use walrus::{
    ExportItem, FunctionBuilder, FunctionId, GlobalId, InstrSeqBuilder, LocalId, MemoryId, Module,
    ValType,
};

use crate::layout::{self, Layout};
#[cfg(doc)]
use crate::meta::StateLocation;
use crate::meta::{self, Metric};

/// The state module's export (and the instrumented module's import) of the call-site global.
const SITE_EXPORT: &str = "site";
/// The state module's export of the instruction counter.
const INSTRUCTIONS_EXPORT: &str = "instructions";
/// The state module's export of `enter`.
const ENTER_EXPORT: &str = "enter";
/// The state module's export of `exit`.
const EXIT_EXPORT: &str = "exit";
/// The state module's export of `count_call`.
const COUNT_CALL_EXPORT: &str = "count_call";

/// Multipliers of the two multiplicative hashes.
const HASH_A: i32 = 0x9E37_79B1_u32 as i32;
const HASH_B: i32 = 0x85EB_CA6B_u32 as i32;

/// The ids of the runtime pieces that the probes use.
pub struct Runtime {
    /// Call-site id set just before a call; 0 when the host makes the call.
    pub site: GlobalId,
    /// What the entry and exit probes call.
    pub probes: Probes,
}

/// The probes of a metric.
pub enum Probes {
    /// The calls metric: an entry probe that counts the call and its arc.
    Count(CallCounter),
    /// A cost metric: entry and exit probes around a clock.
    Timed(Timing),
}

/// The calls metric's entry probe.
pub enum CallCounter {
    /// Loads and stores on the profiler's memory, inline.
    Inline(Counter),
    /// A call of the state module's `count_call(f: i32)`.
    Call(FunctionId),
}

impl CallCounter {
    /// Emits the counting of a call of function `f` and its arc, using `locals` as scratch.
    pub fn count_call(&self, b: &mut InstrSeqBuilder, f: u32, locals: [LocalId; 2]) {
        match self {
            CallCounter::Inline(counter) => counter.count_call(b, Func::Const(f), locals),
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
    /// Where the cost is read.
    pub clock: Clock,
}

/// Where the entry and exit probes' work runs.
pub enum TimedProbes {
    /// Inline in each function, on the module's own profiler memory; only the rare path of
    /// the entry (a context node that is not its parent's first child) calls out.
    Inline(TimedOps),
    /// In the state module's functions.
    Call {
        /// `enter(f: i32) -> i32`: counts the arc and the call, moves to the callee's
        /// context node and returns it.
        enter: FunctionId,
        /// `exit(parent: i32, node: i32, t0: i64)`: adds the activation's cost and
        /// returns to the parent's context.
        exit: FunctionId,
        /// The current context node.
        cur: GlobalId,
    },
}

impl Timing {
    /// Emits the entry probe of function `f` into `b`: `parent` gets the current context
    /// node, `node` the activation's own, `t0` the clock; `scratch` is a spare i32 local.
    pub fn entry(&self, b: &mut InstrSeqBuilder, f: u32, l: TimedLocals) {
        match &self.probes {
            TimedProbes::Inline(ops) => ops.enter(b, Func::Const(f), [l.parent, l.node, l.scratch]),
            TimedProbes::Call { enter, cur, .. } => {
                b.global_get(*cur).local_set(l.parent);
                b.i32_const(f as i32).call(*enter).local_set(l.node);
            }
        }
        b.instr(self.clock.read()).local_set(l.t0);
    }

    /// Emits the exit probe into `b`, with the locals of the function's entry probe
    /// (`t0` ends up holding the activation's cost).
    pub fn exit(&self, b: &mut InstrSeqBuilder, l: TimedLocals) {
        match &self.probes {
            TimedProbes::Inline(ops) => {
                b.instr(self.clock.read())
                    .local_get(l.t0)
                    .binop(BinaryOp::I64Sub)
                    .local_set(l.t0);
                ops.exit(b, [l.parent, l.node, l.scratch], l.t0);
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

/// The timed probes' work on the profiler's memory, for a function id known when the code
/// is generated (inline probes) or held in a local (the state module's `enter`, `exit`).
#[derive(Clone, Copy)]
pub struct TimedOps {
    mem: MemoryId,
    layout: Layout,
    cur: GlobalId,
    counter: Counter,
    /// `find_child(parent: i32, f: i32) -> i32`: the entry's rare path.
    find_child: FunctionId,
}

impl TimedOps {
    /// Counts the arc into `f`, moves the current context node (left in `parent`) to its
    /// child for `f` (left in `node`) and counts the call there. A function that keeps
    /// calling the same callee finds it first among its children: the lookup is then two
    /// loads and a comparison.
    fn enter(&self, b: &mut InstrSeqBuilder, f: Func, [parent, node, addr]: [LocalId; 3]) {
        let mem = Mem(self.mem);
        let nodes = self.layout.nodes_off;
        self.counter.count_arc(b, f, [node, addr]);
        b.global_get(self.cur).local_set(parent);
        node_addr(b, parent);
        mem.load32(b, nodes + layout::NODE_FIRST_CHILD);
        b.local_tee(node);
        b.if_else(
            ValType::I32,
            |first| {
                node_addr(first, node);
                mem.load32(first, nodes + layout::NODE_FUNC);
                push_func(first, f);
                first.binop(BinaryOp::I32Ne);
            },
            |none| {
                none.i32_const(1);
            },
        );
        b.if_else(
            None,
            |search| {
                search.local_get(parent);
                push_func(search, f);
                search.call(self.find_child).local_set(node);
            },
            |_| {},
        );
        node_addr(b, node);
        b.local_set(addr);
        mem.add64(b, addr, nodes + layout::NODE_COUNT, |b| {
            b.i64_const(1);
        });
        b.local_get(node).global_set(self.cur);
    }

    /// Adds the activation's cost `dt` to its node's inclusive cost, and returns to the
    /// parent's context. What the decoder cannot sum from the tree, the cost of a child
    /// that went to a fold node, goes to the parent's cost in children.
    fn exit(&self, b: &mut InstrSeqBuilder, [parent, node, addr]: [LocalId; 3], dt: LocalId) {
        let mem = Mem(self.mem);
        let nodes = self.layout.nodes_off;
        node_addr(b, node);
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
                node_addr(folded, parent);
                folded.local_set(addr);
                mem.add64(folded, addr, nodes + layout::NODE_CHILD, |b| {
                    b.local_get(dt);
                });
            },
            |_| {},
        );
        b.local_get(parent).global_set(self.cur);
    }
}

/// A function id, known when the code is generated or held in a local.
#[derive(Clone, Copy)]
enum Func {
    /// A constant.
    Const(u32),
    /// A local.
    Local(LocalId),
}

/// Counts calls and arcs: the part of the entry probe that every metric has.
#[derive(Clone, Copy)]
pub struct Counter {
    mem: MemoryId,
    layout: Layout,
    site: GlobalId,
    /// `dyn_arc(site: i32, f: i32)`: counts an arc from an indirect site or the host.
    dyn_arc: FunctionId,
}

impl Counter {
    /// Emits the calls metric's whole entry probe for function `f`: the arc, and the call in
    /// `f`'s counter (with a cost, the context node counts the call instead).
    fn count_call(&self, b: &mut InstrSeqBuilder, f: Func, locals: [LocalId; 2]) {
        self.count_arc(b, f, locals);
        let mem = Mem(self.mem);
        match f {
            Func::Const(f) => mem.bump64(b, self.layout.calls_off + 8 * f),
            Func::Local(f) => mem.add64_element(b, self.layout.calls_off, f, locals[1], |b| {
                b.i64_const(1);
            }),
        }
    }

    /// Emits the counting of the arc into `f`: takes the call site (clearing it, so that an
    /// entry nobody announced is the host's) and counts it (a counter per direct site, the
    /// dynamic table for the rest). Uses locals `s` and `addr`.
    fn count_arc(&self, b: &mut InstrSeqBuilder, f: Func, [s, addr]: [LocalId; 2]) {
        let mem = Mem(self.mem);
        let l = &self.layout;
        b.global_get(self.site)
            .local_set(s)
            .i32_const(0)
            .global_set(self.site);
        b.local_get(s)
            .i32_const(1)
            .binop(BinaryOp::I32Sub)
            .i32_const((layout::INDIRECT_SITE - 1) as i32)
            .binop(BinaryOp::I32LtU);
        b.if_else(
            None,
            |direct| {
                mem.add64_element(direct, l.direct_arcs_off, s, addr, |b| {
                    b.i64_const(1);
                });
            },
            |other| {
                other.local_get(s);
                push_func(other, f);
                other.call(self.dyn_arc);
            },
        );
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
pub enum Clock {
    /// The host's clock import, `() -> i64`.
    Host(FunctionId),
    /// A global that every straight-line run of the program's code adds its instruction
    /// count to.
    Instructions(GlobalId),
}

impl Clock {
    /// The instruction that pushes a reading.
    pub fn read(&self) -> Instr {
        match *self {
            Clock::Host(func) => Instr::Call(walrus::ir::Call { func }),
            Clock::Instructions(global) => Instr::GlobalGet(walrus::ir::GlobalGet { global }),
        }
    }
}

/// Small helpers for loads and stores on the profiler's memory.
struct Mem(MemoryId);

impl Mem {
    fn load32(&self, b: &mut InstrSeqBuilder, offset: u32) {
        b.load(
            self.0,
            LoadKind::I32 { atomic: false },
            MemArg {
                align: 4,
                offset: offset.into(),
            },
        );
    }
    fn load64(&self, b: &mut InstrSeqBuilder, offset: u32) {
        b.load(
            self.0,
            LoadKind::I64 { atomic: false },
            MemArg {
                align: 8,
                offset: offset.into(),
            },
        );
    }
    fn store32(&self, b: &mut InstrSeqBuilder, offset: u32) {
        b.store(
            self.0,
            StoreKind::I32 { atomic: false },
            MemArg {
                align: 4,
                offset: offset.into(),
            },
        );
    }
    fn store64(&self, b: &mut InstrSeqBuilder, offset: u32) {
        b.store(
            self.0,
            StoreKind::I64 { atomic: false },
            MemArg {
                align: 8,
                offset: offset.into(),
            },
        );
    }

    /// `mem64[offset] += 1`, at an address known when the code is generated.
    fn bump64(&self, b: &mut InstrSeqBuilder, offset: u32) {
        b.i32_const(0).i32_const(0);
        self.load64(b, offset);
        b.i64_const(1).binop(BinaryOp::I64Add);
        self.store64(b, offset);
    }

    /// `array[index] += value` for the u64 array at `offset`, with `index` in a local and
    /// `value` pushed by `push`; `scratch` holds the element's address.
    fn add64_element(
        &self,
        b: &mut InstrSeqBuilder,
        offset: u32,
        index: LocalId,
        scratch: LocalId,
        push: impl FnOnce(&mut InstrSeqBuilder),
    ) {
        b.local_get(index)
            .i32_const(3)
            .binop(BinaryOp::I32Shl)
            .local_set(scratch);
        self.add64(b, scratch, offset, push);
    }

    /// `mem64[addr + offset] += value`, where `addr` is in a local and `value` is pushed by `push`.
    fn add64(
        &self,
        b: &mut InstrSeqBuilder,
        addr: LocalId,
        offset: u32,
        push: impl FnOnce(&mut InstrSeqBuilder),
    ) {
        b.local_get(addr).local_get(addr);
        self.load64(b, offset);
        push(b);
        b.binop(BinaryOp::I64Add);
        self.store64(b, offset);
    }
}

/// Adds the profiler's memory, globals, clock and runtime functions for `metric` to
/// `module`, and exports the memory and the current-node global for the host.
pub fn add(module: &mut Module, layout: &Layout, metric: Metric) -> Runtime {
    let parts = Parts::build(module, layout, metric);
    module
        .exports
        .add(meta::MEMORY_EXPORT, ExportItem::Memory(parts.memory));
    module
        .exports
        .add(meta::CUR_EXPORT, ExportItem::Global(parts.cur));
    let probes = match parts.timing {
        Some((ops, clock)) => Probes::Timed(Timing {
            probes: TimedProbes::Inline(ops),
            clock,
        }),
        None => Probes::Count(CallCounter::Inline(parts.counter)),
    };
    Runtime {
        site: parts.site,
        probes,
    }
}

/// Builds the state module for `metric` (the profiler's memory, globals and probes, all
/// exported) and makes `module` import what its probes use from it. Returns the runtime as
/// `module` sees it and the state module's bytes.
pub fn import_state_module(
    module: &mut Module,
    layout: &Layout,
    metric: Metric,
) -> (Runtime, Vec<u8>) {
    let mut state = Module::default();
    let parts = Parts::build(&mut state, layout, metric);
    let exports = &mut state.exports;
    exports.add(meta::MEMORY_EXPORT, ExportItem::Memory(parts.memory));
    exports.add(meta::CUR_EXPORT, ExportItem::Global(parts.cur));
    exports.add(SITE_EXPORT, ExportItem::Global(parts.site));

    let import_global = |module: &mut Module, name: &str, ty: ValType| {
        module
            .add_import_global(meta::STATE_MODULE, name, ty, true, false)
            .0
    };
    let import_func = |module: &mut Module, name: &str, params: &[ValType], results: &[ValType]| {
        let ty = module.types.add(params, results);
        module.add_import_func(meta::STATE_MODULE, name, ty).0
    };
    let cur = import_global(module, meta::CUR_EXPORT, ValType::I32);
    let site = import_global(module, SITE_EXPORT, ValType::I32);
    let probes = match parts.timing {
        None => {
            let count_call = build_count_call(&mut state, &parts.counter);
            state
                .exports
                .add(COUNT_CALL_EXPORT, ExportItem::Function(count_call));
            let count_call = import_func(module, COUNT_CALL_EXPORT, &[ValType::I32], &[]);
            Probes::Count(CallCounter::Call(count_call))
        }
        Some((ops, clock)) => {
            let enter = build_enter(&mut state, &ops);
            let exit = build_exit(&mut state, &ops, clock);
            let exports = &mut state.exports;
            exports.add(ENTER_EXPORT, ExportItem::Function(enter));
            exports.add(EXIT_EXPORT, ExportItem::Function(exit));
            let clock = match clock {
                Clock::Host(_) => {
                    Clock::Host(import_func(module, meta::CLOCK_NAME, &[], &[ValType::I64]))
                }
                Clock::Instructions(global) => {
                    exports.add(INSTRUCTIONS_EXPORT, ExportItem::Global(global));
                    Clock::Instructions(import_global(module, INSTRUCTIONS_EXPORT, ValType::I64))
                }
            };
            Probes::Timed(Timing {
                probes: TimedProbes::Call {
                    enter: import_func(module, ENTER_EXPORT, &[ValType::I32], &[ValType::I32]),
                    exit: import_func(module, EXIT_EXPORT, &EXIT_PARAMS, &[]),
                    cur,
                },
                clock,
            })
        }
    };
    let runtime = Runtime { site, probes };
    (runtime, state.emit_wasm())
}

/// `count_call(f: i32)`: the calls metric's entry probe, out of line.
fn build_count_call(module: &mut Module, counter: &Counter) -> FunctionId {
    let f = module.locals.add(ValType::I32);
    let locals = [
        module.locals.add(ValType::I32),
        module.locals.add(ValType::I32),
    ];
    let mut builder = FunctionBuilder::new(&mut module.types, &[ValType::I32], &[]);
    builder.name("__wasmprof_count_call".into());
    counter.count_call(&mut builder.func_body(), Func::Local(f), locals);
    builder.finish(vec![f], &mut module.funcs)
}

/// The parameters of `exit`: parent, node, t0.
const EXIT_PARAMS: [ValType; 3] = [ValType::I32, ValType::I32, ValType::I64];

/// The runtime's pieces inside the module that holds the state.
struct Parts {
    memory: MemoryId,
    cur: GlobalId,
    site: GlobalId,
    counter: Counter,
    /// With a cost metric, the probes' work and the clock.
    timing: Option<(TimedOps, Clock)>,
}

impl Parts {
    fn build(module: &mut Module, layout: &Layout, metric: Metric) -> Parts {
        let pages = u64::from(layout.pages);
        let memory = module
            .memories
            .add_local(false, false, pages, Some(pages), None);
        let mut header = Vec::with_capacity(layout::HEADER_SIZE as usize);
        header.extend_from_slice(&layout::MAGIC.to_le_bytes());
        header.extend_from_slice(&crate::meta::VERSION.to_le_bytes());
        header.extend_from_slice(&layout.first_context_node().to_le_bytes());
        module.data.add(
            walrus::DataKind::Active {
                memory,
                offset: walrus::ConstExpr::Value(walrus::ir::Value::I32(0)),
            },
            header,
        );
        let zero = walrus::ConstExpr::Value(walrus::ir::Value::I32(0));
        let cur = module
            .globals
            .add_local(ValType::I32, true, false, zero.clone());
        let site = module.globals.add_local(ValType::I32, true, false, zero);
        let clock = match metric {
            Metric::Calls => None,
            Metric::Time => {
                let ty = module.types.add(&[], &[ValType::I64]);
                let (now, _) =
                    module.add_import_func(crate::meta::CLOCK_MODULE, crate::meta::CLOCK_NAME, ty);
                Some(Clock::Host(now))
            }
            Metric::Instructions => {
                let zero = walrus::ConstExpr::Value(walrus::ir::Value::I64(0));
                let counter = module.globals.add_local(ValType::I64, true, false, zero);
                Some(Clock::Instructions(counter))
            }
        };
        let mem = Mem(memory);
        let counter = Counter {
            mem: memory,
            layout: *layout,
            site,
            dyn_arc: build_dyn_arc(module, layout, &mem),
        };
        let timing = clock.map(|clock| {
            let ops = TimedOps {
                mem: memory,
                layout: *layout,
                cur,
                counter,
                find_child: build_find_child(module, layout, &mem),
            };
            (ops, clock)
        });
        Parts {
            memory,
            cur,
            site,
            counter,
            timing,
        }
    }
}

fn build_dyn_arc(module: &mut Module, layout: &Layout, mem: &Mem) -> FunctionId {
    let s = module.locals.add(ValType::I32);
    let f = module.locals.add(ValType::I32);
    let slot = module.locals.add(ValType::I32);
    let start = module.locals.add(ValType::I32);
    let mut builder = FunctionBuilder::new(&mut module.types, &[ValType::I32, ValType::I32], &[]);
    builder.name("__wasmprof_dyn_arc".into());
    count_dyn_arc(&mut builder.func_body(), layout, mem, s, f, [slot, start]);
    builder.finish(vec![s, f], &mut module.funcs)
}

/// `enter(f: i32) -> i32`, the state module's entry probe: [`TimedOps::enter`] for a
/// function id in a parameter; returns the activation's node.
fn build_enter(module: &mut Module, ops: &TimedOps) -> FunctionId {
    let f = module.locals.add(ValType::I32);
    let parent = module.locals.add(ValType::I32);
    let node = module.locals.add(ValType::I32);
    let addr = module.locals.add(ValType::I32);
    let mut builder = FunctionBuilder::new(&mut module.types, &[ValType::I32], &[ValType::I32]);
    builder.name("__wasmprof_enter".into());
    let mut b = builder.func_body();
    ops.enter(&mut b, Func::Local(f), [parent, node, addr]);
    b.local_get(node);
    builder.finish(vec![f], &mut module.funcs)
}

/// `find_child(parent: i32, f: i32) -> i32`: the child of `parent` for `f`, found in the
/// list, or added.
fn build_find_child(module: &mut Module, layout: &Layout, mem: &Mem) -> FunctionId {
    let parent = module.locals.add(ValType::I32);
    let f = module.locals.add(ValType::I32);
    let node = module.locals.add(ValType::I32);
    let prev = module.locals.add(ValType::I32);
    let addr = module.locals.add(ValType::I32);
    let mut builder = FunctionBuilder::new(
        &mut module.types,
        &[ValType::I32, ValType::I32],
        &[ValType::I32],
    );
    builder.name("__wasmprof_find_child".into());
    let mut b = builder.func_body();
    find_child(&mut b, layout, mem, [parent, f, node], [prev, addr]);
    b.local_get(node);
    builder.finish(vec![parent, f], &mut module.funcs)
}

/// `h = ((a * HASH_A) ^ b) * HASH_B >> (32 - bits)`: the slot for key (a, b) in a table of
/// `cap` (a power of two) slots, left in local `h`.
fn hash(b: &mut InstrSeqBuilder, a: LocalId, k: LocalId, cap: u32, h: LocalId) {
    let bits = cap.trailing_zeros();
    b.local_get(a).i32_const(HASH_A).binop(BinaryOp::I32Mul);
    b.local_get(k).binop(BinaryOp::I32Xor);
    b.i32_const(HASH_B).binop(BinaryOp::I32Mul);
    b.i32_const((32 - bits) as i32).binop(BinaryOp::I32ShrU);
    b.local_set(h);
}

/// Counts arc (s, f) in the dynamic arc table, by linear probing. A full table counts the
/// arc as dropped in the header.
fn count_dyn_arc(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    s: LocalId,
    f: LocalId,
    [slot, start]: [LocalId; 2],
) {
    let mask = (layout.dyn_arcs_cap - 1) as i32;
    let off = layout.dyn_arcs_off;
    hash(b, s, f, layout.dyn_arcs_cap, start);
    b.local_get(start).local_set(slot);
    // `f + 1` marks a used slot; the probe count stops the search when the table is full.
    b.block(None, |done| {
        let done_id = done.id();
        done.loop_(None, |lp| {
            let lp_id = lp.id();
            // addr = slot * 16; empty slot: claim it.
            lp.local_get(slot).i32_const(4).binop(BinaryOp::I32Shl);
            mem.load32(lp, off + 4);
            lp.unop(UnaryOp::I32Eqz);
            lp.if_else(
                None,
                |claim| {
                    claim
                        .local_get(slot)
                        .i32_const(4)
                        .binop(BinaryOp::I32Shl)
                        .local_get(s);
                    mem.store32(claim, off);
                    claim.local_get(slot).i32_const(4).binop(BinaryOp::I32Shl);
                    claim.local_get(f).i32_const(1).binop(BinaryOp::I32Add);
                    mem.store32(claim, off + 4);
                    claim
                        .local_get(slot)
                        .i32_const(4)
                        .binop(BinaryOp::I32Shl)
                        .i64_const(1);
                    mem.store64(claim, off + 8);
                    claim.br(done_id);
                },
                |_| {},
            );
            // Our slot: count.
            lp.local_get(slot).i32_const(4).binop(BinaryOp::I32Shl);
            mem.load32(lp, off + 4);
            lp.local_get(f)
                .i32_const(1)
                .binop(BinaryOp::I32Add)
                .binop(BinaryOp::I32Eq);
            lp.local_get(slot).i32_const(4).binop(BinaryOp::I32Shl);
            mem.load32(lp, off);
            lp.local_get(s)
                .binop(BinaryOp::I32Eq)
                .binop(BinaryOp::I32And);
            lp.if_else(
                None,
                |hit| {
                    hit.local_get(slot).i32_const(4).binop(BinaryOp::I32Shl);
                    hit.local_get(slot).i32_const(4).binop(BinaryOp::I32Shl);
                    mem.load64(hit, off + 8);
                    hit.i64_const(1).binop(BinaryOp::I64Add);
                    mem.store64(hit, off + 8);
                    hit.br(done_id);
                },
                |_| {},
            );
            // Next slot; back at the start means the table is full.
            lp.local_get(slot)
                .i32_const(1)
                .binop(BinaryOp::I32Add)
                .i32_const(mask)
                .binop(BinaryOp::I32And);
            lp.local_tee(slot)
                .local_get(start)
                .binop(BinaryOp::I32Ne)
                .br_if(lp_id);
            mem.bump64(lp, layout::HDR_ARCS_DROPPED);
        });
    });
}

/// Pushes the address of node `n`, relative to the node region.
fn node_addr(b: &mut InstrSeqBuilder, n: LocalId) {
    b.local_get(n)
        .i32_const(layout::NODE_SIZE as i32)
        .binop(BinaryOp::I32Mul);
}

/// Leaves in `node` the child of `parent` for function `f`, adding it when new. Children are
/// a list (`first_child`, `next_sibling`) kept in most-recently-used order, so a lookup is
/// one comparison while a function keeps calling the same callee. When the tree is full,
/// the entry goes to f's fold node and the header counts it.
fn find_child(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    [parent, f, node]: [LocalId; 3],
    [prev, at]: [LocalId; 2],
) {
    let nodes = layout.nodes_off;
    b.i32_const(0).local_set(prev);
    node_addr(b, parent);
    mem.load32(b, nodes + layout::NODE_FIRST_CHILD);
    b.local_set(node);
    b.block(None, |done| {
        let done_id = done.id();
        done.block(None, |missing| {
            let missing_id = missing.id();
            missing.loop_(None, |lp| {
                let lp_id = lp.id();
                lp.local_get(node).unop(UnaryOp::I32Eqz).br_if(missing_id);
                node_addr(lp, node);
                lp.local_tee(at);
                mem.load32(lp, nodes + layout::NODE_FUNC);
                lp.local_get(f).binop(BinaryOp::I32Eq);
                lp.if_else(
                    None,
                    |found| {
                        // Move to the front of the list, unless it is there.
                        found.local_get(prev).unop(UnaryOp::I32Eqz).br_if(done_id);
                        node_addr(found, prev);
                        found.local_get(at);
                        mem.load32(found, nodes + layout::NODE_NEXT_SIBLING);
                        mem.store32(found, nodes + layout::NODE_NEXT_SIBLING);
                        link_first(found, layout, mem, [parent, node, at]);
                        found.br(done_id);
                    },
                    |_| {},
                );
                lp.local_get(node).local_set(prev);
                lp.local_get(at);
                mem.load32(lp, nodes + layout::NODE_NEXT_SIBLING);
                lp.local_set(node).br(lp_id);
            });
        });
        // A new child: node = header.node_count; when the tree is full, the fold node.
        done.i32_const(0);
        mem.load32(done, layout::HDR_NODE_COUNT);
        done.local_tee(node)
            .i32_const(layout.nodes_cap as i32)
            .binop(BinaryOp::I32GeU);
        done.if_else(
            None,
            |full| {
                full.local_get(f)
                    .i32_const(1)
                    .binop(BinaryOp::I32Add)
                    .local_set(node);
                mem.bump64(full, layout::HDR_FOLDED);
                full.br(done_id);
            },
            |_| {},
        );
        done.i32_const(0)
            .local_get(node)
            .i32_const(1)
            .binop(BinaryOp::I32Add);
        mem.store32(done, layout::HDR_NODE_COUNT);
        node_addr(done, node);
        done.local_tee(at).local_get(parent);
        mem.store32(done, nodes + layout::NODE_PARENT);
        done.local_get(at).local_get(f);
        mem.store32(done, nodes + layout::NODE_FUNC);
        link_first(done, layout, mem, [parent, node, at]);
    });
}

/// Makes `node` (whose address is in `at`) the first child of `parent`.
fn link_first(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    [parent, node, at]: [LocalId; 3],
) {
    let nodes = layout.nodes_off;
    b.local_get(at);
    node_addr(b, parent);
    mem.load32(b, nodes + layout::NODE_FIRST_CHILD);
    mem.store32(b, nodes + layout::NODE_NEXT_SIBLING);
    node_addr(b, parent);
    b.local_get(node);
    mem.store32(b, nodes + layout::NODE_FIRST_CHILD);
}

/// `exit(parent: i32, node: i32, t0: i64)`, the state module's exit probe: reads the clock
/// and runs [`TimedOps::exit`].
fn build_exit(module: &mut Module, ops: &TimedOps, clock: Clock) -> FunctionId {
    let parent = module.locals.add(ValType::I32);
    let node = module.locals.add(ValType::I32);
    let t0 = module.locals.add(ValType::I64);
    let addr = module.locals.add(ValType::I32);
    let mut builder = FunctionBuilder::new(&mut module.types, &EXIT_PARAMS, &[]);
    builder.name("__wasmprof_exit".into());
    let mut b = builder.func_body();
    b.instr(clock.read())
        .local_get(t0)
        .binop(BinaryOp::I64Sub)
        .local_set(t0);
    ops.exit(&mut b, [parent, node, addr], t0);
    builder.finish(vec![parent, node, t0], &mut module.funcs)
}
