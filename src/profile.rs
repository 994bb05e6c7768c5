//! The profile: one data model that every report and output format is a view of.
//!
//! A profile is self-contained: it carries the names and source locations of its
//! functions, so a report never needs the build that made it. It is decoded from the
//! profiler's memory with the tables of [`crate::meta`].

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::layout::{self, Layout};
use crate::meta::{Meta, Metric};
use crate::symbols::SourcePos;

/// The `format` field of every profile file.
pub const FORMAT: &str = "wasmprof-profile";
/// Version of the profile file format.
pub const FORMAT_VERSION: u32 = 1;
/// The caller name of arcs that enter the module from the host.
pub const HOST: &str = "<host>";
/// The `format` field of a [`DumpFile`].
pub const DUMP_FORMAT: &str = "wasmprof-dump";

/// A whole profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// What was profiled: the module (or, merged, the modules).
    pub modules: Vec<String>,
    /// Whether every activation ended (false after a trap or an exit from deep inside).
    pub complete: bool,
    /// How each module's run ended.
    pub runs: Vec<RunInfo>,
    /// What was measured besides calls: `time` (the `*_ns` fields, wall-clock
    /// nanoseconds), `instructions` (the `*_instructions` fields) or `calls` (neither).
    pub metric: Metric,
    /// Functions that were called at least once.
    pub functions: Vec<Function>,
    /// Caller -> callee arcs, with counts and times.
    pub arcs: Vec<Arc>,
    /// The calling-context tree: node 0 is the host, every other node one call path.
    pub contexts: Vec<Context>,
    /// Function entries that went to a per-function fold node because the context tree
    /// was full (their paths are lost; counts and times are not).
    pub folded_entries: u64,
    /// Arcs that could not be recorded because the arc table was full.
    pub arcs_dropped: u64,
    /// The probes' own cost, when it was subtracted from the times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation: Option<ProbeCost>,
}

/// What the probes cost per call, as measured at start-up (see [`crate::calibrate`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbeCost {
    /// Probe time that falls inside an activation's own window: added to the callee's self
    /// time by every call (ns).
    pub in_callee_ns: f64,
    /// Probe time that falls outside the callee's window: added to the caller's self time
    /// by every call it makes (ns).
    pub in_caller_ns: f64,
}

/// How one run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The module that ran.
    pub module: String,
    /// Its exit code.
    pub exit_code: i32,
    /// The trap message, if it trapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trap: Option<String>,
    /// The activations open when the run ended, outermost first (empty after a clean run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_stack: Vec<String>,
    /// Wall time of the run.
    pub wall_ns: u64,
    /// The clock the module read (`tsc`, `instant`).
    #[serde(default)]
    pub clock: String,
}

/// One function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Function {
    /// Index in `functions`, which `contexts` refer to.
    pub id: u32,
    /// Demangled name, unique in the profile.
    pub name: String,
    /// Source file of the definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Line of the definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Imported: its time is time spent in the host.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub import: bool,
    /// Exact number of calls.
    pub calls: u64,
    /// Cost in the function itself, callees excluded (`self`), and with its callees,
    /// counted once per outermost activation (`total`).
    #[serde(flatten)]
    pub cost: Costs,
}

impl Function {
    /// The function's own weight in `metric`: its self time or self instructions, or, for
    /// the calls metric, its calls.
    pub fn own_weight(&self, metric: Metric) -> u64 {
        match metric {
            Metric::Calls => self.calls,
            other => self.cost.get(other).0,
        }
    }
}

/// Self and inclusive cost, in the profile's metric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Costs {
    /// Self time, in nanoseconds (0 unless the metric is time).
    pub self_ns: u64,
    /// Inclusive time, in nanoseconds (0 unless the metric is time).
    pub total_ns: u64,
    /// Self executed instructions (with the instructions metric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_instructions: Option<u64>,
    /// Inclusive executed instructions (with the instructions metric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_instructions: Option<u64>,
}

impl Costs {
    /// Costs of `self_` and `total` raw readings (clock ticks or instructions) of `metric`.
    fn from_raw(metric: Metric, self_: u64, total: u64, ticks_per_ns: f64) -> Costs {
        let ns = |ticks: u64| (ticks as f64 / ticks_per_ns).round() as u64;
        match metric {
            Metric::Calls => Costs::default(),
            Metric::Time => Costs {
                self_ns: ns(self_),
                total_ns: ns(total),
                ..Costs::default()
            },
            Metric::Instructions => Costs {
                self_instructions: Some(self_),
                total_instructions: Some(total),
                ..Costs::default()
            },
        }
    }

