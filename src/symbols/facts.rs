//! What symbolization reads of a module with wasmparser: its imports, its function
//! bodies' places, its name section, its exports and its DWARF sections.

use std::collections::HashMap;
use std::ops::Range;

/// The module facts that symbolization needs, read with wasmparser.
#[derive(Default)]
pub(super) struct ModuleFacts<'a> {
    /// `module.field` of each imported function, in index order.
    pub(super) imports: Vec<String>,
    /// File offset of the code section's payload, where DWARF's code addresses start.
    pub(super) code_start: u64,
    /// Each defined function's body (after its size), relative to the code section payload.
    pub(super) bodies: Vec<Range<u64>>,
    /// The `name` section's function names (of defined functions; imports keep `module.field`).
    pub(super) names: HashMap<u32, String>,
    /// The first export name of each exported function.
    pub(super) exports: HashMap<u32, String>,
    /// The `.debug_*` custom sections.
    pub(super) debug: HashMap<&'a str, &'a [u8]>,
}

impl<'a> ModuleFacts<'a> {
    /// Reads the facts of `wasm`.
    pub(super) fn read(wasm: &'a [u8]) -> anyhow::Result<ModuleFacts<'a>> {
        use wasmparser::{KnownCustom, Name, Payload};
        let mut facts = ModuleFacts::default();
        for payload in wasmparser::Parser::new(0).parse_all(wasm) {
            match payload? {
                Payload::ImportSection(reader) => {
                    for import in reader.into_imports() {
                        let import = import?;
                        if let wasmparser::TypeRef::Func(_) = import.ty {
                            facts
                                .imports
                                .push(format!("{}.{}", import.module, import.name));
                        }
                    }
                }
                Payload::ExportSection(reader) => {
                    for export in reader {
                        let export = export?;
                        if export.kind == wasmparser::ExternalKind::Func {
                            facts
                                .exports
                                .entry(export.index)
                                .or_insert_with(|| export.name.to_string());
                        }
                    }
                }
                Payload::CodeSectionStart { range, .. } => facts.code_start = range.start as u64,
                Payload::CodeSectionEntry(body) => {
                    let range = body.range();
                    let at = |offset: usize| offset as u64 - facts.code_start;
                    facts.bodies.push(at(range.start)..at(range.end));
                }
                Payload::CustomSection(section) => match section.as_known() {
                    KnownCustom::Name(reader) => {
                        for name in reader.into_iter().flatten() {
                            if let Name::Function(map) = name {
                                for naming in map.into_iter().flatten() {
                                    facts.names.insert(naming.index, naming.name.to_string());
                                }
                            }
                        }
                    }
                    _ if section.name().starts_with(".debug_") => {
                        facts.debug.insert(section.name(), section.data());
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        Ok(facts)
    }
}
