//! The allocation probes' out-of-line functions, in the module that holds the profiler's
//! state: `record_alloc`, `record_free` (and the live table they keep: open addressing,
//! linear probing, deletion by shifting back), `record_grow`, and the state module's
//! `alloc_depth`.

use walrus::ir::{BinaryOp, UnaryOp};
use walrus::{FunctionBuilder, FunctionId, GlobalId, InstrSeqBuilder, LocalId, Module};
use walrus::{ValType, ValType::I32, ValType::I64};

use super::mem::Mem;
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
    b.global_get(cur)
        .i32_const(layout.node_size as i32)
        .binop(BinaryOp::I32Mul)
        .local_set(at);
}

/// Pushes the live-table slot of address `ptr`, its home.
fn home(b: &mut InstrSeqBuilder, layout: &Layout, ptr: LocalId) {
    b.local_get(ptr);
    hash(b, layout);
}

/// Replaces the address on the stack with its home slot (Fibonacci hashing: the table's
/// slots are a power of two).
fn hash(b: &mut InstrSeqBuilder, layout: &Layout) {
    let shift = 32 - layout.live_slots.trailing_zeros() as i32;
    b.i32_const(0x9E37_79B1_u32 as i32)
        .binop(BinaryOp::I32Mul)
        .i32_const(shift)
        .binop(BinaryOp::I32ShrU);
}

/// Leaves slot `i`'s address (relative to the live table) in `e` and pushes its address
/// field.
fn slot(b: &mut InstrSeqBuilder, layout: &Layout, mem: &Mem, i: LocalId, e: LocalId) {
    b.local_get(i)
        .i32_const(4)
        .binop(BinaryOp::I32Shl)
        .local_tee(e);
    mem.load32(b, layout.live_off);
}

