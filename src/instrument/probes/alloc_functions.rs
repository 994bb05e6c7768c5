//! The allocation probes' out-of-line functions, in the module that holds the profiler's
//! state: `record_alloc`, `record_free` (through the live table, `live_table`, and what
//! keeps the peak's blocks, `peak_log`), `record_grow`, and the state module's
//! `alloc_depth`.

use walrus::ir::{BinaryOp, UnaryOp};
use walrus::{FunctionBuilder, FunctionId, GlobalId, InstrSeqBuilder, LocalId, Module};
use walrus::{ValType, ValType::I32, ValType::I64};

use super::entry_exit::SampleWord;
use super::live_growth::build_grow_live;
use super::live_table::{put, Table};
use super::mem::Mem;
use super::peak_log::{build_log_room, build_rebase, log, record_peak};
use super::tables::scale_node;
use crate::layout::{self as l, Layout};

/// Returns from the function when `ptr` is null (a failed allocation, a free of nothing).
fn return_if_null(b: &mut InstrSeqBuilder, ptr: LocalId) {
    b.local_get(ptr).unop(UnaryOp::I32Eqz).if_else(
        None,
        |null| {
            null.return_();
        },
        |_| {},
    );
}

/// Leaves the running node's address (relative to the node region) in `at`.
fn running_node(b: &mut InstrSeqBuilder, layout: &Layout, cur: GlobalId, at: LocalId) {
    b.global_get(cur);
    scale_node(b, layout);
    b.local_set(at);
}

/// `header64[offset] += value` (pushed by `push`); `negate` subtracts it.
fn add_header(
    b: &mut InstrSeqBuilder,
    mem: &Mem,
    offset: u32,
    negate: bool,
    push: impl FnOnce(&mut InstrSeqBuilder),
) {
    b.i32_const(0).i32_const(0);
    mem.load64(b, offset);
    push(b);
    b.binop(if negate {
        BinaryOp::I64Sub
    } else {
        BinaryOp::I64Add
    });
    mem.store64(b, offset);
}

/// `header32[offset] += by`.
pub(super) fn add_header32(b: &mut InstrSeqBuilder, mem: &Mem, offset: u32, by: i32) {
    b.i32_const(0).i32_const(0);
    mem.load32(b, offset);
    b.i32_const(by).binop(BinaryOp::I32Add);
    mem.store32(b, offset);
}

/// The functions that keep the live table's size and the peak's blocks, which
/// `record_alloc` and `record_free` call.
pub(super) struct LiveFunctions {
    /// `grow_live() -> i32`.
    grow: FunctionId,
    /// `log_room() -> i32`.
    log_room: FunctionId,
}

impl LiveFunctions {
    /// Adds them to `module`, whose profiler memory is `mem`.
    pub(super) fn build(module: &mut Module, layout: &Layout, mem: &Mem) -> LiveFunctions {
        let rebase = build_rebase(module, mem);
        LiveFunctions {
            grow: build_grow_live(module, layout, mem, rebase),
            log_room: build_log_room(module, mem, rebase),
        }
    }
}

