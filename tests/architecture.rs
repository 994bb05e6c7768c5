//! The map stays true: every module of src/ has its layer in ARCHITECTURE.md's table, and
//! every `use` of another module points to a lower layer, so there is no import cycle.

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
