//! Measures what the time probes cost, so that it can be subtracted from a profile
//! ([`Profile::compensate`]).
//!
//! Two small modules, each run plain and profiled in the embedded host with the same clock as
//! the program, a few times over (medians are kept):
//! - a call-dense recursion (every activation makes three calls or none, like the naive
//!   recursions that suffer most from the probes): its sum of self times less the plain
//!   run, per call, is what the probes add to a call;
//! - an empty function called from a loop: its self time per call is the part of that cost
//!   inside the callee's own window, the loop's self time less the plain run the part in
//!   the caller; their ratio splits the cost between callee and caller.

use anyhow::Context as _;

use crate::clock::ClockChoice;
use crate::host::{Embedded, RunConfig};
use crate::instrument::{self, Instrumented, Options};
use crate::meta::Metric;
use crate::profile::{ProbeCost, Profile};

const ROUNDS: usize = 7;

/// Calls of `$leaf` in [`SPLIT`].
const SPLIT_CALLS: u32 = 100_000;

const SPLIT: &str = r#"
(module
  (memory (export "memory") 1)
  (func $leaf)
  (func $loop (param $n i32)
    (loop $again
      (call $leaf)
      (br_if $again (local.tee $n (i32.sub (local.get $n) (i32.const 1))))))
  (func (export "_start") (call $loop (i32.const 100000))))
"#;

/// Calls of `$tree` in [`DENSE`]: (3^11 - 1) / 2, a ternary tree of depth 10.
const DENSE_CALLS: u32 = 88_573;

const DENSE: &str = r#"
(module
  (memory (export "memory") 1)
  (func $tree (param $d i32) (result i32)
    (if (result i32) (i32.eqz (local.get $d))
      (then (i32.const 1))
      (else
        (local.set $d (i32.sub (local.get $d) (i32.const 1)))
        (i32.add (i32.const 1)
          (i32.add (call $tree (local.get $d))
            (i32.add (call $tree (local.get $d)) (call $tree (local.get $d))))))))
  (func (export "_start") (drop (call $tree (i32.const 10)))))
"#;

/// A calibration module, plain and instrumented.
struct Calibration {
    plain: Vec<u8>,
    instrumented: Instrumented,
}

impl Calibration {
    fn new(wat: &str) -> anyhow::Result<Calibration> {
        let plain = wat::parse_str(wat).context("a calibration module")?;
        let instrumented = instrument::instrument(
            &plain,
            &Options {
                metric: Metric::ExactTime,
                ..Options::default()
            },
        )?;
        Ok(Calibration {
            plain,
            instrumented,
        })
    }

    /// Runs both: the plain run's time (ns) and the profile.
    fn run(&self, config: &RunConfig) -> anyhow::Result<(f64, Profile)> {
        let plain_ns = Embedded.run_module(&self.plain, config)?.wall_ns as f64;
        let profile = Embedded
            .run_module(&self.instrumented.wasm, config)?
            .profile(&self.instrumented.meta, "calibration")?;
        Ok((plain_ns, profile))
    }
}

fn self_ns(profile: &Profile, name: &str) -> anyhow::Result<f64> {
    profile
        .function_named(name)
        .map(|f| f.cost.self_ns as f64)
        .context("a calibration profile misses a function")
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The probes' cost per call with `clock`.
pub fn probe_cost(clock: ClockChoice) -> anyhow::Result<ProbeCost> {
    let split = Calibration::new(SPLIT)?;
    let dense = Calibration::new(DENSE)?;
    let config = RunConfig {
        inherit_stdio: false,
        clock,
        ..RunConfig::new("calibration", Vec::new(), ".")
    };
    let (mut in_callee, mut in_caller, mut per_call) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (plain_ns, profile) = split.run(&config)?;
        in_callee.push(self_ns(&profile, "leaf")? / f64::from(SPLIT_CALLS));
        in_caller.push(((self_ns(&profile, "loop")? - plain_ns) / f64::from(SPLIT_CALLS)).max(0.0));
        let (plain_ns, profile) = dense.run(&config)?;
        let self_sum: f64 = profile
            .functions
            .iter()
            .map(|f| f.cost.self_ns as f64)
            .sum();
        per_call.push(((self_sum - plain_ns) / f64::from(DENSE_CALLS)).max(0.0));
    }
    let (in_callee, in_caller) = (median(in_callee), median(in_caller));
    let per_call = median(per_call);
    let share = if in_callee + in_caller > 0.0 {
        in_callee / (in_callee + in_caller)
    } else {
        0.5
    };
    Ok(ProbeCost {
        in_callee_ns: per_call * share,
        in_caller_ns: per_call * (1.0 - share),
    })
}
