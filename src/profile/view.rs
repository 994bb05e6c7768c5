//! Views of a profile: pprof's `--focus` and `--ignore` (only the stacks through some
//! functions, or all but those) and `--by file|crate` (functions grouped). A view is a new
//! [`Profile`], rebuilt from the calling-context tree, so every format draws it as it
//! draws any profile, and every figure in it is an exact sum of the whole profile's.

use rustc_hash::FxHashMap;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::counts::{with_counts, Tables};
use super::outermost::{arc_keys, outermost_sums, TreeNode};
use super::{Arc, Context, Costs, Function, Profile, HOST};
use crate::symbols::without_index;

/// What a view keeps of a profile and how it groups its functions.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Keep only the stacks through a function whose name matches, re-rooted at the
    /// outermost such function (its callers are left out).
    pub focus: Option<Regex>,
    /// Leave out the stacks through a function whose name matches.
    pub ignore: Option<Regex>,
    /// How functions are grouped.
    pub by: Grouping,
}

/// How a view groups functions (`--by`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Grouping {
    /// No grouping.
    #[default]
    Function,
    /// By the file a function is defined in.
    File,
    /// By the crate a function is of ([`crate_of`]).
    Crate,
}

/// What a view kept of its profile, for the reports to say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct View {
    /// The view's options as a person reads them (`focus 'fib', by crate`).
    pub description: String,
    /// How its functions are grouped.
    pub by: Grouping,
    /// The whole profile's cost in its metric (its calls for the calls metric), of which
    /// the view shows a part.
    pub whole: u64,
}

impl Filter {
    /// Whether the view is the profile itself.
    pub fn is_identity(&self) -> bool {
        self.focus.is_none() && self.ignore.is_none() && self.by == Grouping::Function
    }

    fn description(&self) -> String {
        let mut parts = Vec::new();
        if let Some(re) = &self.focus {
            parts.push(format!("focus '{re}'"));
        }
        if let Some(re) = &self.ignore {
            parts.push(format!("ignore '{re}'"));
        }
        match self.by {
            Grouping::Function => {}
            Grouping::File => parts.push("by file".to_string()),
            Grouping::Crate => parts.push("by crate".to_string()),
        }
        parts.join(", ")
    }
}

/// A node of the view's tree while it is built.
#[derive(Clone, Default)]
struct Node {
    parent: Option<usize>,
    group: Option<usize>,
    folded: bool,
    calls: u64,
    self_: u64,
    samples: Option<u64>,
    alloc: Option<super::Allocs>,
}

impl Node {
    /// Adds a context's own cost (`self_`, its samples, its allocations) in.
    fn add_own(&mut self, self_: u64, c: &Context) {
        self.self_ += self_;
        self.samples = add(self.samples, c.cost.self_samples);
        if let Some(a) = &c.alloc {
            self.alloc.get_or_insert_with(Default::default).add(a);
        }
    }
}

impl Profile {
    /// The view of this profile that `filter` asks for (the profile itself when it asks
    /// for nothing). Focus and ignore need the calling-context tree, which the calls metric
    /// does not record; grouping works on any profile.
    pub fn view(&self, filter: &Filter) -> anyhow::Result<Profile> {
        if filter.is_identity() {
            return Ok(self.clone());
        }
        let whole = self
            .functions
            .iter()
            .map(|f| f.own_weight(self.metric))
            .sum();
        let view = View {
            description: filter.description(),
            by: filter.by,
            whole,
        };
        let (groups, group_of) = groups(self, filter.by);
        let (functions, arcs, contexts) = if self.contexts.len() > 1 {
            // A name as the report prints it, or whole (with the ` [func N]` that tells
            // apart functions of one module that share a name).
            let matches = |re: &Option<Regex>| -> Vec<bool> {
                self.functions
                    .iter()
                    .map(|f| {
                        re.as_ref().is_some_and(|re| {
                            let plain = without_index(&f.name);
                            re.is_match(&f.name)
                                || (plain.len() < f.name.len() && re.is_match(plain))
                        })
                    })
                    .collect()
            };
            let focused = filter.focus.is_some().then(|| matches(&filter.focus));

            let tables = self.view_tree(
                focused.as_deref(),
                (&matches(&filter.ignore), &vec![false; group_of.len()]),
                filter.by,
                &groups,
                &group_of,
            );
            match (self.sampled_contexts, filter.by) {
                (false, _) => tables,
                (true, Grouping::Function) => {
                    with_counts(self.counted(&vec![true; group_of.len()]), tables, false)
                }
                (true, _) => with_counts(self.group_counts(&groups, &group_of), tables, false),
            }
        } else {
            anyhow::ensure!(
                filter.focus.is_none() && filter.ignore.is_none(),
                "--focus and --ignore need calling contexts, which the calls metric does not record; profile with the default metric, time"
            );
            let (functions, arcs) = self.group_counts(&groups, &group_of);
            (functions, arcs, self.contexts.clone())
        };
        let lines = match filter.by {
            Grouping::Function => self.lines_of_whole(&functions),
            _ => Vec::new(),
        };
        Ok(Profile {
            view: Some(view),
            ..self.with_tables(functions, arcs, contexts, lines)
        })
    }

