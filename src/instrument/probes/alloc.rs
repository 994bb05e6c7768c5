//! The allocation probes: what an allocator entry point records when it returns (in the
//! running context node: allocations and their bytes, frees and theirs), the live table
//! that matches each free with its allocation by address, and what a `memory.grow` records
//! (the pages, in the running node). Only the outermost allocator call records
//! (`__rust_alloc` calls `malloc` on wasip1): the header keeps how deep allocator calls are.
//! With the state in a state module, the state module has these functions (and one that
//! keeps the depth), and the program calls them.

use walrus::ir::{
    BinaryOp, Binop, Call, Const, Drop, Instr, InstrLocId, LocalGet, LocalSet, LocalTee,
    MemorySize, UnaryOp, Value,
};
use walrus::{FunctionBuilder, FunctionId, GlobalId, InstrSeqBuilder, LocalId, MemoryId, Module};
use walrus::{ValType, ValType::I32, ValType::I64};

use super::mem::Mem;
use crate::layout::{self as l, Layout};
use crate::meta::AllocKind;

/// Where the depth of the running allocator calls is kept.
#[derive(Clone, Copy)]
enum Depth {
    /// In the header of the profiler's memory, the module's own.
    Inline(MemoryId),
    /// In the state module's, through its `alloc_depth(by: i32) -> i32`, which adds `by`
    /// and returns the new depth.
    Call(FunctionId),
}

/// The state module's export (and the instrumented module's import) of each allocation
/// probe function: the depth's, `record_alloc`, `record_free`, `record_grow`.
const EXPORTS: [&str; 4] = ["alloc_depth", "record_alloc", "record_free", "record_grow"];

/// The allocation probes as the rewrite reaches them.
pub struct AllocProbes {
    depth: Depth,
    /// The program's 32-bit memories, whose growth is recorded.
    memories32: Vec<MemoryId>,
    /// The program's first memory, where `posix_memalign` stores its pointer.
    program_memory: Option<MemoryId>,
    /// `record_alloc(ptr: i32, size: i32)`.
    record_alloc: FunctionId,
    /// `record_free(ptr: i32, size: i64)`, the size -1 when the free does not say it.
    record_free: FunctionId,
    /// `record_grow(result: i32, delta: i32) -> i32`.
    record_grow: FunctionId,
}

impl AllocProbes {
    /// Adds the allocation probes' functions to `module`, whose profiler memory is `mem`
    /// (laid out by `layout`, with the live table) and current-node global `cur`.
    pub(super) fn build(
        module: &mut Module,
        layout: &Layout,
        mem: MemoryId,
        cur: GlobalId,
        program_memory: Option<MemoryId>,
    ) -> AllocProbes {
        let memories32 = module
            .memories
            .iter()
            .filter(|m| m.id() != mem && !m.memory64)
            .map(|m| m.id())
            .collect();
        AllocProbes {
            depth: Depth::Inline(mem),
            memories32,
            program_memory,
            record_alloc: build_record_alloc(module, layout, Mem(mem), cur),
            record_free: build_record_free(module, layout, Mem(mem), cur),
            record_grow: build_record_grow(module, layout, Mem(mem), cur),
        }
    }

    /// Adds the allocation probes' functions to the `state` module (its memory `mem`,
    /// laid out by `layout`, and current-node global `cur`), exported, and has `module`
    /// import them.
    pub(super) fn import(
        module: &mut Module,
        state: &mut Module,
        layout: &Layout,
        mem: MemoryId,
        cur: GlobalId,
    ) -> AllocProbes {
        let built = [
            build_alloc_depth(state, Mem(mem)),
            build_record_alloc(state, layout, Mem(mem), cur),
            build_record_free(state, layout, Mem(mem), cur),
            build_record_grow(state, layout, Mem(mem), cur),
        ];
        for (name, f) in EXPORTS.iter().zip(built) {
            state.exports.add(name, walrus::ExportItem::Function(f));
        }
        let types: [(&[ValType], &[ValType]); 4] = [
            (&[I32], &[I32]),
            (&[I32, I32], &[]),
            (&[I32, I64], &[]),
            (&[I32, I32], &[I32]),
        ];
        let [depth, record_alloc, record_free, record_grow] =
            std::array::from_fn(|i| super::import_func(module, EXPORTS[i], types[i].0, types[i].1));
        let memories32: Vec<MemoryId> = module
            .memories
            .iter()
            .filter(|m| !m.memory64)
            .map(|m| m.id())
            .collect();
        AllocProbes {
            depth: Depth::Call(depth),
            program_memory: memories32.first().copied(),
            memories32,
            record_alloc,
            record_free,
            record_grow,
        }
    }

