//! Measures what the time probes cost, so that it can be subtracted from a profile
//! ([`Profile::compensate`]).
//!
//! A small module calls an empty function `CALLS` times from a loop. Profiled, the empty
//! function's self time per call is the probe time that lands inside every activation's
//! own window; the loop's self time, less the whole uninstrumented run, per call, is the
//! probe time that lands in the caller. Both run in the same host with the same clock as
//! the program, a few times over, and the smallest measurements are kept: noise only ever
//! adds time, and subtracting too much is worse than too little (it hides small functions).

use anyhow::Context as _;

use crate::clock::ClockChoice;
use crate::host::{self, RunConfig};
use crate::instrument::{self, Options};
use crate::profile::{ProbeCost, Profile};

const CALLS: u32 = 100_000;
const ROUNDS: usize = 5;

const MODULE: &str = r#"
(module
  (memory (export "memory") 1)
  (func $leaf)
  (func $loop (param $n i32)
    (loop $again
      (call $leaf)
      (br_if $again (local.tee $n (i32.sub (local.get $n) (i32.const 1))))))
  (func (export "_start") (call $loop (i32.const 100000))))
"#;

/// The probes' cost per call with `clock`.
pub fn probe_cost(clock: ClockChoice) -> anyhow::Result<ProbeCost> {
    let plain = wat::parse_str(MODULE).context("the calibration module")?;
    let instrumented = instrument::instrument(&plain, &Options::default())?;
    let config = RunConfig {
        inherit_stdio: false,
        clock,
        ..RunConfig::new("calibration", Vec::new(), ".")
    };
    let mut in_callee = Vec::with_capacity(ROUNDS);
    let mut in_caller = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let plain_ns = host::run(&plain, &config)?.wall_ns as f64;
        let outcome = host::run(&instrumented.wasm, &config)?;
        let dump = outcome
            .state
            .as_ref()
            .context("the calibration module left no profile")?;
        let profile = Profile::decode(&instrumented.meta, dump, outcome.run_info("calibration"))?;
        let self_ns = |name: &str| {
            profile
                .function_named(name)
                .map(|f| f.cost.self_ns as f64)
                .context("the calibration profile misses a function")
        };
        in_callee.push(self_ns("leaf")? / f64::from(CALLS));
        in_caller.push(((self_ns("loop")? - plain_ns) / f64::from(CALLS)).max(0.0));
    }
    let least = |xs: Vec<f64>| xs.into_iter().fold(f64::INFINITY, f64::min);
    Ok(ProbeCost {
        in_callee_ns: least(in_callee),
        in_caller_ns: least(in_caller),
    })
}
