//! Decoding: what the profiler left in a module's memory after a run, read with the
//! module's meta into a [`Profile`]. The memory is laid out as [`crate::layout`]
//! says; nothing else about the run is needed.

use std::collections::BTreeMap;

use anyhow::Context as _;

mod allocs;
mod lines;
mod nodes;

pub use nodes::context_of;
pub(super) use nodes::Raw;
use nodes::{direct_sites, end_or_samples, read_nodes, RawNode};

use super::outermost::{arc_keys, outermost_sums, TreeNode};
use super::stacks::StackSamples;
use super::{
    Arc, ArcSite, Context, Costs, Function, NoSampler, Profile, RunInfo, Sampling, FORMAT,
    FORMAT_VERSION, HOST,
};
use crate::layout::{self, Layout};
use crate::meta::Meta;
use crate::symbols::SourcePos;

/// What the profiler left in a module after a run: the input of [`Profile::decode`].
#[derive(Debug, Clone)]
pub struct Dump {
    /// The profiler's linear memory.
    pub memory: Vec<u8>,
    /// The context-tree node that was current when the run ended (the root after a clean
    /// run; the innermost open activation after a trap).
    pub cur: u32,
    /// Clock ticks per nanosecond (1 for a nanosecond clock).
    pub ticks_per_ns: f64,
    /// Which clock the module read (`tsc`, `instant`; `none` when it read none).
    pub clock: String,
    /// The clock's (or, with the instructions metric, the instruction counter's) raw
    /// reading when the run ended: the activations still open then are closed at it. `None`
    /// when the host did not read it; they keep only what their finished activations cost.
    pub end: Option<u64>,
    /// Where a trap or an exit from inside left the program, from the host's backtrace:
    /// function ids, outermost first (empty where the host has none), led by
    /// [`crate::meta::NO_FUNCTION`] where the host kept only the innermost frames. The
    /// open stack of a metric that keeps no context tree (`calls`).
    pub frames: Vec<u32>,
    /// With the stack sampler, the samples it took of the thread (the word sampler leaves
    /// its samples in the memory).
    pub stacks: Option<StackSamples>,
    /// Why no sampler ran, when the metric is sampled and the host could not start one.
    pub no_sampler: Option<NoSampler>,
}

impl Profile {
    /// Decodes what one run of a module instrumented with `meta` left behind.
    pub fn decode(meta: &Meta, dump: &Dump, run: RunInfo) -> anyhow::Result<Profile> {
        let raw = Raw(&dump.memory);
        anyhow::ensure!(
            raw.u32(layout::HDR_MAGIC)? == layout::MAGIC,
            "profiler memory has no WPRF header"
        );
        let decoder = Decoder {
            meta,
            layout: &meta.layout,
            // The sampler credits nanoseconds; a clock's metric, ticks.
            ticks_per_ns: match meta.metric.facts().sampled {
                true => 1.0,
                false => dump.ticks_per_ns,
            },
            nodes: {
                let mut nodes =
                    read_nodes(&raw, &meta.layout, dump.cur, end_or_samples(meta, dump))?;
                allocs::read_node_allocs(&raw, &meta.layout, &mut nodes)?;
                nodes
            },
            stacks: dump.stacks.as_ref(),
            no_sampler: dump.no_sampler,
            direct: direct_sites(&raw, meta)?,
            raw,
        };
        let (functions, fid) = decoder.functions()?;
        let lines = decoder.lines()?;
        let contexts = decoder.contexts(&fid);
        let arcs = decoder.arcs()?;
        let helpers = helpers(meta, &functions);
        // The host's backtrace, where it has one (a trap's, an exit's from inside).
        let backtrace: Vec<String> = dump
            .frames
            .iter()
            .filter_map(|&f| match f {
                crate::meta::NO_FUNCTION => Some(TRUNCATED.to_string()),
                f => meta
                    .functions
                    .get(f as usize)
                    .map(|f| f.symbol.name.clone()),
            })
            .collect();
        let open_stack = match meta.contexts {
            // No context tree: the host's backtrace says where the run ended.
            false => backtrace,
            true if run.trap.is_some() => deepest(decoder.open_stack(dump.cur), backtrace),
            true => decoder.open_stack(dump.cur),
        };
        Ok(Profile {
            format: FORMAT.to_string(),
            version: FORMAT_VERSION,
            modules: vec![run.module.clone()],
            complete: open_stack.is_empty(),
            runs: vec![RunInfo {
                open_stack,
                clock: dump.clock.clone(),
                state: Some(meta.state),
                ..run
            }],
            metric: meta.metric,
            functions,
            arcs,
            contexts,
            sampled_contexts: !meta.contexts && dump.stacks.is_some(),
            folded_entries: decoder.raw.u64(layout::HDR_FOLDED)?,
            arcs_dropped: decoder.raw.u64(layout::HDR_ARCS_DROPPED)?,
            compensation: None,
            uncompensated: None,
            sampling: meta.metric.facts().sampled.then(|| decoder.sampling()),
            lines,
            view: None,
            threads: Vec::new(),
            allocations: Some(allocs::allocations(&decoder.raw, meta, &decoder.nodes)?),
            benchmarks: Vec::new(),
            requests: None,
            helpers,
        })
    }
}

