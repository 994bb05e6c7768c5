//! The program's allocations in the profile: each context's figures ([`Allocs`], exact:
//! the allocator probes count every call), and the run's ([`Allocations`]: what was still
//! held at the end, the peak, and what the live table could not follow).

use serde::{Deserialize, Serialize};

use super::outermost::outermost_sums;
use super::{Context, Profile};

/// A calling context's allocations: those its allocator calls made, the frees, the bytes
/// of each, what was still held at the end of what it allocated, and the pages it grew the
/// memory by. A context's figures are its own: its callers' are the sums over its subtree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocs {
    /// Allocations (a realloc that moves or resizes is one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub allocs: u64,
    /// The bytes they asked for.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub alloc_bytes: u64,
    /// Frees (a realloc's of its old block is one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub frees: u64,
    /// The bytes they freed, as their allocations asked for them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub freed_bytes: u64,
    /// Of the allocations made here, those still held at the end.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held: u64,
    /// Their bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held_bytes: u64,
    /// The 64 KiB pages `memory.grow` added here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grown_pages: u64,
    /// Of the allocations made here, those live at the peak of live bytes (dhat's "at
    /// t-gmax"; of a merged profile, those of the run with the largest peak).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub at_peak: u64,
    /// Their bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub at_peak_bytes: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

impl Allocs {
    /// Adds `other` in.
    pub fn add(&mut self, other: &Allocs) {
        self.allocs += other.allocs;
        self.alloc_bytes += other.alloc_bytes;
        self.frees += other.frees;
        self.freed_bytes += other.freed_bytes;
        self.held += other.held;
        self.held_bytes += other.held_bytes;
        self.grown_pages += other.grown_pages;
        self.at_peak += other.at_peak;
        self.at_peak_bytes += other.at_peak_bytes;
    }

    /// Whether nothing happened here.
    pub fn is_empty(&self) -> bool {
        *self == Allocs::default()
    }

    /// `Some(self)` unless nothing happened.
    pub fn non_empty(self) -> Option<Allocs> {
        (!self.is_empty()).then_some(self)
    }
}

/// What a profile records of the program's allocations as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocations {
    /// Why they are not recorded (then nothing else here is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_recorded: Option<String>,
    /// The allocator entry points found, by name (none: only `memory.grow` was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocators: Vec<String>,
    /// The most bytes live at once (of a merged profile's runs, the largest run's; each
    /// run is a process of its own).
    pub peak_bytes: u64,
    /// The 64 KiB pages of the program's memory at the end: those it started with and
    /// those grown (of a merged profile's runs, the largest).
    #[serde(default)]
    pub memory_pages: u64,
    /// The live bytes at the moment the contexts' `at_peak` figures are of: `peak_bytes`
    /// (of a merged profile's runs, the largest).
    #[serde(default)]
    pub at_peak_bytes: u64,
    /// Of a merged profile of several runs, the module whose run had the largest peak:
    /// `peak_bytes` and the contexts' `at_peak` figures are that run's alone (each run is a
    /// process of its own, so the runs' peaks are no one moment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_module: Option<String>,
    /// Allocations the live table had no room for (counted in their contexts, but not in
    /// the bytes held or the peak).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub untracked: u64,
    /// Their bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub untracked_bytes: u64,
    /// Frees of an address the live table did not hold (an untracked allocation's, a
    /// block the allocator gave out before the probes saw it, or, in a threaded program,
    /// one that another thread allocated).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unmatched_frees: u64,
    /// Recorded thread by thread (a threaded program): each thread's probes match the frees
    /// they see with the blocks their thread allocated, so a block freed on another thread
    /// is an unmatched free there and still held in its allocating context (the held
    /// figures are then an upper bound), and the program's peak of live bytes is not known
    /// (`peak_bytes` and every at-peak figure are 0). The allocations, the frees and the
    /// pages grown are exact.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_thread: bool,
}

