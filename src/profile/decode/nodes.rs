//! The calling-context tree as the profiler's memory holds it, read into [`RawNode`]s: each
//! node's function, parent, calls and cost, the open activations closed (or, for the
//! sampled metric, the samples placed: the word sampler's in the memory, the stack
//! sampler's by their stacks), inclusive costs summed.

use anyhow::Context as _;

use super::Dump;
use crate::layout::{self, Layout};
use crate::meta::Meta;
use crate::profile::stacks::{Children, StackSamples};

/// How open activations are closed: at the `end` reading, or, with the sampled metric,
/// not at all (each node's cost is its samples', in the memory or the stack sampler's).
pub(super) fn end_or_samples<'a>(meta: &Meta, dump: &'a Dump) -> Ending<'a> {
    match (meta.metric.facts().sampled, &dump.stacks, dump.end) {
        (true, Some(stacks), _) if !meta.contexts => Ending::StacksAlone(stacks),
        (true, Some(stacks), _) => Ending::Stacks(stacks),
        (true, None, _) => Ending::Samples,
        (false, _, Some(end)) => Ending::At(end),
        (false, _, None) => Ending::Unknown,
    }
}

/// How a node's inclusive cost is found.
#[derive(Clone, Copy)]
pub(super) enum Ending<'a> {
    /// The probes summed it; the activations still open are closed at this reading.
    At(u64),
    /// The probes summed it; the activations still open keep what their finished
    /// activations cost (the host did not read the end).
    Unknown,
    /// The sampled metric: each node's samples are its self time; its inclusive time is
    /// summed over its subtree.
    Samples,
    /// The sampled metric with the stack sampler: as [`Ending::Samples`], each node's
    /// samples those of the stacks that lead to it.
    Stacks(&'a StackSamples),
    /// The sampled metric with the stack sampler and no context tree of the probes': the
    /// contexts are those the stacks make, each node's samples those of its stacks.
    StacksAlone(&'a StackSamples),
}

/// A little-endian reader over the profiler's memory.
pub(in crate::profile) struct Raw<'a>(pub(in crate::profile) &'a [u8]);

impl Raw<'_> {
    pub(in crate::profile) fn u32(&self, at: u32) -> anyhow::Result<u32> {
        self.bytes(at).map(u32::from_le_bytes)
    }
    pub(in crate::profile) fn u64(&self, at: u32) -> anyhow::Result<u64> {
        self.bytes(at).map(u64::from_le_bytes)
    }
    /// The `N` bytes at `at`.
    fn bytes<const N: usize>(&self, at: u32) -> anyhow::Result<[u8; N]> {
        let at = at as usize;
        let bytes = self
            .0
            .get(at..at + N)
            .context("profiler memory is truncated")?;
        Ok(bytes.try_into().expect("N bytes"))
    }
}

/// One node as the runtime left it.
pub(super) struct RawNode {
    pub(super) parent: u32,
    pub(super) func: u32,
    pub(super) count: u64,
    pub(super) incl: u64,
    pub(super) child: u64,
    pub(super) t0: u64,
    /// With the sampled metric, the node's own samples.
    pub(super) samples: u64,
    /// When allocations are recorded, the node's own.
    pub(super) alloc: crate::profile::Allocs,
    /// Whether the node is not a context but part of a chunk the live table grew into: a
    /// child of the root, of function 0, with nothing counted.
    pub(super) chunk: bool,
}

/// The context node the call path `frames` (function ids, outermost first) leads to in the
/// tree the profiler's `memory` holds, where a host knows the path but not the node (a
/// component's, whose globals it cannot read): the deepest node on the path the tree has,
/// the root for an empty path or a metric with no tree.
pub fn context_of(memory: &[u8], meta: &Meta, frames: &[u32]) -> anyhow::Result<u32> {
    if !meta.contexts || frames.is_empty() {
        return Ok(0);
    }
    let l = &meta.layout;
    let nodes = read_raw_nodes(&Raw(memory), l, Ending::Unknown)?;
    Ok(children(&nodes, l).deepest(frames))
}