/// `i = (i + 1) mod slots`.
fn next_slot(b: &mut InstrSeqBuilder, layout: &Layout, i: LocalId) {
    b.local_get(i)
        .i32_const(1)
        .binop(BinaryOp::I32Add)
        .i32_const(layout.live_slots as i32 - 1)
        .binop(BinaryOp::I32And)
        .local_set(i);
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

/// `record_alloc(ptr: i32, size: i32)`: an allocation in the running node, and, while the
/// live table has room (three quarters of its slots), the block in it, with the bytes live
/// and their peak; else the header counts it untracked. A null pointer (a failed
/// allocation) records nothing.
pub(super) fn build_record_alloc(
    module: &mut Module,
    layout: &Layout,
    mem: Mem,
    cur: GlobalId,
) -> FunctionId {
    let [ptr, size, at, i, e, key] = [I32; 6].map(|t| module.locals.add(t));
    let mut builder = FunctionBuilder::new(&mut module.types, &[I32, I32], &[]);
    builder.name("__wasmprof_record_alloc".into());
    let mut b = builder.func_body();
    return_if_null(&mut b, ptr);
    running_node(&mut b, layout, cur, at);
    let node_field = |off: u32| layout.nodes_off + off;
    mem.add64(&mut b, at, node_field(l::NODE_ALLOCS), |b| {
        b.i64_const(1);
    });
    mem.add64(&mut b, at, node_field(l::NODE_ALLOC_BYTES), |b| {
        b.local_get(size).unop(UnaryOp::I64ExtendUI32);
    });
    b.i32_const(0);
    mem.load32(&mut b, l::HDR_LIVE_COUNT);
    b.i32_const((layout.live_slots / 4 * 3) as i32)
        .binop(BinaryOp::I32GeU);
    b.if_else(
        None,
        |full| {
            mem.bump64(full, l::HDR_UNTRACKED);
            add_header(full, &mem, l::HDR_UNTRACKED_BYTES, false, |b| {
                b.local_get(size).unop(UnaryOp::I64ExtendUI32);
            });
            full.return_();
        },
        |_| {},
    );
    find(
        &mut b,
        (layout, &mem),
        [ptr, i, e, key],
        |_| {},
        |again| {
            // Still live: freed where no probe saw it; this allocation replaces it.
            add_header32(again, &mem, l::HDR_LIVE_COUNT, -1);
            add_header(again, &mem, l::HDR_LIVE_BYTES, true, |b| {
                b.local_get(e);
                mem.load64(b, layout.live_off + 8);
            });
        },
    );
    store_live(&mut b, layout, &mem, cur, [ptr, size, e]);
    builder.finish(vec![ptr, size], &mut module.funcs)
}

/// Walks the live table from `ptr`'s home slot to the first slot that is empty or holds
/// `ptr` (its index left in `i`, its address in `e`, each slot's key read once into `key`),
/// and runs `empty` or `found` there.
fn find(
    b: &mut InstrSeqBuilder,
    (layout, mem): (&Layout, &Mem),
    [ptr, i, e, key]: [LocalId; 4],
    empty: impl FnOnce(&mut InstrSeqBuilder),
    found: impl FnOnce(&mut InstrSeqBuilder),
) {
    home(b, layout, ptr);
    b.local_set(i);
    b.block(None, |done| {
        let done_id = done.id();
        done.loop_(None, |lp| {
            let lp_id = lp.id();
            slot(lp, layout, mem, i, e);
            lp.local_tee(key).unop(UnaryOp::I32Eqz);
            lp.if_else(
                None,
                |at_empty| {
                    empty(at_empty);
                    at_empty.br(done_id);
                },
                |_| {},
            );
            lp.local_get(key).local_get(ptr).binop(BinaryOp::I32Eq);
            lp.if_else(
                None,
                |at_ptr| {
                    found(at_ptr);
                    at_ptr.br(done_id);
                },
                |_| {},
            );
            next_slot(lp, layout, i);
            lp.br(lp_id);
        });
    });
}

/// Stores the live block at `ptr` of `size` bytes, of the running node, at slot address
/// `e`, and counts it live, with the peak.
fn store_live(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    cur: GlobalId,
    [ptr, size, e]: [LocalId; 3],
) {
    b.local_get(e).local_get(ptr);
    mem.store32(b, layout.live_off);
    b.local_get(e).global_get(cur);
    mem.store32(b, layout.live_off + 4);
    b.local_get(e).local_get(size).unop(UnaryOp::I64ExtendUI32);
    mem.store64(b, layout.live_off + 8);
    add_header32(b, mem, l::HDR_LIVE_COUNT, 1);
    add_header(b, mem, l::HDR_LIVE_BYTES, false, |b| {
        b.local_get(size).unop(UnaryOp::I64ExtendUI32);
    });
    // peak = max(peak, live)
    b.i32_const(0).i32_const(0);
    mem.load64(b, l::HDR_LIVE_BYTES);
    b.i32_const(0);
    mem.load64(b, l::HDR_PEAK_BYTES);
    b.i32_const(0);
    mem.load64(b, l::HDR_LIVE_BYTES);
    b.i32_const(0);
    mem.load64(b, l::HDR_PEAK_BYTES);
    b.binop(BinaryOp::I64GtU).select(None);
    mem.store64(b, l::HDR_PEAK_BYTES);
    // pending |= live * 100 > snapshot * 101 && live > snapshot + SNAPSHOT_STEP: grown
    // past the peak table's copy by 1% and by a step (each copy is the whole table's).
    b.i32_const(0).i32_const(0);
    mem.load64(b, l::HDR_LIVE_BYTES);
    b.i64_const(100).binop(BinaryOp::I64Mul).i32_const(0);
    mem.load64(b, l::HDR_SNAPSHOT_BYTES);
    b.i64_const(101)
        .binop(BinaryOp::I64Mul)
        .binop(BinaryOp::I64GtU)
        .i32_const(0);
    mem.load64(b, l::HDR_LIVE_BYTES);
    b.i32_const(0);
    mem.load64(b, l::HDR_SNAPSHOT_BYTES);
    b.i64_const(l::SNAPSHOT_STEP as i64)
        .binop(BinaryOp::I64Add)
        .binop(BinaryOp::I64GtU)
        .binop(BinaryOp::I32And)
        .i32_const(0);
    mem.load32(b, l::HDR_PEAK_PENDING);
    b.binop(BinaryOp::I32Or);
    mem.store32(b, l::HDR_PEAK_PENDING);
}

/// The first free after a peak: the live table, as it is at that peak, copied to the peak
/// table, with its bytes; the pending flag cleared.
fn snapshot_if_pending(b: &mut InstrSeqBuilder, layout: &Layout, mem: &Mem) {
    b.i32_const(0);
    mem.load32(b, l::HDR_PEAK_PENDING);
    b.if_else(
        None,
        |pending| {
            pending
                .i32_const(layout.peak_off as i32)
                .i32_const(layout.live_off as i32)
                .i32_const((layout.live_slots * l::LIVE_ENTRY_SIZE) as i32)
                .memory_copy(mem.0, mem.0);
            pending.i32_const(0).i32_const(0);
            mem.load64(pending, l::HDR_LIVE_BYTES);
            mem.store64(pending, l::HDR_SNAPSHOT_BYTES);
            pending.i32_const(0).i32_const(0);
            mem.store32(pending, l::HDR_PEAK_PENDING);
        },
        |_| {},
    );
}

/// `record_free(ptr: i32, size: i64)`: a free in the running node, of the bytes its
/// allocation asked for, found in the live table by address and taken out of it (the
/// slots after it shifted back, so a lookup stops at the first empty slot); an address not
/// there is counted unmatched, with `size` bytes when the free says it (≥ 0). A null
/// pointer records nothing.
pub(super) fn build_record_free(
    module: &mut Module,
    layout: &Layout,
    mem: Mem,
    cur: GlobalId,
) -> FunctionId {
    let ptr = module.locals.add(I32);
    let size = module.locals.add(I64);
    let [at, i, e, key] = [I32; 4].map(|t| module.locals.add(t));
    let mut builder = FunctionBuilder::new(&mut module.types, &[I32, I64], &[]);
    builder.name("__wasmprof_record_free".into());
    let mut b = builder.func_body();
    return_if_null(&mut b, ptr);
    snapshot_if_pending(&mut b, layout, &mem);
    // size = max(size, 0): unknown until the table says.
    b.local_get(size)
        .i64_const(0)
        .local_get(size)
        .i64_const(0)
        .binop(BinaryOp::I64GtS)
        .select(None)
        .local_set(size);
    find(
        &mut b,
        (layout, &mem),
        [ptr, i, e, key],
        |missing| mem.bump64(missing, l::HDR_UNMATCHED_FREES),
        |found| {
            found.local_get(e);
            mem.load64(found, layout.live_off + 8);
            found.local_set(size);
            add_header32(found, &mem, l::HDR_LIVE_COUNT, -1);
            add_header(found, &mem, l::HDR_LIVE_BYTES, true, |b| {
                b.local_get(size);
            });
            remove(found, layout, &mem, [i, e, at]);
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

/// Empties slot `i` of the live table, shifting back the entries after it that their
/// home slot allows (linear probing's deletion without tombstones). Uses `e` and `j`.
fn remove(b: &mut InstrSeqBuilder, layout: &Layout, mem: &Mem, [i, e, j]: [LocalId; 3]) {
    let mask = layout.live_slots as i32 - 1;
    let off = layout.live_off;
    b.local_get(i).local_set(j);
    b.block(None, |done| {
        let done_id = done.id();
        done.loop_(None, |lp| {
            let lp_id = lp.id();
            next_slot(lp, layout, j);
            slot(lp, layout, mem, j, e);
            lp.unop(UnaryOp::I32Eqz).br_if(done_id);
            // Its home h is not in (i, j] cyclically: (j - h) & mask >= (j - i) & mask.
            lp.local_get(j);
            home_of_slot(lp, layout, mem, e);
            lp.binop(BinaryOp::I32Sub)
                .i32_const(mask)
                .binop(BinaryOp::I32And)
                .local_get(j)
                .local_get(i)
                .binop(BinaryOp::I32Sub)
                .i32_const(mask)
                .binop(BinaryOp::I32And)
                .binop(BinaryOp::I32GeU);
            lp.if_else(
                None,
                |moves| {
                    for half in [0, 8] {
                        moves.local_get(i).i32_const(4).binop(BinaryOp::I32Shl);
                        moves.local_get(e);
                        mem.load64(moves, off + half);
                        mem.store64(moves, off + half);
                    }
                    moves.local_get(j).local_set(i);
                },
                |_| {},
            );
            lp.br(lp_id);
        });
    });
    b.local_get(i)
        .i32_const(4)
        .binop(BinaryOp::I32Shl)
        .i32_const(0);
    mem.store32(b, off);
}

/// Pushes the home slot of the entry at `e` (relative to the live table).
fn home_of_slot(b: &mut InstrSeqBuilder, layout: &Layout, mem: &Mem, e: LocalId) {
    b.local_get(e);
    mem.load32(b, layout.live_off);
    hash(b, layout);
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