    /// [`Profile::view`] of a profile not needed whole any more: the profile itself, not a
    /// copy, when `filter` asks for nothing.
    pub fn into_view(self, filter: &Filter) -> anyhow::Result<Profile> {
        match filter.is_identity() {
            true => Ok(self),
            false => self.view(filter),
        }
    }

    /// The stacks through the functions `chosen` marks (by function id), re-rooted at the
    /// outermost of them, as `--focus` keeps those through the functions it matches; the
    /// profile itself without a calling-context tree. The text report shows the program's
    /// own stacks this way. With sampled contexts, which count no calls, the functions are
    /// those `keep` marks, with their calls and arcs from the whole profile (a function no
    /// kept sample found has no cost).
    pub fn focused_on(&self, chosen: &[bool], keep: &[bool]) -> Profile {
        if self.contexts.len() <= 1 {
            return self.clone();
        }
        let (groups, group_of) = groups(self, Grouping::Function);
        let none = vec![false; self.functions.len()];
        let tables = self.view_tree(
            Some(chosen),
            (&none, &none),
            Grouping::Function,
            &groups,
            &group_of,
        );
        let (functions, arcs, contexts) = match self.sampled_contexts {
            true => with_counts(self.counted(keep), tables, true),
            false => tables,
        };
        let lines = self.lines_of_whole(&functions);
        self.with_tables(functions, arcs, contexts, lines)
    }

    /// The per-line costs of the view's `functions` that kept all their calls: a
    /// segment's runs are not told apart by calling context, so a function some of whose
    /// calls the view left out has no lines in it.
    pub(super) fn lines_of_whole(&self, functions: &[Function]) -> Vec<super::LineCost> {
        let whole: FxHashMap<&str, u64> = self
            .functions
            .iter()
            .map(|f| (f.name.as_str(), f.calls))
            .collect();
        let all_calls: rustc_hash::FxHashSet<&str> = functions
            .iter()
            .filter(|f| whole.get(f.name.as_str()) == Some(&f.calls))
            .map(|f| f.name.as_str())
            .collect();
        self.lines
            .iter()
            .filter(|l| all_calls.contains(l.function.as_str()))
            .cloned()
            .collect()
    }

