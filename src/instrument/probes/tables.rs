//! The code that keeps the state's two tables (see [`crate::layout`]): the dynamic arc
//! table, a hash table probed linearly, and the calling-context tree, whose children are
//! lists in most-recently-used order.

use walrus::ir::{BinaryOp, UnaryOp};
use walrus::{InstrSeqBuilder, LocalId, ValType};

use super::mem::Mem;
use super::Func;
use crate::layout::{self, Layout};

/// Multipliers of the two multiplicative hashes.
const HASH_A: i32 = 0x9E37_79B1_u32 as i32;
const HASH_B: i32 = 0x85EB_CA6B_u32 as i32;

/// `h = ((a * HASH_A) ^ b) * HASH_B >> (32 - bits)`: the slot for key (a, b) in a table of
/// `cap` (a power of two) slots, left in local `h`.
fn hash(b: &mut InstrSeqBuilder, a: LocalId, k: LocalId, cap: u32, h: LocalId) {
    let bits = cap.trailing_zeros();
    b.local_get(a).i32_const(HASH_A).binop(BinaryOp::I32Mul);
    b.local_get(k).binop(BinaryOp::I32Xor);
    b.i32_const(HASH_B).binop(BinaryOp::I32Mul);
    b.i32_const((32 - bits) as i32).binop(BinaryOp::I32ShrU);
    b.local_set(h);
}

/// Counts arc (s, f) in the dynamic arc table, by linear probing. A full table counts the
/// arc as dropped in the header.
pub(super) fn count_dyn_arc(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    s: LocalId,
    f: LocalId,
    [slot, start]: [LocalId; 2],
) {
    let mask = (layout.dyn_arcs_cap - 1) as i32;
    let off = layout.dyn_arcs_off;
    hash(b, s, f, layout.dyn_arcs_cap, start);
    b.local_get(start).local_set(slot);
    // `f + 1` marks a used slot; the probe count stops the search when the table is full.
    b.block(None, |done| {
        let done_id = done.id();
        done.loop_(None, |lp| {
            let lp_id = lp.id();
            claim_if_empty(lp, mem, off, [slot, s, f], done_id);
            count_if_ours(lp, mem, off, [slot, s, f], done_id);
            // Next slot; back at the start means the table is full.
            lp.local_get(slot)
                .i32_const(1)
                .binop(BinaryOp::I32Add)
                .i32_const(mask)
                .binop(BinaryOp::I32And);
            lp.local_tee(slot)
                .local_get(start)
                .binop(BinaryOp::I32Ne)
                .br_if(lp_id);
            mem.bump64(lp, layout::HDR_ARCS_DROPPED);
        });
    });
}

/// Claims the arc table's `slot` (at `off`) for arc (s, f) with a count of 1 when it is
/// empty, and leaves the search (`done`).
fn claim_if_empty(
    lp: &mut InstrSeqBuilder,
    mem: &Mem,
    off: u32,
    [slot, s, f]: [LocalId; 3],
    done: walrus::ir::InstrSeqId,
) {
    // addr = slot * 16; empty slot: claim it.
    slot_addr(lp, slot);
    mem.load32(lp, off + 4);
    lp.unop(UnaryOp::I32Eqz);
    lp.if_else(
        None,
        |claim| {
            slot_addr(claim, slot);
            claim.local_get(s);
            mem.store32(claim, off);
            slot_addr(claim, slot);
            claim.local_get(f).i32_const(1).binop(BinaryOp::I32Add);
            mem.store32(claim, off + 4);
            slot_addr(claim, slot);
            claim.i64_const(1);
            mem.store64(claim, off + 8);
            claim.br(done);
        },
        |_| {},
    );
}

/// Counts arc (s, f) in the arc table's `slot` (at `off`) when the slot is the arc's, and
/// leaves the search (`done`).
fn count_if_ours(
    lp: &mut InstrSeqBuilder,
    mem: &Mem,
    off: u32,
    [slot, s, f]: [LocalId; 3],
    done: walrus::ir::InstrSeqId,
) {
    slot_addr(lp, slot);
    mem.load32(lp, off + 4);
    lp.local_get(f)
        .i32_const(1)
        .binop(BinaryOp::I32Add)
        .binop(BinaryOp::I32Eq);
    slot_addr(lp, slot);
    mem.load32(lp, off);
    lp.local_get(s)
        .binop(BinaryOp::I32Eq)
        .binop(BinaryOp::I32And);
    lp.if_else(
        None,
        |hit| {
            slot_addr(hit, slot);
            slot_addr(hit, slot);
            mem.load64(hit, off + 8);
            hit.i64_const(1).binop(BinaryOp::I64Add);
            mem.store64(hit, off + 8);
            hit.br(done);
        },
        |_| {},
    );
}

