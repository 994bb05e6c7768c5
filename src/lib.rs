//! cargo-wasmprof: an instrumenting profiler for WebAssembly.
//!
//! The pipeline, one module per step:
//! [`build`] (cargo; wasm32-wasip1, or wasm32-unknown-emscripten through [`emscripten`]) ->
//! [`instrument`] (walrus; it also reads the original module's DWARF through [`symbols`]
//! into the tables of [`meta`]) -> [`host`] (wasmtime; node for [`emscripten`]) ->
//! [`profile`] (one data model, decoded from the memory laid out by [`layout`]) ->
//! [`report`] (views of it). [`commands`] walks it for each command of [`cli`]; [`emcc`]
//! is the compiler wrapper that instruments what Emscripten links.

pub mod build;
pub mod calibrate;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod diff;
pub mod emcc;
pub mod emscripten;
pub mod error;
pub mod format;
pub mod fsutil;
pub mod host;
pub mod instrument;
pub mod iterations;
pub mod layout;
pub mod meta;
pub mod profile;
pub mod report;
pub mod status;
pub mod symbols;
