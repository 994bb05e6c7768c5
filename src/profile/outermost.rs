//! Inclusive costs that stay right under recursion: a function's (or an arc's) cost counted
//! once per outermost activation, summed over a calling-context tree.
//!
//! A node of the tree is one call path; under recursion a function has nodes below nodes
//! of its own, whose costs their ancestors' already hold. Counting only the nodes with no
//! ancestor of the same key counts every unit of cost once.

use rustc_hash::FxHashMap;

/// One node of a calling-context tree: its parent (`None` for the root, which is node 0) and
/// its function (`None` for the root).
pub(super) type TreeNode = (Option<usize>, Option<usize>);

/// Sums `value` per key over the outermost nodes of each key: those with no ancestor of the
/// same key. With a node's function as its key, that is a function's inclusive cost counted
/// once per outermost activation, right under recursion; with its arc ([`arc_keys`]), an
/// arc's. `keys` gives each node's key (none for the root); parents come before their
/// children.
pub(super) fn outermost_sums(
    parents: impl Iterator<Item = Option<usize>>,
    keys: &[Option<usize>],
    value: &[u64],
    key_count: usize,
) -> Vec<u64> {
    let parents: Vec<_> = parents.collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); parents.len()];
    for (i, parent) in parents.iter().enumerate().skip(1) {
        children[parent.expect("non-root nodes have a parent")].push(i);
    }
    let mut sums = vec![0u64; key_count];
    let mut on_path = vec![0u32; key_count];
    let mut stack = vec![(0usize, false)];
    while let Some((i, leaving)) = stack.pop() {
        let key = keys[i];
        if leaving {
            if let Some(k) = key {
                on_path[k] -= 1;
            }
            continue;
        }
        if let Some(k) = key {
            if on_path[k] == 0 {
                sums[k] = sums[k].saturating_add(value[i]);
            }
            on_path[k] += 1;
        }
        stack.push((i, true));
        stack.extend(children[i].iter().map(|&c| (c, false)));
    }
    sums
}

/// An arc of the tree: the caller's function (none for the host) and the callee's.
pub(super) type TreeArc = (Option<usize>, usize);

/// The arcs of a tree's nodes: each node's key (an index into the returned arcs; none for
/// the root and for a node whose caller is unknown, a fold node's) and the distinct arcs,
/// in order of first use.
pub(super) fn arc_keys(
    nodes: &[TreeNode],
    caller_known: impl Fn(usize) -> bool,
) -> (Vec<Option<usize>>, Vec<TreeArc>) {
    let mut index: FxHashMap<TreeArc, usize> = FxHashMap::default();
    let mut arcs = Vec::new();
    let keys = nodes
        .iter()
        .enumerate()
        .map(|(i, &(parent, function))| {
            let (parent, callee) = (parent?, function?);
            if !caller_known(i) {
                return None;
            }
            let arc = (nodes[parent].1, callee);
            Some(*index.entry(arc).or_insert_with(|| {
                arcs.push(arc);
                arcs.len() - 1
            }))
        })
        .collect();
    (keys, arcs)
}
