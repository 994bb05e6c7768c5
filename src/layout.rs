//! Where the profiler keeps its state inside an instrumented module.
//!
//! All profiling state lives in a linear memory of its own that the instrumenter
//! adds to the module (the program's memories are never touched). The layout is
//! fixed at instrumentation time, written into the module's `wasmprof` custom
//! section, and read back by whichever host dumps that memory after the run.
//!
//! ```text
//! header        HEADER_SIZE bytes (see the HDR_* offsets)
//! calls         u64 per function: with the calls metric, the calls that did not come
//!               through a direct call site (those are their site's count); with a cost,
//!               the context nodes count calls
//! direct_arcs   u64 per direct call site (index = site id)
//! site_children u32 per direct call site, with a context tree: the child the site's callee
//!               got under the parent it last ran in, so that a callee that is not its
//!               parent's first child is found without a list walk (the node itself says
//!               whose child it is, so a child of another parent is told by reading it)
//! child_cache   u32 per slot (CHILD_CACHE_SLOTS, with a context tree): the child last found
//!               for a (parent, function) pair, at the pair's hash, so that a child that its
//!               site's slot does not hold is found without a list walk too (told as above)
//! dyn_arcs      DynArc per slot: (site, callee) pairs seen at indirect sites and host entries
//! segments      u64 per straight-line segment of the program's code, with the instructions
//!               metric: how many times it ran (its instructions' lines are in the meta)
//! live          LiveEntry per slot, when allocations are recorded: the program's live
//!               allocations (address, allocating node, size), an open-addressing table
//!               that the allocator probes keep (a free finds its allocation here), as it
//!               is at the start (the header says where the table is and how many slots
//!               it has once it grew)
//! copy          as many slots: the live table as it was at a moment, taken by the first
//!               free after a peak of live bytes when no log was kept
//! log           as many LiveEntry: what the program allocated (address, node, size) and
//!               freed (address, node FREED) since the copy, so that the copy and the
//!               log's first HDR_LOG_PEAK entries are the blocks live at the peak; when the
//!               log is full, the copy takes in those entries and the rest move to its start
//! nodes         Node per context-tree node: the root (node 0), one fold node per function
//!               (function f's at node f + 1: it collects f's entries once the tree is
//!               full), then the contexts,
//!               allocated in order (each node lists its children, so memory is touched
//!               densely, which matters: a page touched for the first time costs a fault);
//!               the memory starts with room for a few and grows as the tree does; when
//!               allocations are recorded a node is ALLOC_NODE_SIZE bytes, its allocation
//!               figures after the others. When the live table fills up, the probes take
//!               the next nodes for a chunk twice its size (a CHUNK_HEAD, then the larger
//!               table, its copy and its log) and move the live blocks and the copy there;
//!               the chunks are listed from the header (HDR_CHUNKS), so that the decoder
//!               knows those nodes for what they are
//! ```

use serde::{Deserialize, Serialize};

