//! Runs of one module summed into one run's dump, where the profiler's state is counters
//! alone (no calling-context tree, no allocations: the default time metric and the calls
//! metric): each function's, call site's and segment's count added, the dynamic arcs by
//! their site and callee, the stack samples by stack. A server sums its requests' states
//! so as each one ends, and decodes the sum once.

use rustc_hash::FxHashMap;

use super::decode::Raw;
use super::{Dump, StackSample, StackSamples};
use crate::layout::{self, Layout};
use crate::meta::Meta;

/// The sum of runs' profiler states and samples.
pub struct DumpSum {
    layout: Layout,
    /// The first run's state, the others' counts added in.
    memory: Vec<u8>,
    /// The slot of each dynamic arc in `memory`, by (site, callee + 1).
    dyn_arcs: FxHashMap<(u32, u32), u32>,
    /// No slot below it is free.
    free: u32,
    stacks: Option<StackSamples>,
    /// Where each of `stacks`' stacks is, by its frames, line and whether in host code.
    stack_index: FxHashMap<(Vec<u32>, u32, bool), usize>,
}

impl DumpSum {
    /// An empty sum for runs of a module instrumented with `meta`; `None` where its state
    /// is more than counters (a context tree, allocations).
    pub fn new(meta: &Meta) -> Option<DumpSum> {
        (!meta.contexts && !meta.records_allocations()).then(|| DumpSum::of_layout(meta.layout))
    }

    /// An empty sum of states laid out as `layout`.
    fn of_layout(layout: Layout) -> DumpSum {
        DumpSum {
            layout,
            memory: Vec::new(),
            dyn_arcs: FxHashMap::default(),
            free: 0,
            stacks: None,
            stack_index: FxHashMap::default(),
        }
    }

    /// Adds a run that ended cleanly: its profiler's `state` (its memory up to its last
    /// node) and its `stacks`. Where the sum has no room for the run's dynamic arcs, or the
    /// state is not laid out as the sum's (or ends before its counters do), nothing is
    /// added and the stacks come back: the run is to be decoded on its own.
    pub fn add(
        &mut self,
        state: &[u8],
        stacks: Option<StackSamples>,
    ) -> Result<(), Option<StackSamples>> {
        // Every counter lies below the nodes: a state that reaches them can be read whole.
        if state.len() < self.layout.nodes_off as usize {
            return Err(stacks);
        }
        if self.memory.is_empty() {
            self.memory = state.to_vec();
            for (slot, site, callee, _) in dyn_arcs(&self.layout, state) {
                self.dyn_arcs.insert((site, callee), slot);
            }
            self.add_stacks(stacks);
            return Ok(());
        }
        let arcs: Vec<_> = dyn_arcs(&self.layout, state).collect();
        let new = (arcs.iter())
            .filter(|&&(_, site, callee, _)| !self.dyn_arcs.contains_key(&(site, callee)))
            .count();
        if state.len() != self.memory.len()
            || self.dyn_arcs.len() + new > self.layout.dyn_arcs_cap as usize
        {
            return Err(stacks);
        }
        let l = self.layout;
        let counters = [
            (l.calls_off, l.functions),
            (l.direct_arcs_off, l.direct_sites + 1),
            (l.segments_off, l.segments),
        ];
        for (off, n) in counters {
            for i in 0..n {
                self.add_u64(off + 8 * i, u64_at(state, off + 8 * i));
            }
        }
        for at in [layout::HDR_FOLDED, layout::HDR_ARCS_DROPPED] {
            self.add_u64(at, u64_at(state, at));
        }
        for (_, site, callee, count) in arcs {
            let slot = match self.dyn_arcs.get(&(site, callee)) {
                Some(&slot) => slot,
                None => {
                    let slot = self.free_slot();
                    let at = (l.dyn_arcs_off + slot * layout::DYN_ARC_SIZE) as usize;
                    self.memory[at..at + 4].copy_from_slice(&site.to_le_bytes());
                    self.memory[at + 4..at + 8].copy_from_slice(&callee.to_le_bytes());
                    self.dyn_arcs.insert((site, callee), slot);
                    slot
                }
            };
            self.add_u64(l.dyn_arcs_off + slot * layout::DYN_ARC_SIZE + 8, count);
        }
        self.add_stacks(stacks);
        Ok(())
    }

    /// The runs summed, as one run's dump that ended cleanly; `None` when none was added.
    pub fn into_dump(self) -> Option<Dump> {
        (!self.memory.is_empty()).then(|| Dump {
            memory: self.memory,
            cur: 0,
            ticks_per_ns: 1.0,
            clock: "none".to_string(),
            end: None,
            frames: Vec::new(),
            stacks: self.stacks,
            no_sampler: None,
        })
    }

    fn add_u64(&mut self, at: u32, n: u64) {
        let at = at as usize;
        let sum = u64_at(&self.memory, at as u32).wrapping_add(n);
        self.memory[at..at + 8].copy_from_slice(&sum.to_le_bytes());
    }

    /// A free slot of the dynamic arc table (the caller has made sure there is one).
    fn free_slot(&mut self) -> u32 {
        let l = self.layout;
        while u32_at(
            &self.memory,
            l.dyn_arcs_off + self.free * layout::DYN_ARC_SIZE + 4,
        ) != 0
        {
            self.free += 1;
        }
        self.free
    }