    /// The view of a profile with a calling-context tree: the tree filtered (`focused`
    /// functions, none of the `ignored`, the `hidden` folded into their callers), re-rooted
    /// and grouped, then functions and arcs summed from it as the decoder sums them.
    pub(super) fn view_tree(
        &self,
        focused: Option<&[bool]>,
        (ignored, hidden): (&[bool], &[bool]),
        by: Grouping,
        groups: &[Function],
        group_of: &[usize],
    ) -> Tables {
        let nodes = self.view_nodes(focused, (ignored, hidden), by, group_of);
        // Parents come before their children: inclusive costs from the leaves up.
        let mut total: Vec<u64> = nodes.iter().map(|node| node.self_).collect();
        for j in (1..nodes.len()).rev() {
            let parent = nodes[j].parent.expect("non-root nodes have a parent");
            total[parent] += total[j];
        }
        let metric = self.metric;
        let (mut functions, fid) = view_functions(metric, &nodes, groups);
        let tree: Vec<TreeNode> = nodes
            .iter()
            .map(|node| (node.parent, node.group.and_then(|g| fid[g])))
            .collect();
        let parents = || tree.iter().map(|&(parent, _)| parent);
        let keys: Vec<Option<usize>> = tree.iter().map(|&(_, f)| f).collect();
        for (f, sum) in
            functions
                .iter_mut()
                .zip(outermost_sums(parents(), &keys, &total, fid.len()))
        {
            f.cost.set_total(metric, sum);
        }
        let contexts = nodes
            .iter()
            .enumerate()
            .map(|(j, node)| Context {
                id: j as u32,
                parent: node.parent.map(|p| p as u32),
                function: tree[j].1.map(|f| f as u32),
                folded: node.folded,
                calls: node.calls,
                cost: Costs::in_unit(metric, node.self_, total[j], node.samples),
                alloc: node.alloc,
            })
            .collect();
        let arcs = self.view_arcs(&nodes, &tree, &total, &functions, by);
        (functions, arcs, contexts)
    }

    /// The view's tree: the contexts through a `focused` function (or all) and none of
    /// the `ignored`, the outermost focused one hanging from the root, grouped by
    /// `group_of` (a call inside a group is the group's own cost), a `hidden` function's
    /// cost its caller's own.
    fn view_nodes(
        &self,
        focused: Option<&[bool]>,
        (ignored, hidden): (&[bool], &[bool]),
        by: Grouping,
        group_of: &[usize],
    ) -> Vec<Node> {
        let n = self.contexts.len();
        // alive: no ignored function on the path; inside: a focused one is (or no focus).
        let mut alive = vec![true; n];
        let mut inside = vec![focused.is_none(); n];
        let mut nodes = vec![Node::default()];
        let mut new_of = vec![usize::MAX; n];
        new_of[0] = 0;
        let mut index: FxHashMap<(usize, usize, bool), usize> = FxHashMap::default();
        for (i, c) in self.contexts.iter().enumerate().skip(1) {
            let (Some(parent), Some(f)) = (c.parent.map(|p| p as usize), c.function) else {
                continue;
            };
            let f = f as usize;
            alive[i] = alive[parent] && !ignored[f];
            inside[i] = inside[parent] || focused.is_some_and(|chosen| chosen[f]);
            if !alive[i] || !inside[i] {
                continue;
            }
            // The outermost focused function hangs from the root.
            let up = if inside[parent] { new_of[parent] } else { 0 };
            let group = group_of[f];
            let (self_, _) = c.cost.get(self.metric);
            let grouped = by != Grouping::Function && nodes[up].group == Some(group);
            if up != 0 && !c.folded && (grouped || hidden[f]) {
                // A call inside the group, or of a hidden function: its cost is the caller's.
                nodes[up].add_own(self_, c);
                new_of[i] = up;
                continue;
            }
            let id = *index.entry((up, group, c.folded)).or_insert_with(|| {
                nodes.push(Node {
                    parent: Some(up),
                    group: Some(group),
                    folded: c.folded,
                    ..Node::default()
                });
                nodes.len() - 1
            });
            nodes[id].calls += c.calls;
            nodes[id].add_own(self_, c);
            new_of[i] = id;
        }
        nodes
    }

