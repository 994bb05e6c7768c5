//! The program's allocations as the allocator probes left them: each node's figures, the
//! live table (what each context still held at the end), its copy and its log (what each
//! held at the peak), and the header's totals.

use std::collections::HashMap;

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
        let at = l.node_at(n as u32);
        node.alloc = Allocs {
            allocs: raw.u64(at + layout::NODE_ALLOCS)?,
            alloc_bytes: raw.u64(at + layout::NODE_ALLOC_BYTES)?,
            frees: raw.u64(at + layout::NODE_FREES)?,
            freed_bytes: raw.u64(at + layout::NODE_FREED_BYTES)?,
            grown_pages: raw.u64(at + layout::NODE_GROWN_PAGES)?,
            ..Allocs::default()
        };
    }
    let table = Table::of(raw)?;
    for (node, size) in table.entries(raw, 0)?.into_values() {
        match nodes.get_mut(node) {
            Some(node) if !node.chunk => {
                node.alloc.held += 1;
                node.alloc.held_bytes += size;
            }
            _ => anyhow::bail!("a live allocation names node {node}, not a context"),
        }
    }
    for (node, size) in table.at_peak(raw)?.into_values() {
        if let Some(node) = nodes.get_mut(node).filter(|n| !n.chunk) {
            node.alloc.at_peak += 1;
            node.alloc.at_peak_bytes += size;
        }
    }
    Ok(())
}

/// The live table as the header says it is: its address and slots, its copy and its log
/// after it.
struct Table {
    base: u32,
    slots: u32,
}

/// Blocks by address: their node and size.
type Blocks = HashMap<u32, (usize, u64)>;

impl Table {
    fn of(raw: &Raw) -> anyhow::Result<Table> {
        Ok(Table {
            base: raw.u32(layout::HDR_LIVE_TABLE)?,
            slots: raw.u32(layout::HDR_LIVE_SLOTS)?,
        })
    }

    /// The address of slot `slot` of region `k` (the table: 0, its copy: 1, its log: 2).
    fn slot(&self, k: u32, slot: u32) -> u32 {
        self.base + (k * self.slots + slot) * layout::LIVE_ENTRY_SIZE
    }

    /// The blocks in the table (`k` 0) or its copy (1).
    fn entries(&self, raw: &Raw, k: u32) -> anyhow::Result<Blocks> {
        let mut blocks = HashMap::new();
        for slot in 0..self.slots {
            let at = self.slot(k, slot);
            let address = raw.u32(at)?;
            if address != 0 {
                blocks.insert(address, (raw.u32(at + 4)? as usize, raw.u64(at + 8)?));
            }
        }
        Ok(blocks)
    }

    /// The blocks live at the peak: the table itself when no free came after the peak, else
    /// the copy with the log's entries before the peak applied.
    fn at_peak(&self, raw: &Raw) -> anyhow::Result<Blocks> {
        if raw.u32(layout::HDR_PEAK_PENDING)? != 0 {
            return self.entries(raw, 0);
        }
        let state = raw.u32(layout::HDR_COPY_STATE)?;
        if state == layout::COPY_NONE {
            return Ok(HashMap::new());
        }
        let mut blocks = self.entries(raw, 1)?;
        if state == layout::COPY_LOGGED {
            let peak = raw.u32(layout::HDR_LOG_PEAK)?;
            anyhow::ensure!(
                peak <= self.slots,
                "the allocations' log is longer than its room"
            );
            for entry in 0..peak {
                let at = self.slot(2, entry);
                let (address, node) = (raw.u32(at)?, raw.u32(at + 4)?);
                match node {
                    layout::FREED => blocks.remove(&address),
                    _ => blocks.insert(address, (node as usize, raw.u64(at + 8)?)),
                };
            }
        }
        Ok(blocks)
    }
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
        // One run's: a merge of several names its peak's.
        peak_module: None,
        // A thread's profile is marked so when its program's are merged.
        per_thread: false,
    })
}
