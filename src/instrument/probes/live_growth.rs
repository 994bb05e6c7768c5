//! Growing the live table: when three quarters of its slots are taken, `grow_live` takes
//! the next nodes of the node region for a chunk (see [`crate::layout`]) with a table twice
//! its size, a copy and a log, and moves the live blocks and the copy there, so that every
//! live block is followed up to [`Layout::live_slots_max`] slots.

use walrus::ir::{BinaryOp, UnaryOp};
use walrus::{FunctionBuilder, FunctionId, InstrSeqBuilder, LocalId, Module, ValType::I32};

use super::live_table::{rehash, Table};
use super::mem::Mem;
use super::tables::node_addr;
use crate::layout::{self as l, Layout};

/// `grow_live() -> i32`: the table moved into a chunk of twice its slots, its blocks
/// rehashed there, and the copy too, as the blocks live at the peak (the log's entries
/// before the peak taken into it first, the rest dropped); the old chunk emptied where it
/// was written, so that a dump leaves it out. 1 when it grew, 0 when it may not (at
/// [`Layout::live_slots_max`] already, or the memory cannot grow to the chunk).
pub(super) fn build_grow_live(
    module: &mut Module,
    layout: &Layout,
    mem: &Mem,
    rebase: FunctionId,
) -> FunctionId {
    let [old, new, old_copy, new_copy, old_log] = [(); 5].map(|_| Table::locals(module));
    let [first, nodes, i, e, j, f, to, key] = [I32; 8].map(|t| module.locals.add(t));
    let [copied, logged] = [I32; 2].map(|t| module.locals.add(t));
    let mut builder = FunctionBuilder::new(&mut module.types, &[], &[I32]);
    builder.name("__wasmprof_grow_live".into());
    let mut b = builder.func_body();
    old.load(&mut b, mem);
    // At the most slots: no growth.
    old.slots(&mut b);
    b.i32_const(layout.live_slots_max as i32)
        .binop(BinaryOp::I32GeU);
    return_zero_if(&mut b);
    // copied = whether a copy was taken (before, the copy's region holds only zeros).
    b.i32_const(0);
    mem.load32(&mut b, l::HDR_COPY_STATE);
    b.i32_const(l::COPY_NONE as i32)
        .binop(BinaryOp::I32Ne)
        .local_set(copied);
    claim_chunk(&mut b, layout, mem, &old, [first, nodes, e]);
    // The new table, empty (the memory grew for it), after the head.
    b.local_get(e)
        .i32_const(l::CHUNK_HEAD as i32)
        .binop(BinaryOp::I32Add);
    new.set_base(&mut b);
    old.slots(&mut b);
    b.i32_const(1).binop(BinaryOp::I32Shl);
    new.set_size(&mut b);
    // Its table, and its copy where one is kept, written with the zeros they hold, so that
    // each fresh page's first touch is a write: a lookup's read would map the kernel's zero
    // page and the insert after it would replace that, a second fault and a flush of every
    // CPU's TLB entries for the page, which interrupts the sampler's thread on its CPU. The
    // log is only appended to, each entry written before it is read; its pages and those
    // of a copy not taken stay untouched, so that a fault is paid only for a page in use.
    // (The regions below the nodes, there before the run, the embedded host faults in
    // itself: `host::instance::populate_for_writing`.)
    new.fill_zero(&mut b, mem, copied);
    rehash(&mut b, mem, (&old, &new), [i, e, j, f, to, key]);
    move_copy(
        &mut b,
        (mem, rebase),
        [(&old, &old_copy), (&new, &new_copy)],
        [copied, logged],
        [i, e, j, f, to, key],
    );
    // The old table, copy and log emptied where they were written (a log's entries past
    // its length are zeros: `rebase` empties those it moves).
    old.fill_zero(&mut b, mem, copied);
    old_log.region_of(&mut b, &old, 2);
    old_log.base(&mut b);
    b.i32_const(0)
        .local_get(logged)
        .i32_const(4)
        .binop(BinaryOp::I32Shl)
        .memory_fill(mem.0);
    b.i32_const(0);
    new.base(&mut b);
    mem.store32(&mut b, l::HDR_LIVE_TABLE);
    b.i32_const(0);
    new.slots(&mut b);
    mem.store32(&mut b, l::HDR_LIVE_SLOTS);
    b.i32_const(1);
    builder.finish(vec![], &mut module.funcs)
}

