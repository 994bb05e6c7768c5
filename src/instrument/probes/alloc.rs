//! The allocation probes: what an allocator entry point records when it returns (in the
//! running context node: allocations and their bytes, frees and theirs), the live table
//! that matches each free with its allocation by address, and what a `memory.grow` records
//! (the pages, in the running node). Only the outermost allocator call records
//! (`__rust_alloc` calls `malloc` on wasip1): the header keeps how deep allocator calls are.
//! With the state in a state module, the state module has these functions (and one that
//! keeps the depth), and the program calls them. With the word sampler, `record_alloc` and
//! `record_free` mark the sample word as the probes'.

use walrus::ir::{
    BinaryOp, Binop, Call, Const, Drop, Instr, InstrLocId, LocalGet, LocalSet, LocalTee,
    MemorySize, UnaryOp, Value,
};
use walrus::{FunctionId, GlobalId, InstrSeqBuilder, LocalId, MemoryId, Module};
use walrus::{ValType, ValType::I32, ValType::I64};

use super::alloc_functions::{
    add_header32, build_alloc_depth, build_record_alloc, build_record_free, build_record_grow,
    LiveFunctions,
};
use super::entry_exit::SampleWord;
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
    /// (laid out by `layout`, with the live table), current-node global `cur` and, with
    /// the word sampler, sample word `sample`.
    pub(super) fn build(
        module: &mut Module,
        layout: &Layout,
        (mem, cur, sample): (MemoryId, GlobalId, Option<SampleWord>),
        program_memory: Option<MemoryId>,
    ) -> AllocProbes {
        let memories32 = module
            .memories
            .iter()
            .filter(|m| m.id() != mem && !m.memory64)
            .map(|m| m.id())
            .collect();
        let live = LiveFunctions::build(module, layout, &Mem(mem));
        AllocProbes {
            depth: Depth::Inline(mem),
            memories32,
            program_memory,
            record_alloc: build_record_alloc(module, (layout, Mem(mem)), (cur, sample), &live),
            record_free: build_record_free(module, (layout, Mem(mem)), (cur, sample), &live),
            record_grow: build_record_grow(module, layout, Mem(mem), cur),
        }
    }

    /// Adds the allocation probes' functions to the `state` module (its memory `mem`,
    /// laid out by `layout`, current-node global `cur` and, with the word sampler, sample
    /// word `sample`), exported, and has `module` import them.
    pub(super) fn import(
        (module, state): (&mut Module, &mut Module),
        layout: &Layout,
        (mem, cur, sample): (MemoryId, GlobalId, Option<SampleWord>),
    ) -> AllocProbes {
        let live = LiveFunctions::build(state, layout, &Mem(mem));
        let built = [
            build_alloc_depth(state, Mem(mem)),
            build_record_alloc(state, (layout, Mem(mem)), (cur, sample), &live),
            build_record_free(state, (layout, Mem(mem)), (cur, sample), &live),
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
    /// them) and its result (if it has one) in `result`: one call less deep, and, the
    /// outermost, what it did recorded.
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