/// The names of `functions` that an unoptimized build left of the standard library's
/// inlinable functions ([`Profile::helpers`]).
fn helpers(meta: &Meta, functions: &[Function]) -> Vec<String> {
    if !meta.unoptimized {
        return Vec::new();
    }
    let inlinable: rustc_hash::FxHashSet<&str> = (meta.functions.iter())
        .filter(|f| f.symbol.inlinable)
        .map(|f| f.symbol.name.as_str())
        .collect();
    (functions.iter())
        .filter(|f| inlinable.contains(f.name.as_str()))
        .map(|f| f.name.clone())
        .collect()
}

/// The memory of one run, read into nodes and site counts, and the meta to name them.
struct Decoder<'a> {
    meta: &'a Meta,
    layout: &'a Layout,
    raw: Raw<'a>,
    ticks_per_ns: f64,
    nodes: Vec<RawNode>,
    /// Each direct site's callee and count.
    direct: Vec<(u32, u64)>,
    /// With the stack sampler, its samples (placed in `nodes` already).
    stacks: Option<&'a StackSamples>,
    /// [`Dump::no_sampler`].
    no_sampler: Option<NoSampler>,
}

impl Decoder<'_> {
    /// Costs of raw `self_` and `total` readings (converted once summed, so that rounding
    /// cannot make self exceed total).
    fn cost(&self, self_: u64, total: u64) -> Costs {
        Costs::from_raw(self.meta.metric, self_, total, self.ticks_per_ns)
    }

    /// [`Self::cost`], with the self samples it comes from under the sampled metric.
    fn sampled_cost(&self, self_: u64, total: u64, samples: u64) -> Costs {
        Costs {
            self_samples: self.meta.metric.facts().sampled.then_some(samples),
            ..self.cost(self_, total)
        }
    }

    /// The sampler's totals, from the header and the nodes.
    fn sampling(&self) -> Sampling {
        let in_tree = |f: fn(&RawNode) -> u64| self.nodes.iter().map(f).sum::<u64>();
        let samples = in_tree(|n| n.samples);
        // The self times' sum: the root's inclusive time, and the fold nodes'.
        let sampled_ns = self
            .nodes
            .iter()
            .map(|n| n.incl.saturating_sub(n.child))
            .sum();
        if let Some(stacks) = self.stacks {
            let stacked: u64 = stacks.stacks.iter().map(|s| s.samples).sum();
            let stacked_ns: u64 = stacks.stacks.iter().map(|s| s.ns).sum();
            return Sampling {
                sampler: self.meta.sampler,
                samples,
                sampled_ns,
                in_probes: stacks.in_probes,
                idle: stacks.outside,
                late: 0,
                unplaced: stacked.saturating_sub(samples) + stacks.truncated + stacks.dropped,
                unplaced_ns: stacked_ns.saturating_sub(sampled_ns)
                    + stacks.truncated_ns
                    + stacks.dropped_ns,
                no_sampler: None,
                cpu: false,
                tick: false,
                in_page: stacks.in_page,
            };
        }
        let header = |at| self.raw.u64(at).unwrap_or(0);
        Sampling {
            sampler: self.meta.sampler,
            samples,
            sampled_ns,
            in_probes: header(layout::HDR_PROBE_SAMPLES),
            idle: header(layout::HDR_IDLE_SAMPLES),
            late: header(layout::HDR_LATE_SAMPLES),
            unplaced: 0,
            unplaced_ns: 0,
            no_sampler: self.no_sampler,
            cpu: false,
            tick: false,
            in_page: false,
        }
    }

    /// The name of function `f`.
    fn name(&self, f: u32) -> String {
        self.meta.functions[f as usize].symbol.name.clone()
    }

    /// Each node's parent and function; a fold node hangs from the root.
    fn tree(&self) -> Vec<TreeNode> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(n, node)| match n {
                0 => (None, None),
                _ if self.is_fold(n) => (Some(0), Some(node.func as usize)),
                _ => (Some(node.parent as usize), Some(node.func as usize)),
            })
            .collect()
    }

    /// Whether node `n` is a fold node.
    fn is_fold(&self, n: usize) -> bool {
        n > 0 && (n as u32) < self.layout.first_context_node()
    }

    /// The functions that ran, renumbered densely, and each function id's new id
    /// (`u32::MAX` for those that did not run).
    fn functions(&self) -> anyhow::Result<(Vec<Function>, Vec<u32>)> {
        let (meta, l, nodes) = (self.meta, self.layout, &self.nodes);
        let nf = l.functions as usize;
        // Self cost sums over the nodes of each function; calls, with a cost, over its
        // context nodes (fold nodes included); for the calls metric, the function's own
        // counter and its direct sites.
        let mut self_ticks = vec![0u64; nf];
        let mut self_samples = vec![0u64; nf];
        let mut node_calls = vec![0u64; nf];
        // Without the probes' tree, a function the samples found, even one whose calls no
        // probe counted.
        let mut sampled = vec![false; nf];
        for (i, n) in nodes.iter().enumerate().skip(1).filter(|(_, n)| !n.chunk) {
            self_ticks[n.func as usize] += n.incl.saturating_sub(n.child);
            self_samples[n.func as usize] += n.samples;
            node_calls[n.func as usize] += n.count;
            sampled[n.func as usize] |= !meta.contexts && !self.is_fold(i);
        }
        let mut direct_calls = vec![0u64; nf];
        // Without a tree, a function's calls are its direct sites' and its own counter's.
        let tree_counts = meta.contexts;
        if !tree_counts {
            for &(callee, count) in &self.direct {
                let calls = &mut direct_calls[callee as usize];
                *calls = calls.saturating_add(count);
            }
        }
        // Inclusive cost, once per outermost activation; a fold node's entries (their
        // paths lost) count as outermost.
        let tree = self.tree();
        let total_ticks = outermost_sums(
            tree.iter().map(|&(parent, _)| parent),
            &tree
                .iter()
                .map(|&(_, function)| function)
                .collect::<Vec<_>>(),
            &nodes.iter().map(|n| n.incl).collect::<Vec<_>>(),
            nf,
        );

        let mut fid = vec![u32::MAX; nf];
        let mut functions = Vec::new();
        for f in 0..nf {
            let calls = match tree_counts {
                false => self
                    .raw
                    .u64(l.calls_off + 8 * f as u32)?
                    .saturating_add(direct_calls[f]),
                true => node_calls[f],
            };
            if calls == 0 && !sampled[f] {
                continue;
            }
            let m = &meta.functions[f];
            fid[f] = functions.len() as u32;
            functions.push(Function {
                id: functions.len() as u32,
                name: m.symbol.name.clone(),
                file: m.symbol.file.clone(),
                line: m.symbol.line,
                import: m.import,
                calls,
                cost: self.sampled_cost(self_ticks[f], total_ticks[f], self_samples[f]),
            });
        }
        Ok((functions, fid))
    }

    /// The contexts: the root, the fold nodes that were used, then every context, with
    /// functions by their new ids `fid`.
    fn contexts(&self, fid: &[u32]) -> Vec<Context> {
        let mut cid = vec![u32::MAX; self.nodes.len()];
        let mut contexts = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            // A context the probes entered, or, without their tree, one the samples made.
            let sampled = !self.meta.contexts && n as u32 >= self.layout.first_context_node();
            if n > 0 && node.count == 0 && !sampled {
                continue;
            }
            cid[n] = contexts.len() as u32;
            let parent = match n {
                0 => None,
                _ if self.is_fold(n) => Some(0),
                _ => Some(cid[node.parent as usize]),
            };
            contexts.push(Context {
                id: contexts.len() as u32,
                parent,
                function: (n > 0).then(|| fid[node.func as usize]),
                folded: self.is_fold(n),
                calls: node.count,
                cost: match n {
                    0 => self.sampled_cost(0, node.child, 0),
                    _ => self.sampled_cost(
                        node.incl.saturating_sub(node.child),
                        node.incl,
                        node.samples,
                    ),
                },
                alloc: node.alloc.non_empty(),
            });
        }
        contexts
    }

    /// The arcs: counts and sites from the arc tables, costs from the context tree.
    fn arcs(&self) -> anyhow::Result<Vec<Arc>> {
        let mut arcs = ArcCounts::default();
        for (site, &(callee, count)) in self.meta.direct_sites.iter().zip(&self.direct) {
            if count > 0 {
                let callee = self.name(callee);
                arcs.add(self.name(site.caller), callee, count, site.pos.as_ref());
            }
        }
        self.dynamic_arcs(&mut arcs)?;
        let mut arcs = arcs.0;
        // Costs from the context nodes (fold nodes' callers are lost): self over all the
        // arc's nodes, inclusive over its outermost ones; raw readings, converted once
        // summed.
        let tree = self.tree();
        let (keys, tree_arcs) = arc_keys(&tree, |n| !self.is_fold(n));
        let mut self_raw = vec![0u64; tree_arcs.len()];
        let mut self_samples = vec![0u64; tree_arcs.len()];
        for (node, key) in self.nodes.iter().zip(&keys) {
            if let Some(k) = *key {
                self_raw[k] = self_raw[k].saturating_add(node.incl.saturating_sub(node.child));
                self_samples[k] += node.samples;
            }
        }
        let total_raw = outermost_sums(
            tree.iter().map(|&(parent, _)| parent),
            &keys,
            &self.nodes.iter().map(|n| n.incl).collect::<Vec<_>>(),
            tree_arcs.len(),
        );
        for (k, &(caller, callee)) in tree_arcs.iter().enumerate() {
            let caller = caller.map_or_else(|| HOST.to_string(), |f| self.name(f as u32));
            if let Some(arc) = arcs.get_mut(&(caller, self.name(callee as u32))) {
                arc.cost = self.sampled_cost(self_raw[k], total_raw[k], self_samples[k]);
            }
        }
        let mut arcs: Vec<Arc> = arcs.into_values().collect();
        for arc in &mut arcs {
            arc.sites
                .sort_by(|x, y| (&x.pos.file, x.pos.line).cmp(&(&y.pos.file, y.pos.line)));
        }
        Ok(arcs)
    }

    /// The dynamic arc table's arcs (from the host, from an import's callbacks, through
    /// indirect call sites), added to `arcs`.
    fn dynamic_arcs(&self, arcs: &mut ArcCounts) -> anyhow::Result<()> {
        let l = self.layout;
        for slot in 0..l.dyn_arcs_cap {
            let at = l.dyn_arcs_off + slot * layout::DYN_ARC_SIZE;
            let callee_plus_one = self.raw.u32(at + 4)?;
            if callee_plus_one == 0 {
                continue;
            }
            let site = self.raw.u32(at)?;
            let count = self.raw.u64(at + 8)?;
            let callee = self.name(callee_plus_one - 1);
            if site == 0 {
                arcs.add(HOST.to_string(), callee, count, None);
            } else if site & layout::INDIRECT_SITE == 0 && site & layout::IMPORT_ENTRY != 0 {
                // The host called in while this import ran.
                let import = site & !layout::IMPORT_ENTRY;
                anyhow::ensure!(import < l.functions, "an arc from an unknown import");
                arcs.add(self.name(import), callee, count, None);
            } else {
                let s = self
                    .meta
                    .indirect_sites
                    .get((site & !layout::INDIRECT_SITE) as usize)
                    .context("an arc from an unknown call site")?;
                arcs.add(self.name(s.caller), callee, count, s.pos.as_ref());
            }
        }
        Ok(())
    }

    /// The activations open at the end, outermost first: from node `cur` up to the root.
    fn open_stack(&self, cur: u32) -> Vec<String> {
        let nodes = &self.nodes;
        let mut open_stack = Vec::new();
        let mut at = cur;
        while at != 0 && (at as usize) < nodes.len() && open_stack.len() < nodes.len() {
            open_stack.push(self.name(nodes[at as usize].func));
            at = nodes[at as usize].parent;
            if at == layout::NO_PARENT {
                break;
            }
        }
        open_stack.reverse();
        open_stack
    }
}

