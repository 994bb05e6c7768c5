//! The calling-context tree as the stack-shaped formats (folded stacks, flame graphs,
//! speedscope, the HTML page) draw it: frames with names, children in name order, and each
//! frame's weight: its cost in the profile's metric, or the bytes allocated there
//! ([`Weight`]).

use super::units;
use super::Weight;
use crate::meta::{Metric, Unit};
use crate::profile::Profile;

/// The frame above the entries whose paths were lost when the context tree was full.
pub const LOST_PATHS: &str = "[paths lost: context tree full]";

/// One frame: a calling context, or the root (the host).
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    /// The function's name (`<host>` for the root).
    pub name: &'a str,
    /// Index of the function in the profile's `functions`, `None` for the root and
    /// [`LOST_PATHS`].
    pub function: Option<u32>,
    /// The parent frame; `None` for the root.
    pub parent: Option<usize>,
    /// Calls along this path.
    pub calls: u64,
    /// Self weight: self time (ns), self instructions, or bytes allocated.
    pub self_weight: u64,
    /// Self weight plus the descendants' (so that children always fit in their parent).
    pub total: u64,
    /// Children, in name order.
    pub children: Vec<usize>,
}

/// The calling-context tree of a profile; frame 0 is the root.
pub struct Tree<'a> {
    /// The frames, parents before their children.
    pub frames: Vec<Frame<'a>>,
    /// The profile's metric.
    pub metric: Metric,
    /// What the weights count: the metric's cost, or bytes.
    pub weight: Weight,
}

impl<'a> Tree<'a> {
    /// The tree of `profile`, weighed by `weight`; fails for a profile without one (the
    /// calls metric records no calling contexts), or weighed by bytes without allocations.
    pub fn of(profile: &'a Profile, weight: Weight) -> anyhow::Result<Tree<'a>> {
        anyhow::ensure!(
            profile.metric.has_cost(),
            "this view needs calling contexts, which the calls metric does not record; \
             profile with the default metric, time"
        );
        if weight != Weight::Cost {
            let why = match &profile.allocations {
                None => Some("the profile says nothing of them"),
                Some(a) => a.not_recorded.as_deref(),
            };
            if let Some(why) = why {
                anyhow::bail!("weighed by bytes, but this profile recorded no allocations: {why}");
            }
        }
        anyhow::ensure!(
            profile.contexts.len() > 1,
            "nothing to draw: {}",
            match &profile.view {
                Some(view) => format!("the view ({}) keeps no stack", view.description),
                None if profile.sampled_contexts => format!(
                    "no sample found the program running (a run this short needs a shorter \
                     --sample-interval{})",
                    profile
                        .exact_costs_flag()
                        .map_or(String::new(), |flag| format!(", or {flag}"))
                ),
                None => "the profile has no calling context".to_string(),
            }
        );
        let metric = profile.metric;
        let mut frames = frames(profile, weight);
        for i in (0..frames.len()).rev() {
            frames[i].total += frames[i].self_weight;
            if let Some(parent) = frames[i].parent {
                frames[parent].total += frames[i].total;
            }
        }
        let names: Vec<&str> = frames.iter().map(|f| f.name).collect();
        for frame in &mut frames {
            frame
                .children
                .sort_by(|&a, &b| names[a].cmp(names[b]).then(a.cmp(&b)));
        }
        Ok(Tree {
            frames,
            metric,
            weight,
        })
    }

    /// What the weights count, for people: `nanoseconds`, `instructions`, `bytes`.
    pub fn unit_name(&self) -> &'static str {
        match self.weight {
            Weight::Cost => self.metric.facts().unit.name(),
            Weight::AllocBytes | Weight::HeldBytes => "bytes",
        }
    }

    /// Whether the weights are times (nanoseconds).
    pub fn is_time(&self) -> bool {
        self.weight == Weight::Cost && self.metric.facts().unit == Unit::Nanoseconds
    }

    /// A weight in words: `1.20 ms`, `3.40M instructions`, `640 B`.
    pub fn amount(&self, w: u64) -> String {
        match self.weight {
            Weight::Cost => units::amount(self.metric, w),
            Weight::AllocBytes | Weight::HeldBytes => units::bytes(w),
        }
    }

    /// Calls `visit(frame, depth)` for every frame below the root, parents first and
    /// children in name order; the root's children have depth 1.
    pub fn preorder(&self, visit: &mut dyn FnMut(usize, usize)) {
        let mut stack: Vec<(usize, usize)> = self.frames[0]
            .children
            .iter()
            .rev()
            .map(|&c| (c, 1))
            .collect();
        while let Some((id, depth)) = stack.pop() {
            visit(id, depth);
            stack.extend(
                self.frames[id]
                    .children
                    .iter()
                    .rev()
                    .map(|&c| (c, depth + 1)),
            );
        }
    }

    /// The frame names from the outermost frame down to `id` (the root left out).
    pub fn path(&self, id: usize) -> Vec<&'a str> {
        let mut names = Vec::new();
        let mut at = Some(id);
        while let Some(frame) = at.filter(|&f| f != 0).map(|f| &self.frames[f]) {
            names.push(frame.name);
            at = frame.parent;
        }
        names.reverse();
        names
    }
}

/// A frame of no function, with no weight yet, under `parent`.
fn empty_frame(name: &str, parent: Option<usize>) -> Frame<'_> {
    Frame {
        name,
        function: None,
        parent,
        calls: 0,
        self_weight: 0,
        total: 0,
        children: Vec::new(),
    }
}

/// The frames of `profile`'s contexts, parents before their children: the root, and the
/// lost paths (the fold nodes, under one frame of their own, when the tree was full).
fn frames(profile: &Profile, weight: Weight) -> Vec<Frame<'_>> {
    let own = |c: &crate::profile::Context| {
        let a = c.alloc.unwrap_or_default();
        match weight {
            Weight::Cost => c.cost.get(profile.metric).0,
            Weight::AllocBytes => a.alloc_bytes,
            Weight::HeldBytes => a.held_bytes,
        }
    };
    let mut frames = vec![empty_frame(crate::profile::HOST, None)];
    let mut frame_of: Vec<Option<usize>> = vec![None; profile.contexts.len()];
    frame_of[0] = Some(0);
    let mut lost = None;
    for start in 0..profile.contexts.len() {
        // Resolve the unresolved ancestors of `start`, outermost first.
        let mut pending = Vec::new();
        let mut at = start;
        while frame_of[at].is_none() {
            pending.push(at);
            at = profile.contexts[at].parent.unwrap_or(0) as usize;
        }
        for &id in pending.iter().rev() {
            let c = &profile.contexts[id];
            let mut parent = frame_of[c.parent.unwrap_or(0) as usize].unwrap_or(0);
            if c.folded {
                parent = *lost.get_or_insert_with(|| {
                    frames.push(empty_frame(LOST_PATHS, Some(0)));
                    let index = frames.len() - 1;
                    frames[0].children.push(index);
                    index
                });
            }
            let function = c.function.and_then(|f| profile.functions.get(f as usize));
            frames.push(Frame {
                name: function.map_or("<unknown>", |f| f.name.as_str()),
                function: c.function,
                parent: Some(parent),
                calls: c.calls,
                self_weight: own(c),
                total: 0,
                children: Vec::new(),
            });
            let index = frames.len() - 1;
            frames[parent].children.push(index);
            frame_of[id] = Some(index);
        }
    }
    frames
}
