//! The runtime's out-of-line functions: the rare paths the inline probes call
//! (`dyn_arc`, `find_child`), and the state module's probes (`enter`, `exit`,
//! `count_call`), generated from the same code as the inline ones.

use walrus::ir::BinaryOp;
use walrus::{FunctionBuilder, FunctionId, Module, ValType};

use super::mem::Mem;
use super::probes::{ArcCounter, Func, Reading, TimedOps};
use super::tables::{count_dyn_arc, find_child};
use crate::layout::Layout;

/// `count_call(f: i32)`: the calls metric's entry probe, out of line.
pub(super) fn build_count_call(module: &mut Module, counter: &ArcCounter) -> FunctionId {
    let f = module.locals.add(ValType::I32);
    let locals = [
        module.locals.add(ValType::I32),
        module.locals.add(ValType::I32),
    ];
    let mut builder = FunctionBuilder::new(&mut module.types, &[ValType::I32], &[]);
    builder.name("__wasmprof_count_call".into());
    counter.count_arc(&mut builder.func_body(), Func::Local(f), locals);
    builder.finish(vec![f], &mut module.funcs)
}

/// The parameters of `exit`: parent, node, t0.
pub(super) const EXIT_PARAMS: [ValType; 3] = [ValType::I32, ValType::I32, ValType::I64];

/// `dyn_arc(site: i32, f: i32)`: counts an arc from an indirect site or the host and, with
/// `count_calls` (the calls metric, where direct calls are counted at their sites alone),
/// the call in f's counter, so that it stays exact when the arc table is full.
pub(super) fn build_dyn_arc(
    module: &mut Module,
    layout: &Layout,
    mem: &Mem,
    count_calls: bool,
) -> FunctionId {
    let s = module.locals.add(ValType::I32);
    let f = module.locals.add(ValType::I32);
    let slot = module.locals.add(ValType::I32);
    let start = module.locals.add(ValType::I32);
    let mut builder = FunctionBuilder::new(&mut module.types, &[ValType::I32, ValType::I32], &[]);
    builder.name("__wasmprof_dyn_arc".into());
    let mut b = builder.func_body();
    count_dyn_arc(&mut b, layout, mem, s, f, [slot, start]);
    if count_calls {
        mem.add64_element(&mut b, layout.calls_off, f, slot, |b| {
            b.i64_const(1);
        });
    }
    builder.finish(vec![s, f], &mut module.funcs)
}

/// `enter(f: i32) -> i32`, the state module's entry probe: [`TimedOps::enter`] for a
/// function id in a parameter; returns the activation's node.
pub(super) fn build_enter(module: &mut Module, ops: &TimedOps) -> FunctionId {
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
pub(super) fn build_find_child(module: &mut Module, layout: &Layout, mem: &Mem) -> FunctionId {
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

/// `exit(parent: i32, node: i32, t0: i64)`, the state module's exit probe: reads the clock
/// and runs [`TimedOps::exit`].
pub(super) fn build_exit(module: &mut Module, ops: &TimedOps, clock: Reading) -> FunctionId {
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
