//! Compensation: the probes' own cost, measured at start-up, subtracted from a timed
//! profile in its calling-context tree.

use std::collections::HashMap;

use super::outermost::{arc_keys, outermost_sums, TreeNode};
use super::{Context, ProbeCost, Profile, HOST};

/// What is done about the probes' own cost in exact times.
#[derive(Debug, Clone, PartialEq)]
pub enum Compensation {
    /// Nothing to do: the metric reads no clock at its probes.
    None,
    /// Subtract this cost.
    Subtract(ProbeCost),
    /// Keep it, for this reason, which the profile records.
    Keep(String),
}

impl Profile {
    /// Does what `compensation` says to a profile whose probes read a clock, and records
    /// why its times still hold the probes' cost if they do (`uncompensated`, which it
    /// returns).
    pub fn apply(&mut self, compensation: &Compensation) -> Option<&str> {
        if !self.metric.facts().probes.clock {
            return None;
        }
        self.uncompensated = match compensation {
            Compensation::Subtract(cost) => self.compensate(*cost).err(),
            Compensation::Keep(why) => Some(why.clone()),
            Compensation::None => Some("the probes' cost was not measured".into()),
        };
        self.uncompensated.as_deref()
    }

    /// Subtracts the probes' own cost from the times, in the calling-context tree: each
    /// context loses `in_callee` per call and `in_caller` per call it makes from its self
    /// time; inclusive times are then rebuilt from the corrected self times, and functions
    /// and arcs summed again from the contexts. Changes nothing, and says why, when the
    /// profile does not measure exact time, is compensated already, or its tree was folded
    /// (the calls each context made are lost then).
    pub fn compensate(&mut self, cost: ProbeCost) -> Result<(), String> {
        if !self.metric.facts().probes.clock {
            return Err(format!("the profile measures {}", self.metric.name()));
        }
        if self.compensation.is_some() {
            return Err("the probes' cost was subtracted already".into());
        }
        if !self.threads.is_empty() {
            return self.compensate_threads(cost);
        }
        if self.folded_entries > 0 {
            return Err(format!(
                "the calling-context tree was full ({} entries folded), so the calls each context made are unknown; raise --max-contexts",
                self.folded_entries
            ));
        }
        let (self_ns, total_ns) = self.compensate_contexts(cost);
        self.sum_compensated(&self_ns, &total_ns);
        self.compensation = Some(cost);
        Ok(())
    }

    /// Subtracts `cost` from every context's self time, and sums its inclusive times again
    /// from the leaves up; the contexts' new self and inclusive times.
    fn compensate_contexts(&mut self, cost: ProbeCost) -> (Vec<u64>, Vec<u64>) {
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
        (self_ns, total_ns)
    }

    /// Functions' and arcs' times summed again from the contexts' compensated ones: self
    /// over all their contexts, total over their outermost ones.
    fn sum_compensated(&mut self, self_ns: &[u64], total_ns: &[u64]) {
        let tree: Vec<TreeNode> = self
            .contexts
            .iter()
            .map(|c| (c.parent.map(|p| p as usize), c.function.map(|f| f as usize)))
            .collect();
        let parents = || tree.iter().map(|&(parent, _)| parent);
        let functions: Vec<Option<usize>> = tree.iter().map(|&(_, function)| function).collect();
        let totals = outermost_sums(parents(), &functions, total_ns, self.functions.len());
        for (f, total) in self.functions.iter_mut().zip(totals) {
            f.cost.self_ns = 0;
            f.cost.total_ns = total;
        }
        for (c, &ns) in self.contexts.iter().zip(self_ns) {
            if let Some(f) = c.function {
                self.functions[f as usize].cost.self_ns += ns;
            }
        }
        // Arcs: the callee's contexts under the caller.
        let (keys, tree_arcs) = arc_keys(&tree, |_| true);
        let mut arc_self = vec![0u64; tree_arcs.len()];
        for (key, &ns) in keys.iter().zip(self_ns) {
            if let Some(k) = *key {
                arc_self[k] += ns;
            }
        }
        let arc_total = outermost_sums(parents(), &keys, total_ns, tree_arcs.len());
        let name = |f: usize| self.functions[f].name.clone();
        let sums: HashMap<(String, String), (u64, u64)> = tree_arcs
            .iter()
            .enumerate()
            .map(|(k, &(caller, callee))| {
                let caller = caller.map_or_else(|| HOST.to_string(), name);
                ((caller, name(callee)), (arc_self[k], arc_total[k]))
            })
            .collect();
        for arc in &mut self.arcs {
            let (self_, total) = sums
                .get(&(arc.caller.clone(), arc.callee.clone()))
                .copied()
                .unwrap_or_default();
            arc.cost.self_ns = self_;
            arc.cost.total_ns = total;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::Metric;
    use crate::profile::{Arc, Costs, Function};

    fn function(id: u32, name: &str, calls: u64, self_ns: u64, total_ns: u64) -> Function {
        Function {
            cost: Costs {
                self_ns,
                total_ns,
                ..Costs::default()
            },
            ..Function::of_calls(id, name, calls)
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
            alloc: None,
        }
    }

    /// host -> main (1 call) -> leaf (10 calls); host -> f (1 call) -> f (1 call).
    fn profile() -> Profile {
        Profile {
            modules: vec!["m".into()],
            complete: true,
            runs: Vec::new(),
            metric: Metric::ExactTime,
            functions: vec![
                function(0, "main", 1, 1000, 2000),
                function(1, "leaf", 10, 1000, 1000),
                function(2, "f", 2, 200, 200),
            ],
            arcs: vec![
                Arc::of_calls(HOST, "main", 1),
                Arc::of_calls("main", "leaf", 10),
                Arc::of_calls(HOST, "f", 1),
                Arc::of_calls("f", "f", 1),
            ],
            contexts: vec![
                context(0, None, None, 0, 0, 2200),
                context(1, Some(0), Some(0), 1, 1000, 2000),
                context(2, Some(1), Some(1), 10, 1000, 1000),
                context(3, Some(0), Some(2), 1, 100, 200),
                context(4, Some(3), Some(2), 1, 100, 100),
            ],
            ..Profile::merge(&[])
        }
    }

    #[test]
    fn compensation_subtracts_the_probes_and_rebuilds_inclusive_times() {
        let mut p = profile();
        let cost = ProbeCost {
            in_callee_ns: 10.0,
            in_caller_ns: 20.0,
        };
        assert!(p.compensate(cost).is_ok());
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
        assert!(p.compensate(cost).is_err());
    }

    #[test]
    fn folded_or_untimed_profiles_are_left_alone() {
        let cost = ProbeCost {
            in_callee_ns: 10.0,
            in_caller_ns: 20.0,
        };
        let mut folded = profile();
        folded.folded_entries = 1;
        assert!(folded.compensate(cost).is_err());
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
        assert!(counted.compensate(cost).is_err());
    }
}