    /// Adds `other` in.
    pub fn add(&mut self, other: &Costs) {
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.self_ns += other.self_ns;
        self.total_ns += other.total_ns;
        self.self_instructions = sum(self.self_instructions, other.self_instructions);
        self.total_instructions = sum(self.total_instructions, other.total_instructions);
    }

    /// (self, total) in `metric`'s unit: nanoseconds, instructions, or (0, 0) for calls.
    pub fn get(&self, metric: Metric) -> (u64, u64) {
        match metric {
            Metric::Calls => (0, 0),
            Metric::Time => (self.self_ns, self.total_ns),
            Metric::Instructions => (
                self.self_instructions.unwrap_or(0),
                self.total_instructions.unwrap_or(0),
            ),
        }
    }
}

/// Calls from one function to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Arc {
    /// Name of the caller, or [`HOST`].
    pub caller: String,
    /// Name of the callee.
    pub callee: String,
    /// Exact number of calls.
    pub count: u64,
    /// The callee's self and inclusive cost in these calls (for a recursive arc, nested
    /// calls count again).
    #[serde(flatten)]
    pub cost: Costs,
    /// The call sites, with their counts, when known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<ArcSite>,
}

/// One call site of an arc.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArcSite {
    /// Where the call is.
    #[serde(flatten)]
    pub pos: SourcePos,
    /// Calls made there.
    pub count: u64,
}

/// One node of the calling-context tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
    /// Index in `contexts`.
    pub id: u32,
    /// Parent node; `None` for the root (the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    /// Function id; `None` for the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<u32>,
    /// This node collects entries whose path was lost when the tree was full.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub folded: bool,
    /// Calls along this path.
    pub calls: u64,
    /// Self and inclusive cost along this path.
    #[serde(flatten)]
    pub cost: Costs,
}

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
}

/// What a host without the Rust decoder (the JS runtime under node or in a browser) saves
/// after a run: the profiler's memory, base64-encoded, with the tables to decode it. Read
/// like a profile: [`Profile::read`] decodes it.
#[derive(Debug, Deserialize)]
pub struct DumpFile {
    /// [`crate::meta::VERSION`] of the runtime that wrote it.
    pub version: u32,
    /// The instrumented module's tables.
    pub meta: Meta,
    /// How the run ended (its `open_stack` is decoded from the memory).
    #[serde(flatten)]
    pub run: RunInfo,
    /// The used part of the profiler's memory, base64.
    pub memory: String,
    /// The context-tree node current at the end.
    pub cur: u32,
    /// Clock ticks per nanosecond.
    pub ticks_per_ns: f64,
}

impl DumpFile {
    /// Decodes the dump into a profile.
    pub fn decode(self) -> anyhow::Result<Profile> {
        use base64::Engine as _;
        anyhow::ensure!(
            self.version == crate::meta::VERSION,
            "a dump of version {}, this cargo-wasmprof reads version {}",
            self.version,
            crate::meta::VERSION
        );
        let memory = base64::engine::general_purpose::STANDARD
            .decode(self.memory.as_bytes())
            .context("its memory is not base64")?;
        let dump = Dump {
            memory,
            cur: self.cur,
            ticks_per_ns: self.ticks_per_ns,
            clock: self.run.clock.clone(),
        };
        Profile::decode(&self.meta, &dump, self.run)
    }
}

/// A little-endian reader over the profiler's memory.
struct Raw<'a>(&'a [u8]);

impl Raw<'_> {
    fn u32(&self, at: u32) -> anyhow::Result<u32> {
        let at = at as usize;
        let bytes = self
            .0
            .get(at..at + 4)
            .context("profiler memory is truncated")?;
        Ok(u32::from_le_bytes(bytes.try_into().expect("4 bytes")))
    }
    fn u64(&self, at: u32) -> anyhow::Result<u64> {
        let at = at as usize;
        let bytes = self
            .0
            .get(at..at + 8)
            .context("profiler memory is truncated")?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }
}

/// One node as the runtime left it.
struct RawNode {
    parent: u32,
    func: u32,
    count: u64,
    incl: u64,
    child: u64,
}

