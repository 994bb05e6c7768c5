//! The profiler's JS runtime (`templates/wasmprof-runtime.js`), filled in for one program.
//!
//! One runtime serves every JS host: Emscripten's glue loads it with `--pre-js`
//! ([`for_emscripten`]: it instantiates the module itself, through `Module.instantiateWasm`);
//! wasm-bindgen's glue imports it as the module an instrumented module imports its state
//! from: under node `require("wasmprof")` ([`for_bindgen`]), in a browser page an ES module
//! at a URL ([`for_bindgen_page`]); the state module and the meta come inside it, since
//! wasm-bindgen's own pass over the module need not keep our custom sections.
//! Either way it saves the same dump when the program ends.

use crate::layout as l;
use crate::meta::{Meta, Metric};

/// The clock the runtime names in a dump it saves in a browser (`clock`; under node it is
/// `hrtime`): `performance.now`, which browsers coarsen.
pub const BROWSER_CLOCK: &str = "performance.now";

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
/// imports `names` from (the state module's exports, and the clock). When the tests are
/// done it posts the dump to `dump_url` (see [`PAGE_DUMP`]).
pub fn for_bindgen_page(
    wasm_file: &str,
    meta: &Meta,
    state: &[u8],
    names: &[String],
    dump_url: &str,
) -> String {
    let quoted = |s: &str| serde_json::to_string(s).expect("strings serialize");
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
        page = PAGE_DUMP.replace("'__WASMPROF_DUMP_URL__'", &quoted(dump_url)),
    )
}

/// What posts the dump from wasm-bindgen-test's page. The page writes the summary (`test
/// result: ...`) into `#output` when the tests are done, and the headless runner, which
/// reads `#output` every 100 ms, closes the browser once it sees it. A mutation observer
/// runs at the end of the task that wrote it, before the runner's next look (a task of
/// its own), and posts the dump with a synchronous request, so the dump is with
/// cargo-wasmprof before the browser goes.
const PAGE_DUMP: &str = r#"(function () {
  var output = document.getElementById('output');
  if (!output) return console.error('wasmprof: the page has no #output, so the profile cannot be sent when the tests end');
  var observer = new MutationObserver(function () {
    if (output.textContent.indexOf('test result: ') < 0) return;
    observer.disconnect();
    var request = new XMLHttpRequest();
    request.open('POST', '__WASMPROF_DUMP_URL__', false);
    request.setRequestHeader('Content-Type', 'text/plain');
    try {
      request.send(JSON.stringify(wasmprof.profile()));
    } catch (e) {
      console.error('wasmprof: cannot send the profile: ' + e.message);
    }
  });
  observer.observe(output, { childList: true, characterData: true, subtree: true });
})();"#;

/// The runtime for a wasm-bindgen program, which loads no module itself.
fn bindgen_runtime(wasm_file: &str, metric: Metric) -> String {
    format!(
        "// cargo-wasmprof's runtime for a wasm-bindgen program (generated).\n\
         var Module = {{}}; // the Emscripten glue's object, which this program has not\n\
         {}\n",
        for_emscripten(wasm_file, metric)
    )
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
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