/// How a backtrace that lost its outermost frames begins.
const TRUNCATED: &str = "…";

/// Where a trapped run ended: the context tree's open activations (`tree`, outermost
/// first), unless the trap's `backtrace` (led by [`TRUNCATED`] where the host kept only its
/// innermost frames) goes deeper. It does where the exception that ended the run passed
/// through the thunks of imports that catch (Emscripten's `invoke_*`, which rethrow what is
/// not theirs): each thunk closed the activations it unwound, so the tree's stack ends at
/// the outermost of them. The backtrace then extends the tree's stack where the two
/// overlap, or follows it after a [`TRUNCATED`] where they do not.
fn deepest(tree: Vec<String>, backtrace: Vec<String>) -> Vec<String> {
    let (truncated, frames) = match backtrace.split_first() {
        Some((first, rest)) if first == TRUNCATED => (true, rest),
        _ => (false, &backtrace[..]),
    };
    if !truncated {
        return match frames.len() > tree.len() && frames.starts_with(&tree) {
            true => frames.to_vec(),
            false => tree,
        };
    }
    // The longest end of the tree's stack that the kept frames begin with.
    let overlap = (0..=tree.len().min(frames.len()))
        .rev()
        .find(|&n| tree[tree.len() - n..] == frames[..n])
        .unwrap_or(0);
    if overlap == frames.len() {
        return tree;
    }
    let mut stack = tree;
    if overlap == 0 {
        stack.push(TRUNCATED.to_string());
    }
    stack.extend_from_slice(&frames[overlap..]);
    stack
}