/// Bytes reserved for the header at offset 0.
pub const HEADER_SIZE: u32 = 192;
/// Header: the magic `WPRF`, a u32.
pub const HDR_MAGIC: u32 = 0;
/// Header: the next free context-tree node, a u32.
pub const HDR_NODE_COUNT: u32 = 8;
/// Header: function entries that found the context tree full and went to a fold node, a u64.
pub const HDR_FOLDED: u32 = 16;
/// Header: arcs dropped because the dynamic arc table was full, a u64.
pub const HDR_ARCS_DROPPED: u32 = 24;
/// Header: with the sampled time metric, the sample word: the context node that runs, or
/// [`IN_PROBES`] while the probes' own work runs. The probes store it; the sampler, on
/// another thread, reads it (the memory is shared then).
pub const HDR_WHERE: u32 = 32;
/// Header: samples the sampler took, a u64 (those in the probes included).
pub const HDR_SAMPLES: u32 = 40;
/// Header: samples that found the probes' own work running, a u64: left out of the times.
pub const HDR_PROBE_SAMPLES: u32 = 48;
/// Header: samples that found no function running (before the program's entry or after
/// its exit), a u64.
pub const HDR_IDLE_SAMPLES: u32 = 56;
/// Header: samples that came late, a u64: the sampler woke long after it asked to (it
/// waited for a CPU), so the sample fell where the program let it run, often a host call
/// that blocked, and the time it stands for is skewed toward there.
pub const HDR_LATE_SAMPLES: u32 = 64;
/// Header, in a threaded module (each thread's instance has a profiler memory of its own,
/// shared so that the host may read it from another thread): a u32 that the wait probe
/// adds one to (atomically stored) before each `memory.atomic.wait` and after it: odd
/// while the thread is blocked in one. The host, ending
/// the program, reads a blocked thread's state from the memory and the fields below (the
/// thread can change none of it while it waits), then wakes it.
pub const HDR_WAITING: u32 = 72;
/// Header: the current context node when the thread began to wait, a u32.
pub const HDR_WAIT_CUR: u32 = 76;
/// Header: the address the thread waits on in the program's shared memory, a u64.
pub const HDR_WAIT_ADDR: u32 = 80;
/// Header: with the instructions metric, the instruction counter when the thread began to
/// wait, a u64.
pub const HDR_WAIT_INSTRUCTIONS: u32 = 88;
/// Header, when allocations are recorded: how deep the running allocator calls are, a u32
/// (an allocator that calls another, `__rust_alloc` calling `malloc`, is recorded once, by
/// the outermost).
pub const HDR_ALLOC_DEPTH: u32 = 100;
/// Header: the allocations in the live table, a u32.
pub const HDR_LIVE_COUNT: u32 = 104;
/// Header: the bytes of the allocations in the live table, a u64.
pub const HDR_LIVE_BYTES: u32 = 112;
/// Header: the most [`HDR_LIVE_BYTES`] ever was, a u64.
pub const HDR_PEAK_BYTES: u32 = 120;
/// Header: allocations the live table had no room for, a u64 (counted in their contexts,
/// but not in the bytes held at the end or the peak).
pub const HDR_UNTRACKED: u32 = 128;
/// Header: the bytes of those, a u64.
pub const HDR_UNTRACKED_BYTES: u32 = 136;
/// Header: frees of an address the live table did not hold, a u64 (an untracked
/// allocation's, or memory the allocator handed out before the probes saw it); their
/// bytes are counted only where the free says its size (`__rust_dealloc`).
pub const HDR_UNMATCHED_FREES: u32 = 144;
/// Header: a u32, 1 once an allocation took live bytes to a new peak: the live table is
/// the peak's blocks until the next free, which first records them (in the log when one
/// is kept, else as the copy) and clears it.
pub const HDR_PEAK_PENDING: u32 = 152;
/// Header: what the copy and the log hold, a u32: [`COPY_NONE`], [`COPY_LOGGED`] or
/// [`COPY_AT_PEAK`].
pub const HDR_COPY_STATE: u32 = 160;
/// [`HDR_COPY_STATE`]: no copy was taken (no free came after a peak).
pub const COPY_NONE: u32 = 0;
/// [`HDR_COPY_STATE`]: the copy, with the log's first [`HDR_LOG_PEAK`] entries, is the
/// blocks live at the peak; the log is kept.
pub const COPY_LOGGED: u32 = 1;
/// [`HDR_COPY_STATE`]: the copy is the blocks live at the peak, and no log is kept (it
/// filled up with what came after the peak): the next free after a new peak takes a copy.
pub const COPY_AT_PEAK: u32 = 2;
/// A log entry's node for a free.
pub const FREED: u32 = u32::MAX;
/// Header: the live table's address in the profiler's memory, a u32 ([`Layout::live_off`]
/// until the table first grows).
pub const HDR_LIVE_TABLE: u32 = 168;
/// Header: the live table's slots, a u32 (a power of two; [`Layout::live_slots`] until it
/// first grows, at most [`Layout::live_slots_max`]).
pub const HDR_LIVE_SLOTS: u32 = 172;
/// Header: the entries in the log, a u32 (at most the table's slots).
pub const HDR_LOG_LEN: u32 = 176;
/// Header: the log's entries that came before the peak, a u32.
pub const HDR_LOG_PEAK: u32 = 180;
/// Header: the first node of the last chunk the live table grew into, plus one, a u32 (0:
/// none); each chunk's head names the chunk before it.
pub const HDR_CHUNKS: u32 = 184;
/// Header: the nodes that the chunks take, a u32: the context tree's room is
/// [`Layout::nodes_cap`] nodes besides them.
pub const HDR_CLAIMED: u32 = 188;
/// The head of a chunk of nodes that the live table grew into: the chunk before it (its
/// first node plus one, 0: none), a u32, and the nodes it takes, a u32; then the table, its
/// copy and its log, 8-aligned.
pub const CHUNK_HEAD: u32 = 16;
/// The sample word's value while the probes' own work runs.
pub const IN_PROBES: u32 = u32::MAX;
/// The magic number at [`HDR_MAGIC`] (`WPRF` in little-endian bytes).
pub const MAGIC: u32 = u32::from_le_bytes(*b"WPRF");