    /// At an allocator's entry: its arguments (`params`) kept in `saved`, for its
    /// allocation probe (its code may reuse its parameters' locals), and one allocator call
    /// deeper.
    pub fn enter(&self, b: &mut InstrSeqBuilder, params: &[LocalId], saved: &[LocalId]) {
        for (&param, &copy) in params.iter().zip(saved) {
            b.local_get(param).local_set(copy);
        }
        self.add_depth(b, 1);
    }

    /// Where an allocator's activation ends without its result (an exception, a tail
    /// call): one allocator call less deep.
    pub fn unwound(&self, b: &mut InstrSeqBuilder) {
        self.add_depth(b, -1);
    }

    /// Where an allocator of `kind` returns, its arguments in `args` (as `enter` saved
    /// them) and its result (if it has one) in `result`: one call less deep, and, the outermost, what it did recorded.
    pub fn leave(
        &self,
        b: &mut InstrSeqBuilder,
        kind: AllocKind,
        args: &[LocalId],
        result: Option<LocalId>,
    ) {
        match self.depth {
            Depth::Inline(mem) => {
                self.add_depth(b, -1);
                b.i32_const(0);
                Mem(mem).load32(b, l::HDR_ALLOC_DEPTH);
            }
            Depth::Call(depth) => {
                b.i32_const(-1).call(depth);
            }
        }
        b.unop(UnaryOp::I32Eqz);
        b.if_else(None, |outer| self.record(outer, kind, args, result), |_| {});
    }

    /// A `memory.grow` of a 32-bit memory with its probe: its delta kept in `delta`, and,
    /// after it, the pages it grew by added to the running node (its result left on the
    /// stack). Any other instruction is returned as it is.
    pub fn around_grow(
        &self,
        (grow, loc): (Instr, InstrLocId),
        delta: LocalId,
    ) -> Vec<(Instr, InstrLocId)> {
        let probe = InstrLocId::default();
        match &grow {
            Instr::MemoryGrow(g) if self.memories32.contains(&g.memory) => vec![
                (Instr::LocalTee(LocalTee { local: delta }), probe),
                (grow, loc),
                (Instr::LocalGet(LocalGet { local: delta }), probe),
                (
                    Instr::Call(Call {
                        func: self.record_grow,
                    }),
                    probe,
                ),
            ],
            _ => vec![(grow, loc)],
        }
    }

    /// An import's call (in its thunk) that may grow the program's memory from the host:
    /// its size kept in `size` before, and the pages it gained added to the running node
    /// after (its results left on the stack). Any other instruction is returned as it is.
    pub fn around_host_growth(
        &self,
        (call, loc): (Instr, InstrLocId),
        size: LocalId,
    ) -> Vec<(Instr, InstrLocId)> {
        let (Instr::Call(_), Some(&memory)) = (&call, self.memories32.first()) else {
            return vec![(call, loc)];
        };
        let probe = InstrLocId::default();
        let get = Instr::LocalGet(LocalGet { local: size });
        let set = Instr::LocalSet(LocalSet { local: size });
        let memory_size = Instr::MemorySize(MemorySize { memory });
        [
            (memory_size.clone(), probe),
            (set.clone(), probe),
            (call, loc),
            // pages gained = size after - size before; record_grow(0, gained), its 0 dropped
            (memory_size, probe),
            (get.clone(), probe),
            (
                Instr::Binop(Binop {
                    op: BinaryOp::I32Sub,
                }),
                probe,
            ),
            (set, probe),
            (
                Instr::Const(Const {
                    value: Value::I32(0),
                }),
                probe,
            ),
            (get, probe),
            (
                Instr::Call(Call {
                    func: self.record_grow,
                }),
                probe,
            ),
            (Instr::Drop(Drop {}), probe),
        ]
        .into()
    }