/// Pushes the address of the arc table's `slot`, relative to the table (16 bytes a slot).
fn slot_addr(b: &mut InstrSeqBuilder, slot: LocalId) {
    b.local_get(slot).i32_const(4).binop(BinaryOp::I32Shl);
}

/// Pushes the address of node `n`, relative to the node region.
pub(super) fn node_addr(b: &mut InstrSeqBuilder, layout: &Layout, n: LocalId) {
    b.local_get(n);
    scale_node(b, layout);
}

/// Turns the node id on the stack into its address relative to the node region: a shift,
/// since a node's size is a power of two ([`layout::NODE_SIZE`]), so that no engine's tier
/// has to find the shift in a multiplication.
pub(super) fn scale_node(b: &mut InstrSeqBuilder, layout: &Layout) {
    debug_assert!(layout.node_size.is_power_of_two());
    b.i32_const(layout.node_size.trailing_zeros() as i32)
        .binop(BinaryOp::I32Shl);
}

/// Leaves in `node` the child of `parent` for function `f`, entered from call site `s`,
/// adding it when new. A direct site's slot in `site_children` remembers the child its
/// callee got under the parent the site last ran in, and `child_cache` the child last found
/// for the pair at the pair's hash (left in `h`); each is taken when it is `parent`'s for
/// `f`, which the node says itself. Else the children are a list (`first_child`,
/// `next_sibling`) kept in most-recently-used order (the entry probe has already looked at
/// the first), and the child found or added goes into the cache and the site's slot. When
/// the tree is full, the entry goes to f's fold node and the header counts it (a fold node
/// is never kept in a slot, so that every such entry is counted).
pub(super) fn find_child(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    [parent, f, s, node]: [LocalId; 4],
    [prev, at, h]: [LocalId; 3],
) {
    b.block(None, |remembered| {
        let remembered_id = remembered.id();
        remembered.local_get(s);
        push_is_direct(remembered);
        remembered.if_else(
            None,
            |direct| {
                let f = Func::Local(f);
                site_child(direct, layout, mem, [parent, s, node], f, remembered_id)
            },
            |_| {},
        );
        remembered.block(None, |cached| {
            let cached_id = cached.id();
            cached_child(cached, layout, mem, [parent, f, node, h], cached_id);
            walk_children(cached, layout, mem, [parent, f, node], [prev, at]);
            push_is_context(cached, layout, node);
            cached.if_else(
                None,
                |keep| {
                    word_slot(keep, h);
                    keep.local_get(node);
                    mem.store32(keep, layout.child_cache_off);
                },
                |_| {},
            );
        });
        // Remember it, unless it is a fold node or the site is not a direct one.
        remembered.local_get(s);
        push_is_direct(remembered);
        push_is_context(remembered, layout, node);
        remembered.binop(BinaryOp::I32And);
        remembered.if_else(
            None,
            |keep| {
                word_slot(keep, s);
                keep.local_get(node);
                mem.store32(keep, layout.site_children_off);
            },
            |_| {},
        );
    });
}

/// Pushes whether `node` is a calling context's (not the root nor a fold node).
fn push_is_context(b: &mut InstrSeqBuilder, layout: &Layout, node: LocalId) {
    b.local_get(node)
        .i32_const(layout.first_context_node() as i32)
        .binop(BinaryOp::I32GeU);
}

/// Leaves the slot of pair (`parent`, `f`) in `child_cache` in `h`, and leaves (`found`)
/// with `node` the child the slot holds when that child is `parent`'s for `f`.
fn cached_child(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    [parent, f, node, h]: [LocalId; 4],
    found: walrus::ir::InstrSeqId,
) {
    hash(b, parent, f, layout::CHILD_CACHE_SLOTS, h);
    let slot = (layout.child_cache_off, h);
    remembered_child(b, layout, mem, slot, [parent, node], Func::Local(f), found);
}