/// Sums `value` per function over the outermost nodes of a tree: those with no ancestor of
/// the same function. That is a function's inclusive cost counted once per outermost
/// activation, right under recursion. `nodes` gives each node's parent and function; node 0
/// is the root, and parents come before their children.
fn outermost_sums(
    nodes: impl Iterator<Item = (Option<usize>, Option<usize>)>,
    value: &[u64],
    functions: usize,
) -> Vec<u64> {
    let nodes: Vec<_> = nodes.collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, &(parent, _)) in nodes.iter().enumerate().skip(1) {
        children[parent.expect("non-root nodes have a parent")].push(i);
    }
    let mut sums = vec![0u64; functions];
    let mut on_path = vec![0u32; functions];
    let mut stack = vec![(0usize, false)];
    while let Some((i, leaving)) = stack.pop() {
        let function = nodes[i].1;
        if leaving {
            if let Some(f) = function {
                on_path[f] -= 1;
            }
            continue;
        }
        if let Some(f) = function {
            if on_path[f] == 0 {
                sums[f] = sums[f].saturating_add(value[i]);
            }
            on_path[f] += 1;
        }
        stack.push((i, true));
        stack.extend(children[i].iter().map(|&c| (c, false)));
    }
    sums
}

impl Profile {
    /// Decodes what one run of a module instrumented with `meta` left behind.
    pub fn decode(meta: &Meta, dump: &Dump, run: RunInfo) -> anyhow::Result<Profile> {
        let raw = Raw(&dump.memory);
        let cur = dump.cur;
        let metric = meta.metric;
        let cost =
            |self_: u64, total: u64| Costs::from_raw(metric, self_, total, dump.ticks_per_ns);
        let l: &Layout = &meta.layout;
        anyhow::ensure!(
            raw.u32(layout::HDR_MAGIC)? == layout::MAGIC,
            "profiler memory has no WPRF header"
        );
        let node_count = raw.u32(layout::HDR_NODE_COUNT)?.min(l.nodes_cap);
        let node = |n: u32| -> anyhow::Result<RawNode> {
            let at = l.nodes_off + n * layout::NODE_SIZE;
            Ok(RawNode {
                parent: raw.u32(at + layout::NODE_PARENT)?,
                func: raw.u32(at + layout::NODE_FUNC)?,
                count: raw.u64(at + layout::NODE_COUNT)?,
                incl: raw.u64(at + layout::NODE_INCL)?,
                child: raw.u64(at + layout::NODE_CHILD)?,
            })
        };

        // Raw nodes: the root, the fold nodes (function f at node f + 1), the contexts.
        let mut nodes = Vec::with_capacity(node_count as usize);
        for n in 0..node_count {
            let mut raw_node = node(n)?;
            if n == 0 {
                raw_node.parent = layout::NO_PARENT;
                raw_node.func = layout::NO_PARENT;
            } else if n < l.first_context_node() {
                raw_node.parent = layout::NO_PARENT;
                raw_node.func = n - 1;
            } else {
                anyhow::ensure!(
                    raw_node.parent < n && raw_node.func < l.functions,
                    "context node {n} has parent {} and function {}, not an earlier node and a function",
                    raw_node.parent,
                    raw_node.func
                );
            }
            nodes.push(raw_node);
        }
        // The probes leave a node's tree children out of its cost in children (only what
        // went to fold nodes is there): add their inclusive costs.
        for n in l.first_context_node() as usize..nodes.len() {
            let (parent, incl) = (nodes[n].parent as usize, nodes[n].incl);
            nodes[parent].child = nodes[parent].child.saturating_add(incl);
        }

        // Self cost sums over the nodes of each function, in raw readings (converted once
        // summed, so that rounding cannot make self exceed total).
        let nf = l.functions as usize;
        // Calls: with a cost, the sum of the function's context nodes (fold nodes
        // included); for the calls metric, the function's own counter.
        let mut self_ticks = vec![0u64; nf];
        let mut node_calls = vec![0u64; nf];
        for n in nodes.iter().skip(1) {
            self_ticks[n.func as usize] += n.incl.saturating_sub(n.child);
            node_calls[n.func as usize] += n.count;
        }

        // Inclusive cost, once per outermost activation; a fold node's entries (their
        // paths lost) count as outermost.
        let total_ticks = outermost_sums(
            nodes.iter().enumerate().map(|(n, raw_node)| match n {
                0 => (None, None),
                _ if (n as u32) < l.first_context_node() => (Some(0), Some(raw_node.func as usize)),
                _ => (Some(raw_node.parent as usize), Some(raw_node.func as usize)),
            }),
            &nodes.iter().map(|n| n.incl).collect::<Vec<_>>(),
            nf,
        );

        // Each direct site's callee and count, read once: the arcs' counts, and with the
        // calls metric the callees' calls too (a direct call is counted at its site alone,
        // the others in the function's counter).
        let direct: Vec<(u32, u64)> = meta
            .direct_sites
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
            .collect::<anyhow::Result<_>>()?;
        let mut direct_calls = vec![0u64; nf];
        if metric == Metric::Calls {
            for &(callee, count) in &direct {
                let calls = &mut direct_calls[callee as usize];
                *calls = calls.saturating_add(count);
            }
        }

        // Functions that ran, renumbered densely.
        let mut fid = vec![u32::MAX; nf];
        let mut functions = Vec::new();
        for f in 0..nf {
            let calls = match metric {
                Metric::Calls => raw
                    .u64(l.calls_off + 8 * f as u32)?
                    .saturating_add(direct_calls[f]),
                _ => node_calls[f],
            };
            if calls == 0 {
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
                cost: cost(self_ticks[f], total_ticks[f]),
            });
        }

