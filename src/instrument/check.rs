//! The instrumenter's input checks: what it refuses (not WebAssembly, instrumented
//! already, names that are the profiler's own, proposals it cannot handle), and the
//! validation of what it writes.

use crate::error::InstrumentError;
use crate::meta::{self, StateLocation};

/// Refuses what is not WebAssembly, a module we already instrumented, and one whose names are
/// the profiler's own. ([`check_proposals`] runs beside walrus's parse.)
pub(super) fn check_input(bytes: &[u8]) -> Result<(), InstrumentError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(InstrumentError::NotWasm);
    }
    match meta::custom_section(bytes, meta::SECTION) {
        Ok(Some(_)) => return Err(InstrumentError::AlreadyInstrumented),
        Ok(None) => {}
        Err(e) => return Err(InstrumentError::Invalid(format!("{e:#}"))),
    }
    check_names(bytes)
}

/// Proposals the instrumenter does not handle, with the name a user knows them by.
const NOT_HANDLED: &[(wasmparser::WasmFeatures, &str)] = {
    use wasmparser::WasmFeatures as F;
    &[
        (F::GC, "garbage collection (GC)"),
        (F::STACK_SWITCHING, "stack switching"),
        (F::SHARED_EVERYTHING_THREADS, "shared-everything threads"),
        (F::CUSTOM_PAGE_SIZES, "custom page sizes"),
        (F::WIDE_ARITHMETIC, "wide arithmetic"),
        (F::MEMORY_CONTROL, "memory control"),
        (F::CUSTOM_DESCRIPTORS, "custom descriptors"),
        (F::COMPACT_IMPORTS, "compact imports"),
    ]
};

/// Validates the module with the proposals the instrumenter handles (the standard ones up
/// to Wasm 3.0 but GC, plus legacy exceptions); a module that needs another one is refused
/// with its name.
pub(super) fn check_proposals(bytes: &[u8]) -> Result<(), InstrumentError> {
    use wasmparser::{Validator, WasmFeatures};
    let validate = |features: WasmFeatures| {
        Validator::new_with_features(features)
            .validate_all(bytes)
            .map(|_| ())
    };
    let mut handled = WasmFeatures::all();
    for &(feature, _) in NOT_HANDLED {
        handled.remove(feature);
    }
    let Err(error) = validate(handled) else {
        return Ok(());
    };
    for &(feature, name) in NOT_HANDLED {
        if validate(handled | feature).is_ok() {
            return Err(InstrumentError::Unsupported(format!(
                "uses the {name} proposal, which cargo-wasmprof cannot instrument yet"
            )));
        }
    }
    Err(InstrumentError::Invalid(error.to_string()))
}