/// With the word sampler (`sample`), `record_alloc` and `record_free` first mark the sample
/// word as the probes': so the sampler leaves their work (a lookup in the live table, its
/// growth, its copy at a peak) out of the allocator's time, as it leaves the entry and exit
/// probes' out. They run at the allocator's exit, just before its exit probe, which names
/// the running node again.
///
/// `record_alloc(ptr: i32, size: i32)`: an allocation in the running node, and the block in
/// the live table (grown first when three quarters of its slots are taken) and in the log,
/// with the bytes live and their peak; where the table may grow no more, the header counts
/// it untracked. A null pointer (a failed allocation) records nothing.
pub(super) fn build_record_alloc(
    module: &mut Module,
    (layout, mem): (&Layout, Mem),
    (cur, sample): (GlobalId, Option<SampleWord>),
    live: &LiveFunctions,
) -> FunctionId {
    let table = Table::locals(module);
    let [ptr, size, at, i, e, key] = [I32; 6].map(|t| module.locals.add(t));
    let mut builder = FunctionBuilder::new(&mut module.types, &[I32, I32], &[]);
    builder.name("__wasmprof_record_alloc".into());
    let mut b = builder.func_body();
    SampleWord::mark_probes(sample, &mut b);
    return_if_null(&mut b, ptr);
    running_node(&mut b, layout, cur, at);
    let node_field = |off: u32| layout.nodes_off + off;
    mem.add64(&mut b, at, node_field(l::NODE_ALLOCS), |b| {
        b.i64_const(1);
    });
    mem.add64(&mut b, at, node_field(l::NODE_ALLOC_BYTES), |b| {
        b.local_get(size).unop(UnaryOp::I64ExtendUI32);
    });
    table.load(&mut b, &mem);
    table.push_is_full(&mut b, &mem);
    b.if_else(
        None,
        |full| {
            full.call(live.grow).unop(UnaryOp::I32Eqz).if_else(
                None,
                |untracked| {
                    mem.bump64(untracked, l::HDR_UNTRACKED);
                    add_header(untracked, &mem, l::HDR_UNTRACKED_BYTES, false, |b| {
                        b.local_get(size).unop(UnaryOp::I64ExtendUI32);
                    });
                    untracked.return_();
                },
                |_| {},
            );
            table.load(full, &mem);
        },
        |_| {},
    );
    table.find(
        &mut b,
        &mem,
        [ptr, i, e, key],
        |_| {},
        |again| {
            // Still live: freed where no probe saw it; this allocation replaces it.
            add_header32(again, &mem, l::HDR_LIVE_COUNT, -1);
            add_header(again, &mem, l::HDR_LIVE_BYTES, true, |b| {
                b.local_get(e);
                mem.load64(b, 8);
            });
        },
    );
    store_live(&mut b, &mem, cur, [ptr, size, e]);
    let node = |b: &mut InstrSeqBuilder| {
        b.global_get(cur);
    };
    let bytes = |b: &mut InstrSeqBuilder| {
        b.local_get(size).unop(UnaryOp::I64ExtendUI32);
    };
    log(
        &mut b,
        (&mem, &table),
        live.log_room,
        [ptr, i, e],
        (node, bytes),
    );
    builder.finish(vec![ptr, size], &mut module.funcs)
}

/// Stores the live block at `ptr` of `size` bytes, of the running node, at slot address
/// `e`, and counts it live, with the peak: a new peak has the next free record the blocks
/// live then.
fn store_live(b: &mut InstrSeqBuilder, mem: &Mem, cur: GlobalId, [ptr, size, e]: [LocalId; 3]) {
    put(
        b,
        mem,
        [e, ptr],
        |b| {
            b.global_get(cur);
        },
        |b| {
            b.local_get(size).unop(UnaryOp::I64ExtendUI32);
        },
    );
    add_header32(b, mem, l::HDR_LIVE_COUNT, 1);
    add_header(b, mem, l::HDR_LIVE_BYTES, false, |b| {
        b.local_get(size).unop(UnaryOp::I64ExtendUI32);
    });
    // if live > peak { peak = live; pending = 1 }
    b.i32_const(0);
    mem.load64(b, l::HDR_LIVE_BYTES);
    b.i32_const(0);
    mem.load64(b, l::HDR_PEAK_BYTES);
    b.binop(BinaryOp::I64GtU).if_else(
        None,
        |higher| {
            higher.i32_const(0).i32_const(0);
            mem.load64(higher, l::HDR_LIVE_BYTES);
            mem.store64(higher, l::HDR_PEAK_BYTES);
            higher.i32_const(0).i32_const(1);
            mem.store32(higher, l::HDR_PEAK_PENDING);
        },
        |_| {},
    );
}