/// The children of each context node, by function id, for placing stacks (chunks' nodes
/// are no one's).
pub(super) fn children(nodes: &[RawNode], l: &Layout) -> Children {
    Children::of(
        nodes.iter().map(|n| match n.chunk {
            true => (layout::NO_PARENT, layout::NO_PARENT),
            false => (n.parent, n.func),
        }),
        l.first_context_node(),
    )
}

/// The nodes of the context tree: the root, the fold nodes (function f at node f + 1), the
/// contexts. The activations still open at the end (from node `cur` up) are closed at the
/// `end` reading, from the reading their entry kept; then each node's cost in children is
/// completed with its tree children's inclusive costs (the probes leave those out: only
/// what went to fold nodes is there).
pub(super) fn read_nodes(
    raw: &Raw,
    l: &Layout,
    cur: u32,
    ending: Ending,
) -> anyhow::Result<Vec<RawNode>> {
    let mut nodes = read_raw_nodes(raw, l, ending)?;
    match ending {
        Ending::Stacks(stacks) => {
            let full = raw.u64(layout::HDR_FOLDED)? > 0;
            place_stacks(&mut nodes, stacks, l, full);
        }
        Ending::StacksAlone(stacks) => grow_from_stacks(&mut nodes, stacks),
        _ => {}
    }
    match ending {
        Ending::At(end) => {
            // Context nodes only: a fold node's path is lost, and it may hold several open
            // activations, of which it kept only the latest entry's reading.
            let mut n = cur as usize;
            while n >= l.first_context_node() as usize && n < nodes.len() {
                let node = &mut nodes[n];
                node.incl = node.incl.saturating_add(end.saturating_sub(node.t0));
                n = node.parent as usize;
            }
        }
        Ending::Samples | Ending::Stacks(_) | Ending::StacksAlone(_) => {
            // Self time to inclusive: children come after their parents.
            for n in (l.first_context_node() as usize..nodes.len()).rev() {
                let (parent, incl) = (nodes[n].parent as usize, nodes[n].incl);
                nodes[parent].incl = nodes[parent].incl.saturating_add(incl);
            }
        }
        Ending::Unknown => {}
    }
    for n in l.first_context_node() as usize..nodes.len() {
        let (parent, incl) = (nodes[n].parent as usize, nodes[n].incl);
        nodes[parent].child = nodes[parent].child.saturating_add(incl);
    }
    Ok(nodes)
}

/// Each stack sample's count and time added to the node its stack leads to (see
/// [`Children::place`]; `full`: the tree was full, so a path missing from it went to a
/// fold node). A stack that leads nowhere stays out, counted by [`unplaced`].
pub(super) fn place_stacks(nodes: &mut [RawNode], stacks: &StackSamples, l: &Layout, full: bool) {
    let children = children(nodes, l);
    for s in &stacks.stacks {
        if let Some(node) = children.place(&s.frames, full) {
            if let Some(node) = nodes.get_mut(node as usize) {
                node.samples += s.samples;
                node.incl = node.incl.saturating_add(s.ns);
            }
        }
    }
}

/// The contexts the stack samples make, after the root and the fold nodes (`nodes`, which
/// hold none then): a node for each path from the root that a sample's stack took, parents
/// before their children, each with the count and time of the samples whose stack ends
/// there.
pub(super) fn grow_from_stacks(nodes: &mut Vec<RawNode>, stacks: &StackSamples) {
    let mut children: std::collections::HashMap<(u32, u32), u32> = Default::default();
    for s in &stacks.stacks {
        let mut at = 0u32;
        for &func in &s.frames {
            at = *children.entry((at, func)).or_insert_with(|| {
                nodes.push(RawNode {
                    parent: at,
                    func,
                    count: 0,
                    incl: 0,
                    child: 0,
                    t0: 0,
                    samples: 0,
                    alloc: Default::default(),
                    chunk: false,
                });
                (nodes.len() - 1) as u32
            });
        }
        if at != 0 {
            let node = &mut nodes[at as usize];
            node.samples += s.samples;
            node.incl = node.incl.saturating_add(s.ns);
        }
    }
}

