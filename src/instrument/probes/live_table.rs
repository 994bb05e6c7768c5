//! The live table that the allocation probes keep: the program's live blocks (address,
//! allocating node, size), open addressing with linear probing and Fibonacci hashing,
//! deletion by shifting back. The header says where it is and how many slots it has; when
//! it fills up, `__wasmprof_grow_live` moves it into a chunk of the node region twice its
//! size (see [`crate::layout`]), so that every live block is followed up to
//! [`Layout::live_slots_max`] slots.

use walrus::ir::{BinaryOp, InstrSeqId, UnaryOp};
use walrus::{FunctionBuilder, FunctionId, InstrSeqBuilder, LocalId, Module, ValType::I32};

use super::mem::Mem;
use crate::layout::{self as l, Layout};

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

    /// Sets the mask and the shift for the slots on the stack (a power of two): a home
    /// slot is the top log2(slots) bits of the hash, a shift of clz(slots) + 1.
    fn set_size(&self, b: &mut InstrSeqBuilder) {
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

    /// Pushes slot `i`'s address.
    fn slot_address(&self, b: &mut InstrSeqBuilder, i: LocalId) {
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

    /// The first free after a peak: the table, as it is at that peak, copied to the region
    /// right after it, which the header then names as the copy (a copy in an older chunk's
    /// region emptied); the pending flag cleared.
    pub(super) fn snapshot_if_pending(&self, b: &mut InstrSeqBuilder, mem: &Mem) {
        b.i32_const(0);
        mem.load32(b, l::HDR_PEAK_PENDING);
        b.if_else(
            None,
            |pending| {
                let bytes = |b: &mut InstrSeqBuilder| {
                    b.local_get(self.mask)
                        .i32_const(1)
                        .binop(BinaryOp::I32Add)
                        .i32_const(4)
                        .binop(BinaryOp::I32Shl);
                };
                // A copy in an older chunk's region, emptied: this one replaces it.
                pending.i32_const(0);
                mem.load32(pending, l::HDR_PEAK_TABLE);
                pending.local_get(self.base);
                bytes(pending);
                pending.binop(BinaryOp::I32Add).binop(BinaryOp::I32Ne);
                pending.if_else(
                    None,
                    |moved| {
                        moved.i32_const(0);
                        mem.load32(moved, l::HDR_PEAK_TABLE);
                        moved.i32_const(0).i32_const(0);
                        mem.load32(moved, l::HDR_PEAK_SLOTS);
                        moved
                            .i32_const(4)
                            .binop(BinaryOp::I32Shl)
                            .memory_fill(mem.0);
                    },
                    |_| {},
                );
                pending.i32_const(0).local_get(self.base);
                bytes(pending);
                pending.binop(BinaryOp::I32Add);
                mem.store32(pending, l::HDR_PEAK_TABLE);
                pending.i32_const(0).local_get(self.mask).i32_const(1);
                pending.binop(BinaryOp::I32Add);
                mem.store32(pending, l::HDR_PEAK_SLOTS);
                pending.i32_const(0);
                mem.load32(pending, l::HDR_PEAK_TABLE);
                pending.local_get(self.base);
                bytes(pending);
                pending.memory_copy(mem.0, mem.0);
                pending.i32_const(0).i32_const(0);
                mem.load64(pending, l::HDR_LIVE_BYTES);
                mem.store64(pending, l::HDR_SNAPSHOT_BYTES);
                pending.i32_const(0).i32_const(0);
                mem.store32(pending, l::HDR_PEAK_PENDING);
            },
            |_| {},
        );
    }
}

/// Pushes whether the table is full: three quarters of its slots hold a block.
pub(super) fn push_is_full(b: &mut InstrSeqBuilder, mem: &Mem) {
    b.i32_const(0);
    mem.load32(b, l::HDR_LIVE_COUNT);
    b.i32_const(0);
    mem.load32(b, l::HDR_LIVE_SLOTS);
    b.i32_const(2)
        .binop(BinaryOp::I32ShrU)
        .i32_const(3)
        .binop(BinaryOp::I32Mul)
        .binop(BinaryOp::I32GeU);
}

/// `grow_live() -> i32`: the table moved into a chunk of twice its slots (with room for
/// its copy at a peak), taken as the next nodes of the node region, its blocks rehashed
/// there and the old table emptied; 1 when it grew, 0 when it may not (at [`Layout::live_slots_max`] already, or
/// the memory cannot grow to the chunk).
pub(super) fn build_grow_live(module: &mut Module, layout: &Layout, mem: Mem) -> FunctionId {
    let old = Table::locals(module);
    let new = Table::locals(module);
    let [first, nodes, i, e, j, f] = [I32; 6].map(|t| module.locals.add(t));
    let mut builder = FunctionBuilder::new(&mut module.types, &[], &[I32]);
    builder.name("__wasmprof_grow_live".into());
    let mut b = builder.func_body();
    old.load(&mut b, &mem);
    let slots = |b: &mut InstrSeqBuilder, t: &Table| {
        b.local_get(t.mask).i32_const(1).binop(BinaryOp::I32Add);
    };
    // At the most slots: no growth.
    slots(&mut b, &old);
    b.i32_const(layout.live_slots_max as i32)
        .binop(BinaryOp::I32GeU);
    b.if_else(
        None,
        |at_most| {
            at_most.i32_const(0).return_();
        },
        |_| {},
    );
    // nodes = (CHUNK_HEAD + 2 * 16 * 2 * slots) / node_size, rounded up; first = node count.
    slots(&mut b, &old);
    b.i32_const(6)
        .binop(BinaryOp::I32Shl)
        .i32_const((l::CHUNK_HEAD + layout.node_size - 1) as i32)
        .binop(BinaryOp::I32Add)
        .i32_const(layout.node_size as i32)
        .binop(BinaryOp::I32DivU)
        .local_set(nodes);
    b.i32_const(0);
    mem.load32(&mut b, l::HDR_NODE_COUNT);
    b.local_set(first);
    take_chunk(&mut b, layout, &mem, [first, nodes, e]);
    // The chunk's head: the chunk before, the nodes it takes; the header lists it.
    node_address(&mut b, layout, first);
    b.local_tee(e).i32_const(0);
    mem.load32(&mut b, l::HDR_CHUNKS);
    mem.store32(&mut b, 0);
    b.local_get(e).local_get(nodes);
    mem.store32(&mut b, 4);
    b.i32_const(0)
        .local_get(first)
        .i32_const(1)
        .binop(BinaryOp::I32Add);
    mem.store32(&mut b, l::HDR_CHUNKS);
    b.i32_const(0)
        .local_get(first)
        .local_get(nodes)
        .binop(BinaryOp::I32Add);
    mem.store32(&mut b, l::HDR_NODE_COUNT);
    add_header32_local(&mut b, &mem, l::HDR_CLAIMED, nodes);
    // The new table, empty (the memory grew for it), after the head.
    b.local_get(e)
        .i32_const(l::CHUNK_HEAD as i32)
        .binop(BinaryOp::I32Add)
        .local_set(new.base);
    slots(&mut b, &old);
    b.i32_const(1).binop(BinaryOp::I32Shl);
    new.set_size(&mut b);
    rehash(&mut b, &mem, (&old, &new), [i, e, j, f]);
    // The old table emptied, so that a dump leaves it out as zeros.
    b.local_get(old.base).i32_const(0);
    slots(&mut b, &old);
    b.i32_const(4).binop(BinaryOp::I32Shl).memory_fill(mem.0);
    b.i32_const(0).local_get(new.base);
    mem.store32(&mut b, l::HDR_LIVE_TABLE);
    b.i32_const(0);
    slots(&mut b, &new);
    mem.store32(&mut b, l::HDR_LIVE_SLOTS);
    b.i32_const(1);
    builder.finish(vec![], &mut module.funcs)
}

/// Pushes the address of node `n`.
fn node_address(b: &mut InstrSeqBuilder, layout: &Layout, n: LocalId) {
    b.local_get(n)
        .i32_const(layout.node_size as i32)
        .binop(BinaryOp::I32Mul)
        .i32_const(layout.nodes_off as i32)
        .binop(BinaryOp::I32Add);
}

/// Returns 0 from the function unless `nodes` nodes from node `first` fit in the memory's
/// most pages, growing the memory to hold them. Uses `pages` as scratch.
fn take_chunk(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    [first, nodes, pages]: [LocalId; 3],
) {
    // pages = ceil((nodes_off + (first + nodes) * node_size) / 64 KiB), in 64 bits.
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
        .binop(BinaryOp::I64ShrU);
    b.i64_const(i64::from(layout.pages))
        .binop(BinaryOp::I64GtU)
        .if_else(
            None,
            |too_far| {
                too_far.i32_const(0).return_();
            },
            |_| {},
        );
    b.local_get(first)
        .local_get(nodes)
        .binop(BinaryOp::I32Add)
        .i32_const(layout.node_size as i32)
        .binop(BinaryOp::I32Mul)
        .i32_const((layout.nodes_off + 0xFFFF) as i32)
        .binop(BinaryOp::I32Add)
        .i32_const(16)
        .binop(BinaryOp::I32ShrU)
        .local_tee(pages)
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
                .binop(BinaryOp::I32Eq)
                .if_else(
                    None,
                    |refused| {
                        refused.i32_const(0).return_();
                    },
                    |_| {},
                );
        },
        |_| {},
    );
}

