//! The blocks live at the peak of live bytes, kept exactly at a cost per allocator call
//! that stays small: a copy of the live table, taken by the first free after a peak, and a
//! log of what the program allocated and freed since, in which the next peaks are only
//! positions. When the log fills up, the copy takes in the entries before the peak and the
//! rest move to the log's start; a log full of what came after the peak is dropped, and the
//! next peak takes a copy again (so a copy costs at most one per table's worth of calls).

use walrus::ir::BinaryOp;
use walrus::ValType::I32;
use walrus::{FunctionBuilder, FunctionId, InstrSeqBuilder, LocalId, Module};

use super::live_table::{copy_entry, count_up, put, Table};
use super::mem::Mem;
use crate::layout as l;

/// Pushes whether the header's u32 at `offset` is `value`.
fn header_is(b: &mut InstrSeqBuilder, mem: &Mem, offset: u32, value: u32) {
    b.i32_const(0);
    mem.load32(b, offset);
    b.i32_const(value as i32).binop(BinaryOp::I32Eq);
}

/// `header32[offset] = value`.
fn set_header(b: &mut InstrSeqBuilder, mem: &Mem, offset: u32, value: u32) {
    b.i32_const(0).i32_const(value as i32);
    mem.store32(b, offset);
}

/// At a free, with `table` loaded: when an allocation made a new peak since the last
/// free, the blocks live now are that peak's: the log's length marks it, or, without a
/// log, the table is copied and a log begins.
pub(super) fn record_peak(b: &mut InstrSeqBuilder, mem: &Mem, table: &Table) {
    b.i32_const(0);
    mem.load32(b, l::HDR_PEAK_PENDING);
    b.if_else(
        None,
        |pending| {
            header_is(pending, mem, l::HDR_COPY_STATE, l::COPY_LOGGED);
            pending.if_else(
                None,
                |logged| {
                    logged.i32_const(0).i32_const(0);
                    mem.load32(logged, l::HDR_LOG_LEN);
                    mem.store32(logged, l::HDR_LOG_PEAK);
                },
                |copy| {
                    table.base(copy);
                    table.bytes(copy);
                    copy.binop(BinaryOp::I32Add);
                    table.base(copy);
                    table.bytes(copy);
                    copy.memory_copy(mem.0, mem.0);
                    set_header(copy, mem, l::HDR_COPY_STATE, l::COPY_LOGGED);
                    set_header(copy, mem, l::HDR_LOG_LEN, 0);
                    set_header(copy, mem, l::HDR_LOG_PEAK, 0);
                },
            );
            set_header(pending, mem, l::HDR_PEAK_PENDING, 0);
        },
        |_| {},
    );
}

/// An allocation of `ptr` (its node and size, an i64, pushed by `node` and `size`) or a
/// free (its node [`l::FREED`]) at the end of the log, where one is kept, in a function that
/// has `table` loaded; `log_room` called first when the log is full. Uses `len` and `e`.
pub(super) fn log(
    b: &mut InstrSeqBuilder,
    (mem, table): (&Mem, &Table),
    log_room: FunctionId,
    [ptr, len, e]: [LocalId; 3],
    (node, size): (
        impl FnOnce(&mut InstrSeqBuilder),
        impl FnOnce(&mut InstrSeqBuilder),
    ),
) {
    header_is(b, mem, l::HDR_COPY_STATE, l::COPY_LOGGED);
    b.if_else(
        None,
        |logged| {
            logged.i32_const(0);
            mem.load32(logged, l::HDR_LOG_LEN);
            logged.local_tee(len);
            table.slots(logged);
            logged.binop(BinaryOp::I32Eq).if_else(
                None,
                |full| {
                    full.call(log_room).local_set(len);
                },
                |_| {},
            );
            // -1: dropped. The log is the third region from the table.
            logged
                .local_get(len)
                .i32_const(-1)
                .binop(BinaryOp::I32Ne)
                .if_else(
                    None,
                    |append| {
                        table.slot_address(append, len);
                        table.bytes(append);
                        append
                            .i32_const(2)
                            .binop(BinaryOp::I32Mul)
                            .binop(BinaryOp::I32Add)
                            .local_set(e);
                        put(append, mem, [e, ptr], node, size);
                        append
                            .i32_const(0)
                            .local_get(len)
                            .i32_const(1)
                            .binop(BinaryOp::I32Add);
                        mem.store32(append, l::HDR_LOG_LEN);
                    },
                    |_| {},
                );
        },
        |_| {},
    );
}

