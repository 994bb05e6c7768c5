//! Threads: the profile of a threaded program's run is the merge of its threads' profiles
//! (the default view), and carries each thread's profile too ([`Thread`]), so that counts
//! are exact per thread and sum exactly.

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::{Dump, ProbeCost, Profile, RunInfo};
use crate::meta::Meta;

/// One thread of a run: its own profile, as decoded from its profiler's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    /// The module whose run it is.
    pub module: String,
    /// Its wasi-threads id: 0 for the main thread, then in the order they were spawned.
    pub id: u32,
    /// How it ended (`returned`, `waiting when the program ended`, ...).
    pub how: String,
    /// Its profile (which has no threads of its own).
    pub profile: Profile,
}

impl Thread {
    /// `main`, or `thread N`.
    pub fn label(&self) -> String {
        match self.id {
            0 => "main".to_string(),
            id => format!("thread {id}"),
        }
    }
}

/// What one thread of a threaded program left, before it is decoded.
#[derive(Debug, Clone)]
pub struct ThreadDump {
    /// Its id: 0 for the main thread, then in the order the threads started.
    pub tid: u32,
    /// Its profiler's state, for an instrumented module.
    pub dump: Option<Dump>,
    /// How it ended, in words (`returned`, `waiting when the program ended`, ...).
    pub how: String,
    /// Its trap's message, when it trapped.
    pub trap: Option<String>,
}

impl Profile {
    /// The profile of a run of `meta`'s module from what its main thread left (`main`,
    /// `run`) and, for a threaded program, every other thread (`threads`; the main
    /// thread's entry, id 0, says how it ended) and the ids of those whose state could not
    /// be collected (`lost`): the threads' profiles merged, each one kept. A thread whose
    /// state could not be read counts as lost.
    pub fn decode_threads(
        meta: &Meta,
        main: &Dump,
        run: RunInfo,
        threads: &[ThreadDump],
        lost: &[u32],
    ) -> anyhow::Result<Profile> {
        let module = run.module.clone();
        let main_profile =
            Profile::decode(meta, main, run.clone()).context("cannot decode the profile")?;
        if threads.is_empty() && lost.is_empty() {
            return Ok(main_profile);
        }
        let how = |tid: u32| threads.iter().find(|t| t.tid == tid).map(|t| t.how.clone());
        let mut decoded = vec![Thread {
            module: module.clone(),
            id: 0,
            how: how(0).unwrap_or_default(),
            profile: main_profile,
        }];
        let mut lost = lost.to_vec();
        for t in threads.iter().filter(|t| t.tid != 0) {
            let Some(dump) = &t.dump else {
                lost.push(t.tid);
                continue;
            };
            let run = RunInfo {
                module: format!("{module} (thread {})", t.tid),
                trap: t.trap.clone(),
                ..run.clone()
            };
            let profile = Profile::decode(meta, dump, run)
                .with_context(|| format!("cannot decode thread {}'s profile", t.tid))?;
            decoded.push(Thread {
                module: module.clone(),
                id: t.tid,
                how: t.how.clone(),
                profile,
            });
        }
        lost.sort_unstable();
        Ok(Profile::of_threads(decoded, lost))
    }

    /// The profile of one run of a threaded program: its threads' profiles merged, the
    /// main thread's (id 0) run and module its own, every thread kept in `threads`.
    /// `lost` are the threads whose state could not be collected: the profile is then
    /// incomplete, and its run says which.
    pub fn of_threads(mut threads: Vec<Thread>, lost: Vec<u32>) -> Profile {
        for t in &mut threads {
            t.profile.allocations_per_thread();
        }
        let parts: Vec<Profile> = threads.iter().map(|t| t.profile.clone()).collect();
        let mut merged = Profile::merge(&parts);
        // The threads share one memory: it is the pages it started with and every thread's
        // growth (merging runs takes the largest run's, each a process of its own).
        let initial = parts.iter().find_map(|p| {
            let a = p.allocations.as_ref()?;
            Some(a.memory_pages.saturating_sub(p.total_allocs().grown_pages))
        });
        let grown = merged.total_allocs().grown_pages;
        if let (Some(a), Some(initial)) = (merged.allocations.as_mut(), initial) {
            a.memory_pages = initial + grown;
        }
        if let Some(main) = threads.iter().find(|t| t.id == 0) {
            merged.modules = main.profile.modules.clone();
            merged.runs = main.profile.runs.clone();
        }
        // Where the program ended: in the thread that trapped, if one did (the run's trap
        // names it), else in the main thread.
        let ender = threads
            .iter()
            .find(|t| t.id != 0 && t.profile.runs.iter().any(|r| r.trap.is_some()));
        if let (Some(ender), Some(run)) = (ender, merged.runs.first_mut()) {
            run.open_stack = ender
                .profile
                .runs
                .first()
                .map(|r| r.open_stack.clone())
                .unwrap_or_default();
        }
        if let Some(run) = merged.runs.first_mut() {
            run.threads_lost = lost;
            merged.complete &= run.threads_lost.is_empty();
        }
        merged.threads = threads;
        merged
    }

    /// Subtracts the probes' cost thread by thread (a threaded profile) and merges again.
    pub(super) fn compensate_threads(&mut self, cost: ProbeCost) -> Result<(), String> {
        let mut threads = std::mem::take(&mut self.threads);
        for t in &mut threads {
            t.profile.compensate(cost)?;
        }
        let lost = self
            .runs
            .first()
            .map(|r| r.threads_lost.clone())
            .unwrap_or_default();
        *self = Profile::of_threads(threads, lost);
        Ok(())
    }
}
