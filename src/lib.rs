//! cargo-wasmprof: an instrumenting profiler for WebAssembly.
//!
//! The pipeline, one module per step: [`build`] (cargo, for wasm32-wasip1 or, through
//! `emscripten`, wasm32-unknown-emscripten) -> [`instrument`] (walrus; it also reads the
//! original module's DWARF through [`symbols`] into its [`meta`]) -> [`host`]
//! (one seam: the embedded wasmtime, node) -> [`profile`] (one data model, decoded from the
//! memory laid out by [`layout`]) -> [`format`](mod@format) (every view of it, the text report too).
//!
//! [`commands`] walks the pipeline for each command of [`cli`]; [`emcc`] is the compiler
//! wrapper that instruments what Emscripten links. Layers point down only: ARCHITECTURE.md
//! at the repository's root is the map, and `tests/architecture.rs` keeps it true.

#![warn(missing_docs)]

pub mod build;
pub(crate) mod cache;
pub mod calibrate;
pub mod cli;
pub mod clock;
pub mod commands;
pub(crate) mod diff;
pub mod emcc;
pub(crate) mod emscripten;
pub mod error;
pub mod format;
pub(crate) mod fsutil;
pub mod harness;
pub mod host;
pub mod instrument;
pub mod js_runtime;
pub mod layout;
pub mod meta;
pub mod profile;
pub mod sampling;
pub mod source;
pub mod status;
pub mod symbols;