/// `record_free(ptr: i32, size: i64)`: a free in the running node, of the bytes its
/// allocation asked for, found in the live table by address and taken out of it (the
/// slots after it shifted back, so a lookup stops at the first empty slot) and logged; an
/// address not there is counted unmatched, with `size` bytes when the free says it (≥ 0).
/// The blocks live at a peak that came since the last free are recorded first. A null
/// pointer records nothing.
pub(super) fn build_record_free(
    module: &mut Module,
    (layout, mem): (&Layout, Mem),
    (cur, sample): (GlobalId, Option<SampleWord>),
    live: &LiveFunctions,
) -> FunctionId {
    let ptr = module.locals.add(I32);
    let size = module.locals.add(I64);
    let [at, i, e, key] = [I32; 4].map(|t| module.locals.add(t));
    let table = Table::locals(module);
    let mut builder = FunctionBuilder::new(&mut module.types, &[I32, I64], &[]);
    builder.name("__wasmprof_record_free".into());
    let mut b = builder.func_body();
    SampleWord::mark_probes(sample, &mut b);
    return_if_null(&mut b, ptr);
    table.load(&mut b, &mem);
    record_peak(&mut b, &mem, &table);
    // size = max(size, 0): unknown until the table says.
    b.local_get(size)
        .i64_const(0)
        .local_get(size)
        .i64_const(0)
        .binop(BinaryOp::I64GtS)
        .select(None)
        .local_set(size);
    table.find(
        &mut b,
        &mem,
        [ptr, i, e, key],
        |missing| mem.bump64(missing, l::HDR_UNMATCHED_FREES),
        |found| {
            found.local_get(e);
            mem.load64(found, 8);
            found.local_set(size);
            add_header32(found, &mem, l::HDR_LIVE_COUNT, -1);
            add_header(found, &mem, l::HDR_LIVE_BYTES, true, |b| {
                b.local_get(size);
            });
            table.remove(found, &mem, [i, e, at]);
            let freed = |b: &mut InstrSeqBuilder| {
                b.i32_const(l::FREED as i32);
            };
            let no_bytes = |b: &mut InstrSeqBuilder| {
                b.i64_const(0);
            };
            log(
                found,
                (&mem, &table),
                live.log_room,
                [ptr, i, e],
                (freed, no_bytes),
            );
        },
    );
    running_node(&mut b, layout, cur, at);
    mem.add64(&mut b, at, layout.nodes_off + l::NODE_FREES, |b| {
        b.i64_const(1);
    });
    mem.add64(&mut b, at, layout.nodes_off + l::NODE_FREED_BYTES, |b| {
        b.local_get(size);
    });
    builder.finish(vec![ptr, size], &mut module.funcs)
}

/// `alloc_depth(by: i32) -> i32`: the allocator calls' depth changed by `by`, returned.
pub(super) fn build_alloc_depth(module: &mut Module, mem: Mem) -> FunctionId {
    let [by, depth] = [I32; 2].map(|t| module.locals.add(t));
    let mut builder = FunctionBuilder::new(&mut module.types, &[I32], &[I32]);
    builder.name("__wasmprof_alloc_depth".into());
    let mut b = builder.func_body();
    b.i32_const(0).i32_const(0);
    mem.load32(&mut b, l::HDR_ALLOC_DEPTH);
    b.local_get(by).binop(BinaryOp::I32Add).local_tee(depth);
    mem.store32(&mut b, l::HDR_ALLOC_DEPTH);
    b.local_get(depth);
    builder.finish(vec![by], &mut module.funcs)
}

/// `record_grow(result: i32, delta: i32) -> i32`: a `memory.grow` that succeeded (its
/// result not -1) adds its pages to the running node; returns the result.
pub(super) fn build_record_grow(
    module: &mut Module,
    layout: &Layout,
    mem: Mem,
    cur: GlobalId,
) -> FunctionId {
    let [result, delta, at] = [I32; 3].map(|t| module.locals.add(t));
    let mut builder = FunctionBuilder::new(&mut module.types, &[I32, I32], &[ValType::I32]);
    builder.name("__wasmprof_record_grow".into());
    let mut b = builder.func_body();
    b.local_get(result).i32_const(-1).binop(BinaryOp::I32Ne);
    b.if_else(
        None,
        |grew| {
            running_node(grew, layout, cur, at);
            mem.add64(grew, at, layout.nodes_off + l::NODE_GROWN_PAGES, |b| {
                b.local_get(delta).unop(UnaryOp::I64ExtendUI32);
            });
        },
        |_| {},
    );
    b.local_get(result);
    builder.finish(vec![result, delta], &mut module.funcs)
}
