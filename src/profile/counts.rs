//! The counts of a view of sampled calling contexts ([`Profile::sampled_contexts`]), whose
//! contexts count no calls: the view takes each function's and each arc's calls from the
//! profile's exact counts (or its groups', with `--by`), and its costs from the stacks it
//! kept. A count is then the whole run's, not the kept stacks' alone.

use rustc_hash::FxHashMap;

use super::{Arc, Context, Costs, Function, Profile, HOST};

/// A view's tables: its functions, arcs and contexts.
pub(super) type Tables = (Vec<Function>, Vec<Arc>, Vec<Context>);

/// `counted` functions and arcs, each with the cost that the view's `tree` (its functions
/// and arcs, by name) gives it (none where no sample the view kept found it), the tree's
/// contexts renumbered to them. Of the counted functions, those the tree has stay, and the
/// others too where `all`; of the counted arcs, those between functions that stay.
pub(super) fn with_counts(
    (counted_functions, counted_arcs): (Vec<Function>, Vec<Arc>),
    (functions, arcs, contexts): Tables,
    all: bool,
) -> Tables {
    let sampled: FxHashMap<&str, &Function> =
        functions.iter().map(|f| (f.name.as_str(), f)).collect();
    let mut kept: Vec<Function> = Vec::new();
    let mut id_of: FxHashMap<String, u32> = FxHashMap::default();
    for f in counted_functions {
        let cost = match sampled.get(f.name.as_str()) {
            Some(tree) => tree.cost,
            None if all => Costs {
                self_samples: Some(0),
                ..Costs::default()
            },
            None => continue,
        };
        let id = kept.len() as u32;
        id_of.insert(f.name.clone(), id);
        kept.push(Function { id, cost, ..f });
    }
    let contexts = contexts
        .into_iter()
        .map(|c| Context {
            function: c
                .function
                .and_then(|old| id_of.get(&functions[old as usize].name).copied()),
            ..c
        })
        .collect();
    let tree_arcs: FxHashMap<(&str, &str), &Arc> = arcs
        .iter()
        .map(|a| ((a.caller.as_str(), a.callee.as_str()), a))
        .collect();
    let arcs = counted_arcs
        .into_iter()
        .filter(|a| {
            id_of.contains_key(&a.callee) && (a.caller == HOST || id_of.contains_key(&a.caller))
        })
        .map(|a| {
            let cost = tree_arcs
                .get(&(a.caller.as_str(), a.callee.as_str()))
                .map_or_else(Costs::default, |tree| tree.cost);
            Arc { cost, ..a }
        })
        .collect();
    (kept, arcs, contexts)
}

impl Profile {
    /// The profile's functions that `keep` marks (by id) and the arcs between them, with
    /// their exact counts and no cost: what [`with_counts`] takes.
    pub(super) fn counted(&self, keep: &[bool]) -> (Vec<Function>, Vec<Arc>) {
        let functions: Vec<Function> = self
            .functions
            .iter()
            .filter(|f| keep[f.id as usize])
            .cloned()
            .collect();
        let arcs = self.arcs.clone();
        (functions, arcs)
    }
}
