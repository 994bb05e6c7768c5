//! cargo-wasmprof: an instrumenting profiler for WebAssembly.
//!
//! The pipeline, one module per step:
//! [`build`] (cargo, wasm32-wasip1) -> [`instrument`] (walrus) -> [`host`] (wasmtime) ->
//! [`symbols`] (DWARF, at instrumentation time, from the original module) ->
//! [`profile`] (one data model) -> [`report`] (views of it).

pub mod fsutil;
pub mod host;
pub mod instrument;
pub mod layout;
pub mod meta;
pub mod profile;
pub mod symbols;