/// Slots of `child_cache` (a power of two; 64 KiB).
pub const CHILD_CACHE_SLOTS: u32 = 1 << 14;

/// Size of one dynamic-arc slot: `site: u32, callee_plus_one: u32, count: u64`.
pub const DYN_ARC_SIZE: u32 = 16;
/// Size of one context-tree node: `parent: u32, func: u32, count: u64, incl: u64, child: u64,
/// first_child: u32, next_sibling: u32, t0: u64`, then 16 bytes unused. Node sizes are
/// powers of two, so that the probes find a node's address from its id by a shift, not a
/// multiplication, on the chain of loads that finds an entry's context node
/// (BENCHMARKS.md, "The context tree's lookup").
pub const NODE_SIZE: u32 = 64;
/// Node field offsets within a node.
pub const NODE_PARENT: u32 = 0;
/// See [`NODE_PARENT`].
pub const NODE_FUNC: u32 = 4;
/// See [`NODE_PARENT`].
pub const NODE_COUNT: u32 = 8;
/// See [`NODE_PARENT`].
pub const NODE_INCL: u32 = 16;
/// The cost of the node's children that went to fold nodes; the decoder adds its tree
/// children's inclusive costs, which the probes leave out.
pub const NODE_CHILD: u32 = 24;
/// See [`NODE_PARENT`].
pub const NODE_FIRST_CHILD: u32 = 32;
/// See [`NODE_PARENT`].
pub const NODE_NEXT_SIBLING: u32 = 36;
/// With the sampled time metric (no clock): the samples that found this node running, a
/// u64, which the sampler adds (atomically) where a clock's metric keeps [`NODE_INCL`].
pub const NODE_SAMPLES: u32 = NODE_INCL;
/// With the sampled time metric: the time those samples stand for (each the interval
/// since the sampler's previous sample), in nanoseconds, a u64 kept where a clock's
/// metric keeps [`NODE_T0`].
pub const NODE_SAMPLE_NS: u32 = NODE_T0;
/// The clock's (or the instruction counter's) reading when the node's latest activation
/// began: what closes an activation that never reached its exit probe (one that a longjmp
/// or a JS exception unwound, or that was still open when the run ended). A context node
/// has at most one open activation at a time (a recursive call is a child node).
pub const NODE_T0: u32 = 40;

/// Size of a context-tree node when allocations are recorded: [`NODE_SIZE`] and the
/// allocation figures, each a u64, that the allocator probes add to the running node (40
/// bytes), then 24 bytes unused.
pub const ALLOC_NODE_SIZE: u32 = 2 * NODE_SIZE;
const _: () = assert!(NODE_SIZE.is_power_of_two() && ALLOC_NODE_SIZE.is_power_of_two());
const _: () = assert!(NODE_GROWN_PAGES + 8 <= ALLOC_NODE_SIZE);
/// Allocations made in this context (a realloc that moves or resizes is one).
pub const NODE_ALLOCS: u32 = NODE_SIZE;
/// The bytes those asked for.
pub const NODE_ALLOC_BYTES: u32 = NODE_SIZE + 8;
/// Frees made in this context (a realloc's of the old block is one).
pub const NODE_FREES: u32 = NODE_SIZE + 16;
/// The bytes those freed, as their allocations asked for them.
pub const NODE_FREED_BYTES: u32 = NODE_SIZE + 24;
/// The 64 KiB pages by which `memory.grow` grew the program's memories in this context.
pub const NODE_GROWN_PAGES: u32 = NODE_SIZE + 32;
/// Size of one live-table slot: `address: u32, node: u32, size: u64`; address 0 is an
/// empty slot (an allocator returns 0 only when it fails).
pub const LIVE_ENTRY_SIZE: u32 = 16;
/// The live table's slots at the start when allocations are recorded (fewer where it may
/// not grow to that many); at most three quarters of them are used, so that a lookup stays
/// short, and a table that fills up doubles.
pub const LIVE_SLOTS: u32 = 1 << 10;
/// The most slots the live table grows to: with its copy and its log, 768 MiB of the
/// profiler's memory.
const MAX_LIVE_SLOTS: u32 = 1 << 24;
/// The most live allocations the table can follow, and the default of
/// `--max-live-allocations`.
pub const MAX_LIVE: u32 = MAX_LIVE_SLOTS / 4 * 3;