/// Leaves (`found`) with `node` the child kept in slot `slot` of the region of u32 slots at
/// `off` (`site_children`, `child_cache`; 0 where none was kept), when it is `parent`'s for
/// `f`: a context node (a fold node is never kept) whose own parent and function are those.
fn remembered_child(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    (off, slot): (u32, LocalId),
    [parent, node]: [LocalId; 2],
    f: Func,
    found: walrus::ir::InstrSeqId,
) {
    let nodes = layout.nodes_off;
    word_slot(b, slot);
    mem.load32(b, off);
    b.local_set(node);
    push_is_context(b, layout, node);
    b.if_else(
        None,
        |held| {
            node_addr(held, layout, node);
            mem.load32(held, nodes + layout::NODE_PARENT);
            held.local_get(parent).binop(BinaryOp::I32Eq);
            node_addr(held, layout, node);
            mem.load32(held, nodes + layout::NODE_FUNC);
            f.push(held);
            held.binop(BinaryOp::I32Eq)
                .binop(BinaryOp::I32And)
                .br_if(found);
        },
        |_| {},
    );
}

/// Pushes the address of slot `slot` of a region of u32 slots (`site_children`,
/// `child_cache`), relative to the region.
fn word_slot(b: &mut InstrSeqBuilder, slot: LocalId) {
    b.local_get(slot).i32_const(2).binop(BinaryOp::I32Shl);
}

/// Pops a site id and pushes whether it is a direct call site's (not 0, the host's, nor an
/// indirect site's).
pub(super) fn push_is_direct(b: &mut InstrSeqBuilder) {
    b.i32_const(1)
        .binop(BinaryOp::I32Sub)
        .i32_const((layout::INDIRECT_SITE - 1) as i32)
        .binop(BinaryOp::I32LtU);
}

/// Leaves (`found`) with `node` the child that direct site `s`'s slot remembers, when it is
/// `parent`'s for `f`.
pub(super) fn site_child(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    [parent, s, node]: [LocalId; 3],
    f: Func,
    found: walrus::ir::InstrSeqId,
) {
    let slot = (layout.site_children_off, s);
    remembered_child(b, layout, mem, slot, [parent, node], f, found);
}

/// Leaves in `node` the child of `parent` for `f` from the list of its children, or a new
/// one (or f's fold node, when the tree is full).
fn walk_children(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    [parent, f, node]: [LocalId; 3],
    [prev, at]: [LocalId; 2],
) {
    let nodes = layout.nodes_off;
    b.i32_const(0).local_set(prev);
    node_addr(b, layout, parent);
    mem.load32(b, nodes + layout::NODE_FIRST_CHILD);
    b.local_set(node);
    b.block(None, |done| {
        let done_id = done.id();
        done.block(None, |missing| {
            let missing_id = missing.id();
            missing.loop_(None, |lp| {
                let lp_id = lp.id();
                lp.local_get(node).unop(UnaryOp::I32Eqz).br_if(missing_id);
                node_addr(lp, layout, node);
                lp.local_tee(at);
                mem.load32(lp, nodes + layout::NODE_FUNC);
                lp.local_get(f).binop(BinaryOp::I32Eq);
                lp.if_else(
                    None,
                    |found| {
                        // Move to the front of the list, unless it is there.
                        found.local_get(prev).unop(UnaryOp::I32Eqz).br_if(done_id);
                        node_addr(found, layout, prev);
                        found.local_get(at);
                        mem.load32(found, nodes + layout::NODE_NEXT_SIBLING);
                        mem.store32(found, nodes + layout::NODE_NEXT_SIBLING);
                        link_first(found, layout, mem, [parent, node, at]);
                        found.br(done_id);
                    },
                    |_| {},
                );
                lp.local_get(node).local_set(prev);
                lp.local_get(at);
                mem.load32(lp, nodes + layout::NODE_NEXT_SIBLING);
                lp.local_set(node).br(lp_id);
            });
        });
        add_child(done, layout, mem, [parent, f, node], at, done_id);
    });
}

