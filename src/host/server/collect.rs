//! The collector: one thread that takes each request's report, decodes its profile and
//! merges it into the server's (a batch at a time, off the workers' path), counts the
//! requests route by route, and says when enough have been answered.

use std::sync::mpsc;
use std::sync::Arc;

use tokio::sync::Notify;

use super::worker::Done;
use super::Served;
use crate::host::{Outcome, TRAP_EXIT_CODE};
use crate::meta::Meta;
use crate::profile::{Profile, Requests};
use crate::status::Spinner;

/// How many requests' profiles are merged at once.
const BATCH: usize = 64;

/// The distinct traps (message and open stack) whose run is kept in the profile; the
/// requests section counts every trapped request.
const TRAPS_KEPT: usize = 16;

/// Takes the workers' reports until they have all stopped; once `limit` requests have been
/// answered, notifies `stop`. The requests' profiles (of a component that carries the
/// profiler, `meta`'s), and the workers' sums of them, merge into one, of `module`.
pub(super) fn run(
    reports: mpsc::Receiver<Done>,
    meta: Option<&Meta>,
    module: &str,
    limit: Option<u64>,
    stop: &Arc<Notify>,
    spinner: &Spinner,
) -> anyhow::Result<Served> {
    let mut requests = Requests::default();
    let mut merged: Option<Profile> = None;
    let mut batch = Vec::with_capacity(BATCH);
    for done in reports {
        let report = match done {
            Done::Request(report) => report,
            Done::Summed(dump) => {
                if let Some(meta) = meta {
                    let outcome = Outcome::of_one_thread(0, None, Some(dump), 0);
                    batch.push(outcome.profile(meta, module)?);
                }
                continue;
            }
        };
        requests.add(&report.route, report.answer);
        let total = requests.total();
        spinner.set_message(format!("{total} requests"));
        if limit == Some(total) {
            stop.notify_one();
        }
        if let (Some(meta), Some(dump)) = (meta, report.dump) {
            let exit_code = report.trap.as_ref().map_or(0, |_| TRAP_EXIT_CODE);
            let (trap, wall_ns) = (report.trap, report.answer.latency_ns);
            let outcome = Outcome::of_one_thread(exit_code, trap, Some(dump), wall_ns);
            let mut p = outcome.profile(meta, module)?;
            for run in &mut p.runs {
                run.module = format!("{module}: a request to {}", report.route);
            }
            batch.push(p);
        }
        if batch.len() == BATCH {
            merged = Some(merge(merged.take(), &mut batch));
        }
    }
    if !batch.is_empty() {
        merged = Some(merge(merged.take(), &mut batch));
    }
    requests.sort();
    let profile = merged.map(|mut p| {
        if let Some(sampling) = p.sampling.as_mut() {
            sampling.cpu = true;
            sampling.tick = crate::host::stacks::cpu_timer_fallback().is_some();
        }
        p.runs.iter_mut().for_each(|r| r.component = true);
        p.requests = Some(requests.clone());
        p
    });
    Ok(Served { profile, requests })
}

/// `merged` (if any) and `batch` as one profile, `batch` emptied. Of the requests' runs,
/// one stands for those that ended cleanly, and each distinct trap keeps one (up to
/// [`TRAPS_KEPT`]): a profile of a million requests does not list a million runs.
fn merge(merged: Option<Profile>, batch: &mut Vec<Profile>) -> Profile {
    let mut all: Vec<Profile> = merged.into_iter().collect();
    all.append(batch);
    let mut p = Profile::merge(&all);
    let mut kept: Vec<crate::profile::RunInfo> = Vec::new();
    for run in p.runs.drain(..) {
        let same =
            |k: &crate::profile::RunInfo| k.trap == run.trap && k.open_stack == run.open_stack;
        let room = run.trap.is_none() || kept.len() <= TRAPS_KEPT;
        if room && !kept.iter().any(same) {
            kept.push(run);
        }
    }
    p.modules.dedup();
    p.complete = kept.iter().all(|r| r.trap.is_none());
    p.runs = kept;
    p
}
