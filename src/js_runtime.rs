//! The profiler's JS runtime (`templates/wasmprof-runtime.js`), filled in for one program.
//!
//! One runtime serves every JS host: Emscripten's glue loads it with `--pre-js`
//! ([`for_emscripten`]: it instantiates the module itself, through `Module.instantiateWasm`);
//! wasm-bindgen's glue `require`s it as the module `wasmprof` that an instrumented module
//! imports its state from ([`for_bindgen`]: the state module and the meta come inside
//! it, since wasm-bindgen's own pass over the module need not keep our custom sections).
//! Either way it saves the same dump when the program ends.

use crate::layout as l;
use crate::meta::{Meta, Metric};

/// The runtime, with [`WASM_FILE_MARK`] standing for the module's file name and
/// [`LAYOUT_MARK`] for the state's layout constants.
const RUNTIME: &str = include_str!("../templates/wasmprof-runtime.js");
/// What the runtime template has where the .wasm file's name goes.
const WASM_FILE_MARK: &str = "__WASMPROF_WASM_FILE__";
/// What the runtime template has where the layout constants go ([`layout`]).
const LAYOUT_MARK: &str = "__WASMPROF_LAYOUT__";

/// The runtime for the module `wasm_file` (its file name), instrumented for `metric`, as
/// Emscripten's `--pre-js` takes it.
pub fn for_emscripten(wasm_file: &str, metric: Metric) -> String {
    let quoted = serde_json::to_string(wasm_file).expect("strings serialize");
    RUNTIME
        .replace(&format!("'{WASM_FILE_MARK}'"), &quoted) // a JS string literal
        .replace(&format!("'{LAYOUT_MARK}'"), &layout(metric))
}

/// The CommonJS module `wasmprof` for a wasm-bindgen program (its module `wasm_file`,
/// instrumented with `meta`, whose state module is `state`): its exports are what the
/// module imports from `wasmprof` (the state module's, and the clock).
pub fn for_bindgen(wasm_file: &str, meta: &Meta, state: &[u8]) -> String {
    use base64::Engine as _;
    let state = base64::engine::general_purpose::STANDARD.encode(state);
    format!(
        "// cargo-wasmprof's runtime for a wasm-bindgen program (generated).\n\
         var Module = {{}}; // the Emscripten glue's object, which this program has not\n\
         {runtime}\n\
         module.exports = wasmprof.attach({meta}, Buffer.from('{state}', 'base64'));\n",
        runtime = for_emscripten(wasm_file, meta.metric),
        meta = serde_json::to_string(meta).expect("the meta serializes"),
    )
}

/// The state's layout constants the runtime reads, and whether the metric is sampled.
fn layout(metric: Metric) -> String {
    serde_json::json!({
        "sampled": metric == Metric::Time,
        "node_size": l::NODE_SIZE,
        "where": l::HDR_WHERE,
        "samples": l::HDR_SAMPLES,
        "probe_samples": l::HDR_PROBE_SAMPLES,
        "idle_samples": l::HDR_IDLE_SAMPLES,
        "late_samples": l::HDR_LATE_SAMPLES,
        "in_probes": l::IN_PROBES,
        "node_samples": l::NODE_SAMPLES,
        "node_sample_ns": l::NODE_SAMPLE_NS,
        "waiting": l::HDR_WAITING,
        "wait_cur": l::HDR_WAIT_CUR,
        "wait_instructions": l::HDR_WAIT_INSTRUCTIONS,
    })
    .to_string()
}
