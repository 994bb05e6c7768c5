//! The map stays true and the house stays easy to change: every module of src/ has its
//! layer in ARCHITECTURE.md's table and every `use` of another module points to a lower
//! layer; no two files of one module use each other (no import cycle anywhere); no file is
//! over 600 lines and no function of the program over 80.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of ARCHITECTURE.md, top first: the backquoted names in each row of the
/// table under `## Layers`.
fn layers() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let table = text
        .split("\n## Layers")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Layers` section");
    table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .map(|row| {
            let modules = row.split('|').nth(2).expect("a modules column");
            modules
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        })
        .collect()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every .rs file below `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of src/ belongs to (`bin` for the binaries).
fn module_of(file: &Path) -> String {
    let relative = file.strip_prefix(root().join("src")).unwrap();
    let first = relative.components().next().unwrap().as_os_str();
    Path::new(first)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The top-level modules `text` names through `crate::` or `cargo_wasmprof::`, outside
/// comments.
fn uses(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        for prefix in ["crate::", "cargo_wasmprof::"] {
            for (at, _) in code.match_indices(prefix) {
                let rest = &code[at + prefix.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        }
    }
    found
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let layers = layers();
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, row)| row.iter().map(move |m| (m.as_str(), i)))
        .collect();
    assert!(
        layer_of.len() == layers.iter().map(Vec::len).sum::<usize>(),
        "a module is in two layers: {layers:?}"
    );
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut seen = BTreeSet::new();
    for file in &files {
        let module = module_of(file);
        if module == "lib" {
            continue;
        }
        let Some(&layer) = layer_of.get(module.as_str()) else {
            wrong.push(format!(
                "src/{module} has no layer in ARCHITECTURE.md's table"
            ));
            continue;
        };
        seen.insert(module.clone());
        let text = std::fs::read_to_string(file).unwrap();
        // A module's unit tests may use what they like.
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        for used in uses(text) {
            if used == module {
                continue;
            }
            match layer_of.get(used.as_str()) {
                Some(&below) if below > layer => {}
                Some(_) => wrong.push(format!(
                    "{} uses {used}, which is not in a lower layer",
                    file.strip_prefix(root()).unwrap().display()
                )),
                None => wrong.push(format!(
                    "{} uses {used}, which has no layer",
                    file.strip_prefix(root()).unwrap().display()
                )),
            }
        }
    }
    for module in layer_of.keys() {
        if !seen.contains(*module) {
            wrong.push(format!(
                "ARCHITECTURE.md names {module}, which src/ does not have"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "the map is not true:\n{}",
        wrong.join("\n")
    );
}

/// The files of a directory module (each `.rs` but `mod.rs`, by stem) and the sibling files
/// each one names: through `super::x`, `super::{x, ...}` or `crate::path::x`.
fn sibling_uses(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && !p.ends_with("mod.rs"))
        .collect();
    let stems: BTreeSet<String> = files
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    // `crate::a::b::` for a file of src/a/b/.
    let module_path = dir
        .strip_prefix(root().join("src"))
        .unwrap()
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("::");
    let mut graph = BTreeMap::new();
    for file in &files {
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(file).unwrap();
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let mut used = BTreeSet::new();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            for prefix in ["super::".to_string(), format!("crate::{module_path}::")] {
                for (at, _) in code.match_indices(prefix.as_str()) {
                    let rest = &code[at + prefix.len()..];
                    let names: Vec<&str> = match rest.strip_prefix('{') {
                        Some(group) => group.split('}').next().unwrap().split(',').collect(),
                        None => vec![rest],
                    };
                    for name in names {
                        let name: String = name
                            .trim()
                            .chars()
                            .take_while(|c| {
                                c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_'
                            })
                            .collect();
                        if stems.contains(&name) && name != stem {
                            used.insert(name);
                        }
                    }
                }
            }
        }
        graph.insert(stem, used);
    }
    graph
}

/// A cycle in `graph`, as the names along it, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_two_files_of_a_module_use_each_other() {
    let mut dirs = vec![root().join("src")];
    let mut cycles = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            }
        }
        if dir == root().join("src") {
            continue; // the top-level modules: the layers above
        }
        if let Some(found) = cycle(&sibling_uses(&dir)) {
            cycles.push(format!(
                "{}: {}",
                dir.strip_prefix(root()).unwrap().display(),
                found.join(" -> ")
            ));
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

/// Every file of the project's own code and tests (the Rust sources, the templates).
fn project_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        sources(&root().join(dir), &mut files);
    }
    for entry in std::fs::read_dir(root().join("templates")).unwrap() {
        files.push(entry.unwrap().path());
    }
    files.sort();
    files
}

/// The most lines a file of the project may have: past it, a file holds more than one
/// thing a reader looks for.
const MAX_FILE_LINES: usize = 600;

#[test]
fn no_file_is_over_600_lines() {
    let long: Vec<String> = project_files()
        .iter()
        .map(|file| (file, std::fs::read_to_string(file).unwrap().lines().count()))
        .filter(|&(_, lines)| lines > MAX_FILE_LINES)
        .map(|(file, lines)| {
            format!(
                "{} ({lines} lines)",
                file.strip_prefix(root()).unwrap().display()
            )
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The most lines a function of src/ may have, its signature and closing brace included.
const MAX_FUNCTION_LINES: usize = 80;

/// The functions of `text` (rustfmt's layout: a `fn` line and its closing brace at the
/// same indentation) longer than [`MAX_FUNCTION_LINES`], with their lengths.
fn long_functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let signature = [
            "fn ",
            "pub fn ",
            "pub(super) fn ",
            "pub(crate) fn ",
            "const fn ",
            "unsafe fn ",
        ]
        .iter()
        .find_map(|start| code.strip_prefix(start));
        let Some(rest) = signature else { continue };
        if code.ends_with(';') {
            continue; // a trait's declaration
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let closing = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == closing) {
            let length = end + 2;
            if length > MAX_FUNCTION_LINES {
                long.push((name, length));
            }
        }
    }
    long
}

#[test]
fn no_function_of_the_program_is_over_80_lines() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    files.sort();
    let mut long = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (name, lines) in long_functions(&text) {
            long.push(format!(
                "{}: {name} ({lines} lines)",
                file.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them by their jobs):\n{}",
        long.join("\n")
    );
}