        // Contexts: the root, the fold nodes that were used, then every context.
        let mut cid = vec![u32::MAX; nodes.len()];
        let mut contexts = Vec::new();
        for (n, raw_node) in nodes.iter().enumerate() {
            let is_fold = n > 0 && (n as u32) < l.first_context_node();
            if n > 0 && raw_node.count == 0 {
                continue;
            }
            cid[n] = contexts.len() as u32;
            let parent = match n {
                0 => None,
                _ if is_fold => Some(0),
                _ => Some(cid[raw_node.parent as usize]),
            };
            contexts.push(Context {
                id: contexts.len() as u32,
                parent,
                function: (n > 0).then(|| fid[raw_node.func as usize]),
                folded: is_fold,
                calls: raw_node.count,
                cost: match n {
                    0 => cost(0, raw_node.child),
                    _ => cost(raw_node.incl.saturating_sub(raw_node.child), raw_node.incl),
                },
            });
        }

        // Arcs: counts and sites from the arc tables, times from the context tree.
        let name = |f: u32| meta.functions[f as usize].symbol.name.clone();
        let mut arcs: BTreeMap<(String, String), Arc> = BTreeMap::new();
        let mut add = |caller: String, callee: u32, count: u64, pos: Option<&SourcePos>| {
            let arc = arcs
                .entry((caller.clone(), name(callee)))
                .or_insert_with(|| Arc {
                    caller,
                    callee: name(callee),
                    count: 0,
                    cost: Costs::default(),
                    sites: Vec::new(),
                });
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
        };
        for (site, &(callee, count)) in meta.direct_sites.iter().zip(&direct) {
            if count > 0 {
                add(name(site.caller), callee, count, site.pos.as_ref());
            }
        }
        for slot in 0..l.dyn_arcs_cap {
            let at = l.dyn_arcs_off + slot * layout::DYN_ARC_SIZE;
            let callee_plus_one = raw.u32(at + 4)?;
            if callee_plus_one == 0 {
                continue;
            }
            let site = raw.u32(at)?;
            let count = raw.u64(at + 8)?;
            if site == 0 {
                add(HOST.to_string(), callee_plus_one - 1, count, None);
            } else {
                let s = meta
                    .indirect_sites
                    .get((site & !layout::INDIRECT_SITE) as usize)
                    .context("an arc from an unknown call site")?;
                add(name(s.caller), callee_plus_one - 1, count, s.pos.as_ref());
            }
        }
        // Raw readings summed per arc, converted once summed.
        let mut arc_raw: HashMap<(String, String), (u64, u64)> = HashMap::new();
        for n in nodes.iter().skip(l.first_context_node() as usize) {
            let caller = match n.parent {
                0 => HOST.to_string(),
                p => name(nodes[p as usize].func),
            };
            let sums = arc_raw.entry((caller, name(n.func))).or_default();
            sums.0 += n.incl.saturating_sub(n.child);
            sums.1 += n.incl;
        }
        for (key, (self_, total)) in arc_raw {
            if let Some(arc) = arcs.get_mut(&key) {
                arc.cost = cost(self_, total);
            }
        }