/// Adds `node`, a new child of `parent` for function `f` (its address left in `at`), as
/// the next node of the tree (the tree's room is `nodes_cap` nodes besides those the live
/// table's chunks took); when the tree is full (or its memory cannot grow), leaves
/// f's fold node in `node`, counts the entry as folded and leaves (`done`).
fn add_child(
    done: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    [parent, f, node]: [LocalId; 3],
    at: LocalId,
    done_id: walrus::ir::InstrSeqId,
) {
    let nodes = layout.nodes_off;
    // node = header.node_count
    done.i32_const(0);
    mem.load32(done, layout::HDR_NODE_COUNT);
    done.local_tee(node).i32_const(layout.nodes_cap as i32);
    if layout.live_slots_max > layout.live_slots {
        // Besides the nodes the live table's chunks took.
        done.i32_const(0);
        mem.load32(done, layout::HDR_CLAIMED);
        done.binop(BinaryOp::I32Add);
    }
    done.binop(BinaryOp::I32GeU);
    done.if_else(
        ValType::I32,
        |full| {
            full.i32_const(1);
        },
        |room| grow_for(room, layout, mem, node, at),
    );
    done.if_else(
        None,
        |full| {
            full.local_get(f)
                .i32_const(1)
                .binop(BinaryOp::I32Add)
                .local_set(node);
            mem.bump64(full, layout::HDR_FOLDED);
            full.br(done_id);
        },
        |_| {},
    );
    done.i32_const(0)
        .local_get(node)
        .i32_const(1)
        .binop(BinaryOp::I32Add);
    mem.store32(done, layout::HDR_NODE_COUNT);
    node_addr(done, layout, node);
    done.local_tee(at).local_get(parent);
    mem.store32(done, nodes + layout::NODE_PARENT);
    done.local_get(at).local_get(f);
    mem.store32(done, nodes + layout::NODE_FUNC);
    link_first(done, layout, mem, [parent, node, at]);
}

/// Pushes 0 when node `node` fits in the profiler's memory, growing the memory (doubling
/// it, up to the layout's pages) when it does not; 1 when the memory cannot grow. The tree
/// so takes only the memory it uses. Uses `pages` as scratch.
fn grow_for(b: &mut InstrSeqBuilder, layout: &Layout, mem: &Mem, node: LocalId, pages: LocalId) {
    // (node + 1) * node_size + nodes_off > memory.size * 64 KiB, in 64 bits.
    b.local_get(node)
        .unop(UnaryOp::I64ExtendUI32)
        .i64_const(1)
        .binop(BinaryOp::I64Add)
        .i64_const(i64::from(layout.node_size))
        .binop(BinaryOp::I64Mul)
        .i64_const(i64::from(layout.nodes_off))
        .binop(BinaryOp::I64Add);
    b.memory_size(mem.0)
        .local_tee(pages)
        .unop(UnaryOp::I64ExtendUI32)
        .i64_const(16)
        .binop(BinaryOp::I64Shl)
        .binop(BinaryOp::I64GtU);
    b.if_else(
        ValType::I32,
        |grow| {
            // min(size, max - size) more pages; -1 when the host refuses.
            let max = layout.pages as i32;
            grow.local_get(pages)
                .i32_const(max)
                .local_get(pages)
                .binop(BinaryOp::I32Sub)
                .local_get(pages)
                .i32_const(max)
                .local_get(pages)
                .binop(BinaryOp::I32Sub)
                .binop(BinaryOp::I32LtU)
                .select(None)
                .memory_grow(mem.0)
                .i32_const(-1)
                .binop(BinaryOp::I32Eq);
        },
        |fits| {
            fits.i32_const(0);
        },
    );
}

/// Makes `node` (whose address is in `at`) the first child of `parent`.
fn link_first(
    b: &mut InstrSeqBuilder,
    layout: &Layout,
    mem: &Mem,
    [parent, node, at]: [LocalId; 3],
) {
    let nodes = layout.nodes_off;
    b.local_get(at);
    node_addr(b, layout, parent);
    mem.load32(b, nodes + layout::NODE_FIRST_CHILD);
    mem.store32(b, nodes + layout::NODE_NEXT_SIBLING);
    node_addr(b, layout, parent);
    b.local_get(node);
    mem.store32(b, nodes + layout::NODE_FIRST_CHILD);
}
