//! The live table that the allocation probes keep: the program's live blocks (address,
//! allocating node, size), open addressing with linear probing and Fibonacci hashing,
//! deletion by shifting back. The header says where it is and how many slots it has; its
//! copy (the same kind of table) and its log follow it (see [`crate::layout`]).

use walrus::ir::{BinaryOp, InstrSeqId, UnaryOp};
use walrus::{InstrSeqBuilder, LocalId, Module, ValType::I32};

use super::mem::Mem;
use crate::layout as l;

/// The table as a probe function reads it from the header once: its address, its slots
/// less one (a mask) and the shift that turns a hash into a home slot.
pub(super) struct Table {
    base: LocalId,
    mask: LocalId,
    shift: LocalId,
}

impl Table {
    /// Adds the locals that hold the table to `module`.
    pub(super) fn locals(module: &mut Module) -> Table {
        let [base, mask, shift] = [I32; 3].map(|t| module.locals.add(t));
        Table { base, mask, shift }
    }

    /// Reads the table's address and size from the header.
    pub(super) fn load(&self, b: &mut InstrSeqBuilder, mem: &Mem) {
        b.i32_const(0);
        mem.load32(b, l::HDR_LIVE_TABLE);
        b.local_set(self.base);
        b.i32_const(0);
        mem.load32(b, l::HDR_LIVE_SLOTS);
        self.set_size(b);
    }

    /// Makes this the region `k` tables past `table` (the copy: 1, the log: 2), of as many
    /// slots.
    pub(super) fn region_of(&self, b: &mut InstrSeqBuilder, table: &Table, k: i32) {
        b.local_get(table.base);
        table.bytes(b);
        b.i32_const(k)
            .binop(BinaryOp::I32Mul)
            .binop(BinaryOp::I32Add)
            .local_set(self.base);
        b.local_get(table.mask).local_set(self.mask);
        b.local_get(table.shift).local_set(self.shift);
    }

    /// Pushes the table's slots.
    pub(super) fn slots(&self, b: &mut InstrSeqBuilder) {
        b.local_get(self.mask).i32_const(1).binop(BinaryOp::I32Add);
    }

    /// Pushes the table's size in bytes.
    pub(super) fn bytes(&self, b: &mut InstrSeqBuilder) {
        self.slots(b);
        b.i32_const(4).binop(BinaryOp::I32Shl);
    }

    /// Fills the table and, when `with_copy` (an i32 local) is 1, its copy after it, with
    /// zeros.
    pub(super) fn fill_zero(&self, b: &mut InstrSeqBuilder, mem: &Mem, with_copy: LocalId) {
        self.base(b);
        b.i32_const(0);
        self.bytes(b);
        b.local_get(with_copy)
            .binop(BinaryOp::I32Shl)
            .memory_fill(mem.0);
    }

    /// Pushes the table's address.
    pub(super) fn base(&self, b: &mut InstrSeqBuilder) {
        b.local_get(self.base);
    }

    /// Sets the table's address to the one on the stack.
    pub(super) fn set_base(&self, b: &mut InstrSeqBuilder) {
        b.local_set(self.base);
    }

    /// Sets the mask and the shift for the slots on the stack (a power of two): a home
    /// slot is the top log2(slots) bits of the hash, a shift of clz(slots) + 1.
    pub(super) fn set_size(&self, b: &mut InstrSeqBuilder) {
        b.local_tee(self.mask)
            .unop(UnaryOp::I32Clz)
            .i32_const(1)
            .binop(BinaryOp::I32Add)
            .local_set(self.shift);
        b.local_get(self.mask)
            .i32_const(1)
            .binop(BinaryOp::I32Sub)
            .local_set(self.mask);
    }

    /// Replaces the address on the stack with its home slot.
    fn hash(&self, b: &mut InstrSeqBuilder) {
        b.i32_const(0x9E37_79B1_u32 as i32)
            .binop(BinaryOp::I32Mul)
            .local_get(self.shift)
            .binop(BinaryOp::I32ShrU);
    }

    /// Leaves slot `i`'s address in `e` and pushes its address field.
    fn slot(&self, b: &mut InstrSeqBuilder, mem: &Mem, i: LocalId, e: LocalId) {
        self.slot_address(b, i);
        b.local_tee(e);
        mem.load32(b, 0);
    }

    /// Pushes slot `i`'s address (in a log, entry `i`'s).
    pub(super) fn slot_address(&self, b: &mut InstrSeqBuilder, i: LocalId) {
        b.local_get(self.base)
            .local_get(i)
            .i32_const(4)
            .binop(BinaryOp::I32Shl)
            .binop(BinaryOp::I32Add);
    }

    /// `i = (i + 1) mod slots`.
    fn next_slot(&self, b: &mut InstrSeqBuilder, i: LocalId) {
        b.local_get(i)
            .i32_const(1)
            .binop(BinaryOp::I32Add)
            .local_get(self.mask)
            .binop(BinaryOp::I32And)
            .local_set(i);
    }

    /// Pushes whether the table is full: three quarters of its slots hold a block.
    pub(super) fn push_is_full(&self, b: &mut InstrSeqBuilder, mem: &Mem) {
        b.i32_const(0);
        mem.load32(b, l::HDR_LIVE_COUNT);
        self.slots(b);
        b.i32_const(2)
            .binop(BinaryOp::I32ShrU)
            .i32_const(3)
            .binop(BinaryOp::I32Mul)
            .binop(BinaryOp::I32GeU);
    }

