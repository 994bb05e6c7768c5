//! The README and the book run: the bundled example's benchmark, run as the README's first
//! command runs it (with the flags the README names for its excerpt), and every line of
//! each report the pages show of it found in what it printed, its figures (the machine's)
//! elided; the getting-started page's commands, in turn, on the example; and every
//! command line of the README and the book, on the example or with the reason it cannot.

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

/// Why a command line of the book does not run on the bundled example in `dir` (a library
/// of one bench, `textstats`), or `None` where it does.
fn not_runnable(words: &[String], dir: &Path) -> Option<String> {
    let command = words[0].as_str();
    let value = |flag: &str| {
        let at = words.iter().position(|w| w == flag)?;
        words.get(at + 1).map(String::as_str)
    };
    if command == "serve" {
        return Some("a server: the serve tests serve fixtures under curl's load".into());
    }
    if command == "emcc" || command == "em++" {
        return Some("Emscripten's compilers: the emcc tests link C programs with them".into());
    }
    if let Some(target) = value("--target").filter(|t| *t != "wasm32-wasip1") {
        return Some(format!(
            "{target}: the tests of its host build fixtures for it"
        ));
    }
    if let Some(bench) = value("--bench").filter(|b| !dir.join(format!("benches/{b}.rs")).exists())
    {
        return Some(format!("names a bench of the reader's, `{bench}`"));
    }
    if value("--example").is_some() {
        return Some("names an example of the reader's; the bundled crate has none".into());
    }
    // A file the line reads (not one it writes with `-o`) that the page has not made.
    let outputs: Vec<&str> = ["-o", "--save-baseline"]
        .iter()
        .filter_map(|f| value(f))
        .collect();
    let file = regex::Regex::new(r"\.(wasm|js|json|html|gz|txt)$").unwrap();
    let missing = words.iter().skip(1).find(|w| {
        file.is_match(w) && !outputs.contains(&w.as_str()) && !dir.join(w.as_str()).exists()
    });
    if let Some(missing) = missing {
        return Some(format!("reads `{missing}`, a file of the reader's"));
    }
    if command == "run" {
        return Some("runs a program: the bundled crate is a library".into());
    }
    None
}

/// Every `cargo wasmprof` command line the README and the book's pages show runs, in each
/// page's order, on a copy of the bundled example of its own (so that a page's later
/// lines read what its earlier ones wrote), and succeeds (`--fail-above` may find a
/// regression: exit code 3); or the test says why it cannot run there (a file, a target, a
/// host the example does not have, each tested elsewhere). The lines that ran and those
/// that did not are printed.
#[test]
fn every_command_line_of_the_book_runs_on_the_example_or_says_why_not() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut book: Vec<_> = std::fs::read_dir(root.join("docs/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    book.sort();
    pages.extend(book);
    let (mut ran, mut skipped, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        let mut dir = None;
        let mut printed = HashSet::new();
        for line in common::book::example_commands(&text) {
            let words = common::book::shell_words(&line)[2..].to_vec();
            let dir = dir.get_or_insert_with(|| {
                let dir = tempfile::tempdir().unwrap();
                copy_dir(&root.join("example"), dir.path());
                dir
            });
            if let Some(why) = not_runnable(&words, dir.path()) {
                skipped.push(format!("{name}: `{line}`: {why}"));
                continue;
            }
            let out = output(
                wasmprof()
                    .arg("wasmprof")
                    .args(&words)
                    .current_dir(dir.path()),
            );
            printed.extend(String::from_utf8_lossy(&out.stdout).lines().map(shape));
            let regression =
                words.iter().any(|w| w == "--fail-above") && out.status.code() == Some(3);
            match out.status.success() || regression {
                true => ran.push(format!("{name}: `{line}`")),
                false => failed.push(format!(
                    "{name}: `{line}`: {}",
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .last()
                        .unwrap_or_default()
                )),
            }
        }
        // What the page shows of the example, its commands printed (the README's and
        // report.md's reports are the bench's, checked above).
        if !["README.md", "report.md"].contains(&name.as_str()) {
            for line in example_lines(&text) {
                if !printed.contains(&shape(&line)) {
                    failed.push(format!(
                        "{name}: shows what its commands did not print: {line}"
                    ));
                }
            }
        }
    }
    eprintln!(
        "ran:\n  {}\nnot run:\n  {}",
        ran.join("\n  "),
        skipped.join("\n  ")
    );
    assert!(
        failed.is_empty(),
        "command lines of the book that fail:\n{}",
        failed.join("\n")
    );
    assert!(ran.len() >= 15, "{} ran", ran.len());
}

/// The host of one's own that how-it-works.md shows (its JavaScript, run as the page says
/// under node 22 or later) runs a module `instrument` wrote, and `report` reads the dump
/// it saves: fib(12)'s exact calls, and the program's exit code.
#[test]
fn the_host_of_ones_own_the_book_shows_runs_and_its_dump_reports() {
    let Some(node) = common::nodes().into_iter().find(|n| n.major >= 22) else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/src/how-it-works.md")).unwrap();
    let script = page
        .split("```js\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a ```js block");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("host.mjs"), script).unwrap();
    std::fs::write(dir.path().join("app.wasm"), common::fib_command()).unwrap();
    for args in [
        &[
            "instrument",
            "app.wasm",
            "-o",
            "app.prof.wasm",
            "--metric",
            "calls",
        ][..],
        &[
            "report",
            "app.prof.wasm.dump.json",
            "--format",
            "json",
            "-o",
            "p.json",
        ],
    ] {
        if args[0] == "report" {
            let ran = output(
                node.command()
                    .args(["host.mjs", "app.prof.wasm"])
                    .current_dir(dir.path()),
            );
            assert!(
                ran.status.success(),
                "{}",
                String::from_utf8_lossy(&ran.stderr)
            );
        }
        let out = output(
            wasmprof()
                .arg("wasmprof")
                .args(args)
                .current_dir(dir.path()),
        );
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    common::validate(&std::fs::read(dir.path().join("app.prof.wasm")).unwrap());
    let p = cargo_wasmprof::profile::Profile::read(&dir.path().join("p.json")).unwrap();
    assert_eq!(common::calls(&p, "fib"), common::fib_calls(12));
    assert_eq!(p.runs[0].exit_code, 3);
}
