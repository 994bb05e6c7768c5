//! An instrumented module made to import the profiler's state (and the clock) from a module
//! of another name. node's `require` finds the bare name [`meta::STATE_MODULE`] on
//! `NODE_PATH`; a browser page's ES module import needs a URL, known only once the server
//! that serves it is up.
//!
//! Only the import section changes, and it is spliced in place of the old one: every other
//! byte (the code, its DWARF, the tables of function indices) stays as it was.

use anyhow::Context as _;
use wasm_encoder::reencode::{Reencode as _, RoundtripReencoder};
use wasm_encoder::{Encode as _, Section as _};
use wasmparser::{Parser, Payload};

use crate::meta;

/// An instrumented module that imports its state from another module name.
#[derive(Debug, Clone)]
pub struct StateImport {
    /// The module, importing from the new name.
    pub wasm: Vec<u8>,
    /// The names it imports from there, in the import section's order.
    pub names: Vec<String>,
}

/// `wasm` with its imports from [`meta::STATE_MODULE`] taken from `module` instead.
pub fn import_state_from(wasm: &[u8], module: &str) -> anyhow::Result<StateImport> {
    let mut section_start = 0;
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload.context("not a valid module")?;
        if let Payload::ImportSection(reader) = &payload {
            let mut section = wasm_encoder::ImportSection::new();
            let mut names = Vec::new();
            for import in reader.clone().into_imports() {
                let import = import.context("not a valid import section")?;
                let from = if import.module == meta::STATE_MODULE {
                    names.push(import.name.to_string());
                    module
                } else {
                    import.module
                };
                let ty = RoundtripReencoder
                    .entity_type(import.ty)
                    .context("an import of an unknown kind")?;
                section.import(from, import.name, ty);
            }
            let mut out = wasm[..section_start].to_vec();
            out.push(section.id());
            section.encode(&mut out);
            out.extend_from_slice(&wasm[reader.range().end..]);
            return Ok(StateImport { wasm: out, names });
        }
        if let Some((_, range)) = payload.as_section() {
            section_start = range.end;
        } else if let Payload::Version { range, .. } = &payload {
            section_start = range.end;
        }
    }
    anyhow::bail!("it imports nothing, so not the profiler's state")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_only_the_state_modules_imports() {
        let wasm = wat::parse_str(
            r#"(module
                 (import "env" "f" (func))
                 (import "wasmprof" "now" (func (result i64)))
                 (import "wasmprof" "__wasmprof_memory" (memory 1))
                 (func (export "g") call 0)
                 (@custom "keep" "bytes"))"#,
        )
        .unwrap();
        let done = import_state_from(&wasm, "http://127.0.0.1:1/wasmprof.js").unwrap();
        assert_eq!(done.names, ["now", "__wasmprof_memory"]);
        wasmparser::validate(&done.wasm).unwrap();
        let imports: Vec<(String, String)> = Parser::new(0)
            .parse_all(&done.wasm)
            .filter_map(|p| match p.unwrap() {
                Payload::ImportSection(r) => Some(
                    r.into_imports()
                        .map(|i| i.unwrap())
                        .map(|i| (i.module.to_string(), i.name.to_string()))
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(
            imports,
            [
                ("env".to_string(), "f".to_string()),
                ("http://127.0.0.1:1/wasmprof.js".into(), "now".into()),
                (
                    "http://127.0.0.1:1/wasmprof.js".into(),
                    "__wasmprof_memory".into()
                ),
            ]
        );
        // From the code section on, the module is the original's, byte for byte.
        let from_code = |wasm: &[u8]| {
            let at = Parser::new(0)
                .parse_all(wasm)
                .find_map(|p| match p.unwrap() {
                    Payload::CodeSectionStart { range, .. } => Some(range.start),
                    _ => None,
                })
                .unwrap();
            wasm[at..].to_vec()
        };
        assert_eq!(from_code(&wasm), from_code(&done.wasm));
    }
}