/// With a copy kept (`copied`), moves it from `old`'s chunk (as `old_copy`) into `new`'s
/// (as `new_copy`): with a log, the peak's blocks taken into it first and the log's entries
/// after the peak dropped, their count left in `logged` (0 without a log). Uses `scratch`.
fn move_copy(
    b: &mut InstrSeqBuilder,
    (mem, rebase): (&Mem, FunctionId),
    [(old, old_copy), (new, new_copy)]: [(&Table, &Table); 2],
    [copied, logged]: [LocalId; 2],
    scratch: [LocalId; 6],
) {
    b.i32_const(0).local_set(logged);
    b.i32_const(0);
    mem.load32(b, l::HDR_COPY_STATE);
    b.i32_const(l::COPY_LOGGED as i32).binop(BinaryOp::I32Eq);
    b.if_else(
        None,
        |is_logged| {
            is_logged.call(rebase);
            is_logged.i32_const(0);
            mem.load32(is_logged, l::HDR_LOG_LEN);
            is_logged.local_set(logged);
            is_logged.i32_const(0).i32_const(l::COPY_AT_PEAK as i32);
            mem.store32(is_logged, l::HDR_COPY_STATE);
            is_logged.i32_const(0).i32_const(0);
            mem.store32(is_logged, l::HDR_LOG_LEN);
        },
        |_| {},
    );
    b.local_get(copied).if_else(
        None,
        |with_copy| {
            old_copy.region_of(with_copy, old, 1);
            new_copy.region_of(with_copy, new, 1);
            rehash(with_copy, mem, (old_copy, new_copy), scratch);
        },
        |_| {},
    );
}

/// Takes the chunk for a table twice `old`'s size as the next nodes (`first`, `nodes` of
/// them), growing the memory, its address left in `e`, its head written and the header's
/// list and counts updated; returns 0 from the function where there is no room.
fn claim_chunk(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    old: &Table,
    [first, nodes, e]: [LocalId; 3],
) {
    // nodes = (CHUNK_HEAD + 3 * 16 * 2 * slots) / node_size, rounded up.
    old.slots(b);
    b.i32_const(96)
        .binop(BinaryOp::I32Mul)
        .i32_const((l::CHUNK_HEAD + layout.node_size - 1) as i32)
        .binop(BinaryOp::I32Add)
        .i32_const(layout.node_size as i32)
        .binop(BinaryOp::I32DivU)
        .local_set(nodes);
    b.i32_const(0);
    mem.load32(b, l::HDR_NODE_COUNT);
    b.local_set(first);
    take_chunk(b, layout, mem, [first, nodes, e]);
    // The chunk's head: the chunk before, the nodes it takes; the header lists it.
    node_address(b, layout, first);
    b.local_tee(e).i32_const(0);
    mem.load32(b, l::HDR_CHUNKS);
    mem.store32(b, 0);
    b.local_get(e).local_get(nodes);
    mem.store32(b, 4);
    b.i32_const(0)
        .local_get(first)
        .i32_const(1)
        .binop(BinaryOp::I32Add);
    mem.store32(b, l::HDR_CHUNKS);
    b.i32_const(0)
        .local_get(first)
        .local_get(nodes)
        .binop(BinaryOp::I32Add);
    mem.store32(b, l::HDR_NODE_COUNT);
    b.i32_const(0).i32_const(0);
    mem.load32(b, l::HDR_CLAIMED);
    b.local_get(nodes).binop(BinaryOp::I32Add);
    mem.store32(b, l::HDR_CLAIMED);
}

/// Pushes the address of node `n`.
fn node_address(b: &mut InstrSeqBuilder, layout: &Layout, n: LocalId) {
    node_addr(b, layout, n);
    b.i32_const(layout.nodes_off as i32).binop(BinaryOp::I32Add);
}

/// Returns 0 from the function unless `nodes` nodes from node `first` fit in the memory's
/// most pages, growing the memory to hold them. Uses `pages` as scratch.
fn take_chunk(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    [first, nodes, pages]: [LocalId; 3],
) {
    // pages = ceil((nodes_off + (first + nodes) * node_size) / 64 KiB), computed in 64 bits
    // (it fits in 32).
    b.local_get(first)
        .unop(UnaryOp::I64ExtendUI32)
        .local_get(nodes)
        .unop(UnaryOp::I64ExtendUI32)
        .binop(BinaryOp::I64Add)
        .i64_const(i64::from(layout.node_size))
        .binop(BinaryOp::I64Mul)
        .i64_const(i64::from(layout.nodes_off) + 0xFFFF)
        .binop(BinaryOp::I64Add)
        .i64_const(16)
        .binop(BinaryOp::I64ShrU)
        .unop(UnaryOp::I32WrapI64)
        .local_tee(pages)
        .i32_const(layout.pages as i32)
        .binop(BinaryOp::I32GtU);
    return_zero_if(b);
    b.local_get(pages)
        .memory_size(mem.0)
        .binop(BinaryOp::I32GtU);
    b.if_else(
        None,
        |short| {
            short
                .local_get(pages)
                .memory_size(mem.0)
                .binop(BinaryOp::I32Sub)
                .memory_grow(mem.0)
                .i32_const(-1)
                .binop(BinaryOp::I32Eq);
            return_zero_if(short);
        },
        |_| {},
    );
}

/// Returns 0 from the function when the condition on the stack holds.
fn return_zero_if(b: &mut InstrSeqBuilder) {
    b.if_else(
        None,
        |holds| {
            holds.i32_const(0).return_();
        },
        |_| {},
    );
}