        // The open activations, from the current node up to the root.
        let mut open_stack = Vec::new();
        let mut at = cur;
        while at != 0 && (at as usize) < nodes.len() && open_stack.len() < nodes.len() {
            open_stack.push(name(nodes[at as usize].func));
            at = nodes[at as usize].parent;
            if at == layout::NO_PARENT {
                break;
            }
        }
        open_stack.reverse();
        let complete = open_stack.is_empty();
        let mut arcs: Vec<Arc> = arcs.into_values().collect();
        arcs.iter_mut().for_each(|a| {
            a.sites
                .sort_by(|x, y| (&x.pos.file, x.pos.line).cmp(&(&y.pos.file, y.pos.line)))
        });
        Ok(Profile {
            format: FORMAT.to_string(),
            version: FORMAT_VERSION,
            modules: vec![run.module.clone()],
            complete,
            runs: vec![RunInfo {
                open_stack,
                clock: dump.clock.clone(),
                ..run
            }],
            metric,
            functions,
            arcs,
            contexts,
            folded_entries: raw.u64(layout::HDR_FOLDED)?,
            arcs_dropped: raw.u64(layout::HDR_ARCS_DROPPED)?,
            compensation: None,
        })
    }

    /// Merges several profiles into one: functions by name, file and line; arcs by caller
    /// and callee; contexts by call path.
    pub fn merge(profiles: &[Profile]) -> Profile {
        let mut out = Profile {
            format: FORMAT.to_string(),
            version: FORMAT_VERSION,
            modules: Vec::new(),
            complete: true,
            runs: Vec::new(),
            // The profiles of one run share their metric.
            metric: profiles.first().map_or(Metric::Time, |p| p.metric),
            functions: Vec::new(),
            arcs: Vec::new(),
            contexts: vec![Context {
                id: 0,
                parent: None,
                function: None,
                folded: false,
                calls: 0,
                cost: Costs::default(),
            }],
            folded_entries: 0,
            arcs_dropped: 0,
            // The profiles of one run were compensated alike.
            compensation: profiles.first().and_then(|p| p.compensation),
        };
        type FnKey = (String, Option<String>, Option<u32>);
        let mut function_ids: HashMap<FnKey, u32> = HashMap::new();
        let mut arc_ids: HashMap<(String, String), usize> = HashMap::new();
        let mut context_ids: HashMap<(u32, Option<u32>, bool), u32> = HashMap::new();
        for p in profiles {
            out.modules.extend(p.modules.iter().cloned());
            out.runs.extend(p.runs.iter().cloned());
            out.complete &= p.complete;
            out.folded_entries += p.folded_entries;
            out.arcs_dropped += p.arcs_dropped;
            let mut fmap = Vec::with_capacity(p.functions.len());
            for f in &p.functions {
                let key = (f.name.clone(), f.file.clone(), f.line);
                let id = *function_ids.entry(key).or_insert_with(|| {
                    out.functions.push(Function {
                        id: out.functions.len() as u32,
                        calls: 0,
                        cost: Costs::default(),
                        ..f.clone()
                    });
                    out.functions.len() as u32 - 1
                });
                let g = &mut out.functions[id as usize];
                g.calls += f.calls;
                g.cost.add(&f.cost);
                fmap.push(id);
            }
            for a in &p.arcs {
                let key = (a.caller.clone(), a.callee.clone());
                let i = *arc_ids.entry(key).or_insert_with(|| {
                    out.arcs.push(Arc {
                        count: 0,
                        cost: Costs::default(),
                        sites: Vec::new(),
                        ..a.clone()
                    });
                    out.arcs.len() - 1
                });
                let b = &mut out.arcs[i];
                b.count += a.count;
                b.cost.add(&a.cost);
                for s in &a.sites {
                    match b.sites.iter_mut().find(|t| t.pos == s.pos) {
                        Some(t) => t.count += s.count,
                        None => b.sites.push(s.clone()),
                    }
                }
            }
            // Contexts come parents first, so a parent's new id is known before its children.
            let mut cmap = vec![0u32; p.contexts.len()];
            for c in &p.contexts {
                let new_id = match c.parent {
                    None => 0,
                    Some(parent) => {
                        let key = (
                            cmap[parent as usize],
                            c.function.map(|f| fmap[f as usize]),
                            c.folded,
                        );
                        *context_ids.entry(key).or_insert_with(|| {
                            out.contexts.push(Context {
                                id: out.contexts.len() as u32,
                                parent: Some(key.0),
                                function: key.1,
                                folded: c.folded,
                                calls: 0,
                                cost: Costs::default(),
                            });
                            out.contexts.len() as u32 - 1
                        })
                    }
                };
                cmap[c.id as usize] = new_id;
                let d = &mut out.contexts[new_id as usize];
                d.calls += c.calls;
                d.cost.add(&c.cost);
            }
        }
        out
    }

    /// Subtracts the probes' own cost from the times, in the calling-context tree: each
    /// context loses `in_callee` per call and `in_caller` per call it makes from its self
    /// time; inclusive times are then rebuilt from the corrected self times, and functions
    /// and arcs summed again from the contexts. Returns false, and changes nothing, when
    /// the profile does not measure time or its tree was folded (paths were lost).
    pub fn compensate(&mut self, cost: ProbeCost) -> bool {
        if self.metric != Metric::Time || self.folded_entries > 0 || self.compensation.is_some() {
            return false;
        }
        let n = self.contexts.len();
        let parent = |c: &Context| c.parent.map(|p| p as usize);
        let mut child_calls = vec![0u64; n];
        for c in &self.contexts[1..] {
            child_calls[parent(c).expect("non-root contexts have a parent")] += c.calls;
        }
        let mut self_ns = vec![0u64; n];
        for (i, c) in self.contexts.iter().enumerate().skip(1) {
            let probes =
                c.calls as f64 * cost.in_callee_ns + child_calls[i] as f64 * cost.in_caller_ns;
            self_ns[i] = (c.cost.self_ns as f64 - probes).max(0.0).round() as u64;
        }
        // Parents come before children: sum inclusive times from the leaves up.
        let mut total_ns = self_ns.clone();
        for i in (1..n).rev() {
            let p = parent(&self.contexts[i]).expect("non-root contexts have a parent");
            total_ns[p] += total_ns[i];
        }
        for (i, c) in self.contexts.iter_mut().enumerate() {
            c.cost.self_ns = self_ns[i];
            c.cost.total_ns = total_ns[i];
        }

        // Functions: self over all their contexts, total over their outermost ones.
        let totals = outermost_sums(
            self.contexts
                .iter()
                .map(|c| (c.parent.map(|p| p as usize), c.function.map(|f| f as usize))),
            &total_ns,
            self.functions.len(),
        );
        for (f, total) in self.functions.iter_mut().zip(totals) {
            f.cost.self_ns = 0;
            f.cost.total_ns = total;
        }
        for (c, &ns) in self.contexts.iter().zip(&self_ns) {
            if let Some(f) = c.function {
                self.functions[f as usize].cost.self_ns += ns;
            }
        }

        // Arcs: the callee's contexts under the caller.
        let mut sums: HashMap<(String, String), (u64, u64)> = HashMap::new();
        for (i, c) in self.contexts.iter().enumerate().skip(1) {
            let caller = match self.contexts[parent(c).expect("has a parent")].function {
                Some(f) => self.functions[f as usize].name.clone(),
                None => HOST.to_string(),
            };
            let callee = self.functions
                [c.function.expect("non-root contexts have a function") as usize]
                .name
                .clone();
            let sum = sums.entry((caller, callee)).or_default();
            sum.0 += self_ns[i];
            sum.1 += total_ns[i];
        }
        for arc in &mut self.arcs {
            let (self_, total) = sums
                .get(&(arc.caller.clone(), arc.callee.clone()))
                .copied()
                .unwrap_or_default();
            arc.cost.self_ns = self_;
            arc.cost.total_ns = total;
        }
        self.compensation = Some(cost);
        true
    }

    /// Reads a profile file, or a [`DumpFile`] that it decodes, checking the format. Errors
    /// do not repeat the path.
    pub fn read(path: &Path) -> anyhow::Result<Profile> {
        let text = std::fs::read(path).context("cannot read it")?;
        let value: serde_json::Value = serde_json::from_slice(&text).context("not JSON")?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {
                serde_json::from_value(value).context("not a valid cargo-wasmprof profile")
            }
            Some(DUMP_FORMAT) => serde_json::from_value::<DumpFile>(value)
                .context("not a valid cargo-wasmprof dump")?
                .decode()
                .context("cannot decode the dump"),
            _ => anyhow::bail!(
                "not a cargo-wasmprof profile (no \"format\": \"{FORMAT}\" or \"{DUMP_FORMAT}\")"
            ),
        }
    }

    /// Writes the profile as JSON, atomically (a temporary file renamed into place).
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let json = serde_json::to_vec_pretty(self).expect("profiles serialize");
        crate::fsutil::write_atomic(path, &json)
    }

    /// The function with this name.
    pub fn function_named(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// The arc from `caller` to `callee`, by name.
    pub fn arc(&self, caller: &str, callee: &str) -> Option<&Arc> {
        self.arcs
            .iter()
            .find(|a| a.caller == caller && a.callee == callee)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(id: u32, name: &str, calls: u64, self_ns: u64, total_ns: u64) -> Function {
        Function {
            id,
            name: name.into(),
            file: None,
            line: None,
            import: false,
            calls,
            cost: Costs {
                self_ns,
                total_ns,
                ..Costs::default()
            },
        }
    }

    fn context(
        id: u32,
        parent: Option<u32>,
        function: Option<u32>,
        calls: u64,
        self_ns: u64,
        total_ns: u64,
    ) -> Context {
        Context {
            id,
            parent,
            function,
            folded: false,
            calls,
            cost: Costs {
                self_ns,
                total_ns,
                ..Costs::default()
            },
        }
    }

    fn arc(caller: &str, callee: &str, count: u64) -> Arc {
        Arc {
            caller: caller.into(),
            callee: callee.into(),
            count,
            cost: Costs::default(),
            sites: Vec::new(),
        }
    }

    /// host -> main (1 call) -> leaf (10 calls); host -> f (1 call) -> f (1 call).
    fn profile() -> Profile {
        Profile {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            modules: vec!["m".into()],
            complete: true,
            runs: Vec::new(),
            metric: Metric::Time,
            functions: vec![
                function(0, "main", 1, 1000, 2000),
                function(1, "leaf", 10, 1000, 1000),
                function(2, "f", 2, 200, 200),
            ],
            arcs: vec![
                arc(HOST, "main", 1),
                arc("main", "leaf", 10),
                arc(HOST, "f", 1),
                arc("f", "f", 1),
            ],
            contexts: vec![
                context(0, None, None, 0, 0, 2200),
                context(1, Some(0), Some(0), 1, 1000, 2000),
                context(2, Some(1), Some(1), 10, 1000, 1000),
                context(3, Some(0), Some(2), 1, 100, 200),
                context(4, Some(3), Some(2), 1, 100, 100),
            ],
            folded_entries: 0,
            arcs_dropped: 0,
            compensation: None,
        }
    }

    #[test]
    fn compensation_subtracts_the_probes_and_rebuilds_inclusive_times() {
        let mut p = profile();
        let cost = ProbeCost {
            in_callee_ns: 10.0,
            in_caller_ns: 20.0,
        };
        assert!(p.compensate(cost));
        let costs = |name: &str| {
            let c = p.function_named(name).unwrap().cost;
            (c.self_ns, c.total_ns)
        };
        // main: 1000 - 1 call * 10 - 10 calls made * 20; leaf: 1000 - 10 calls * 10.
        assert_eq!(costs("leaf"), (900, 900));
        assert_eq!(costs("main"), (790, 790 + 900));
        // f: the outer activation made one call, the inner none; total counts the outer once.
        assert_eq!(costs("f"), ((100 - 10 - 20) + (100 - 10), 70 + 90));
        let arc = |caller: &str, callee: &str| {
            let c = p.arc(caller, callee).unwrap().cost;
            (c.self_ns, c.total_ns)
        };
        assert_eq!(arc("main", "leaf"), (900, 900));
        assert_eq!(arc(HOST, "main"), (790, 1690));
        assert_eq!(p.contexts[0].cost.total_ns, 1690 + 160);
        assert_eq!(p.compensation, Some(cost));
        // Only once.
        assert!(!p.compensate(cost));
    }

    #[test]
    fn folded_or_untimed_profiles_are_left_alone() {
        let cost = ProbeCost {
            in_callee_ns: 10.0,
            in_caller_ns: 20.0,
        };
        let mut folded = profile();
        folded.folded_entries = 1;
        assert!(!folded.compensate(cost));
        assert_eq!(
            folded,
            Profile {
                folded_entries: 1,
                ..profile()
            }
        );
        let mut counted = Profile {
            metric: Metric::Instructions,
            ..profile()
        };
        assert!(!counted.compensate(cost));
    }
}
