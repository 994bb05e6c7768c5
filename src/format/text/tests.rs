//! The text report's choices that no real run pins down: why a run got few samples, and
//! what the sections of a short run show.

use super::header::few_samples_why;
use super::*;
use crate::profile::Sampling;

#[test]
fn a_run_with_few_samples_says_whether_it_was_short_or_the_sampler_starved() {
    // A short run: its few samples came when asked.
    let short = Sampling {
        samples: 3,
        idle: 1,
        ..Sampling::default()
    };
    assert_eq!(few_samples_why(&short), "the run was too short to sample");
    // A run whose sampler shared the program's CPU: two of its three samples came late,
    // each after a time slice of the program's (the only figures the wording reads).
    let starved = Sampling {
        samples: 2,
        idle: 1,
        late: 2,
        ..Sampling::default()
    };
    assert!(few_samples_why(&starved).contains("seldom got a CPU"));
    // A server's workers, sampled on their CPU time by POSIX timers: the timers' tick.
    let served = Sampling {
        samples: 3,
        idle: 30,
        cpu: true,
        tick: true,
        ..Sampling::default()
    };
    assert!(few_samples_why(&served).contains("kernel's tick"));
    let task_clock = Sampling {
        tick: false,
        ..served
    };
    assert_eq!(
        few_samples_why(&task_clock),
        "the load was too short to sample"
    );
}

#[test]
fn a_short_run_lists_what_its_samples_found_or_ranks_by_calls_if_they_found_none() {
    // Two functions called 5 and 7 times; the run's one sample found `a`, or nothing
    // that the sections show (the runtime's scaffolding, left out of the view).
    let profile = |sampled: bool| {
        let ns = 1000 * u64::from(sampled);
        Profile {
            metric: Metric::Time,
            sampling: Some(Sampling {
                samples: 1,
                ..Sampling::default()
            }),
            functions: vec![
                Function {
                    cost: Costs::in_unit(Metric::Time, ns, ns, Some(u64::from(sampled))),
                    ..Function::of_calls(0, "a", 5)
                },
                Function {
                    cost: Costs::in_unit(Metric::Time, 0, 0, Some(0)),
                    ..Function::of_calls(1, "b", 7)
                },
            ],
            ..Profile::merge(&[])
        }
    };
    let options = EmitOptions {
        top: Some(10),
        ..EmitOptions::default()
    };
    let names = |rows: &FlatRows| rows.rows.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
    let elisions = Default::default();
    let found = profile(true);
    let units = Units::of(&found, &options, &elisions);
    let rows = FlatRows::of(&found, None, &options, units);
    assert!(rows.by_samples && rows.unsampled);
    assert_eq!(names(&rows), ["a"]);
    let none = profile(false);
    let units = Units::of(&none, &options, &elisions);
    let rows = FlatRows::of(&none, None, &options, units);
    assert!(!rows.by_samples && !rows.unsampled);
    assert_eq!(names(&rows), ["b", "a"], "by calls");
}