impl Allocations {
    /// The summary of several runs' (merged into one profile).
    pub fn merge<'a>(runs: impl IntoIterator<Item = &'a Allocations>) -> Option<Allocations> {
        let mut merged: Option<Allocations> = None;
        for run in runs {
            let m = merged.get_or_insert_with(|| Allocations {
                not_recorded: run.not_recorded.clone(),
                ..Allocations::default()
            });
            if m.not_recorded.is_some() && run.not_recorded.is_none() {
                m.not_recorded = None;
            }
            for name in &run.allocators {
                if !m.allocators.contains(name) {
                    m.allocators.push(name.clone());
                }
            }
            m.peak_bytes = m.peak_bytes.max(run.peak_bytes);
            m.memory_pages = m.memory_pages.max(run.memory_pages);
            m.at_peak_bytes = m.at_peak_bytes.max(run.at_peak_bytes);
            m.untracked += run.untracked;
            m.untracked_bytes += run.untracked_bytes;
            m.unmatched_frees += run.unmatched_frees;
            m.per_thread |= run.per_thread;
        }
        merged
    }

    /// The peak of live bytes, where it is known (not where they were recorded
    /// [`Allocations::per_thread`]).
    pub fn peak(&self) -> Option<u64> {
        (!self.per_thread).then_some(self.peak_bytes)
    }

    /// Whether the bytes held at the end may count blocks freed since: recorded
    /// [`Allocations::per_thread`], with frees no thread's own table matched.
    pub fn held_is_upper_bound(&self) -> bool {
        self.per_thread && self.unmatched_frees > 0
    }
}

impl Profile {
    /// Whether the run recorded the program's allocations (its summary has no reason why
    /// not).
    pub fn records_allocations(&self) -> bool {
        self.allocations
            .as_ref()
            .is_some_and(|a| a.not_recorded.is_none())
    }

    /// Marks a thread's allocations as recorded [`Allocations::per_thread`]: its peak and
    /// at-peak figures are its own thread's, not the program's, so they go.
    pub(super) fn allocations_per_thread(&mut self) {
        let Some(a) = self
            .allocations
            .as_mut()
            .filter(|a| a.not_recorded.is_none())
        else {
            return;
        };
        a.per_thread = true;
        a.peak_bytes = 0;
        a.at_peak_bytes = 0;
        for c in &mut self.contexts {
            if let Some(alloc) = c.alloc.as_mut() {
                alloc.at_peak = 0;
                alloc.at_peak_bytes = 0;
            }
        }
    }

    /// Every context's allocations summed: the program's.
    pub fn total_allocs(&self) -> Allocs {
        let mut total = Allocs::default();
        for c in &self.contexts {
            if let Some(a) = &c.alloc {
                total.add(a);
            }
        }
        total
    }

    /// Each context's allocations with its subtree's (children come after their parents).
    pub fn inclusive_allocs(&self) -> Vec<Allocs> {
        let mut incl: Vec<Allocs> = self
            .contexts
            .iter()
            .map(|c: &Context| c.alloc.unwrap_or_default())
            .collect();
        for j in (1..self.contexts.len()).rev() {
            if let Some(parent) = self.contexts[j].parent {
                let child = incl[j];
                incl[parent as usize].add(&child);
            }
        }
        incl
    }

    /// The bytes each function allocated with everything it called, by function id, counted
    /// once per outermost activation (right under recursion), as its inclusive cost is.
    pub fn function_alloc_bytes(&self) -> Vec<u64> {
        let inclusive: Vec<u64> = self
            .inclusive_allocs()
            .iter()
            .map(|a| a.alloc_bytes)
            .collect();
        let functions: Vec<Option<usize>> = self
            .contexts
            .iter()
            .map(|c| c.function.map(|f| f as usize))
            .collect();
        let parents = self.contexts.iter().map(|c| c.parent.map(|up| up as usize));
        outermost_sums(parents, &functions, &inclusive, self.functions.len())
    }
}