    fn add_stacks(&mut self, stacks: Option<StackSamples>) {
        let Some(new) = stacks else {
            return;
        };
        let sum = self.stacks.get_or_insert_with(StackSamples::default);
        sum.taken += new.taken;
        sum.in_probes += new.in_probes;
        sum.outside += new.outside;
        sum.outside_ns += new.outside_ns;
        sum.truncated += new.truncated;
        sum.truncated_ns += new.truncated_ns;
        sum.dropped += new.dropped;
        sum.dropped_ns += new.dropped_ns;
        for s in new.stacks {
            let key = (s.frames, s.line, s.in_host);
            match self.stack_index.get(&key) {
                Some(&i) => {
                    sum.stacks[i].samples += s.samples;
                    sum.stacks[i].ns += s.ns;
                }
                None => {
                    self.stack_index.insert(key.clone(), sum.stacks.len());
                    sum.stacks.push(StackSample {
                        frames: key.0,
                        line: key.1,
                        in_host: key.2,
                        ..s
                    });
                }
            }
        }
    }
}

/// The used slots of a state's dynamic arc table: (slot, site, callee + 1, count).
fn dyn_arcs<'a>(l: &'a Layout, state: &'a [u8]) -> impl Iterator<Item = (u32, u32, u32, u64)> + 'a {
    (0..l.dyn_arcs_cap).filter_map(move |slot| {
        let at = l.dyn_arcs_off + slot * layout::DYN_ARC_SIZE;
        let callee = u32_at(state, at + 4);
        (callee != 0).then(|| (slot, u32_at(state, at), callee, u64_at(state, at + 8)))
    })
}

/// The counter at `at` of a state that reaches the nodes (`DumpSum::add` checks it).
fn u64_at(state: &[u8], at: u32) -> u64 {
    Raw(state).u64(at).expect("a counter below the nodes")
}

/// See [`u64_at`].
fn u32_at(state: &[u8], at: u32) -> u32 {
    Raw(state).u32(at).expect("a counter below the nodes")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state of `l` with these calls, the first direct site's count, and these dynamic
    /// arcs (site, callee + 1, count) in slots 0, 1, ...
    fn state(l: &Layout, calls: [u64; 3], site: u64, arcs: &[(u32, u32, u64)]) -> Vec<u8> {
        let mut m = vec![0u8; l.nodes_off as usize + 64];
        let mut put = |at: u32, bytes: &[u8]| {
            m[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
        };
        for (i, c) in calls.iter().enumerate() {
            put(l.calls_off + 8 * i as u32, &c.to_le_bytes());
        }
        put(l.direct_arcs_off + 8, &site.to_le_bytes());
        for (slot, &(site, callee, count)) in arcs.iter().enumerate() {
            let at = l.dyn_arcs_off + slot as u32 * layout::DYN_ARC_SIZE;
            put(at, &site.to_le_bytes());
            put(at + 4, &callee.to_le_bytes());
            put(at + 8, &count.to_le_bytes());
        }
        m
    }

    fn samples(frames: &[u32], n: u64) -> Option<StackSamples> {
        Some(StackSamples {
            stacks: vec![StackSample {
                frames: frames.to_vec(),
                line: 1,
                in_host: false,
                samples: n,
                ns: n * 1000,
            }],
            taken: n,
            ..StackSamples::default()
        })
    }

    #[test]
    fn runs_add_their_counts_their_dynamic_arcs_by_site_and_callee_and_their_stacks() {
        let l = Layout::new(3, 2, 1, 0, 1, 0);
        let mut sum = DumpSum::of_layout(l);
        // The host enters function 0 in both runs; the second run's indirect site 9 calls
        // function 2 twice, its arc in the slot the first run's host entry has.
        let one = state(&l, [1, 2, 0], 5, &[(0, 1, 1)]);
        let two = state(&l, [1, 0, 3], 7, &[(9, 3, 2), (0, 1, 1)]);
        assert!(sum.add(&one, samples(&[0, 1], 2)).is_ok());
        assert!(sum.add(&two, samples(&[0, 1], 3)).is_ok());
        // A state that ends before its counters is not added: its stacks come back.
        let short = sum.add(&one[..8], samples(&[0, 1], 4));
        assert_eq!(short.err().flatten().map(|s| s.taken), Some(4));
        let dump = sum.into_dump().expect("a sum");
        let m = &dump.memory;
        let calls: Vec<u64> = (0..3).map(|i| u64_at(m, l.calls_off + 8 * i)).collect();
        assert_eq!(calls, [2, 2, 3]);
        assert_eq!(u64_at(m, l.direct_arcs_off + 8), 12);
        let mut arcs: Vec<(u32, u32, u64)> =
            dyn_arcs(&l, m).map(|(_, s, c, n)| (s, c, n)).collect();
        arcs.sort_unstable();
        assert_eq!(arcs, [(0, 1, 2), (9, 3, 2)]);
        let stacks = dump.stacks.expect("the samples");
        assert_eq!((stacks.stacks.len(), stacks.stacks[0].samples), (1, 5));
        assert_eq!(stacks.taken, 5);
    }
}
