//! The blocks live at the peak of live bytes, kept exactly at a cost per allocator call
//! that stays small: a copy of the live table, taken by the first free after a peak, and a
//! log of what the program allocated and freed since, in which the next peaks are only
//! positions. When the log fills up, the copy takes in the entries before the peak and the
//! rest move to the log's start; a log full of what came after the peak is dropped, and the
//! next peak takes a copy again (so a copy costs at most one per table's worth of calls).

use walrus::ir::{BinaryOp, UnaryOp};
use walrus::{FunctionBuilder, FunctionId, InstrSeqBuilder, LocalId, Module};
use walrus::{ValType::I32, ValType::I64};

use super::live_table::{put, Table};
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

/// `log(ptr: i32, node: i32, size: i64)`: while a log is kept, an allocation (by `node`)
/// or a free (`node` [`l::FREED`]) at its end, room made first when it is full.
pub(super) fn build_log(module: &mut Module, mem: &Mem, rebase: FunctionId) -> FunctionId {
    let table = Table::locals(module);
    let log = Table::locals(module);
    let [ptr, node, len, e] = [I32; 4].map(|t| module.locals.add(t));
    let size = module.locals.add(I64);
    let mut builder = FunctionBuilder::new(&mut module.types, &[I32, I32, I64], &[]);
    builder.name("__wasmprof_log".into());
    let mut b = builder.func_body();
    header_is(&mut b, mem, l::HDR_COPY_STATE, l::COPY_LOGGED);
    b.unop(UnaryOp::I32Eqz).if_else(
        None,
        |no_log| {
            no_log.return_();
        },
        |_| {},
    );
    table.load(&mut b, mem);
    log.region_of(&mut b, &table, 2);
    let full = |b: &mut InstrSeqBuilder| {
        b.i32_const(0);
        mem.load32(b, l::HDR_LOG_LEN);
        log.slots(b);
        b.binop(BinaryOp::I32Eq);
    };
    full(&mut b);
    b.if_else(
        None,
        |full_log| {
            full_log.call(rebase);
            full(full_log);
            full_log.if_else(
                None,
                |after_peak| {
                    // All of it came after the peak: the copy alone is the peak's.
                    set_header(after_peak, mem, l::HDR_COPY_STATE, l::COPY_AT_PEAK);
                    set_header(after_peak, mem, l::HDR_LOG_LEN, 0);
                    log.base(after_peak);
                    after_peak.i32_const(0);
                    log.bytes(after_peak);
                    after_peak.memory_fill(mem.0).return_();
                },
                |_| {},
            );
        },
        |_| {},
    );
    b.i32_const(0);
    mem.load32(&mut b, l::HDR_LOG_LEN);
    b.local_set(len);
    log.slot_address(&mut b, len);
    b.local_set(e);
    put(&mut b, mem, e, [ptr, node], |b| {
        b.local_get(size);
    });
    b.i32_const(0)
        .local_get(len)
        .i32_const(1)
        .binop(BinaryOp::I32Add);
    mem.store32(&mut b, l::HDR_LOG_LEN);
    builder.finish(vec![ptr, node, size], &mut module.funcs)
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
    b.block(None, |done| {
        let done_id = done.id();
        done.loop_(None, |lp| {
            let lp_id = lp.id();
            lp.local_get(k)
                .local_get(peak)
                .binop(BinaryOp::I32GeU)
                .br_if(done_id);
            log.slot_address(lp, k);
            lp.local_tee(x);
            mem.load32(lp, 0);
            lp.local_set(ptr).local_get(x);
            mem.load32(lp, 4);
            lp.local_set(node);
            replay(lp, mem, &copy, [ptr, node, x], [i, e, key, j]);
            lp.local_get(k)
                .i32_const(1)
                .binop(BinaryOp::I32Add)
                .local_set(k)
                .br(lp_id);
        });
    });
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
    let size = |b: &mut InstrSeqBuilder| {
        b.local_get(x);
        mem.load64(b, 8);
    };
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
            empty.if_else(None, |_| {}, |alloc| put(alloc, mem, e, [ptr, node], size));
        },
        |found| {
            is_free(found);
            found.if_else(
                None,
                |free| copy.remove(free, mem, [i, e, j]),
                |alloc| put(alloc, mem, e, [ptr, node], size),
            );
        },
    );
}
