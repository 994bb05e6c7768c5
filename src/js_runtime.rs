//! The profiler's JS runtime (`templates/wasmprof-runtime.js`), filled in for one program,
//! and the contract between it and cargo-wasmprof.
//!
//! One runtime serves every JS host: Emscripten's glue loads it with `--pre-js`
//! ([`for_emscripten`]: it instantiates the module itself, through `Module.instantiateWasm`);
//! wasm-bindgen's glue imports it as the module an instrumented module imports its state
//! from: under node `require("wasmprof")` ([`for_bindgen`]), in a browser page an ES module
//! at a URL ([`for_bindgen_page`], with `templates/wasmprof-page.js`, which posts the dump
//! when the tests are done); the state module and the meta come inside it, since
//! wasm-bindgen's own pass over the module need not keep our custom sections. Either way
//! it saves the same dump when the program ends.
//!
//! **The contract.** Everything the runtime shares with the Rust side is defined here or
//! below and handed to it as one JSON object ([`contract`], the runtime's `CONTRACT`): the
//! state's layout ([`crate::layout`]), every metric's facts ([`crate::meta::Metric::facts`]),
//! the names of the profiler's exports, sections and imports ([`crate::meta`]), the
//! environment variables it reads ([`OUT_VAR`], [`SAMPLE_INTERVAL_VAR`],
//! `emscripten::METRIC_VAR` in its messages), the sampler's schedule
//! ([`crate::sampling`]), the clocks' names ([`NODE_CLOCK`], [`BROWSER_CLOCK`]), and the
//! dump's format and fields ([`crate::profile::DumpFile`]); the runtime checks the dump it
//! writes against those fields.

use crate::emscripten::METRIC_VAR;
use crate::layout as l;
use crate::meta::{self, Meta, Metric, Sampler};
use crate::profile::{DUMP_FIELDS, DUMP_FORMAT, DUMP_THREAD_FIELDS, UNCAUGHT_JS_EXCEPTION};
use crate::sampling;

/// The environment variable that names the file the runtime saves its dump to under node
/// (else `<program>.wasmprof.json` in the working directory).
pub const OUT_VAR: &str = "WASMPROF_OUT";
/// The environment variable that holds the sampled time metric's interval under node, in
/// microseconds ([`sampling::WORD_INTERVAL`] without it).
pub const SAMPLE_INTERVAL_VAR: &str = "WASMPROF_SAMPLE_INTERVAL";
pub use crate::profile::{BROWSER_CLOCK, NODE_CLOCK};

/// The runtime, with [`WASM_FILE_MARK`] standing for the module's file name,
/// [`CONTRACT_MARK`] for the [`contract`], [`SAMPLER_MARK`] for the sampler's source,
/// [`PTHREADS_MARK`] for its `-pthread` part and [`V8_MARK`] for V8's sampler's.
const RUNTIME: &str = include_str!("../templates/wasmprof-runtime.js");
/// The sampled time metric's sampler, a function the runtime runs in a worker of its own.
const SAMPLER: &str = include_str!("../templates/wasmprof-sampler.js");
/// The runtime's part for Emscripten's `-pthread`, which goes inside the runtime's scope
/// at [`PTHREADS_MARK`].
const PTHREADS: &str = include_str!("../templates/wasmprof-pthreads.js");
/// What the runtime template has where [`PTHREADS`] goes, as a statement.
const PTHREADS_MARK: &str = "'__WASMPROF_PTHREADS__';";
/// The runtime's part for V8's own sampler, which goes inside the runtime's scope at
/// [`V8_MARK`].
const V8: &str = include_str!("../templates/wasmprof-v8.js");
/// What the runtime template has where [`V8`] goes, as a statement.
const V8_MARK: &str = "'__WASMPROF_V8__';";
/// What the runtime template has where the sampler's source goes, as a string.
const SAMPLER_MARK: &str = "__WASMPROF_SAMPLER__";
/// What the runtime template has where the .wasm file's name goes.
const WASM_FILE_MARK: &str = "__WASMPROF_WASM_FILE__";
/// What the runtime template has where the contract goes.
const CONTRACT_MARK: &str = "__WASMPROF_CONTRACT__";
/// What posts the dump from wasm-bindgen-test's page (see the file), with
/// [`DUMP_URL_MARK`] and [`SO_FAR_URL_MARK`] standing for where it posts it.
const PAGE: &str = include_str!("../templates/wasmprof-page.js");
/// What the page template has where the dump's URL goes.
const DUMP_URL_MARK: &str = "__WASMPROF_DUMP_URL__";
/// What the page template has where the URL of the dump so far goes.
const SO_FAR_URL_MARK: &str = "__WASMPROF_SO_FAR_URL__";

/// The runtime for the module `wasm_file` (its file name), instrumented for `metric` and
/// (most likely) `sampler`, as Emscripten's `--pre-js` takes it.
pub fn for_emscripten(wasm_file: &str, metric: Metric, sampler: Sampler) -> String {
    // The word sampler's source without its leading comment.
    let source: Vec<&str> = SAMPLER
        .lines()
        .skip_while(|line| line.starts_with("//"))
        .collect();
    RUNTIME
        .replace(PTHREADS_MARK, PTHREADS)
        .replace(V8_MARK, V8)
        .replace(&format!("'{WASM_FILE_MARK}'"), &quoted(wasm_file)) // a JS string literal
        .replace(
            &format!("'{CONTRACT_MARK}'"),
            &contract(metric, sampler).to_string(),
        )
        .replace(&format!("'{SAMPLER_MARK}'"), &quoted(&source.join("\n")))
}

