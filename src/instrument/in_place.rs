//! A module file made instrumented where it lies, its original kept beside it as
//! `NAME.orig.wasm`: what the Emscripten wrapper does after a link, and what a JS host's
//! preparation does before a run.

use std::path::{Path, PathBuf};

use super::{instrument, Options};
use crate::error::Error;
use crate::fsutil::{relative, write_atomic};
use crate::meta::Meta;

/// Makes `wasm` its original instrumented with `options`, keeping the original as
/// `NAME.orig.wasm`. A module instrumented with other options is made again from that
/// original. Returns the meta when it instrumented, `None` when `wasm` was already so.
pub fn instrument_in_place(wasm: &Path, options: &Options) -> Result<Option<Meta>, Error> {
    let bytes = std::fs::read(wasm).map_err(|e| Error::input(wasm, e))?;
    let original_file = original_path(wasm);
    let original = match Meta::from_module(&bytes) {
        Ok(Some(meta)) if options.produced(&meta) => return Ok(None),
        Ok(Some(_)) => std::fs::read(&original_file).map_err(|e| {
            Error::input(
                wasm,
                format!(
                    "instrumented with other options, and its original {} cannot be read: {e}",
                    relative(&original_file)
                ),
            )
        })?,
        _ => {
            write_atomic(&original_file, &bytes)?;
            bytes
        }
    };
    let done = instrument(&original, options).map_err(|source| Error::instrument(wasm, source))?;
    write_atomic(wasm, &done.wasm)?;
    Ok(Some(done.meta))
}

/// Where the uninstrumented module is kept.
pub fn original_path(wasm: &Path) -> PathBuf {
    wasm.with_extension("orig.wasm")
}
