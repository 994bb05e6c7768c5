//! The program's allocations as the allocator probes left them: each node's figures, the
//! live table (what each context still held at the end) and its copy at the peak (what
//! each held then), and the header's totals.

use super::nodes::{Raw, RawNode};
use crate::layout::{self, Layout};
use crate::meta::Meta;
use crate::profile::{Allocations, Allocs};

/// Each node's allocations, and, from the live table, what it still held at the end (a
/// live block's node is the one that allocated it).
pub(super) fn read_node_allocs(raw: &Raw, l: &Layout, nodes: &mut [RawNode]) -> anyhow::Result<()> {
    if l.live_slots == 0 {
        return Ok(());
    }
    for (n, node) in nodes.iter_mut().enumerate() {
        if node.chunk {
            continue;
        }
        let at = l.nodes_off + n as u32 * l.node_size;
        node.alloc = Allocs {
            allocs: raw.u64(at + layout::NODE_ALLOCS)?,
            alloc_bytes: raw.u64(at + layout::NODE_ALLOC_BYTES)?,
            frees: raw.u64(at + layout::NODE_FREES)?,
            freed_bytes: raw.u64(at + layout::NODE_FREED_BYTES)?,
            grown_pages: raw.u64(at + layout::NODE_GROWN_PAGES)?,
            ..Allocs::default()
        };
    }
    let live = (layout::HDR_LIVE_TABLE, layout::HDR_LIVE_SLOTS);
    for (node, size) in table(raw, live)? {
        match nodes.get_mut(node) {
            Some(node) if !node.chunk => {
                node.alloc.held += 1;
                node.alloc.held_bytes += size;
            }
            _ => anyhow::bail!("a live allocation names node {node}, not a context"),
        }
    }
    // At the peak: the live table itself when no free came after its last peak (it is as
    // it was then), else its copy.
    let at_peak = match raw.u32(layout::HDR_PEAK_PENDING)? {
        0 => (layout::HDR_PEAK_TABLE, layout::HDR_PEAK_SLOTS),
        _ => live,
    };
    for (node, size) in table(raw, at_peak)? {
        if let Some(node) = nodes.get_mut(node).filter(|n| !n.chunk) {
            node.alloc.at_peak += 1;
            node.alloc.at_peak_bytes += size;
        }
    }
    Ok(())
}

/// The entries of the live table (or its copy) whose address and slots the header keeps
/// at `(table, slots)`: each block's node and size.
fn table(raw: &Raw, (table, slots): (u32, u32)) -> anyhow::Result<Vec<(usize, u64)>> {
    let (off, slots) = (raw.u32(table)?, raw.u32(slots)?);
    let mut entries = Vec::new();
    for slot in 0..slots {
        let at = off + slot * layout::LIVE_ENTRY_SIZE;
        if raw.u32(at)? != 0 {
            entries.push((raw.u32(at + 4)? as usize, raw.u64(at + 8)?));
        }
    }
    Ok(entries)
}

/// What the run recorded of its allocations as a whole: the header's totals and the
/// memory's size at the end (with the pages its `nodes` grew), or why nothing was recorded.
pub(super) fn allocations(
    raw: &Raw,
    meta: &Meta,
    nodes: &[RawNode],
) -> anyhow::Result<Allocations> {
    let found = &meta.allocations;
    let mut allocators: Vec<String> = found
        .allocators
        .iter()
        .filter_map(|a| meta.functions.get(a.function as usize))
        .map(|f| f.symbol.name.clone())
        .collect();
    allocators.dedup();
    if !meta.records_allocations() {
        return Ok(Allocations {
            not_recorded: Some(
                found
                    .not_recorded
                    .clone()
                    .unwrap_or_else(|| "the module was instrumented without them".into()),
            ),
            allocators,
            ..Allocations::default()
        });
    }
    Ok(Allocations {
        not_recorded: None,
        allocators,
        peak_bytes: raw.u64(layout::HDR_PEAK_BYTES)?,
        memory_pages: found.initial_pages + nodes.iter().map(|n| n.alloc.grown_pages).sum::<u64>(),
        at_peak_bytes: nodes.iter().map(|n| n.alloc.at_peak_bytes).sum(),
        untracked: raw.u64(layout::HDR_UNTRACKED)?,
        untracked_bytes: raw.u64(layout::HDR_UNTRACKED_BYTES)?,
        unmatched_frees: raw.u64(layout::HDR_UNMATCHED_FREES)?,
        // A thread's profile is marked so when its program's are merged.
        per_thread: false,
    })
}
