//! Inclusive costs that stay right under recursion: a function's cost counted once per
//! outermost activation, summed over a calling-context tree.

/// Sums `value` per function over the outermost nodes of a tree: those with no ancestor of
/// the same function. That is a function's inclusive cost counted once per outermost
/// activation, right under recursion. `nodes` gives each node's parent and function; node 0
/// is the root, and parents come before their children.
pub(super) fn outermost_sums(
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
