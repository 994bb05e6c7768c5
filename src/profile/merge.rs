//! Merging: the profiles of several runs (the test binaries of one `cargo wasmprof test`)
//! as one.

use std::collections::HashMap;

use super::{Arc, Context, Costs, Function, Profile, FORMAT, FORMAT_VERSION};
use crate::meta::Metric;

impl Profile {
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
            metric: profiles.first().map_or(Metric::ExactTime, |p| p.metric),
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
            uncompensated: profiles.iter().find_map(|p| p.uncompensated.clone()),
            sampling: None,
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
            if let Some(sampling) = &p.sampling {
                out.sampling
                    .get_or_insert_with(Default::default)
                    .add(sampling);
            }
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
}