/// `log_room() -> i32`: room in a full log: the copy takes in the entries before the
/// peak; when none came before it, the log (all of it after the peak) is dropped and the
/// copy alone is the peak's. Returns the log's length, or -1 when it was dropped.
pub(super) fn build_log_room(module: &mut Module, mem: &Mem, rebase: FunctionId) -> FunctionId {
    let [table, log] = [(); 2].map(|_| Table::locals(module));
    let len = module.locals.add(I32);
    let mut builder = FunctionBuilder::new(&mut module.types, &[], &[I32]);
    builder.name("__wasmprof_log_room".into());
    let mut b = builder.func_body();
    b.call(rebase);
    table.load(&mut b, mem);
    log.region_of(&mut b, &table, 2);
    b.i32_const(0);
    mem.load32(&mut b, l::HDR_LOG_LEN);
    b.local_tee(len);
    log.slots(&mut b);
    b.binop(BinaryOp::I32Eq).if_else(
        None,
        |after_peak| {
            set_header(after_peak, mem, l::HDR_COPY_STATE, l::COPY_AT_PEAK);
            set_header(after_peak, mem, l::HDR_LOG_LEN, 0);
            log.base(after_peak);
            after_peak.i32_const(0);
            log.bytes(after_peak);
            after_peak.memory_fill(mem.0).i32_const(-1).return_();
        },
        |_| {},
    );
    b.local_get(len);
    builder.finish(vec![], &mut module.funcs)
}

/// `rebase()`: the log's entries before the peak taken into the copy (an allocation stored,
/// a free's block taken out), the rest moved to the log's start and the tail emptied.
pub(super) fn build_rebase(module: &mut Module, mem: &Mem) -> FunctionId {
    let [table, copy, log] = [(); 3].map(|_| Table::locals(module));
    let [k, peak, len, ptr, node, x, i, e, key, j] = [I32; 10].map(|t| module.locals.add(t));
    let mut builder = FunctionBuilder::new(&mut module.types, &[], &[]);
    builder.name("__wasmprof_rebase".into());
    let mut b = builder.func_body();
    table.load(&mut b, mem);
    copy.region_of(&mut b, &table, 1);
    log.region_of(&mut b, &table, 2);
    b.i32_const(0);
    mem.load32(&mut b, l::HDR_LOG_PEAK);
    b.local_set(peak).i32_const(0);
    mem.load32(&mut b, l::HDR_LOG_LEN);
    b.local_set(len);
    count_up(
        &mut b,
        k,
        |b| {
            b.local_get(peak);
        },
        |lp| {
            log.slot_address(lp, k);
            lp.local_tee(x);
            mem.load32(lp, 0);
            lp.local_set(ptr).local_get(x);
            mem.load32(lp, 4);
            lp.local_set(node);
            replay(lp, mem, &copy, [ptr, node, x], [i, e, key, j]);
        },
    );
    // log[..len - peak] = log[peak..len]; log[len - peak..len] = 0.
    log.base(&mut b);
    log.slot_address(&mut b, peak);
    b.local_get(len).local_get(peak).binop(BinaryOp::I32Sub);
    b.i32_const(4)
        .binop(BinaryOp::I32Shl)
        .memory_copy(mem.0, mem.0);
    b.local_get(len)
        .local_get(peak)
        .binop(BinaryOp::I32Sub)
        .local_set(len);
    log.slot_address(&mut b, len);
    b.i32_const(0)
        .local_get(peak)
        .i32_const(4)
        .binop(BinaryOp::I32Shl)
        .memory_fill(mem.0);
    b.i32_const(0).local_get(len);
    mem.store32(&mut b, l::HDR_LOG_LEN);
    set_header(&mut b, mem, l::HDR_LOG_PEAK, 0);
    builder.finish(vec![], &mut module.funcs)
}

/// The log entry at `x` (its address `ptr` and node `node` read) applied to `copy`: an
/// allocation stored (over a block at the same address), a free's block taken out.
fn replay(
    b: &mut InstrSeqBuilder,
    mem: &Mem,
    copy: &Table,
    [ptr, node, x]: [LocalId; 3],
    [i, e, key, j]: [LocalId; 4],
) {
    let is_free = |b: &mut InstrSeqBuilder| {
        b.local_get(node)
            .i32_const(l::FREED as i32)
            .binop(BinaryOp::I32Eq);
    };
    copy.find(
        b,
        mem,
        [ptr, i, e, key],
        |empty| {
            is_free(empty);
            empty.if_else(None, |_| {}, |alloc| copy_entry(alloc, mem, x, e));
        },
        |found| {
            is_free(found);
            found.if_else(
                None,
                |free| copy.remove(free, mem, [i, e, j]),
                |alloc| copy_entry(alloc, mem, x, e),
            );
        },
    );
}
