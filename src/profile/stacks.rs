//! What the stack sampler took of one thread ([`StackSamples`]), and how the decoder
//! places it in the calling-context tree: each sample's stack of function ids is a path
//! from the root down the tree's children.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// The samples the stack sampler took of one thread, summed by stack.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StackSamples {
    /// Each distinct stack, with its count and time.
    pub stacks: Vec<StackSample>,
    /// Samples taken, all of them.
    pub taken: u64,
    /// Samples that found the probes' own code running: left out of every time.
    pub in_probes: u64,
    /// Samples that found the thread outside the module's code with no wasm frame under it
    /// (wasmtime entering or leaving the module), and their time: left out of the
    /// functions'.
    pub outside: u64,
    /// See [`StackSamples::outside`].
    pub outside_ns: u64,
    /// Samples of stacks too deep to keep whole, and their time.
    pub truncated: u64,
    /// See [`StackSamples::truncated`].
    pub truncated_ns: u64,
    /// Samples the sampler had no room for, and their time.
    pub dropped: u64,
    /// See [`StackSamples::dropped`].
    pub dropped_ns: u64,
    /// V8's samples of a page, through the JS Self-Profiling API (every 10 ms at best in
    /// Chromium).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_page: bool,
}

/// One stack the sampler found, and how often.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackSample {
    /// The function ids of its wasm frames, outermost first: the outermost one the host
    /// called, the innermost one running (or, in host code, the import that runs it, or the
    /// function whose instruction it runs).
    pub frames: Vec<u32>,
    /// The line of its innermost frame ([`crate::meta::LineTables`]), or
    /// [`crate::meta::NO_LINE`].
    pub line: u32,
    /// The thread was in host code that the innermost frame called: the import that frame
    /// is, or wasmtime's own work for one of its instructions (`memory.grow`,
    /// `memory.copy`, a wait).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_host: bool,
    /// How many samples found it.
    pub samples: u64,
    /// The time they stand for, in nanoseconds.
    pub ns: u64,
}

/// The children of each context node, by function id, for placing stacks.
pub(super) struct Children(HashMap<(u32, u32), u32>);

impl Children {
    /// The children of a tree whose nodes are given as (parent, function), context nodes
    /// from `first_context` on.
    pub(super) fn of(nodes: impl Iterator<Item = (u32, u32)>, first_context: u32) -> Children {
        Children(
            nodes
                .enumerate()
                .skip(first_context as usize)
                .map(|(n, (parent, func))| ((parent, func), n as u32))
                .collect(),
        )
    }

    /// The deepest node of the path `frames` (function ids, outermost first) takes from the
    /// root, as far as the tree has it (the root where it has none of it).
    pub(super) fn deepest(&self, frames: &[u32]) -> u32 {
        let mut node = 0;
        for &f in frames {
            match self.0.get(&(node, f)) {
                Some(&child) => node = child,
                None => break,
            }
        }
        node
    }

    /// The node `frames` (function ids, outermost first) lead to from the root; where a
    /// child is missing and the tree was `full`, its function's fold node (node f + 1),
    /// else `None`.
    pub(super) fn place(&self, frames: &[u32], full: bool) -> Option<u32> {
        let mut node = 0;
        for &f in frames {
            node = match self.0.get(&(node, f)) {
                Some(&child) => child,
                None if full => f + 1,
                None => return None,
            };
        }
        Some(node)
    }
}