    fn add_depth(&self, b: &mut InstrSeqBuilder, by: i32) {
        match self.depth {
            Depth::Inline(mem) => add_header32(b, &Mem(mem), l::HDR_ALLOC_DEPTH, by),
            Depth::Call(depth) => {
                b.i32_const(by).call(depth).drop();
            }
        }
    }

    /// What the outermost allocator call of `kind` did, recorded.
    fn record(
        &self,
        b: &mut InstrSeqBuilder,
        kind: AllocKind,
        args: &[LocalId],
        result: Option<LocalId>,
    ) {
        let arg = |i: usize| args[i];
        let r = || result.expect("an allocating entry point returns its pointer");
        match kind {
            AllocKind::Malloc | AllocKind::RustAlloc | AllocKind::RustAllocZeroed => {
                self.alloc(b, r(), |b| {
                    b.local_get(arg(0));
                })
            }
            AllocKind::Calloc => self.alloc(b, r(), |b| {
                b.local_get(arg(0))
                    .local_get(arg(1))
                    .binop(BinaryOp::I32Mul);
            }),
            AllocKind::AlignedAlloc | AllocKind::Memalign => self.alloc(b, r(), |b| {
                b.local_get(arg(1));
            }),
            AllocKind::PosixMemalign => self.posix_memalign(b, args, r()),
            AllocKind::Free => self.free(b, arg(0), None),
            AllocKind::RustDealloc => self.free(b, arg(0), Some(arg(1))),
            AllocKind::Realloc => {
                // Moved or resized: the old block freed, the new one allocated; a null
                // result frees only for a size of 0 (else the old block stays).
                b.local_get(r());
                b.if_else(
                    None,
                    |moved| {
                        self.free(moved, arg(0), None);
                        self.alloc(moved, r(), |b| {
                            b.local_get(arg(1));
                        });
                    },
                    |failed| {
                        failed.local_get(arg(1)).unop(UnaryOp::I32Eqz);
                        failed.if_else(None, |zero| self.free(zero, arg(0), None), |_| {});
                    },
                );
            }
            AllocKind::RustRealloc => {
                b.local_get(r());
                b.if_else(
                    None,
                    |moved| {
                        self.free(moved, arg(0), Some(arg(1)));
                        self.alloc(moved, r(), |b| {
                            b.local_get(arg(3));
                        });
                    },
                    |_| {},
                );
            }
        }
    }

    /// An allocation of the block at `ptr`, of the size `size` pushes.
    fn alloc(
        &self,
        b: &mut InstrSeqBuilder,
        ptr: LocalId,
        size: impl FnOnce(&mut InstrSeqBuilder),
    ) {
        b.local_get(ptr);
        size(b);
        b.call(self.record_alloc);
    }

    /// A free of the block at `ptr`, of `size` bytes when the free says it.
    fn free(&self, b: &mut InstrSeqBuilder, ptr: LocalId, size: Option<LocalId>) {
        b.local_get(ptr);
        match size {
            Some(size) => b.local_get(size).unop(UnaryOp::I64ExtendUI32),
            None => b.i64_const(-1),
        };
        b.call(self.record_free);
    }

