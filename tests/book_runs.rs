//! The README and the book run: the bundled example's benchmark, run as the README's first
//! command runs it (with the flags the README names for its excerpt), and every line of
//! each report the pages show of it found in what it printed, its figures (the machine's)
//! elided; and the getting-started page's commands, in turn, on the example.

mod common;

use std::collections::HashSet;
use std::path::Path;

use common::{copy_dir, have, output, wasmprof};

/// A report line as a pattern: every figure (a number, with its unit if it has one) and
/// every unit a column's header names made `#`, `~` (a figure from few samples) left out,
/// cargo's hash in a file name elided, the samples outside the program (a run may have
/// none) left out, the spaces collapsed.
fn shape(line: &str) -> String {
    let outside = regex::Regex::new(r", [\d,]+ outside the program's functions \([^)]*\)").unwrap();
    let line = outside.replace_all(line, "");
    let hash = regex::Regex::new(r"-[0-9a-f]{16}\b").unwrap();
    let figure = regex::Regex::new(r"~?\d[\d,.]*( ?(ns|µs|ms|s)\b)?").unwrap();
    let unit = regex::Regex::new(r"\b(ns|µs|ms|s)\b").unwrap();
    let line = hash.replace_all(&line, "-HASH");
    let line = figure.replace_all(&line, "#");
    let line = unit.replace_all(&line, "#");
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The lines of `doc`'s ```text blocks that show the bundled example's report (those
/// that name its crate), "..." (a cut) left out.
fn example_lines(doc: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in doc.lines() {
        match (&mut block, line.trim_start()) {
            (None, "```text") => block = Some(Vec::new()),
            (Some(b), "```") => {
                if b.iter().any(|l| l.contains("textstats")) {
                    lines.extend(
                        b.iter()
                            .filter(|l| l.trim() != "...")
                            .map(|l| l.to_string()),
                    );
                }
                block = None;
            }
            (Some(b), _) => b.push(line),
            (None, _) => {}
        }
    }
    lines
}

#[test]
fn the_example_reports_the_readme_and_the_book_show_are_what_the_bench_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root.join("example"), dir.path());
    let out = output(
        wasmprof()
            .args([
                "bench",
                "--bench",
                "textstats",
                "--top",
                "6",
                "--call-graph",
                "1",
            ])
            .current_dir(dir.path()),
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: HashSet<String> = printed.lines().map(shape).collect();
    let mut shown = 0;
    let mut missing = Vec::new();
    for doc in ["README.md", "docs/src/report.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for line in example_lines(&text) {
            shown += 1;
            if !printed.contains(&shape(&line)) {
                missing.push(format!("{doc}: {line}\n  as {}", shape(&line)));
            }
        }
    }
    assert!(shown >= 15, "{shown} lines of the example's report shown");
    assert!(
        missing.is_empty(),
        "shown but not printed (figures elided):\n{}\nprinted:\n{}",
        missing.join("\n"),
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The getting-started page's commands, in its order, in a copy of the bundled example
/// (`mycrate` is `textstats`, `'parse$'` its `'distance$'`): each succeeds and writes what
/// the page says it writes.
#[test]
fn the_getting_started_commands_run_on_the_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/src/getting-started.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root.join("example"), dir.path());
    let profiles = dir.path().join("target/wasmprof");
    let steps: [(&str, &[&str], Option<&Path>); 6] = [
        (
            "cargo wasmprof test",
            &["test"],
            Some(&profiles.join("textstats-textstats-lib.json")),
        ),
        (
            "cargo wasmprof test --format html",
            &["test", "--format", "html"],
            Some(&profiles.join("report.html")),
        ),
        (
            "cargo wasmprof test -o profile.json",
            &["test", "-o", "profile.json"],
            Some(&dir.path().join("profile.json")),
        ),
        (
            "cargo wasmprof report profile.json --format pprof -o p.pb.gz",
            &[
                "report",
                "profile.json",
                "--format",
                "pprof",
                "-o",
                "p.pb.gz",
            ],
            Some(&dir.path().join("p.pb.gz")),
        ),
        (
            "cargo wasmprof test --metric instructions",
            &["test", "--metric", "instructions"],
            None,
        ),
        (
            "cargo wasmprof annotate target/wasmprof/mycrate-mycrate-lib.json 'parse$'",
            &[
                "annotate",
                "target/wasmprof/textstats-textstats-lib.json",
                "distance$",
            ],
            None,
        ),
    ];
    for (shown, args, writes) in steps {
        assert!(page.contains(shown), "the page no longer shows `{shown}`");
        if let Some(file) = writes {
            let _ = std::fs::remove_file(file);
        }
        let out = output(wasmprof().args(args).current_dir(dir.path()));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "`{shown}`: {said}");
        if let Some(file) = writes {
            assert!(file.is_file(), "`{shown}` wrote no {}", file.display());
        }
        if args[0] == "annotate" {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("textstats::distance"), "{text}");
        }
    }
    if have(&["go"]) {
        let out = output(
            std::process::Command::new("go")
                .args(["tool", "pprof", "-top", "p.pb.gz"])
                .current_dir(dir.path()),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