/// The nodes as the memory has them (with the word sampler, their samples too), the root's
/// and the fold nodes' parents made the root's.
pub(super) fn read_raw_nodes(
    raw: &Raw,
    l: &Layout,
    ending: Ending,
) -> anyhow::Result<Vec<RawNode>> {
    let claimed = raw.u32(layout::HDR_CLAIMED)?;
    let node_count = raw
        .u32(layout::HDR_NODE_COUNT)?
        .min(l.nodes_cap.saturating_add(claimed));
    let chunks = chunks(raw, l, node_count)?;
    let mut nodes = Vec::with_capacity(node_count as usize);
    for n in 0..node_count {
        if chunks.iter().any(|c| c.contains(&n)) {
            nodes.push(RawNode {
                parent: 0,
                func: 0,
                count: 0,
                incl: 0,
                child: 0,
                t0: 0,
                samples: 0,
                alloc: Default::default(),
                chunk: true,
            });
            continue;
        }
        let at = l.node_at(n);
        let mut node = RawNode {
            parent: raw.u32(at + layout::NODE_PARENT)?,
            func: raw.u32(at + layout::NODE_FUNC)?,
            count: raw.u64(at + layout::NODE_COUNT)?,
            incl: raw.u64(at + layout::NODE_INCL)?,
            child: raw.u64(at + layout::NODE_CHILD)?,
            t0: raw.u64(at + layout::NODE_T0)?,
            samples: 0,
            alloc: Default::default(),
            chunk: false,
        };
        match ending {
            Ending::Samples => {
                node.samples = raw.u64(at + layout::NODE_SAMPLES)?;
                node.incl = raw.u64(at + layout::NODE_SAMPLE_NS)?;
                node.t0 = 0;
            }
            Ending::Stacks(_) | Ending::StacksAlone(_) => {
                node.incl = 0;
                node.t0 = 0;
            }
            _ => {}
        }
        if n == 0 {
            node.parent = layout::NO_PARENT;
            node.func = layout::NO_PARENT;
        } else if n < l.first_context_node() {
            node.parent = layout::NO_PARENT;
            node.func = n - 1;
        } else {
            anyhow::ensure!(
                node.parent < n && node.func < l.functions,
                "context node {n} has parent {} and function {}, not an earlier node and a function",
                node.parent,
                node.func
            );
        }
        nodes.push(node);
    }
    Ok(nodes)
}

/// The nodes that the live table's chunks took, as the header and each chunk's head list
/// them (within the `node_count` nodes used).
fn chunks(raw: &Raw, l: &Layout, node_count: u32) -> anyhow::Result<Vec<std::ops::Range<u32>>> {
    let mut chunks = Vec::new();
    let mut next = raw.u32(layout::HDR_CHUNKS)?;
    while next > 0 {
        let first = next - 1;
        let at = l.node_at(first);
        let nodes = raw.u32(at + 4)?;
        anyhow::ensure!(
            first >= l.first_context_node()
                && first.saturating_add(nodes) <= node_count
                && chunks.len() < 64,
            "the live table's chunks are not within the context tree's nodes"
        );
        chunks.push(first..first + nodes);
        next = raw.u32(at)?;
    }
    Ok(chunks)
}

/// Each direct site's callee and count, read once: the arcs' counts, and with the calls
/// metric the callees' calls too (a direct call is counted at its site alone, the others
/// in the function's counter).
pub(super) fn direct_sites(raw: &Raw, meta: &Meta) -> anyhow::Result<Vec<(u32, u64)>> {
    let l = &meta.layout;
    meta.direct_sites
        .iter()
        .enumerate()
        .map(|(k, site)| {
            let callee = site.callee.context("a direct site without a callee")?;
            anyhow::ensure!(
                callee < l.functions,
                "a direct site calls an unknown function"
            );
            Ok((callee, raw.u64(l.direct_arcs_off + 8 * (k as u32 + 1))?))
        })
        .collect()
}
