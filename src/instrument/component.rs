//! Components: the program of a component is its main core module, which is instrumented
//! as any core module is, and put back in the component's place for it, every other byte
//! of the component kept.
//!
//! Why replace the module in the finished component, rather than instrument between the
//! linker and `wit-component` (as `wasm-component-ld --skip-wit-component` would allow):
//! it works on any component, whoever built it (`cargo build --target wasm32-wasip2`, a
//! C toolchain, `wasm-tools component new`), and the component's glue, its adapters and its
//! types stay exactly as its toolchain made them. The instrumented module keeps the
//! original's imports and exports (the component's instances name them), and adds only
//! exports of the profiler's own, which the component does not name.
//!
//! The main module is the component's core module with the most code: the program.
//! wit-component's helpers (the shim and fix-up modules that tie the canonical ABI's
//! functions to the program's imports) and a WASI adapter are small beside it. Components
//! that nest components (a composition) are refused: each is profiled before it is
//! composed.

use std::ops::Range;

use crate::error::InstrumentError;

/// The section id of a core module inside a component.
const CORE_MODULE_SECTION: u8 = 1;
/// The section id of a nested component.
const COMPONENT_SECTION: u8 = 4;

/// A core module of a component, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreModule {
    /// The whole section that holds it in the component (its id, size and bytes).
    pub section: Range<usize>,
    /// The module's own bytes.
    pub bytes: Range<usize>,
    /// Its index among the component's core modules, in their order in the binary: the
    /// index wasmtime gives its code (`StaticModuleIndex`).
    pub index: u32,
}

/// Whether `wasm` is a component (its header's version and layer), not a core module.
pub fn is_component(wasm: &[u8]) -> bool {
    wasmparser::Parser::is_component(wasm)
}

/// What a component is of WASI 0.3 (`wasi:...@0.3.x`, the async world), by the
/// interfaces it exports and imports: the one place the hosts ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wasi03 {
    /// It names none of WASI 0.3.
    None,
    /// It exports none of WASI 0.3 but imports some: a WASI 0.2 command that calls it (a
    /// test binary of a crate that uses it).
    Imports,
    /// A command: it exports `wasi:cli/run@0.3`.
    Command,
    /// A service: it exports this `wasi:http/handler@0.3`.
    Service(String),
    /// Another world: it exports this interface of WASI 0.3, and neither of those.
    Other(String),
}

/// What the component `wasm` is of WASI 0.3.
pub fn wasi_03(wasm: &[u8]) -> Wasi03 {
    let (exports, imports) = wasi_03_interfaces(wasm);
    let exported = |prefix: &str| exports.iter().find(|e| e.starts_with(prefix)).cloned();
    if exported("wasi:cli/run@").is_some() {
        Wasi03::Command
    } else if let Some(service) = exported("wasi:http/handler@") {
        Wasi03::Service(service)
    } else if let Some(other) = exports.first() {
        Wasi03::Other(other.clone())
    } else if imports.is_empty() {
        Wasi03::None
    } else {
        Wasi03::Imports
    }
}

