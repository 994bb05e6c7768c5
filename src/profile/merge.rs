//! Merging: the profiles of several runs (the test binaries of one `cargo wasmprof test`)
//! as one.

use rustc_hash::FxHashMap;

use super::{
    Allocations, Arc, Benchmark, Context, Costs, Function, LineCost, Profile, FORMAT,
    FORMAT_VERSION,
};
use crate::meta::Metric;
use crate::symbols::without_index;

impl Profile {
    /// Merges several profiles into one: functions by identity (name, file and line; the
    /// ` [func N]` that tells apart functions of one module that share a name is each
    /// module's own index, so it is no part of it); arcs by caller and callee; contexts by
    /// call path. A name stays unique: functions of one name but different definitions
    /// get their definition's place as a suffix (` [src/a.rs:10]`). Of the runs' peaks of
    /// live bytes, the largest run's is kept, and so are only that run's blocks live at
    /// its peak: each run is a process of its own, so their peaks are no one moment.
    pub fn merge(profiles: &[Profile]) -> Profile {
        let names = MergedNames::of(profiles);
        let peak_run = peak_run(profiles);
        let mut merger = Merger::new(profiles, peak_run);
        for (i, p) in profiles.iter().enumerate() {
            merger.add(p, &names, peak_run == Some(i));
        }
        let mut out = merger.out;
        // Profiles without a context tree (the calls metric) merge into one without.
        if profiles.iter().all(|p| p.contexts.is_empty()) {
            out.contexts.clear();
        }
        out.helpers.sort_unstable();
        out.helpers.dedup();
        out
    }

    /// Whether `other` merges with this profile into one that tells the truth, and why not:
    /// the same metric, sampled by the same sampler, compensated for the probes' cost alike,
    /// and neither of them a view (a view's costs are a part of its profile's).
    pub fn merges_with(&self, other: &Profile) -> Result<(), String> {
        if self.metric != other.metric {
            return Err(format!(
                "{} {} profile, the other {} {} profile: profiles of one metric merge",
                article(other.metric.name()),
                other.metric.name(),
                article(self.metric.name()),
                self.metric.name()
            ));
        }
        let sampler = |p: &Profile| p.sampling.as_ref().map(|s| s.sampler);
        if let (Some(one), Some(two)) = (sampler(self), sampler(other)) {
            if one != two {
                return Err(format!(
                    "sampled by the {} sampler, the other by the {} sampler",
                    two.name(),
                    one.name()
                ));
            }
        }
        if self.sampled_contexts != other.sampled_contexts {
            let how = |p: &Profile| match p.sampled_contexts {
                true => "sampled",
                false => "counted (--contexts)",
            };
            return Err(format!(
                "its calling contexts are {}, the other's {}: profiles of one kind merge",
                how(other),
                how(self)
            ));
        }
        if self.compensation.is_some() != other.compensation.is_some() {
            return Err(
                "the probes' cost is subtracted from the times of one of them and not the other's"
                    .into(),
            );
        }
        if let Some(view) = self.view.as_ref().or(other.view.as_ref()) {
            return Err(format!(
                "a view ({}) does not merge; merge the profiles it was made from",
                view.description
            ));
        }
        Ok(())
    }
}

/// `a` or `an`, before `word`.
fn article(word: &str) -> &'static str {
    ["a", "an"][usize::from(word.starts_with(['a', 'e', 'i', 'o', 'u']))]
}

/// A merge in progress: the merged profile so far, and where each function, arc, context
/// and line of it is by its key.
struct Merger {
    out: Profile,
    function_ids: FxHashMap<String, u32>,
    arc_ids: FxHashMap<(String, String), usize>,
    context_ids: FxHashMap<(u32, Option<u32>, bool), u32>,
    line_ids: FxHashMap<LineKey, usize>,
}

/// What makes two lines' costs one: the function, the file and line, the inlined chain.
type LineKey = (String, Option<String>, u32, Vec<crate::symbols::Inlined>);

