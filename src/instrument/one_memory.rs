//! The variant a module for the JS hosts carries for the hosts that allow a module one
//! memory. Such a module keeps the profiler's state in a memory of its own, as in
//! wasmtime, where the probes are plain loads and stores; node 20's V8 refuses a second
//! memory, so the module also carries the program instrumented with its state in a state
//! module, in [`meta::ONE_MEMORY_SECTION`], and the JS runtime runs that one there. The
//! variant carries no DWARF: symbols come from the original, and the meta is its own.

use wasm_encoder::Section as _;
use wasmparser::{Parser, Payload};

use crate::meta;

/// Appends `variant`, without its DWARF, to `module` as [`meta::ONE_MEMORY_SECTION`]
/// (a custom section may come last: the module is otherwise as it was).
pub(super) fn carry(module: &mut Vec<u8>, variant: &[u8]) {
    wasm_encoder::CustomSection {
        name: meta::ONE_MEMORY_SECTION.into(),
        data: without_dwarf(variant).into(),
    }
    .append_to(module);
}

/// `wasm` (a valid module, the instrumenter's own) without its `.debug_*` sections.
fn without_dwarf(wasm: &[u8]) -> Vec<u8> {
    let mut out = wasm[..8].to_vec(); // the magic and the version
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload.expect("the instrumenter's own module parses");
        if let Payload::CustomSection(section) = &payload {
            if section.name().starts_with(".debug_") {
                continue;
            }
        }
        if let Some((id, range)) = payload.as_section() {
            wasm_encoder::RawSection {
                id,
                data: &wasm[range],
            }
            .append_to(&mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the sections of `wasm` are named (custom ones) or numbered.
    fn sections(wasm: &[u8]) -> Vec<String> {
        Parser::new(0)
            .parse_all(wasm)
            .filter_map(|p| match p.unwrap() {
                Payload::CustomSection(c) => Some(c.name().to_string()),
                other => other.as_section().map(|(id, _)| id.to_string()),
            })
            .collect()
    }

    #[test]
    fn the_variant_is_carried_whole_but_its_dwarf() {
        let variant = wat::parse_str(
            r#"(module (func (export "f") (result i32) i32.const 7)
                 (@custom ".debug_info" "dwarf") (@custom "name" "names")
                 (@custom "wasmprof" "meta"))"#,
        )
        .unwrap();
        let mut module = wat::parse_str("(module (memory 1) (memory 1))").unwrap();
        let before = module.clone();
        carry(&mut module, &variant);
        wasmparser::validate(&module).unwrap();
        assert!(
            module.starts_with(&before),
            "the module is as it was, then the section"
        );
        let carried = Parser::new(0)
            .parse_all(&module)
            .find_map(|p| match p.unwrap() {
                Payload::CustomSection(c) if c.name() == meta::ONE_MEMORY_SECTION => {
                    Some(c.data().to_vec())
                }
                _ => None,
            })
            .unwrap();
        wasmparser::validate(&carried).unwrap();
        assert_eq!(
            sections(&carried),
            sections(&variant)[..]
                .iter()
                .filter(|s| *s != ".debug_info")
                .cloned()
                .collect::<Vec<_>>()
        );
    }
}