    /// `posix_memalign(out, align, size)`: when it returns 0, the block it stored at `out`
    /// in the program's memory.
    fn posix_memalign(&self, b: &mut InstrSeqBuilder, args: &[LocalId], result: LocalId) {
        let Some(program) = self.program_memory else {
            return;
        };
        b.local_get(result).unop(UnaryOp::I32Eqz);
        b.if_else(
            None,
            |ok| {
                ok.local_get(args[0]);
                Mem(program).load32(ok, 0);
                ok.local_get(args[2]).call(self.record_alloc);
            },
            |_| {},
        );
    }
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
fn add_header32(b: &mut InstrSeqBuilder, mem: &Mem, offset: u32, by: i32) {
    b.i32_const(0).i32_const(0);
    mem.load32(b, offset);
    b.i32_const(by).binop(BinaryOp::I32Add);
    mem.store32(b, offset);
}

/// `record_alloc(ptr: i32, size: i32)`: an allocation in the running node, and, while the
/// live table has room (three quarters of its slots), the block in it, with the bytes live
/// and their peak; else the header counts it untracked. A null pointer (a failed
/// allocation) records nothing.
fn build_record_alloc(module: &mut Module, layout: &Layout, mem: Mem, cur: GlobalId) -> FunctionId {
    let [ptr, size, at, i, e] = [I32; 5].map(|t| module.locals.add(t));
    let mut builder = FunctionBuilder::new(&mut module.types, &[I32, I32], &[]);
    builder.name("__wasmprof_record_alloc".into());
    let mut b = builder.func_body();
    b.local_get(ptr).unop(UnaryOp::I32Eqz).if_else(
        None,
        |failed| {
            failed.return_();
        },
        |_| {},
    );
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
    home(&mut b, layout, ptr);
    b.local_set(i);
    b.block(None, |found| {
        let found_id = found.id();
        found.loop_(None, |lp| {
            let lp_id = lp.id();
            slot(lp, layout, &mem, i, e);
            lp.unop(UnaryOp::I32Eqz).br_if(found_id);
            slot(lp, layout, &mem, i, e);
            lp.local_get(ptr).binop(BinaryOp::I32Eq);
            lp.if_else(
                None,
                |again| {
                    // Still live: freed where no probe saw it; this allocation replaces it.
                    add_header32(again, &mem, l::HDR_LIVE_COUNT, -1);
                    add_header(again, &mem, l::HDR_LIVE_BYTES, true, |b| {
                        b.local_get(e);
                        mem.load64(b, layout.live_off + 8);
                    });
                    again.br(found_id);
                },
                |_| {},
            );
            next_slot(lp, layout, i);
            lp.br(lp_id);
        });
    });
    store_live(&mut b, layout, &mem, cur, [ptr, size, e]);
    builder.finish(vec![ptr, size], &mut module.funcs)
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
}

/// `record_free(ptr: i32, size: i64)`: a free in the running node, of the bytes its
/// allocation asked for, found in the live table by address and taken out of it (the
/// slots after it shifted back, so a lookup stops at the first empty slot); an address not
/// there is counted unmatched, with `size` bytes when the free says it (≥ 0). A null
/// pointer records nothing.
fn build_record_free(module: &mut Module, layout: &Layout, mem: Mem, cur: GlobalId) -> FunctionId {
    let ptr = module.locals.add(I32);
    let size = module.locals.add(I64);
    let [at, i, e] = [I32; 3].map(|t| module.locals.add(t));
    let mut builder = FunctionBuilder::new(&mut module.types, &[I32, I64], &[]);
    builder.name("__wasmprof_record_free".into());
    let mut b = builder.func_body();
    b.local_get(ptr).unop(UnaryOp::I32Eqz).if_else(
        None,
        |none| {
            none.return_();
        },
        |_| {},
    );
    // size = max(size, 0): unknown until the table says.
    b.local_get(size)
        .i64_const(0)
        .local_get(size)
        .i64_const(0)
        .binop(BinaryOp::I64GtS)
        .select(None)
        .local_set(size);
    home(&mut b, layout, ptr);
    b.local_set(i);
    b.block(None, |done| {
        let done_id = done.id();
        done.loop_(None, |lp| {
            let lp_id = lp.id();
            slot(lp, layout, &mem, i, e);
            lp.unop(UnaryOp::I32Eqz);
            lp.if_else(
                None,
                |missing| {
                    mem.bump64(missing, l::HDR_UNMATCHED_FREES);
                    missing.br(done_id);
                },
                |_| {},
            );
            slot(lp, layout, &mem, i, e);
            lp.local_get(ptr).binop(BinaryOp::I32Eq);
            lp.if_else(
                None,
                |found| {
                    found.local_get(e);
                    mem.load64(found, layout.live_off + 8);
                    found.local_set(size);
                    add_header32(found, &mem, l::HDR_LIVE_COUNT, -1);
                    add_header(found, &mem, l::HDR_LIVE_BYTES, true, |b| {
                        b.local_get(size);
                    });
                    remove(found, layout, &mem, [i, e, at]);
                    found.br(done_id);
                },
                |_| {},
            );
            next_slot(lp, layout, i);
            lp.br(lp_id);
        });
    });
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
fn build_alloc_depth(module: &mut Module, mem: Mem) -> FunctionId {
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
fn build_record_grow(module: &mut Module, layout: &Layout, mem: Mem, cur: GlobalId) -> FunctionId {
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