/// The most slots the live table of a module that `records` allocations grows to, with room
/// for `max_live` (0 where it does not record them).
pub fn live_slots(records: bool, max_live: u32) -> u32 {
    if records {
        live_slots_for(max_live)
    } else {
        0
    }
}

/// The live table's slots that follow at least `max_live` allocations at once (a power of
/// two, of which three quarters are used; at least 4).
pub fn live_slots_for(max_live: u32) -> u32 {
    (u64::from(max_live) * 4)
        .div_ceil(3)
        .next_power_of_two()
        .clamp(4, u64::from(MAX_LIVE_SLOTS)) as u32
}

/// The parent recorded for the root and for fold nodes.
pub const NO_PARENT: u32 = u32::MAX;
/// Site ids with this bit set are indirect sites (`call_indirect`, `call_ref` and their tail
/// forms); site ids without it are direct sites, and 0 means "entered from the host".
pub const INDIRECT_SITE: u32 = 0x8000_0000;
/// What a small function's re-entry stub leaves in the site global for the function's
/// inline entry probe, which it tail-calls once `enter` has entered it: no site's id (the
/// indirect sites stop far below it), and the probe clears it at once.
pub const REENTRY_SITE: u32 = u32::MAX;
/// A dynamic arc whose site has this bit set (and not [`INDIRECT_SITE`]) is an entry from
/// the host while the import whose function id is in the other bits was running: the host
/// called back into the module (Emscripten's `invoke_*` trampolines, a callback). Only the
/// arc table holds such ids; call sites never do.
pub const IMPORT_ENTRY: u32 = 0x4000_0000;

/// The most calling contexts a profiler memory can hold (2.4 GB of nodes at most, root and
/// fold nodes included, so that the memory stays within a 32-bit address space).
pub const MAX_CONTEXTS: u32 = 25_000_000;

/// Wasm page size.
const PAGE: u64 = 65536;

/// Offsets and capacities of every region, as the instrumenter laid them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Number of function ids (imports and defined functions).
    pub functions: u32,
    /// Offset of `calls`.
    pub calls_off: u32,
    /// Offset of `direct_arcs`; slot 0 is unused.
    pub direct_arcs_off: u32,
    /// Number of direct call sites (slots 1..=direct_sites).
    pub direct_sites: u32,
    /// Offset of `site_children` (as many slots as `direct_arcs`).
    #[serde(default)]
    pub site_children_off: u32,
    /// Offset of `child_cache` ([`CHILD_CACHE_SLOTS`] slots).
    #[serde(default)]
    pub child_cache_off: u32,
    /// Offset of `dyn_arcs`.
    pub dyn_arcs_off: u32,
    /// Slots in `dyn_arcs` (a power of two).
    pub dyn_arcs_cap: u32,
    /// Offset of `segments`.
    #[serde(default)]
    pub segments_off: u32,
    /// Number of counted straight-line segments (0 unless per-line counts are kept).
    #[serde(default)]
    pub segments: u32,
    /// Offset of `live`, the live allocations' table.
    #[serde(default)]
    pub live_off: u32,
    /// Slots in `live` at the start (a power of two; 0 unless allocations are recorded).
    #[serde(default)]
    pub live_slots: u32,
    /// The most slots the live table grows to (a power of two, at least `live_slots`).
    #[serde(default)]
    pub live_slots_max: u32,
    /// Offset of `nodes`.
    pub nodes_off: u32,
    /// Bytes per node: [`NODE_SIZE`], or [`ALLOC_NODE_SIZE`] when allocations are recorded.
    #[serde(default = "node_size")]
    pub node_size: u32,
    /// Capacity of `nodes`, root and fold nodes included.
    pub nodes_cap: u32,
    /// The most the profiler's memory grows to, in 64 KiB pages (room for `nodes_cap`).
    pub pages: u32,
    /// Its size at the start: every region but the contexts, and room for the first
    /// [`INITIAL_CONTEXTS`]; the context tree grows the memory as it needs.
    pub initial_pages: u32,
}