    /// Walks the table from `ptr`'s home slot to the first slot that is empty or holds
    /// `ptr` (its index left in `i`, its address in `e`, each slot's key read once into
    /// `key`), and runs `empty` or `found` there.
    pub(super) fn find(
        &self,
        b: &mut InstrSeqBuilder,
        mem: &Mem,
        [ptr, i, e, key]: [LocalId; 4],
        empty: impl FnOnce(&mut InstrSeqBuilder),
        found: impl FnOnce(&mut InstrSeqBuilder),
    ) {
        b.local_get(ptr);
        self.hash(b);
        b.local_set(i);
        b.block(None, |done| {
            let done_id = done.id();
            done.loop_(None, |lp| {
                let lp_id = lp.id();
                self.slot(lp, mem, i, e);
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
                self.next_slot(lp, i);
                lp.br(lp_id);
            });
        });
    }

    /// Empties slot `i`, shifting back the entries after it that their home slot allows
    /// (linear probing's deletion without tombstones). Uses `e` and `j`.
    pub(super) fn remove(&self, b: &mut InstrSeqBuilder, mem: &Mem, [i, e, j]: [LocalId; 3]) {
        b.local_get(i).local_set(j);
        b.block(None, |done| {
            let done_id = done.id();
            done.loop_(None, |lp| {
                let lp_id = lp.id();
                self.next_slot(lp, j);
                self.slot(lp, mem, j, e);
                lp.unop(UnaryOp::I32Eqz).br_if(done_id);
                // Its home h is not in (i, j] cyclically: (j - h) & mask >= (j - i) & mask.
                lp.local_get(j).local_get(e);
                mem.load32(lp, 0);
                self.hash(lp);
                lp.binop(BinaryOp::I32Sub)
                    .local_get(self.mask)
                    .binop(BinaryOp::I32And)
                    .local_get(j)
                    .local_get(i)
                    .binop(BinaryOp::I32Sub)
                    .local_get(self.mask)
                    .binop(BinaryOp::I32And)
                    .binop(BinaryOp::I32GeU);
                lp.if_else(
                    None,
                    |moves| {
                        for half in [0, 8] {
                            self.slot_address(moves, i);
                            moves.local_get(e);
                            mem.load64(moves, half);
                            mem.store64(moves, half);
                        }
                        moves.local_get(j).local_set(i);
                    },
                    |_| {},
                );
                lp.br(lp_id);
            });
        });
        // The whole slot zeroed, so that a dump leaves an empty table out.
        for half in [0, 8] {
            self.slot_address(b, i);
            b.i64_const(0);
            mem.store64(b, half);
        }
    }
}

/// Stores the block at `ptr` of `size` bytes (an i64) allocated by `node` (pushed as an i32)
/// at slot address `e`.
pub(super) fn put(
    b: &mut InstrSeqBuilder,
    mem: &Mem,
    [e, ptr]: [LocalId; 2],
    node: impl FnOnce(&mut InstrSeqBuilder),
    size: impl FnOnce(&mut InstrSeqBuilder),
) {
    b.local_get(e).local_get(ptr);
    mem.store32(b, 0);
    b.local_get(e);
    node(b);
    mem.store32(b, 4);
    b.local_get(e);
    size(b);
    mem.store64(b, 8);
}

/// Copies the 16-byte entry at address `from` to address `to`.
pub(super) fn copy_entry(b: &mut InstrSeqBuilder, mem: &Mem, from: LocalId, to: LocalId) {
    for half in [0, 8] {
        b.local_get(to).local_get(from);
        mem.load64(b, half);
        mem.store64(b, half);
    }
}

/// Runs `body` for `k` = 0, 1, ... while `k` is below what `end` pushes (read each round).
pub(super) fn count_up(
    b: &mut InstrSeqBuilder,
    k: LocalId,
    end: impl Fn(&mut InstrSeqBuilder),
    body: impl FnOnce(&mut InstrSeqBuilder),
) {
    b.i32_const(0).local_set(k);
    b.block(None, |done| {
        let done_id: InstrSeqId = done.id();
        done.loop_(None, |lp| {
            let lp_id = lp.id();
            lp.local_get(k);
            end(lp);
            lp.binop(BinaryOp::I32GeU).br_if(done_id);
            body(lp);
            lp.local_get(k)
                .i32_const(1)
                .binop(BinaryOp::I32Add)
                .local_set(k)
                .br(lp_id);
        });
    });
}

/// Every block of table `old` inserted into the empty table `new`. Uses `i`, `e`, `j`,
/// `f`, `to` and `key` as scratch.
pub(super) fn rehash(
    b: &mut InstrSeqBuilder,
    mem: &Mem,
    (old, new): (&Table, &Table),
    [i, e, j, f, to, key]: [LocalId; 6],
) {
    count_up(
        b,
        i,
        |b| old.slots(b),
        |lp| {
            old.slot(lp, mem, i, e);
            lp.local_tee(f);
            lp.if_else(
                None,
                |block| {
                    // Its address is in no other slot: `new` finds it an empty one.
                    new.find(
                        block,
                        mem,
                        [f, j, to, key],
                        |empty| copy_entry(empty, mem, e, to),
                        |_| {},
                    );
                },
                |_| {},
            );
        },
    );
}