impl Merger {
    /// An empty merge of `profiles` (which share their metric and compensation, being of
    /// one run), whose peak of live bytes is `peak_run`'s.
    fn new(profiles: &[Profile], peak_run: Option<usize>) -> Merger {
        let mut allocations =
            Allocations::merge(profiles.iter().filter_map(|p| p.allocations.as_ref()));
        if let Some(a) = allocations.as_mut() {
            // The peak and the blocks at it are one run's; with a run recorded thread by
            // thread, no peak is known (`peak_run` is none then).
            a.at_peak_bytes = 0;
            if a.per_thread {
                a.peak_bytes = 0;
            }
            let chosen = peak_run.map(|i| &profiles[i]);
            if let Some((p, run)) = chosen.and_then(|p| Some((p, p.allocations.as_ref()?))) {
                (a.peak_bytes, a.at_peak_bytes) = (run.peak_bytes, run.at_peak_bytes);
                if profiles.iter().filter(|p| p.records_allocations()).count() > 1 {
                    let inner = run.peak_module.clone();
                    a.peak_module = inner.or_else(|| p.modules.first().cloned());
                }
            }
        }
        Merger {
            out: Profile {
                format: FORMAT.to_string(),
                version: FORMAT_VERSION,
                modules: Vec::new(),
                complete: true,
                runs: Vec::new(),
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
                    alloc: None,
                }],
                sampled_contexts: false,
                folded_entries: 0,
                arcs_dropped: 0,
                compensation: profiles.first().and_then(|p| p.compensation),
                uncompensated: profiles.iter().find_map(|p| p.uncompensated.clone()),
                sampling: None,
                lines: Vec::new(),
                view: None,
                threads: Vec::new(),
                allocations,
                benchmarks: Vec::new(),
                requests: None,
                helpers: Vec::new(),
            },
            function_ids: FxHashMap::default(),
            arc_ids: FxHashMap::default(),
            context_ids: FxHashMap::default(),
            line_ids: FxHashMap::default(),
        }
    }

    /// Adds profile `p` in, its functions named as `names` says; its blocks live at its
    /// peak only if its peak is the merged profile's (`has_peak`).
    fn add(&mut self, p: &Profile, names: &MergedNames, has_peak: bool) {
        let out = &mut self.out;
        out.modules.extend(p.modules.iter().cloned());
        out.threads.extend(p.threads.iter().cloned());
        out.complete &= p.complete;
        out.folded_entries += p.folded_entries;
        out.sampled_contexts |= p.sampled_contexts;
        out.arcs_dropped += p.arcs_dropped;
        if let Some(sampling) = &p.sampling {
            out.sampling
                .get_or_insert_with(Default::default)
                .add(sampling);
        }
        let mut renamed: FxHashMap<&str, &str> = FxHashMap::default();
        let fmap: Vec<u32> = p
            .functions
            .iter()
            .map(|f| {
                renamed.insert(&f.name, names.name(f));
                self.function(f, names.name(f))
            })
            .collect();
        let rename = |name: &str| renamed.get(name).map_or(name, |n| n).to_string();
        // Open stacks name functions too; their suffixes were their module's.
        self.out.runs.extend(p.runs.iter().map(|run| {
            let mut run = run.clone();
            for name in &mut run.open_stack {
                *name = rename(name);
            }
            run
        }));
        for a in &p.arcs {
            self.arc(a, (rename(&a.caller), rename(&a.callee)));
        }
        for l in &p.lines {
            self.line(l, rename(&l.function));
        }
        self.out
            .benchmarks
            .extend(p.benchmarks.iter().map(|b| Benchmark {
                harness: rename(&b.harness),
                routine: rename(&b.routine),
                ..b.clone()
            }));
        self.out.helpers.extend(p.helpers.iter().map(|h| rename(h)));
        let requests = [self.out.requests.take(), p.requests.clone()];
        self.out.requests = requests.into_iter().flatten().reduce(|a, b| a.merged(&b));
        self.contexts(p, &fmap, has_peak);
    }

    /// Adds function `f` in as `name`; its id in the merged profile.
    fn function(&mut self, f: &Function, name: &str) -> u32 {
        let out = &mut self.out;
        let id = *self
            .function_ids
            .entry(name.to_string())
            .or_insert_with(|| {
                out.functions.push(Function {
                    id: out.functions.len() as u32,
                    name: name.to_string(),
                    calls: 0,
                    cost: Costs::default(),
                    ..f.clone()
                });
                out.functions.len() as u32 - 1
            });
        let g = &mut out.functions[id as usize];
        if g.file.is_none() && f.file.is_some() {
            (g.file, g.line) = (f.file.clone(), f.line);
        }
        g.calls += f.calls;
        g.cost.add(&f.cost);
        id
    }

    /// Adds arc `a` in, between its caller and callee as merged (`key`).
    fn arc(&mut self, a: &Arc, key: (String, String)) {
        let out = &mut self.out;
        let i = *self.arc_ids.entry(key.clone()).or_insert_with(|| {
            out.arcs.push(Arc {
                caller: key.0,
                callee: key.1,
                count: 0,
                cost: Costs::default(),
                sites: Vec::new(),
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

    /// Adds line cost `l` in, of `function` as merged.
    fn line(&mut self, l: &LineCost, function: String) {
        let out = &mut self.out;
        let key = (function.clone(), l.file.clone(), l.line, l.inlined.clone());
        let i = *self.line_ids.entry(key).or_insert_with(|| {
            out.lines.push(LineCost {
                function,
                instructions: 0,
                self_ns: None,
                samples: None,
                ..l.clone()
            });
            out.lines.len() - 1
        });
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        let m = &mut out.lines[i];
        m.instructions += l.instructions;
        m.self_ns = sum(m.self_ns, l.self_ns);
        m.samples = sum(m.samples, l.samples);
    }

    /// Adds `p`'s context tree in, its function ids mapped by `fmap`, its contexts' blocks
    /// live at the peak if `has_peak`. Contexts come parents first, so a parent's new id is
    /// known before its children.
    fn contexts(&mut self, p: &Profile, fmap: &[u32], has_peak: bool) {
        let out = &mut self.out;
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
                    *self.context_ids.entry(key).or_insert_with(|| {
                        out.contexts.push(Context {
                            id: out.contexts.len() as u32,
                            parent: Some(key.0),
                            function: key.1,
                            folded: c.folded,
                            calls: 0,
                            cost: Costs::default(),
                            alloc: None,
                        });
                        out.contexts.len() as u32 - 1
                    })
                }
            };
            cmap[c.id as usize] = new_id;
            let d = &mut out.contexts[new_id as usize];
            d.calls += c.calls;
            d.cost.add(&c.cost);
            if let Some(a) = &c.alloc {
                let mut a = *a;
                if !has_peak {
                    a.at_peak = 0;
                    a.at_peak_bytes = 0;
                }
                d.alloc.get_or_insert_with(Default::default).add(&a);
            }
        }
    }
}

/// Of `profiles`, the run whose peak of live bytes a merged profile keeps: the largest
/// known one (the first of equals), if any is; none where a run recorded its allocations
/// thread by thread (the merged profile's peak is not known then).
fn peak_run(profiles: &[Profile]) -> Option<usize> {
    let threaded = |p: &Profile| p.allocations.as_ref().is_some_and(|a| a.per_thread);
    if profiles.iter().any(threaded) {
        return None;
    }
    let peak = |i: usize| {
        let a = profiles[i].allocations.as_ref()?;
        a.peak()
            .filter(|_| profiles[i].records_allocations() && a.at_peak_bytes > 0)
    };
    (0..profiles.len())
        .filter_map(|i| Some((peak(i)?, i)))
        .min_by_key(|&(bytes, i)| (std::cmp::Reverse(bytes), i))
        .map(|(_, i)| i)
}

/// What makes two functions of different modules the same function.
type FnKey = (String, Option<String>, Option<u32>);

/// A function's identity: its name without the module's own ` [func N]`, and its
/// definition. Without a definition from DWARF nothing tells two functions of one name
/// apart but that index, so it stays.
fn identity(f: &Function) -> FnKey {
    match &f.file {
        Some(_) => (without_index(&f.name).to_string(), f.file.clone(), f.line),
        None => (f.name.clone(), None, f.line),
    }
}

/// The last three components of a source path: enough to tell definitions apart, short
/// enough for a name (`std/src/process.rs` of `/rustc/<commit>/library/std/src/process.rs`).
fn tail(file: &str) -> &str {
    match file.rmatch_indices('/').nth(2) {
        Some((at, _)) => &file[at + 1..],
        None => file,
    }
}

/// The name each function of some profiles has once they are merged: one name per
/// identity, its base name, or, where identities share one, the base name and where it is
/// defined. `diff` compares functions by these names too.
pub struct MergedNames(FxHashMap<FnKey, String>);

impl MergedNames {
    /// The names of the functions of `profiles`.
    pub fn of<'a>(profiles: impl IntoIterator<Item = &'a Profile>) -> MergedNames {
        let mut by_base: FxHashMap<String, Vec<FnKey>> = FxHashMap::default();
        for f in profiles.into_iter().flat_map(|p| &p.functions) {
            let key = identity(f);
            let keys = by_base.entry(key.0.clone()).or_default();
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let mut names = FxHashMap::default();
        for (base, keys) in by_base {
            // A copy without a source (a doc test's, which rustdoc builds without DWARF) is
            // the one function of its name that has one, where there is just one.
            let sourced = keys.iter().filter(|k| k.1.is_some()).count();
            if sourced == 1 {
                names.extend(keys.into_iter().map(|key| (key, base.clone())));
                continue;
            }
            let shared = keys.len() > 1;
            for key in keys {
                let name = match (&key.1, key.2) {
                    _ if !shared => base.clone(),
                    (Some(file), Some(line)) => format!("{base} [{}:{line}]", tail(file)),
                    (Some(file), None) => format!("{base} [{}]", tail(file)),
                    (None, _) => format!("{base} [no source]"),
                };
                names.insert(key, name);
            }
        }
        MergedNames(names)
    }

    /// The merged name of `f`, a function of one of the profiles.
    pub fn name(&self, f: &Function) -> &str {
        &self.0[&identity(f)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{RunInfo, HOST};

    fn function(id: u32, name: &str, file: Option<&str>, calls: u64) -> Function {
        Function {
            id,
            name: name.into(),
            file: file.map(Into::into),
            line: file.map(|_| 7),
            import: false,
            calls,
            cost: Costs::default(),
        }
    }

    /// A module whose `grow` is `grow [func N]` (it shares its name with another function
    /// of the module), called `calls` times from the host, with `helper` beside it.
    fn module(name: &str, n: u32, helper_file: &str, calls: u64) -> Profile {
        let grow = format!("grow [func {n}]");
        let context = |id, parent, function, calls| Context {
            id,
            parent,
            function,
            folded: false,
            calls,
            cost: Costs::default(),
            alloc: None,
        };
        Profile {
            modules: vec![name.into()],
            complete: false,
            runs: vec![RunInfo {
                module: name.into(),
                exit_code: 1,
                trap: None,
                open_stack: vec![grow.clone()],
                wall_ns: 0,
                clock: String::new(),
                threads_lost: Vec::new(),
                state: None,
                component: false,
            }],
            metric: Metric::Calls,
            functions: vec![
                function(0, &grow, Some("raw_vec.rs"), calls),
                function(1, "helper", Some(helper_file), 1),
            ],
            arcs: vec![
                Arc::of_calls(HOST, &grow, calls),
                Arc::of_calls(&grow, "helper", 1),
            ],
            contexts: vec![
                context(0, None, None, 0),
                context(1, Some(0), Some(0), calls),
                context(2, Some(1), Some(1), 1),
            ],
            ..Profile::merge(&[])
        }
    }

    #[test]
    fn one_function_of_several_modules_is_one_entry_whatever_its_index() {
        let merged = Profile::merge(&[
            module("a.wasm", 41, "src/lib.rs", 2),
            module("b.wasm", 63, "src/lib.rs", 3),
        ]);
        let names: Vec<&str> = merged.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["grow", "helper"]);
        assert_eq!(merged.function_named("grow").unwrap().calls, 5);
        assert_eq!(merged.arc(HOST, "grow").unwrap().count, 5);
        assert_eq!(merged.arc("grow", "helper").unwrap().count, 2);
        assert_eq!(merged.contexts.len(), 3);
        assert_eq!(merged.contexts[1].calls, 5);
        assert_eq!(merged.runs[1].open_stack, ["grow"]);
    }

    #[test]
    fn functions_of_one_name_defined_apart_stay_apart() {
        let merged = Profile::merge(&[
            module("a.wasm", 1, "src/a.rs", 1),
            module("b.wasm", 1, "src/b.rs", 1),
        ]);
        let names: Vec<&str> = merged.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["grow", "helper [src/a.rs:7]", "helper [src/b.rs:7]"]
        );
        assert_eq!(merged.arc("grow", "helper [src/b.rs:7]").unwrap().count, 1);
    }

    #[test]
    fn a_copy_without_source_is_the_one_function_of_its_name_with_one() {
        // A doc test's copy of a library function: rustdoc builds it without DWARF.
        let sourceless = |mut p: Profile| {
            p.functions[1].file = None;
            p
        };
        let doc_test = sourceless(module("doc.wasm", 2, "src/lib.rs", 4));
        let merged = Profile::merge(&[doc_test, module("a.wasm", 1, "src/lib.rs", 2)]);
        let helper = merged.function_named("helper").unwrap().file.as_deref();
        assert_eq!(helper, Some("src/lib.rs"));
        assert_eq!(merged.functions.len(), 2);
        // Two with a source, and a copy without: which it is, nothing says.
        let [a, b, c] = ["a", "b", "c"].map(|m| module(m, 1, &format!("src/{m}.rs"), 1));
        let merged = Profile::merge(&[a, b, sourceless(c)]);
        assert_eq!(merged.functions.len(), 4, "{:?}", merged.functions);
    }

    /// `module` with its helper's context holding `peak` bytes in one block at the peak,
    /// and `held` bytes at the end.
    fn allocating(name: &str, n: u32, peak: u64, held: u64) -> Profile {
        let mut p = module(name, n, "src/lib.rs", 1);
        p.allocations = Some(Allocations {
            peak_bytes: peak,
            at_peak_bytes: peak,
            ..Allocations::default()
        });
        p.contexts[2].alloc = Some(crate::profile::Allocs {
            allocs: 2,
            alloc_bytes: peak + held,
            frees: 1,
            freed_bytes: peak,
            held: 1,
            held_bytes: held,
            at_peak: 1,
            at_peak_bytes: peak,
            ..Default::default()
        });
        p
    }

    #[test]
    fn the_largest_runs_peak_is_kept_with_only_its_blocks() {
        let merged = Profile::merge(&[
            allocating("a.wasm", 1, 100, 10),
            allocating("b.wasm", 2, 300, 20),
            allocating("c.wasm", 3, 300, 30),
        ]);
        let a = merged.allocations.as_ref().unwrap();
        assert_eq!((a.peak(), a.at_peak_bytes), (Some(300), 300));
        // Of equal peaks, the first run's.
        assert_eq!(a.peak_module.as_deref(), Some("b.wasm"));
        let total = merged.total_allocs();
        assert_eq!((total.at_peak, total.at_peak_bytes), (1, 300));
        // What every run allocated and held at its end adds up.
        assert_eq!((total.allocs, total.held_bytes), (6, 60));
        // Merged again, the peak stays that run's.
        let again = Profile::merge(&[merged, allocating("d.wasm", 4, 200, 0)]);
        let a = again.allocations.as_ref().unwrap();
        assert_eq!(a.peak_module.as_deref(), Some("b.wasm"));
        assert_eq!(again.total_allocs().at_peak_bytes, 300);
        // With a run recorded thread by thread, no peak is known, and no blocks at one.
        let mut threaded = allocating("t.wasm", 5, 0, 0);
        threaded.allocations_per_thread();
        let mixed = Profile::merge(&[allocating("a.wasm", 1, 100, 10), threaded]);
        let a = mixed.allocations.as_ref().unwrap();
        assert_eq!(
            (a.peak(), a.at_peak_bytes, a.peak_module.as_deref()),
            (None, 0, None)
        );
        assert_eq!(mixed.total_allocs().at_peak_bytes, 0);
    }
}
