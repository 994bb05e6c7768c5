//! Helpers that read a module: validation, its operators, its memories, its bodies' sizes.

use cargo_wasmprof::meta;

/// Checks an instrumented module, and the state module it may carry, with wasmparser.
pub fn validate(wasm: &[u8]) {
    let validate = |bytes: &[u8]| {
        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
            .validate_all(bytes)
            .map(|_| ())
    };
    validate(wasm).expect("the instrumented module validates");
    if let Some(state) = meta::custom_section(wasm, meta::STATE_SECTION).unwrap() {
        validate(state).expect("the state module validates");
    }
}

/// Each defined function's index and its operators with their offsets in the module.
pub fn operators(wasm: &[u8]) -> Vec<(u32, Vec<(usize, wasmparser::Operator<'_>)>)> {
    let mut imported = 0;
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload.unwrap() {
            wasmparser::Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    if let wasmparser::TypeRef::Func(_) = import.unwrap().ty {
                        imported += 1;
                    }
                }
            }
            wasmparser::Payload::CodeSectionEntry(body) => {
                let mut ops = Vec::new();
                let mut reader = body.get_operators_reader().unwrap();
                while !reader.eof() {
                    let (op, offset) = reader.read_with_offset().unwrap();
                    ops.push((offset, op));
                }
                out.push((imported + out.len() as u32, ops));
            }
            _ => {}
        }
    }
    out
}

/// The 64 KiB pages the 32-bit memories of the module `wasm` start with, together (what the
/// program's memory is before any growth).
pub fn initial_pages(wasm: &[u8]) -> u64 {
    let mut pages = 0;
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload.expect("a valid module") {
            wasmparser::Payload::MemorySection(memories) => {
                for m in memories {
                    let m = m.unwrap();
                    pages += if m.memory64 { 0 } else { m.initial };
                }
            }
            wasmparser::Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    if let wasmparser::TypeRef::Memory(m) = import.unwrap().ty {
                        pages += if m.memory64 { 0 } else { m.initial };
                    }
                }
            }
            _ => {}
        }
    }
    pages
}

/// The bodies under 50 bytes of `wasm`'s defined functions, and how many those are (V8
/// scales its inlining budget by that share).
pub fn small_bodies(wasm: &[u8]) -> (usize, usize) {
    let bodies: Vec<usize> = wasmparser::Parser::new(0)
        .parse_all(wasm)
        .filter_map(|p| match p.unwrap() {
            wasmparser::Payload::CodeSectionEntry(body) => Some(body.range().len()),
            _ => None,
        })
        .collect();
    (bodies.iter().filter(|&&len| len < 50).count(), bodies.len())
}