/// The WASI 0.3 interfaces the component `wasm` names: those it exports, then those it
/// imports, each as the component names it.
fn wasi_03_interfaces(wasm: &[u8]) -> (Vec<String>, Vec<String>) {
    use wasmparser::Payload;
    let of_03 = |name: &str| {
        name.starts_with("wasi:")
            && name
                .split_once('@')
                .is_some_and(|(_, version)| version.starts_with("0.3"))
    };
    let (mut exports, mut imports) = (Vec::new(), Vec::new());
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload {
            Ok(Payload::ComponentExportSection(reader)) => exports.extend(
                (reader.into_iter().flatten())
                    .map(|e| e.name.0.to_string())
                    .filter(|name| of_03(name)),
            ),
            Ok(Payload::ComponentImportSection(reader)) => imports.extend(
                (reader.into_iter().flatten())
                    .map(|i| i.name.0.to_string())
                    .filter(|name| of_03(name)),
            ),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    (exports, imports)
}

/// The core modules at the top level of the component `wasm`, in order.
pub fn core_modules(wasm: &[u8]) -> Result<Vec<CoreModule>, InstrumentError> {
    let invalid = |what: &str| InstrumentError::Invalid(format!("the component {what}"));
    let mut modules = Vec::new();
    let mut at = 8;
    while at < wasm.len() {
        let start = at;
        let id = wasm[at];
        at += 1;
        let (size, leb) = read_u32(&wasm[at..]).ok_or_else(|| invalid("has a bad section size"))?;
        at += leb;
        let end = at
            .checked_add(size as usize)
            .filter(|&end| end <= wasm.len())
            .ok_or_else(|| invalid("ends inside a section"))?;
        match id {
            CORE_MODULE_SECTION => modules.push(CoreModule {
                section: start..end,
                bytes: at..end,
                index: modules.len() as u32,
            }),
            COMPONENT_SECTION if has_code(&wasm[at..end]) => {
                return Err(InstrumentError::Unsupported(
                    "a component that nests components with code (a composition): \
                     profile each component before composing them"
                        .into(),
                ))
            }
            _ => {}
        }
        at = end;
    }
    Ok(modules)
}

/// The program of the component `wasm`: its core module with the most code.
pub fn main_module(wasm: &[u8]) -> Result<CoreModule, InstrumentError> {
    let modules = core_modules(wasm)?;
    let mut best: Option<(u64, CoreModule)> = None;
    for module in modules {
        let code = code_size(&wasm[module.bytes.clone()]);
        if best.as_ref().is_none_or(|(size, _)| code > *size) {
            best = Some((code, module));
        }
    }
    best.map(|(_, module)| module).ok_or_else(|| {
        InstrumentError::Unsupported("a component without a core module: no code to profile".into())
    })
}

/// The core module of the instrumented component `wasm` that carries the profiler (its
/// meta's section).
pub fn profiled_module(wasm: &[u8]) -> Result<CoreModule, InstrumentError> {
    core_modules(wasm)?
        .into_iter()
        .find(|m| {
            crate::meta::custom_section(&wasm[m.bytes.clone()], crate::meta::SECTION)
                .is_ok_and(|s| s.is_some())
        })
        .ok_or_else(|| {
            InstrumentError::Invalid("no module of the component carries the profiler".into())
        })
}

/// The component `wasm` with `module`'s section holding `replacement` instead.
pub fn with_module(wasm: &[u8], module: &CoreModule, replacement: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(wasm.len() - module.bytes.len() + replacement.len() + 5);
    out.extend_from_slice(&wasm[..module.section.start]);
    out.push(CORE_MODULE_SECTION);
    write_u32(&mut out, replacement.len() as u32);
    out.extend_from_slice(replacement);
    out.extend_from_slice(&wasm[module.section.end..]);
    out
}

/// Validates a component the instrumenter wrote, with every proposal its modules may use.
pub fn validate(wasm: &[u8]) -> Result<(), InstrumentError> {
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(wasm)
        .map(|_| ())
        .map_err(|e| InstrumentError::Produced(format!("the component: {e}")))
}

/// Whether a nested component holds a core module (wit-component nests small ones of
/// types and exports alone).
fn has_code(component: &[u8]) -> bool {
    wasmparser::Parser::new(0)
        .parse_all(component)
        .any(|p| matches!(p, Ok(wasmparser::Payload::ModuleSection { .. }) | Err(_)))
}

/// The size of a core module's code section (0 without one).
fn code_size(module: &[u8]) -> u64 {
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        match payload {
            Ok(wasmparser::Payload::CodeSectionStart { size, .. }) => return u64::from(size),
            Ok(_) => {}
            Err(_) => return 0,
        }
    }
    0
}

/// An unsigned LEB128 u32 at the start of `bytes`, and its length.
fn read_u32(bytes: &[u8]) -> Option<(u32, usize)> {
    let mut value: u64 = 0;
    for (i, &byte) in bytes.iter().enumerate().take(5) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return u32::try_from(value).ok().map(|v| (v, i + 1));
        }
    }
    None
}

/// Appends `value` as an unsigned LEB128.
fn write_u32(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component of two core modules, the second with more code.
    fn component() -> Vec<u8> {
        wat::parse_str(
            r#"(component
                (core module $small (func))
                (core module $big (func (result i32) i32.const 1 i32.const 2 i32.add))
                (core instance (instantiate $big)))"#,
        )
        .unwrap()
    }

    #[test]
    fn the_module_with_the_most_code_is_the_program_and_is_replaced_in_place() {
        let wasm = component();
        assert!(is_component(&wasm));
        let modules = core_modules(&wasm).unwrap();
        assert_eq!(modules.len(), 2);
        let main = main_module(&wasm).unwrap();
        assert_eq!(main.index, 1);
        let module = &wasm[main.bytes.clone()];
        // A module of a few hundred bytes more: its section's size takes another byte.
        let mut grown = module.to_vec();
        grown.extend_from_slice(&[0, 200, 1, 3]);
        grown.extend_from_slice(b"pad");
        grown.extend(std::iter::repeat_n(0u8, 196));
        let replaced = with_module(&wasm, &main, &grown);
        validate(&replaced).unwrap();
        let again = main_module(&replaced).unwrap();
        assert_eq!(&replaced[again.bytes], &grown[..]);
        assert_eq!(&replaced[..main.section.start], &wasm[..main.section.start]);
    }

    #[test]
    fn a_composition_is_refused_in_one_line() {
        let wasm = wat::parse_str("(component (component (core module)))").unwrap();
        // wit-component nests components of types and exports alone.
        let typed = wat::parse_str("(component (core module) (component))").unwrap();
        assert_eq!(core_modules(&typed).unwrap().len(), 1);
        let error = core_modules(&wasm).unwrap_err().to_string();
        assert!(error.contains("nests components"), "{error}");
    }

    #[test]
    fn leb128_round_trips() {
        for value in [0, 1, 127, 128, 300, 16_383, 16_384, u32::MAX] {
            let mut out = Vec::new();
            write_u32(&mut out, value);
            assert_eq!(read_u32(&out), Some((value, out.len())));
        }
    }
}