/// Every block of table `old` inserted into the empty table `new`. Uses `i`, `e`, `j`
/// and `f` as scratch.
fn rehash(
    b: &mut InstrSeqBuilder,
    mem: &Mem,
    (old, new): (&Table, &Table),
    [i, e, j, f]: [LocalId; 4],
) {
    b.i32_const(0).local_set(i);
    b.block(None, |done| {
        let done_id: InstrSeqId = done.id();
        done.loop_(None, |lp| {
            let lp_id = lp.id();
            lp.local_get(i)
                .local_get(old.mask)
                .binop(BinaryOp::I32GtU)
                .br_if(done_id);
            old.slot(lp, mem, i, e);
            lp.local_tee(f);
            lp.if_else(
                None,
                |block| {
                    block.local_get(f);
                    new.hash(block);
                    block.local_set(j);
                    // The first empty slot from its home.
                    block.block(None, |found| {
                        let found_id = found.id();
                        found.loop_(None, |probe| {
                            let probe_id = probe.id();
                            new.slot_address(probe, j);
                            mem.load32(probe, 0);
                            probe.unop(UnaryOp::I32Eqz).br_if(found_id);
                            new.next_slot(probe, j);
                            probe.br(probe_id);
                        });
                    });
                    for half in [0, 8] {
                        new.slot_address(block, j);
                        block.local_get(e);
                        mem.load64(block, half);
                        mem.store64(block, half);
                    }
                },
                |_| {},
            );
            lp.local_get(i)
                .i32_const(1)
                .binop(BinaryOp::I32Add)
                .local_set(i);
            lp.br(lp_id);
        });
    });
}

/// `header32[offset] += local`.
fn add_header32_local(b: &mut InstrSeqBuilder, mem: &Mem, offset: u32, by: LocalId) {
    b.i32_const(0).i32_const(0);
    mem.load32(b, offset);
    b.local_get(by).binop(BinaryOp::I32Add);
    mem.store32(b, offset);
}
