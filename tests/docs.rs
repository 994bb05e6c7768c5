//! The README and the book under docs/ say what is true: every link resolves (to a file,
//! and to a heading where it names one), the book's summary lists every page, every flag
//! a `cargo wasmprof` command line shows is one that command takes (its `--help`), and each
//! command's reference page is what clap makes of its flags (both ways: every flag it
//! takes, and none it does not). Where mdbook is installed, the book builds.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The README and the book's pages (the command reference's too).
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    let mut pages: Vec<PathBuf> = ["docs/src", "docs/src/reference"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).expect(dir))
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
        let name = doc
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
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

/// What a command's reference page says: its description, usage, and every argument it
/// takes under clap's headings, each with its help, values and default, as `--help` has
/// them.
fn reference_page(command: &clap::Command) -> String {
    let name = command.get_name();
    let mut page = format!(
        "# cargo wasmprof {name}\n\n<!-- Made from the command's flags (src/cli/) by tests/docs.rs: \
         WASMPROF_BLESS=1 cargo test --test docs writes it again. -->\n\n"
    );
    let about = command
        .get_long_about()
        .or(command.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default();
    for paragraph in about.split("\n\n") {
        page.push_str(&escape_prose(&paragraph.replace('\n', " ")));
        page.push_str("\n\n");
    }
    let usage = command.clone().render_usage().to_string();
    let usage = usage.trim_start_matches("Usage: ").trim();
    page.push_str(&format!("```text\n{usage}\n```\n"));
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        if arg.is_hide_set() || id == "help" || id == "version" {
            continue;
        }
        let heading = match (arg.is_positional(), arg.get_help_heading()) {
            (true, _) => "Arguments",
            (false, Some(heading)) => heading,
            (false, None) => "Options",
        };
        let row = format!(
            "| {} | {} |",
            escape(&spelling(arg)),
            escape(&description(arg))
        );
        match sections.iter_mut().find(|(h, _)| h == heading) {
            Some((_, rows)) => rows.push(row),
            None => sections.push((heading.to_string(), vec![row])),
        }
    }
    // The arguments first, as `--help` lists them.
    sections.sort_by_key(|(heading, _)| heading != "Arguments");
    for (heading, rows) in sections {
        page.push_str(&format!(
            "\n## {heading}\n\n| argument | what it does |\n|---|---|\n"
        ));
        for row in rows {
            page.push_str(&row);
            page.push('\n');
        }
    }
    page
}

/// An argument as one types it: `-o, --output FILE`, `[FILE]`.
fn spelling(arg: &clap::Arg) -> String {
    let values: Vec<String> = arg
        .get_value_names()
        .map(|v| v.iter().map(|v| v.to_string()).collect())
        .unwrap_or_else(|| vec![arg.get_id().as_str().to_uppercase()]);
    if arg.is_positional() {
        let value = values.join(" ");
        return match arg.is_required_set() {
            true => format!("`{value}`"),
            false => format!("`[{value}]`"),
        };
    }
    let mut names: Vec<String> = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    let takes_value = arg.get_action().takes_values();
    match takes_value {
        true => format!("`{} {}`", names.join(", "), values.join(" ")),
        false => format!("`{}`", names.join(", ")),
    }
}

/// An argument's help, its values (each with its own help) and its default.
fn description(arg: &clap::Arg) -> String {
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let mut text = help.split_whitespace().collect::<Vec<_>>().join(" ");
    if !text.is_empty() && !text.ends_with(['.', ')', ']']) {
        text.push('.');
    }
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| match v.get_help() {
            Some(help) => format!(
                "`{}`: {}",
                v.get_name(),
                help.to_string().trim_end_matches('.')
            ),
            None => format!("`{}`", v.get_name()),
        })
        .collect();
    if arg.get_action().takes_values() && !values.is_empty() {
        text.push_str(&format!(" Values: {}.", values.join("; ")));
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|d| format!("`{}`", d.to_string_lossy()))
        .collect();
    if !defaults.is_empty() && arg.get_action().takes_values() {
        text.push_str(&format!(" Default: {}.", defaults.join(", ")));
    }
    text
}