/// Refuses modules whose import or export names are the profiler's own.
fn check_names(bytes: &[u8]) -> Result<(), InstrumentError> {
    use wasmparser::Payload;
    let invalid = |e: wasmparser::BinaryReaderError| InstrumentError::Invalid(e.to_string());
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.map_err(invalid)? {
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.map_err(invalid)?;
                    if import.module == meta::STATE_MODULE {
                        return Err(InstrumentError::Unsupported(format!(
                            "imports `{}.{}`: module `{}` is the profiler's own import \
                             namespace",
                            import.module,
                            import.name,
                            meta::STATE_MODULE
                        )));
                    }
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.map_err(invalid)?;
                    if export.name.starts_with("__wasmprof_") {
                        return Err(InstrumentError::Unsupported(format!(
                            "exports `{}`: names starting with `__wasmprof_` are the \
                             profiler's own",
                            export.name
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// What Emscripten's `-pthread` modules export for their workers' start.
const EMSCRIPTEN_THREAD_INIT: &str = "_emscripten_thread_init";

/// How a module starts threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Threads {
    /// It does not.
    None,
    /// wasi-threads: it imports `wasi.thread-spawn`; the embedded host runs each thread.
    Wasi,
    /// Emscripten's `-pthread`: the glue runs each thread in a worker (node, browsers),
    /// each an instance of the module on the imported shared memory.
    Emscripten,
}

/// How `module` starts threads (wasi-threads' `thread-spawn` import, or Emscripten's
/// `-pthread` glue), after checking that it can: the import's type, an imported shared
/// memory that every thread's instance shares, the `wasi_thread_start` export, and a
/// profiler state that is each instance's own (wasi-threads: a memory of its own; the JS
/// runtime of Emscripten's threads: each worker's instance's, or its state module).
pub(super) fn threads(
    module: &walrus::Module,
    state: StateLocation,
) -> Result<Threads, InstrumentError> {
    use walrus::ImportKind;
    let spawn = module.imports.iter().find_map(|import| match import.kind {
        ImportKind::Function(f)
            if (import.module.as_str(), import.name.as_str()) == meta::THREAD_SPAWN =>
        {
            Some(f)
        }
        _ => None,
    });
    let shared_import = module.imports.iter().any(|import| match import.kind {
        ImportKind::Memory(m) => module.memories.get(m).shared,
        _ => false,
    });
    match spawn {
        Some(spawn) => wasi_threads(module, spawn, shared_import, state),
        None if module
            .exports
            .iter()
            .any(|e| e.name == EMSCRIPTEN_THREAD_INIT) =>
        {
            emscripten_threads(shared_import)
        }
        None => Ok(Threads::None),
    }
}

/// An Emscripten `-pthread` module, checked: it imports a shared memory (`shared_import`),
/// which the glue gives every worker's instance. The profiler's state is each worker's own
/// either way: in its instance's own memory or in the state module its runtime instantiates.
fn emscripten_threads(shared_import: bool) -> Result<Threads, InstrumentError> {
    if !shared_import {
        return Err(InstrumentError::Unsupported(format!(
            "an Emscripten -pthread module (it exports `{EMSCRIPTEN_THREAD_INIT}`): it imports \
             no shared memory, so its workers would share no memory (the glue gives every \
             worker's instance the imported shared memory)"
        )));
    }
    Ok(Threads::Emscripten)
}

/// A wasi-threads module (it imports `spawn`), checked: the import's type, an imported
/// shared memory (`shared_import`), the `wasi_thread_start` export, and the state in each
/// instance's own memory.
fn wasi_threads(
    module: &walrus::Module,
    spawn: walrus::FunctionId,
    shared_import: bool,
    state: StateLocation,
) -> Result<Threads, InstrumentError> {
    use walrus::{ExportItem, ValType};
    let refuse = |why: String| {
        Err(InstrumentError::Unsupported(format!(
            "a threaded module (it imports `{}.{}`): {why}",
            meta::THREAD_SPAWN.0,
            meta::THREAD_SPAWN.1
        )))
    };
    let ty = module.types.get(module.funcs.get(spawn).ty());
    if ty.params() != [ValType::I32] || ty.results() != [ValType::I32] {
        let list = |types: &[ValType]| {
            let names: Vec<String> = types.iter().map(|t| t.to_string()).collect();
            format!("({})", names.join(", "))
        };
        return refuse(format!(
            "the import's type is {} -> {}, not wasi-threads' (i32) -> (i32)",
            list(ty.params()),
            list(ty.results())
        ));
    }
    if !shared_import {
        return refuse(
            "it imports no shared memory, so its threads would share no memory (wasi-threads \
             instantiates the module once per thread with the imported shared memory)"
                .to_string(),
        );
    }
    let start = module.exports.iter().find_map(|e| match e.item {
        ExportItem::Function(f) if e.name == meta::THREAD_START => Some(f),
        _ => None,
    });
    let start_ok = start.is_some_and(|f| {
        let ty = module.types.get(module.funcs.get(f).ty());
        ty.params() == [ValType::I32, ValType::I32] && ty.results().is_empty()
    });
    if !start_ok {
        return refuse(format!(
            "it exports no `{}(i32, i32)`, where wasi-threads starts each thread",
            meta::THREAD_START
        ));
    }
    if state != StateLocation::OwnMemory {
        return refuse(
            "the embedded host runs its threads, with the profiler's state in each instance's \
             own memory, not in a state module (`--state own-memory`)"
                .to_string(),
        );
    }
    Ok(Threads::Wasi)
}

/// Validates a module with every feature wasmparser knows.
pub fn validate(wasm: &[u8]) -> Result<(), String> {
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(wasm)
        .map(|_| ())
        .map_err(|e| e.to_string())
}
