//! The standard library's small functions that an unoptimized build leaves as calls
//! ([`Profile::helpers`]), folded into their callers as an optimized build inlines them:
//! what the text report shows unless asked for every function.

use rustc_hash::{FxHashMap, FxHashSet};

use super::counts::with_counts;
use super::{Arc, Grouping, Profile};

impl Profile {
    /// This profile with its helpers folded into their callers: a helper's own cost is its
    /// caller's, its callees are its caller's callees, and it has no row of its own. `None`
    /// when it has no helper, or is grouped by file or crate.
    ///
    /// Counts stay exact. Where the calling-context tree counted each context, the arcs
    /// come from it; else a callee that a helper called is called by the helper's caller
    /// where the helper (through other helpers) has one caller, and by an unknown caller
    /// where it has several.
    pub fn without_helpers(&self) -> Option<Profile> {
        if self
            .view
            .as_ref()
            .is_some_and(|v| v.by != Grouping::Function)
        {
            return None;
        }
        let helpers: FxHashSet<&str> = self.helpers.iter().map(String::as_str).collect();
        let hidden: Vec<bool> = (self.functions.iter())
            .map(|f| helpers.contains(f.name.as_str()))
            .collect();
        if !hidden.contains(&true) {
            return None;
        }
        let keep: Vec<bool> = hidden.iter().map(|h| !h).collect();
        let (functions, arcs, contexts) = if self.contexts.len() > 1 {
            let group_of: Vec<usize> = (0..self.functions.len()).collect();
            let none = vec![false; hidden.len()];
            let by = Grouping::Function;
            let tables = self.view_tree(None, (&none, &hidden), by, &self.functions, &group_of);
            match self.sampled_contexts {
                false => tables,
                true => with_counts((self.kept(&keep), self.arcs_around(&hidden)), tables, true),
            }
        } else {
            (
                self.kept(&keep),
                self.arcs_around(&hidden),
                self.contexts.clone(),
            )
        };
        let lines = self.lines_of_whole(&functions);
        Some(self.with_tables(functions, arcs, contexts, lines))
    }

    /// The functions `keep` marks, numbered anew.
    fn kept(&self, keep: &[bool]) -> Vec<super::Function> {
        (self.functions.iter())
            .filter(|f| keep[f.id as usize])
            .enumerate()
            .map(|(id, f)| super::Function {
                id: id as u32,
                ..f.clone()
            })
            .collect()
    }

    /// The arcs with the `hidden` functions folded into their callers: none into a hidden
    /// function; one out of it is its caller's where it has one (through other hidden
    /// functions), and left out where it has several, its calls then of an unknown caller.
    fn arcs_around(&self, hidden: &[bool]) -> Vec<Arc> {
        let index = self.index_by_name();
        let is_hidden = |name: &str| index.get(name).is_some_and(|&i| hidden[i]);
        let mut callers: FxHashMap<&str, Vec<&str>> = FxHashMap::default();
        for a in &self.arcs {
            callers.entry(&a.callee).or_default().push(&a.caller);
        }
        // The one caller that is not hidden above a hidden function, if it has one.
        let only_caller = |f: &str| -> Option<&str> {
            let (mut todo, mut seen, mut found) = (vec![f], FxHashSet::default(), None);
            while let Some(g) = todo.pop() {
                for &c in callers.get(g).into_iter().flatten() {
                    if is_hidden(c) {
                        if seen.insert(c) {
                            todo.push(c);
                        }
                    } else if found.replace(c).is_some_and(|other| other != c) {
                        return None;
                    }
                }
            }
            found
        };
        let mut arcs: Vec<Arc> = Vec::new();
        let mut at: FxHashMap<(&str, &str), usize> = FxHashMap::default();
        for a in self.arcs.iter().filter(|a| !is_hidden(&a.callee)) {
            let caller = match is_hidden(&a.caller) {
                false => a.caller.as_str(),
                true => match only_caller(&a.caller) {
                    Some(caller) => caller,
                    None => continue,
                },
            };
            match at.get(&(caller, a.callee.as_str())) {
                Some(&i) => arcs[i].count += a.count,
                None => {
                    at.insert((caller, &a.callee), arcs.len());
                    arcs.push(Arc {
                        // A call site in a helper's code is not its caller's.
                        sites: match caller == a.caller {
                            true => a.sites.clone(),
                            false => Vec::new(),
                        },
                        ..Arc::of_calls(caller, a.callee.clone(), a.count)
                    });
                }
            }
        }
        arcs
    }
}

#[cfg(test)]
mod tests {
    use crate::meta::Metric;
    use crate::profile::{Arc, Function, Profile, HOST};

    #[test]
    fn a_helper_s_callees_are_its_one_caller_s_and_of_no_known_caller_when_it_has_several() {
        // main calls min (a helper) 3 times and next (a helper) twice; next calls the
        // closure twice and len (a helper) twice; sum, also called by main, calls next too.
        let names = ["main", "min", "next", "closure", "len", "sum"];
        let calls = [1, 3, 4, 2, 2, 1];
        let p = Profile {
            metric: Metric::Calls,
            functions: (names.iter().zip(calls).enumerate())
                .map(|(i, (n, c))| Function::of_calls(i as u32, *n, c))
                .collect(),
            arcs: vec![
                Arc::of_calls(HOST, "main", 1),
                Arc::of_calls("main", "min", 3),
                Arc::of_calls("main", "next", 2),
                Arc::of_calls("main", "sum", 1),
                Arc::of_calls("sum", "next", 2),
                Arc::of_calls("next", "closure", 2),
                Arc::of_calls("closure", "len", 2),
            ],
            helpers: vec!["min".into(), "next".into(), "len".into()],
            ..Profile::merge(&[])
        };
        let folded = p.without_helpers().unwrap();
        let names: Vec<&str> = folded.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["main", "closure", "sum"]);
        assert_eq!(folded.functions[1].calls, 2, "counts stay exact");
        let arcs: Vec<(&str, &str, u64)> = (folded.arcs.iter())
            .map(|a| (a.caller.as_str(), a.callee.as_str(), a.count))
            .collect();
        // next has two callers: the closure's calls are of an unknown caller.
        assert_eq!(arcs, [(HOST, "main", 1), ("main", "sum", 1)]);
        // With one caller, the helper's callees are its caller's.
        let one = Profile {
            arcs: p
                .arcs
                .iter()
                .filter(|a| a.caller != "sum")
                .cloned()
                .collect(),
            ..p.clone()
        };
        let arcs = one.without_helpers().unwrap().arcs;
        assert!(
            arcs.contains(&Arc::of_calls("main", "closure", 2)),
            "{arcs:?}"
        );
    }
}