/// A table cell's text: its pipes escaped, angle brackets as entities.
fn escape(text: &str) -> String {
    escape_prose(text).replace('|', "\\|")
}

/// Prose as Markdown shows it whole: angle brackets outside code spans as entities (in a
/// code span they show as they are).
fn escape_prose(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| match i % 2 {
            0 => part.replace('<', "&lt;").replace('>', "&gt;"),
            _ => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join("`")
}

#[test]
fn each_commands_reference_page_is_what_its_flags_say() {
    use clap::CommandFactory;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference");
    let bless = std::env::var_os("WASMPROF_BLESS").is_some();
    let mut cli = cargo_wasmprof::cli::Cli::command();
    cli.build();
    let mut stale = Vec::new();
    let mut pages = BTreeSet::new();
    for command in cli.get_subcommands().filter(|c| c.get_name() != "help") {
        let file = dir.join(format!("{}.md", command.get_name()));
        pages.insert(file.clone());
        let page = reference_page(command);
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&file, &page).unwrap();
        } else if std::fs::read_to_string(&file).ok().as_deref() != Some(page.as_str()) {
            stale.push(file.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "reference pages that do not say what the commands take (WASMPROF_BLESS=1 cargo test --test docs writes them):\n{}",
        stale.join("\n")
    );
    // And no page of a command that is gone.
    for page in std::fs::read_dir(&dir).unwrap() {
        let page = page.unwrap().path();
        assert!(pages.contains(&page), "{} is no command's", page.display());
    }
}

/// The source the messages and the report's lines are written in: `src/` and the JS
/// runtime, each string literal's continued lines (`\` at a line's end) joined.
fn message_sources() -> String {
    fn walk(dir: &Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs" || e == "js") {
                out.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut text = String::new();
    walk(&root.join("src"), &mut text);
    walk(&root.join("templates"), &mut text);
    regex::Regex::new(r"\\\n\s*")
        .unwrap()
        .replace_all(&text, "")
        .replace("\\\\", "\\")
}

#[test]
fn every_message_the_troubleshooting_page_quotes_is_one_the_code_prints() {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/troubleshooting.md"),
    )
    .unwrap();
    // The table's messages (in code spans, double where they hold backquotes), and the
    // report's lines quoted in bold.
    let quoted =
        regex::Regex::new(r#"(?m)^\| (?:`` (.+?) ``|`(.+?)`) \||^- \*\*"(.+?)"\*\*"#).unwrap();
    // What a message fills in (a file, a name, a number, a version, a quoted value) or
    // leaves out (...).
    let blanks =
        regex::Regex::new(r"\.\.\.|`[^`]*`|\bNAME\b|\bN\b|\bM\b|\bX\.Y\.Z\b|\bFILE\b").unwrap();
    let sources = message_sources();
    let mut missing = Vec::new();
    let mut checked = 0;
    for c in quoted.captures_iter(&page) {
        let message = (c.get(1).or(c.get(2)).or(c.get(3))).unwrap().as_str();
        checked += 1;
        for part in blanks.split(message).map(str::trim) {
            if part.len() >= 6 && !sources.contains(part) {
                missing.push(format!("{message:?}: {part:?}"));
            }
        }
    }
    assert!(checked >= 20, "{checked} messages found on the page");
    assert!(
        missing.is_empty(),
        "troubleshooting.md quotes what no code prints:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_command_line_of_the_readme_and_the_book_is_one_the_command_takes() {
    use clap::Parser;
    let mut refused = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for line in common::book::example_commands(&text) {
            checked += 1;
            let words = common::book::shell_words(&line);
            let args = std::iter::once("cargo-wasmprof".to_string()).chain(words[2..].to_vec());
            if let Err(e) = cargo_wasmprof::cli::Cli::try_parse_from(args) {
                if !matches!(e.kind(), clap::error::ErrorKind::DisplayHelp) {
                    let why = e.to_string();
                    let why = why.lines().next().unwrap_or_default().to_string();
                    refused.push(format!("{}: `{line}`: {why}", doc.display()));
                }
            }
        }
    }
    assert!(checked >= 40, "{checked} command lines found");
    assert!(
        refused.is_empty(),
        "command lines the commands refuse:\n{}",
        refused.join("\n")
    );
}
