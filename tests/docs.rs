//! The README and the book under docs/ say what is true: every link resolves (to a file,
//! and to a heading where it names one), the book's summary lists every page, and every
//! flag a `cargo wasmprof` command line shows is one that command takes (its `--help`).
//! Where mdbook is installed, the book builds.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The README and the book's pages.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs/src"))
        .expect("docs/src")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    docs.extend(pages);
    docs
}

/// The targets of a Markdown document's links, `[text](target)`, outside code.
fn links(text: &str) -> Vec<String> {
    let re = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    prose(text)
        .iter()
        .flat_map(|line| re.captures_iter(line).map(|c| c[1].to_string()))
        .collect()
}

/// A document's lines outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The anchors of a document's headings, as mdBook and GitHub make them.
fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .iter()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|heading| {
            heading
                .trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

#[test]
fn every_link_of_the_readme_and_the_book_resolves() {
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = match path {
                "" => doc.clone(),
                path => doc.parent().unwrap().join(path),
            };
            if !file.exists() {
                broken.push(format!("{}: {target} (no such file)", doc.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                let heads = anchors(&std::fs::read_to_string(&file).unwrap_or_default());
                if !heads.contains(anchor) {
                    broken.push(format!("{}: {target} (no such heading)", doc.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_books_summary_lists_every_page() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    for doc in documents().iter().skip(1) {
        let name = doc.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name == "SUMMARY.md" || listed.contains(&name),
            "docs/src/{name} is not in SUMMARY.md"
        );
    }
}

/// The flags of the `cargo wasmprof` command lines of a document, by subcommand: in code
/// blocks and inline code, up to a `--` (what follows goes to a harness or a driver) or a
/// comment.
fn shown_flags(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let re = regex::Regex::new(r"cargo wasmprof ([a-z+]+)([^`\n]*)").unwrap();
    let mut flags: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in re.captures_iter(text) {
        let rest = c[2]
            .split(" #")
            .next()
            .unwrap()
            .split(" | ")
            .next()
            .unwrap();
        let entry = flags.entry(c[1].to_string()).or_default();
        for token in rest.split_whitespace() {
            if token == "--" {
                break;
            }
            if token.starts_with('-') && token.len() > 1 {
                let flag = token.split(['=', ',']).next().unwrap();
                entry.insert(flag.trim_end_matches([')', '.', ';']).to_string());
            }
        }
    }
    flags
}

#[test]
fn every_flag_a_command_line_shows_is_one_the_command_takes() {
    let mut help: BTreeMap<String, String> = BTreeMap::new();
    let mut wrong = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (command, flags) in shown_flags(&text) {
            let help = help.entry(command.clone()).or_insert_with(|| {
                let out = Command::new(env!("CARGO_BIN_EXE_cargo-wasmprof"))
                    .args(["wasmprof", &command, "--help"])
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}: `cargo wasmprof {command}` is no command",
                    doc.display()
                );
                String::from_utf8_lossy(&out.stdout).into_owned()
            });
            for flag in flags {
                let takes = help.match_indices(&flag).any(|(at, _)| {
                    let after = help[at + flag.len()..].chars().next();
                    let before = help[..at].chars().last();
                    !after.is_some_and(|c| c.is_alphanumeric() || c == '-')
                        && !before.is_some_and(|c| c.is_alphanumeric() || c == '-')
                });
                if !takes {
                    wrong.push(format!(
                        "{}: cargo wasmprof {command} {flag}",
                        doc.display()
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "flags no command takes:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_book_builds_where_mdbook_is_installed() {
    if which::which("mdbook").is_err() {
        eprintln!("skipped: mdbook is not installed (cargo install mdbook)");
        return;
    }
    let out_dir = tempfile::tempdir().unwrap();
    let out = common::output(
        Command::new("mdbook")
            .arg("build")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs"))
            .arg("--dest-dir")
            .arg(out_dir.path()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out_dir.path().join("index.html").exists());
}

#[test]
fn the_readme_is_a_front_door() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lines = std::fs::read_to_string(root.join("README.md"))
        .unwrap()
        .lines()
        .count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; the depth goes in docs/"
    );
    let benchmarks = std::fs::read_to_string(root.join("BENCHMARKS.md"))
        .unwrap()
        .lines()
        .count();
    assert!(benchmarks <= 400, "BENCHMARKS.md has {benchmarks} lines");
}
