//! Hints never point at a refusal: every flag (or `wasmprof-emcc`'s variable) that a run's
//! output, its report, `annotate` or a refused view suggests for a profile is one that the
//! same command takes in the same setting. A flag of `report` is tried on the profile; any
//! other is given to the command that made the profile, run again with it.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use super::{output, wasmprof};

/// A suggestion: a flag with its value (`["--metric", "instructions"]`, `["--show-helpers"]`),
/// or a variable's setting (`["WASMPROF_METRIC=instructions"]`).
pub type Hint = Vec<String>;

/// An example value for a flag a hint names without one (`a shorter --sample-interval`),
/// or with a placeholder (`--max-contexts N`).
fn example_value(flag: &str) -> Option<&'static str> {
    match flag {
        "--sample-interval" => Some("100"),
        "--max-contexts" | "--max-live-allocations" => Some("100000"),
        "--call-graph" => Some("3"),
        "--top" => Some("all"),
        _ => None,
    }
}

/// The suggestions in `said`: our flags (not node's own, `node --no-wasm-lazy-compilation`)
/// and `WASMPROF_*=` settings.
pub fn suggested(said: &str) -> BTreeSet<Hint> {
    let flag = regex::Regex::new(
        r"(node )?(--[a-z][a-z-]+)(?:[ =](all|full|instructions|calls|time|exact-time|N|[0-9]+)\b)?",
    )
    .unwrap();
    let variable = regex::Regex::new(r"\b(WASMPROF_[A-Z_]+=[a-z0-9-]+)").unwrap();
    let mut hints = BTreeSet::new();
    for c in flag.captures_iter(said) {
        if c.get(1).is_some() {
            continue;
        }
        let name = c[2].to_string();
        let value = match c.get(3).map(|v| v.as_str()) {
            Some("N") | None => example_value(&name),
            Some(v) => Some(v),
        };
        hints.insert(
            [Some(name.as_str()), value]
                .into_iter()
                .flatten()
                .map(String::from)
                .collect(),
        );
    }
    for c in variable.captures_iter(said) {
        hints.insert(vec![c[1].to_string()]);
    }
    hints
}

/// What the readers of the profile `file` say of it: its report (every row), `annotate`,
/// and a stack view, which refuses some profiles with a reason.
pub fn said_of(file: &Path) -> String {
    let mut said = String::new();
    let views = tempfile::tempdir().unwrap();
    let folded = views.path().join("stacks.folded");
    let folded = folded.to_str().unwrap();
    for args in [
        &["report", "--top", "all"][..],
        &["annotate"],
        &["report", "--format", "folded", "-o", folded],
    ] {
        let out = output(wasmprof().arg("wasmprof").args(args).arg(file));
        said.push_str(&String::from_utf8_lossy(&out.stdout));
        said.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    said
}

/// Every suggestion of `run_output` (the output of the command that made `file`) and of
/// the profile's readers is taken: `report` tries its own flags on `file`; `rerun` runs
/// the command that made it again with any other, in the same setting, and gives its
/// output, or `None` for a hint meant for another setting (`--metric` under
/// `wasmprof-emcc`, whose settings are variables). Returns the hints checked.
pub fn check_hints(
    file: &Path,
    run_output: &str,
    rerun: impl Fn(&Hint) -> Option<Output>,
) -> BTreeSet<Hint> {
    let hints = suggested(&format!("{run_output}\n{}", said_of(file)));
    for hint in &hints {
        let is_flag = hint[0].starts_with("--");
        if is_flag {
            let out = output(wasmprof().args(["wasmprof", "report"]).args(hint).arg(file));
            // Exit code 2: clap's, a flag `report` does not take.
            if out.status.code() != Some(2) {
                assert!(
                    out.status.success(),
                    "`report {hint:?}` refused what was suggested"
                );
                continue;
            }
        }
        if let Some(out) = rerun(hint) {
            assert!(
                out.status.success(),
                "{hint:?} was suggested for {}, and the command refuses it:\n{}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    hints
}
