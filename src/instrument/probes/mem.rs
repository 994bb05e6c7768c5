//! Loads, stores and additions on the profiler's memory, as the probes emit them.

use walrus::ir::{BinaryOp, LoadKind, MemArg, StoreKind};
use walrus::{InstrSeqBuilder, LocalId, MemoryId};

/// Small helpers for loads and stores on the profiler's memory.
pub(super) struct Mem(pub(super) MemoryId);

impl Mem {
    pub(super) fn load32(&self, b: &mut InstrSeqBuilder, offset: u32) {
        b.load(
            self.0,
            LoadKind::I32 { atomic: false },
            MemArg {
                align: 4,
                offset: offset.into(),
            },
        );
    }
    /// An atomic (sequentially consistent) 32-bit load.
    pub(super) fn atomic_load32(&self, b: &mut InstrSeqBuilder, offset: u32) {
        b.load(
            self.0,
            LoadKind::I32 { atomic: true },
            MemArg {
                align: 4,
                offset: offset.into(),
            },
        );
    }
    pub(super) fn load64(&self, b: &mut InstrSeqBuilder, offset: u32) {
        b.load(
            self.0,
            LoadKind::I64 { atomic: false },
            MemArg {
                align: 8,
                offset: offset.into(),
            },
        );
    }
    pub(super) fn store32(&self, b: &mut InstrSeqBuilder, offset: u32) {
        b.store(
            self.0,
            StoreKind::I32 { atomic: false },
            MemArg {
                align: 4,
                offset: offset.into(),
            },
        );
    }
    pub(super) fn store64(&self, b: &mut InstrSeqBuilder, offset: u32) {
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
    pub(super) fn bump64(&self, b: &mut InstrSeqBuilder, offset: u32) {
        b.i32_const(0).i32_const(0);
        self.load64(b, offset);
        b.i64_const(1).binop(BinaryOp::I64Add);
        self.store64(b, offset);
    }

    /// `array[index] += value` for the u64 array at `offset`, with `index` in a local and
    /// `value` pushed by `push`; `scratch` holds the element's address.
    pub(super) fn add64_element(
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
    pub(super) fn add64(
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