/// The CommonJS module `wasmprof` for a wasm-bindgen program under node (its module
/// `wasm_file`, instrumented with `meta`, whose state module is `state`): its exports are
/// what the module imports from `wasmprof` (the state module's, and the clock).
pub fn for_bindgen(wasm_file: &str, meta: &Meta, state: &[u8]) -> String {
    format!(
        "{runtime}module.exports = wasmprof.attach({meta}, Buffer.from('{state}', 'base64'));\n",
        runtime = bindgen_runtime(wasm_file, meta.metric),
        meta = serde_json::to_string(meta).expect("the meta serializes"),
        state = base64(state),
    )
}

/// The ES module for a wasm-bindgen test page in a browser (the program's module
/// `wasm_file`, instrumented with `meta`, whose state module is `state`), which its module
/// imports `names` from (the state module's exports, and the clock). While the tests run
/// it posts the dump so far to `so_far_url` now and then, and when they are done the dump
/// to `dump_url` (`templates/wasmprof-page.js`).
pub fn for_bindgen_page(
    wasm_file: &str,
    meta: &Meta,
    state: &[u8],
    names: &[String],
    dump_url: &str,
    so_far_url: &str,
) -> String {
    let exports: String = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            format!(
                "const import{i} = imports[{name}];\nexport {{ import{i} as {name} }};\n",
                name = quoted(name)
            )
        })
        .collect();
    format!(
        "{runtime}const imports = wasmprof.attach({meta}, Uint8Array.from(atob('{state}'), (c) => c.charCodeAt(0)));\n\
         {page}\n\
         {exports}",
        runtime = bindgen_runtime(wasm_file, meta.metric),
        meta = serde_json::to_string(meta).expect("the meta serializes"),
        state = base64(state),
        page = PAGE
            .trim_end()
            .replace(&format!("'{DUMP_URL_MARK}'"), &quoted(dump_url))
            .replace(&format!("'{SO_FAR_URL_MARK}'"), &quoted(so_far_url)),
    )
}

/// The runtime for a wasm-bindgen program, which loads no module itself.
fn bindgen_runtime(wasm_file: &str, metric: Metric) -> String {
    format!(
        "// cargo-wasmprof's runtime for a wasm-bindgen program (generated).\n\
         var Module = {{}}; // the Emscripten glue's object, which this program has not\n\
         {}\n",
        for_emscripten(wasm_file, metric, Sampler::Word)
    )
}

/// `s` as a JS string literal.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// What the runtime shares with cargo-wasmprof (see the module's documentation), for a
/// runtime written for `metric` and `sampler` (a module it runs says its own metric and
/// sampler in its meta: `metrics` has every metric's facts; the runtime starts the word
/// sampler's worker early only where that is the sampler it expects).
pub fn contract(metric: Metric, sampler: Sampler) -> serde_json::Value {
    let ns = |d: std::time::Duration| d.as_nanos() as u64;
    let metrics: serde_json::Map<String, serde_json::Value> = Metric::ALL
        .iter()
        .map(|m| (m.name().to_string(), serde_json::json!(m.facts())))
        .collect();
    serde_json::json!({
        "metric": metric.facts(),
        "sampler": sampler.name(),
        "metrics": metrics,
        "layout": {
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
        },
        "names": {
            "memory": meta::MEMORY_EXPORT,
            "cur": meta::CUR_EXPORT,
            "instructions": meta::INSTRUCTIONS_EXPORT,
            "state_module": meta::STATE_MODULE,
            "clock": meta::CLOCK_NAME,
            "meta_section": meta::SECTION,
            "state_section": meta::STATE_SECTION,
            "one_memory_section": meta::ONE_MEMORY_SECTION,
            "frames_section": meta::FRAMES_SECTION,
            "no_function": meta::NO_FUNCTION,
            "flush": meta::FLUSH_EXPORT,
            "no_line": meta::NO_LINE,
            "v8_sampler": Sampler::V8.name(),
            "word_sampler": Sampler::Word.name(),
            "uncaught": UNCAUGHT_JS_EXCEPTION,
        },
        "env": {
            "out": OUT_VAR,
            "sample_interval": SAMPLE_INTERVAL_VAR,
            "metric": METRIC_VAR,
        },
        "sampling": {
            "default_interval_us": sampling::WORD_INTERVAL.as_micros() as u64,
            "v8_interval_us": sampling::V8_INTERVAL.as_micros() as u64,
            "dense_phase_ns": ns(sampling::DENSE_PHASE),
            "dense_divisor": sampling::DENSE_DIVISOR,
            "dense_floor_ns": ns(sampling::DENSE_FLOOR),
            "late_factor": sampling::LATE_FACTOR,
            "late_slack_ns": ns(sampling::LATE_SLACK),
        },
        "clocks": { "node": NODE_CLOCK, "browser": BROWSER_CLOCK },
        "dump": {
            "format": DUMP_FORMAT,
            "fields": DUMP_FIELDS,
            "thread_fields": DUMP_THREAD_FIELDS,
        },
    })
}