    /// The view's arcs: each node's caller and callee (a fold node's caller is lost), their
    /// calls and costs summed from the `nodes` of `tree`, inclusive costs once per
    /// outermost call.
    fn view_arcs(
        &self,
        nodes: &[Node],
        tree: &[TreeNode],
        total: &[u64],
        functions: &[Function],
        by: Grouping,
    ) -> Vec<Arc> {
        let metric = self.metric;
        let (arc_of, tree_arcs) = arc_keys(tree, |j| !nodes[j].folded);
        let mut arcs: Vec<Arc> = tree_arcs
            .iter()
            .map(|&(caller, callee)| Arc {
                caller: caller.map_or_else(|| HOST.to_string(), |f| functions[f].name.clone()),
                callee: functions[callee].name.clone(),
                count: 0,
                cost: Costs::default(),
                sites: Vec::new(),
            })
            .collect();
        for (node, key) in nodes.iter().zip(&arc_of) {
            if let Some(k) = *key {
                arcs[k].count += node.calls;
                arcs[k]
                    .cost
                    .add(&Costs::in_unit(metric, node.self_, 0, node.samples));
            }
        }
        let parents = tree.iter().map(|&(parent, _)| parent);
        for (arc, sum) in
            arcs.iter_mut()
                .zip(outermost_sums(parents, &arc_of, total, tree_arcs.len()))
        {
            arc.cost.set_total(metric, sum);
        }
        // The call sites stay where the view kept every call of the arc.
        if by == Grouping::Function {
            let whole: FxHashMap<(&str, &str), &Arc> = self
                .arcs
                .iter()
                .map(|a| ((a.caller.as_str(), a.callee.as_str()), a))
                .collect();
            for arc in &mut arcs {
                if let Some(whole) = whole.get(&(arc.caller.as_str(), arc.callee.as_str())) {
                    if whole.count == arc.count {
                        arc.sites = whole.sites.clone();
                    }
                }
            }
        }
        arcs
    }

    /// Grouped counts without a tree (the calls metric): a group's calls are the calls
    /// into it from outside, its arcs those between groups.
    fn group_counts(&self, groups: &[Function], group_of: &[usize]) -> (Vec<Function>, Vec<Arc>) {
        let group_named: FxHashMap<&str, usize> = self
            .functions
            .iter()
            .map(|f| (f.name.as_str(), group_of[f.id as usize]))
            .collect();
        let mut calls = vec![0u64; groups.len()];
        for f in &self.functions {
            calls[group_of[f.id as usize]] += f.calls;
        }
        let mut between: FxHashMap<(String, String), u64> = FxHashMap::default();
        for a in &self.arcs {
            let Some(&callee) = group_named.get(a.callee.as_str()) else {
                continue;
            };
            let caller = group_named.get(a.caller.as_str()).copied();
            if caller == Some(callee) {
                calls[callee] -= a.count.min(calls[callee]);
                continue;
            }
            let caller = caller.map_or_else(|| HOST.to_string(), |g| groups[g].name.clone());
            *between
                .entry((caller, groups[callee].name.clone()))
                .or_default() += a.count;
        }
        let functions = groups
            .iter()
            .zip(&calls)
            .filter(|(_, &calls)| calls > 0)
            .enumerate()
            .map(|(id, (g, &calls))| Function {
                id: id as u32,
                calls,
                ..g.clone()
            })
            .collect();
        let mut arcs: Vec<Arc> = between
            .into_iter()
            .map(|((caller, callee), count)| Arc::of_calls(caller, callee, count))
            .collect();
        arcs.sort_by(|a, b| (&a.caller, &a.callee).cmp(&(&b.caller, &b.callee)));
        (functions, arcs)
    }
}

/// The view's functions: the groups its `nodes` ran, renumbered densely, their calls and
/// self costs summed; and each group's function id.
fn view_functions(
    metric: crate::meta::Metric,
    nodes: &[Node],
    groups: &[Function],
) -> (Vec<Function>, Vec<Option<usize>>) {
    let mut fid = vec![None; groups.len()];
    let mut functions: Vec<Function> = Vec::new();
    for node in &nodes[1..] {
        let g = node.group.expect("non-root nodes have a group");
        let id = *fid[g].get_or_insert_with(|| {
            functions.push(Function {
                id: functions.len() as u32,
                calls: 0,
                cost: Costs::default(),
                ..groups[g].clone()
            });
            functions.len() - 1
        });
        let f = &mut functions[id];
        f.calls += node.calls;
        f.cost
            .add(&Costs::in_unit(metric, node.self_, 0, node.samples));
    }
    (functions, fid)
}