fn node_size() -> u32 {
    NODE_SIZE
}

/// The nodes a chunk takes for a live table of `slots` slots, its copy and its log.
pub fn nodes_of_chunk(slots: u32, node_size: u32) -> u32 {
    (CHUNK_HEAD + 3 * LIVE_ENTRY_SIZE * slots).div_ceil(node_size)
}

/// The nodes the live table's chunks take, all told, as it doubles from `from` slots to
/// `to`.
fn chunk_nodes(from: u32, to: u32, node_size: u32) -> u64 {
    let mut slots = u64::from(from);
    let mut nodes = 0;
    while slots < u64::from(to) {
        slots *= 2;
        nodes += u64::from(nodes_of_chunk(slots as u32, node_size));
    }
    nodes
}

/// The contexts the profiler's memory has room for at the start.
pub const INITIAL_CONTEXTS: u32 = 1 << 14;

impl Layout {
    /// Lays out the regions for `functions` function ids, `direct_sites` direct call sites,
    /// `indirect_sites` indirect call sites, `segments` counted segments and room for
    /// `max_contexts` context-tree nodes; where allocations are recorded, a live table that
    /// grows to `live_slots_max` slots (a power of two; 0: none) and the nodes' allocation
    /// figures.
    pub fn new(
        functions: u32,
        direct_sites: u32,
        indirect_sites: u32,
        segments: u32,
        max_contexts: u32,
        live_slots_max: u32,
    ) -> Layout {
        let allocations = live_slots_max > 0;
        let live_slots = live_slots_max.min(LIVE_SLOTS);
        let align8 = |x: u64| (x + 7) & !7;
        // Room for every indirect site to reach a handful of callees, and for host entries.
        let dyn_wanted = 2 * (u64::from(indirect_sites) * 8 + u64::from(functions) / 4 + 64);
        let dyn_arcs_cap = dyn_wanted.next_power_of_two().clamp(1024, 1 << 22) as u32;
        let nodes_cap = (u64::from(functions) + 1 + u64::from(max_contexts.min(MAX_CONTEXTS)))
            .min(u64::from(MAX_CONTEXTS) * 2);

        let calls_off = u64::from(HEADER_SIZE);
        let direct_arcs_off = align8(calls_off + 8 * u64::from(functions));
        let site_children_off = direct_arcs_off + 8 * (u64::from(direct_sites) + 1);
        let child_cache_off = site_children_off + 4 * (u64::from(direct_sites) + 1);
        let dyn_arcs_off = align8(child_cache_off + 4 * u64::from(CHILD_CACHE_SLOTS));
        let segments_off = align8(dyn_arcs_off + u64::from(DYN_ARC_SIZE) * u64::from(dyn_arcs_cap));
        let live_off = align8(segments_off + 8 * u64::from(segments));
        // At a cache line's start, so that no node spans more lines than its size.
        let nodes_off = (live_off + 3 * u64::from(LIVE_ENTRY_SIZE) * u64::from(live_slots))
            .next_multiple_of(64);
        let node_size = if allocations {
            ALLOC_NODE_SIZE
        } else {
            NODE_SIZE
        };
        let chunks = chunk_nodes(live_slots, live_slots_max, node_size);
        // Larger nodes: as many as a 32-bit memory holds, with the live table's chunks.
        let nodes_cap =
            nodes_cap.min((u64::from(u32::MAX) - nodes_off) / u64::from(node_size) - chunks);
        let end = nodes_off + u64::from(node_size) * (nodes_cap + chunks);
        let pages = end.div_ceil(PAGE);
        let first = (u64::from(functions) + 1 + u64::from(INITIAL_CONTEXTS)).min(nodes_cap);
        let initial_pages = (nodes_off + u64::from(node_size) * first).div_ceil(PAGE);
        let to32 = |x: u64| u32::try_from(x).expect("profiler memory exceeds 4 GiB");
        Layout {
            functions,
            calls_off: to32(calls_off),
            direct_arcs_off: to32(direct_arcs_off),
            direct_sites,
            site_children_off: to32(site_children_off),
            child_cache_off: to32(child_cache_off),
            dyn_arcs_off: to32(dyn_arcs_off),
            dyn_arcs_cap,
            segments_off: to32(segments_off),
            segments,
            live_off: to32(live_off),
            live_slots,
            live_slots_max,
            nodes_off: to32(nodes_off),
            node_size,
            nodes_cap: to32(nodes_cap),
            pages: to32(pages),
            initial_pages: to32(initial_pages),
        }
    }

