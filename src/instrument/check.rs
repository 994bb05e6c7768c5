//! The instrumenter's input checks: what it refuses (not a core module, instrumented
//! already, names that are the profiler's own, proposals it cannot handle), and the
//! validation of what it writes.

use crate::error::InstrumentError;
use crate::meta;

/// Refuses what is not a core module, one we already instrumented, and one whose names are
/// the profiler's own. ([`check_proposals`] runs beside walrus's parse.)
pub(super) fn check_input(bytes: &[u8]) -> Result<(), InstrumentError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(InstrumentError::NotWasm);
    }
    if wasmparser::Parser::is_component(bytes) {
        return Err(InstrumentError::Component);
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

/// Refuses modules whose import or export names are the profiler's own, and modules built
/// for threads (wasi-threads' `thread-spawn`), whose other threads are instances the host
/// would not collect.
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
                    if import.name == "thread-spawn" {
                        return Err(InstrumentError::Unsupported(format!(
                            "a threaded module (it imports `{}.thread-spawn`, as \
                             wasm32-wasip1-threads builds do): threads are not supported yet",
                            import.module
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

/// Validates a module with every feature wasmparser knows.
pub fn validate(wasm: &[u8]) -> Result<(), String> {
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(wasm)
        .map(|_| ())
        .map_err(|e| e.to_string())
}