/// The groups of a profile's functions (each a [`Function`] without calls or costs) and
/// each function's group.
fn groups(p: &Profile, by: Grouping) -> (Vec<Function>, Vec<usize>) {
    if by == Grouping::Function {
        let groups = p.functions.clone();
        return (groups, (0..p.functions.len()).collect());
    }
    let mut index: FxHashMap<String, usize> = FxHashMap::default();
    let mut groups: Vec<Function> = Vec::new();
    let group_of: Vec<usize> = p
        .functions
        .iter()
        .map(|f| {
            let (name, file) = match by {
                Grouping::File => match &f.file {
                    Some(file) => (crate::source::short_path(file), Some(file.clone())),
                    None => (format!("[no source: {}]", crate_of(f)), None),
                },
                _ => (crate_of(f), None),
            };
            *index.entry(name.clone()).or_insert_with(|| {
                groups.push(Function {
                    id: groups.len() as u32,
                    name,
                    file,
                    line: None,
                    import: f.import,
                    calls: 0,
                    cost: Costs::default(),
                });
                groups.len() - 1
            })
        })
        .collect();
    // A group is an import only when all its functions are.
    for (f, &g) in p.functions.iter().zip(&group_of) {
        groups[g].import &= f.import;
    }
    (groups, group_of)
}

/// The crate (or C library, or import module) a function is of: an import's module; the
/// library its file is in; else the first segment of its path (`calls::fib`, and
/// `<calls::Shape as core::fmt::Debug>::fmt`, are of `calls`; `<u8 as calls::Bound>::f`,
/// a primitive's impl, is of its trait's); else its file's directory.
pub fn crate_of(f: &Function) -> String {
    if f.import {
        return f.name.split('.').next().unwrap_or(&f.name).to_string();
    }
    if let Some(library) = f.file.as_deref().and_then(crate::source::library_of) {
        return library;
    }
    let mut name = f.name.as_str();
    loop {
        let before = name;
        for prefix in ["<", "&", "mut ", "dyn ", "*const ", "*mut ", "impl "] {
            name = name.strip_prefix(prefix).unwrap_or(name);
        }
        if name == before {
            break;
        }
    }
    // `<u8 as regex_syntax::hir::Bound>::f`: a primitive's impl is its trait's crate's.
    if let Some((self_type, trait_path)) = name.split_once(" as ") {
        if !self_type.contains("::") {
            name = trait_path;
        }
    }
    if let Some((first, _)) = name.split_once("::") {
        if !first.is_empty() && first.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return first.to_string();
        }
    }
    let dir = f
        .file
        .as_deref()
        .and_then(|file| std::path::Path::new(file).parent()?.file_name())
        .map(|dir| dir.to_string_lossy().into_owned());
    dir.unwrap_or_else(|| "[no source]".to_string())
}

/// `a + b` where either may be missing (a sampled count).
fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::crate_of;
    use crate::profile::{Costs, Function};

    fn function(name: &str, file: Option<&str>) -> Function {
        Function {
            id: 0,
            name: name.into(),
            file: file.map(str::to_string),
            line: None,
            import: false,
            calls: 1,
            cost: Costs::default(),
        }
    }

    #[test]
    fn crates_come_from_paths_then_names() {
        let local = Some("/work/x/src/hir/interval.rs");
        for (name, file, expected) in [
            ("calls::fib", local, "calls"),
            ("<calls::Shape as core::fmt::Debug>::fmt", local, "calls"),
            (
                "<u8 as regex_syntax::hir::interval::Bound>::as_u32",
                local,
                "regex_syntax",
            ),
            (
                "<&mut W as core::fmt::Write>::write_str",
                Some("/rustc/abc/library/core/src/fmt/mod.rs"),
                "core",
            ),
            ("main", local, "hir"),
            ("__main_void", None, "[no source]"),
        ] {
            assert_eq!(crate_of(&function(name, file)), expected, "{name}");
        }
        let import = Function {
            import: true,
            ..function("wasi_snapshot_preview1.fd_write", None)
        };
        assert_eq!(crate_of(&import), "wasi_snapshot_preview1");
    }
}