    /// The most nodes the memory holds: the contexts, the root and the fold nodes, and the
    /// chunks the live table may grow into.
    pub fn max_nodes(&self) -> u32 {
        ((u64::from(self.pages) * PAGE - u64::from(self.nodes_off)) / u64::from(self.node_size))
            as u32
    }

    /// The first node available for calling contexts (after the root and the fold nodes).
    pub fn first_context_node(&self) -> u32 {
        self.functions + 1
    }

    /// Where node `n` starts in the profiler's memory.
    pub fn node_at(&self, n: u32) -> u32 {
        self.nodes_off + n * self.node_size
    }

    /// Where the state of a profiler memory whose header counts `nodes` nodes ends: after
    /// the last (a context, or a chunk the live table grew into), at a whole word. Past it
    /// the memory holds only zeros, so a copy of the state may stop there.
    pub fn state_end(&self, nodes: u32) -> u64 {
        let end = u64::from(self.nodes_off) + u64::from(self.node_size) * u64::from(nodes);
        end.next_multiple_of(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_table_has_room_for_what_is_asked() {
        assert_eq!(live_slots_for(MAX_LIVE), MAX_LIVE_SLOTS);
        assert_eq!(live_slots_for(1), 4);
        for n in [1, 3, 4, 100, 49_153, 1_000_000, MAX_LIVE] {
            let slots = live_slots_for(n);
            assert!(slots.is_power_of_two());
            assert!(slots / 4 * 3 >= n, "{n}: {slots}");
        }
    }

    #[test]
    fn regions_do_not_overlap_and_fit_the_pages() {
        let l = Layout::new(1000, 5000, 300, 70_000, 100_000, LIVE_SLOTS);
        assert!(l.calls_off >= HEADER_SIZE);
        assert!(l.direct_arcs_off >= l.calls_off + 8 * 1000);
        assert_eq!(l.direct_arcs_off % 8, 0);
        assert!(l.site_children_off >= l.direct_arcs_off + 8 * 5001);
        assert!(l.child_cache_off >= l.site_children_off + 4 * 5001);
        assert!(l.dyn_arcs_off >= l.child_cache_off + 4 * CHILD_CACHE_SLOTS);
        assert_eq!(l.dyn_arcs_off % 8, 0);
        assert!(l.segments_off >= l.dyn_arcs_off + DYN_ARC_SIZE * l.dyn_arcs_cap);
        assert!(l.live_off >= l.segments_off + 8 * 70_000);
        assert!(l.nodes_off >= l.live_off + 3 * LIVE_ENTRY_SIZE * l.live_slots);
        assert!(l.live_slots.is_power_of_two());
        assert_eq!(l.node_size, ALLOC_NODE_SIZE);
        // Room for the contexts and for every chunk the live table may grow into.
        let chunks = (1..=2)
            .map(|k| nodes_of_chunk(LIVE_SLOTS << k, ALLOC_NODE_SIZE))
            .sum::<u32>();
        let l = Layout::new(1000, 5000, 300, 70_000, 100_000, LIVE_SLOTS * 4);
        assert_eq!(l.live_slots, LIVE_SLOTS);
        assert!(
            u64::from(l.pages) * PAGE
                >= u64::from(l.nodes_off)
                    + u64::from(l.node_size) * u64::from(l.nodes_cap + chunks)
        );
        assert!(l.dyn_arcs_cap.is_power_of_two());
        assert_eq!(l.first_context_node(), 1001);
    }
}