/// Arcs as the arc tables count them, by caller and callee name.
#[derive(Default)]
struct ArcCounts(BTreeMap<(String, String), Arc>);

impl ArcCounts {
    /// Counts `count` calls from `caller` to `callee`, made at `pos` when it is known.
    fn add(&mut self, caller: String, callee: String, count: u64, pos: Option<&SourcePos>) {
        let arc = self
            .0
            .entry((caller.clone(), callee.clone()))
            .or_insert_with(|| Arc::of_calls(caller, callee, 0));
        arc.count += count;
        if let Some(pos) = pos {
            match arc.sites.iter_mut().find(|s| s.pos == *pos) {
                Some(site) => site.count += count,
                None => arc.sites.push(ArcSite {
                    pos: pos.clone(),
                    count,
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{deepest, TRUNCATED};

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_trap_ends_where_the_deeper_of_the_tree_and_the_backtrace_says() {
        let tree = names(&["main", "outer"]);
        // A whole backtrace that goes deeper replaces the tree's stack.
        let whole = names(&["main", "outer", "invoke", "inner", "abort"]);
        assert_eq!(deepest(tree.clone(), whole.clone()), whole);
        // One that lost its outer frames extends it where they overlap...
        let kept = names(&[TRUNCATED, "outer", "invoke", "inner", "abort"]);
        assert_eq!(deepest(tree.clone(), kept), whole);
        // ...or follows it after a mark where they do not.
        let inner = names(&[TRUNCATED, "invoke", "inner", "abort"]);
        assert_eq!(
            deepest(tree.clone(), inner),
            names(&["main", "outer", TRUNCATED, "invoke", "inner", "abort"])
        );
        assert_eq!(
            deepest(Vec::new(), names(&[TRUNCATED, "inner", "abort"])),
            names(&[TRUNCATED, "inner", "abort"])
        );
        let short = names(&[TRUNCATED, "inner", "abort"]);
        assert_eq!(
            deepest(tree.clone(), short),
            names(&["main", "outer", TRUNCATED, "inner", "abort"])
        );
        // The tree's stack stays where the backtrace is no deeper, or disagrees.
        assert_eq!(deepest(tree.clone(), names(&["main", "outer"])), tree);
        assert_eq!(deepest(tree.clone(), names(&[TRUNCATED, "outer"])), tree);
        assert_eq!(deepest(tree.clone(), Vec::new()), tree);
        assert_eq!(deepest(tree.clone(), names(&["start", "x", "y"])), tree);
    }
}
