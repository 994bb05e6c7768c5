//! What each native address of the compiled module is, for the stack sampler's drain
//! thread: the function, and the program's line or the probes' code.

use std::path::Path;

use crate::cache::{self, Kind};
use crate::meta::{self, Meta};

/// Where an address of the module's code is: the function id (as the frame table maps the
/// function that holds it) and what the instruction is ([`meta::ADDRESSES_SECTION`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Place {
    /// The function id.
    pub(super) function: u32,
    /// A line index, [`meta::NO_LINE`] or [`meta::PROBE_CODE`].
    pub(super) what: u32,
}

/// The module's code as the samples see it: its compiled text, each function's range and
/// index, and what each stretch of native code is.
pub(in crate::host) struct CodeMap {
    text: (usize, usize),
    /// Each function's text offset, length and index, by offset.
    functions: Vec<(usize, usize, u32)>,
    /// Each text offset where what the code is changes, and what it is from there on (a
    /// line index, [`meta::NO_LINE`] or [`meta::PROBE_CODE`]).
    native: Vec<(usize, u32)>,
    /// Function index to function id.
    frames: Vec<u32>,
}

/// Compiled code to map: its `text`, compiled from the module `wasm`, which starts at
/// byte `offset` of what was compiled, and where the profiler's cache keeps it.
struct Code<'a> {
    text: &'a [u8],
    offset: u32,
    wasm: &'a [u8],
    compiled: Option<&'a Path>,
}

impl CodeMap {
    /// The map of `module`, compiled from the instrumented `wasm` of `meta` (and kept in
    /// the profiler's cache as `compiled`).
    pub(in crate::host) fn new(
        module: &wasmtime::Module,
        wasm: &[u8],
        meta: &Meta,
        compiled: Option<&Path>,
    ) -> anyhow::Result<CodeMap> {
        let functions = module
            .functions()
            .map(|f| (f.offset, f.len, f.index.as_u32()));
        let addresses = module.address_map().into_iter().flatten();
        let code = Code {
            text: module.text(),
            offset: 0,
            wasm,
            compiled,
        };
        CodeMap::of_code(code, functions, addresses, meta)
    }

    /// The map of a component's instrumented core module, the static module `index` of
    /// `component` (kept in the profiler's cache as `compiled`), compiled from the module
    /// `wasm` of `meta`, which starts at byte `offset` of the component (wasmtime's address
    /// map gives offsets in the component).
    pub(in crate::host) fn of_component(
        component: &wasmtime::component::Component,
        index: u32,
        offset: usize,
        wasm: &[u8],
        meta: &Meta,
        compiled: Option<&Path>,
    ) -> anyhow::Result<CodeMap> {
        let functions = component
            .functions()
            .filter(|f| f.module.as_u32() == index)
            .map(|f| (f.offset, f.len, f.index.as_u32()));
        let addresses = component.address_map().into_iter().flatten();
        let code = Code {
            text: component.text(),
            offset: u32::try_from(offset)?,
            wasm,
            compiled,
        };
        CodeMap::of_code(code, functions, addresses, meta)
    }

    /// The map of the module `code.wasm` of `meta` whose `functions` (text offset, length,
    /// index) are in the compiled `code.text`, its native offsets' wasm offsets as
    /// `addresses` has them. The stretches ([`native_stretches`]) are read back from the
    /// profiler's cache when the same code was mapped before, kept beside the compiled code
    /// (whose file is named by all that the map is made of), else kept there for the next
    /// run: making them takes a millisecond or more, a large part of a short run's.
    fn of_code(
        code: Code,
        functions: impl Iterator<Item = (usize, usize, u32)>,
        addresses: impl Iterator<Item = (usize, Option<u32>)>,
        meta: &Meta,
    ) -> anyhow::Result<CodeMap> {
        let mut functions: Vec<(usize, usize, u32)> = functions.collect();
        functions.sort_unstable();
        let section =
            meta::custom_section(code.wasm, meta::ADDRESSES_SECTION)?.ok_or_else(|| {
                anyhow::anyhow!("the module has no {} section", meta::ADDRESSES_SECTION)
            })?;
        let kept = code.compiled.map(|file| cache::beside(file, Kind::CodeMap));
        let native = match kept.as_deref().and_then(cache::read) {
            Some(bytes) => bytes.chunks_exact(12).map(read_stretch).collect(),
            None => {
                let native = native_stretches(&functions, addresses, code.offset, section);
                if let Some(kept) = kept {
                    let bytes: Vec<u8> = native.iter().flat_map(write_stretch).collect();
                    cache::write(&kept, &bytes);
                }
                native
            }
        };
        let text = code.text.as_ptr_range();
        Ok(CodeMap {
            text: (text.start as usize, text.end as usize),
            functions,
            native,
            frames: meta.frames.clone(),
        })
    }

    /// The map of an uninstrumented `module`: each function its own index, its code the
    /// program's at no line.
    pub(in crate::host) fn plain(module: &wasmtime::Module) -> anyhow::Result<CodeMap> {
        let text = module.text().as_ptr_range();
        let mut functions: Vec<(usize, usize, u32)> = module
            .functions()
            .map(|f| (f.offset, f.len, f.index.as_u32()))
            .collect();
        functions.sort_unstable();
        let count = functions.iter().map(|&(_, _, index)| index + 1).max();
        Ok(CodeMap {
            text: (text.start as usize, text.end as usize),
            functions,
            native: Vec::new(),
            frames: (0..count.unwrap_or(0)).collect(),
        })
    }

    /// Where the code at native address `pc` is: `None` for code of no function the
    /// program has (trampolines).
    pub(super) fn locate(&self, pc: usize) -> Option<Place> {
        let offset = pc.checked_sub(self.text.0)?;
        let at = self
            .functions
            .partition_point(|&(start, _, _)| start <= offset);
        let &(start, len, index) = self.functions.get(at.checked_sub(1)?)?;
        if offset >= start + len {
            return None;
        }
        let function = *self.frames.get(index as usize)?;
        if function == meta::NO_FUNCTION {
            return Some(Place {
                function,
                what: meta::PROBE_CODE,
            });
        }
        // A timer's interrupt stops the thread before the instruction at `pc`, which has
        // not run; the time it stands for is mostly the instruction before's, which the
        // CPU was retiring (most of all one that waited on memory: a probe's counter). So
        // a sample at the first instruction of a stretch is the stretch's before it, in the
        // same function.
        let at = self.native.partition_point(|&(o, _)| o <= offset);
        let what = match at.checked_sub(1) {
            Some(i) if self.native[i].0 == offset && i > 0 && self.native[i - 1].0 >= start => {
                self.native[i - 1].1
            }
            Some(i) => self.native[i].1,
            None => meta::NO_LINE,
        };
        Some(Place { function, what })
    }

    /// The compiled text's range of native addresses.
    pub(super) fn text(&self) -> (usize, usize) {
        self.text
    }
}

/// What each stretch of a module's native code is: each text offset where it changes (in
/// the `functions`, by offset) and what it is from there on, from wasmtime's `addresses`
/// (text offset, wasm offset `offset` bytes into what was compiled) and the module's
/// [`meta::ADDRESSES_SECTION`] `section`.
///
/// wasmtime's address map names the wasm instruction each stretch of native code comes
/// from, but not for all of it: code that Cranelift's optimizer made anew (a loop's
/// arithmetic) has none. Such code is taken to be what the code before it in the same
/// function is (the program's at its line, or the probes'); a function's code before any
/// named instruction (its prologue, which the plain program runs too) is the function's
/// own, at no line. Code of no function of the module (a component's other modules,
/// trampolines) is left out.
fn native_stretches(
    functions: &[(usize, usize, u32)],
    addresses: impl Iterator<Item = (usize, Option<u32>)>,
    offset: u32,
    section: &[u8],
) -> Vec<(usize, u32)> {
    let mut stretches = Stretches::new(section);
    let mut native: Vec<(usize, u32)> = Vec::new();
    let mut function = 0;
    for (at, wasm) in addresses {
        // The function this entry is in; a new function starts as its set-up.
        while function + 1 < functions.len() && functions[function + 1].0 <= at {
            function += 1;
        }
        let Some(&(start, len, _)) = functions.get(function) else {
            break;
        };
        if at < start || at >= start + len {
            continue;
        }
        let starts_function = native.last().is_none_or(|&(o, _)| o < start);
        let what = match (wasm.and_then(|w| w.checked_sub(offset)), native.last()) {
            (Some(wasm), _) => stretches.what_at(wasm),
            (None, Some(&(_, before))) if !starts_function => before,
            (None, _) => meta::NO_LINE,
        };
        if native.last().is_none_or(|&(_, last)| last != what) {
            native.push((at, what));
        }
    }
    native
}

/// A stretch as the cache keeps it: its text offset (a little-endian u64), then what it is
/// (a u32).
fn write_stretch(&(at, what): &(usize, u32)) -> [u8; 12] {
    let mut bytes = [0; 12];
    bytes[..8].copy_from_slice(&(at as u64).to_le_bytes());
    bytes[8..].copy_from_slice(&what.to_le_bytes());
    bytes
}

/// The stretch that [`write_stretch`] kept as `bytes`.
fn read_stretch(bytes: &[u8]) -> (usize, u32) {
    let at = u64::from_le_bytes(bytes[..8].try_into().expect("a stretch's 12 bytes"));
    let what = u32::from_le_bytes(bytes[8..].try_into().expect("a stretch's 12 bytes"));
    (at as usize, what)
}

/// The instrumented module's stretches of code ([`meta::ADDRESSES_SECTION`]): each wasm
/// offset where what the code is changes, and what it is from there on.
struct Stretches {
    list: Vec<(u32, u32)>,
    /// The stretch the last lookup found.
    last: usize,
}

impl Stretches {
    /// The stretches the section's bytes list (pairs of little-endian u32s).
    fn new(section: &[u8]) -> Stretches {
        let list = section
            .chunks_exact(8)
            .map(|b| {
                (
                    u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                    u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
                )
            })
            .collect();
        Stretches { list, last: 0 }
    }

    /// What the code at wasm offset `wasm` is: the stretch it falls in, or the probes'
    /// before the first. The address map runs through a function's code mostly in the
    /// order of its wasm offsets, so the stretch the lookup before found, and the one after
    /// it, are tried first (a binary search for every entry was three quarters of building
    /// the map).
    fn what_at(&mut self, wasm: u32) -> u32 {
        let list = &self.list;
        let fits = |i: usize| {
            list.get(i).is_some_and(|&(o, _)| o <= wasm)
                && list.get(i + 1).is_none_or(|&(o, _)| wasm < o)
        };
        if fits(self.last + 1) {
            self.last += 1;
        } else if !fits(self.last) {
            match list.partition_point(|&(o, _)| o <= wasm).checked_sub(1) {
                Some(i) => self.last = i,
                None => return meta::PROBE_CODE,
            }
        }
        list[self.last].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stretch_is_found_in_any_order_of_lookups() {
        let list = [(10u32, 1u32), (20, 2), (20, 3), (35, 4), (50, 5)];
        let section: Vec<u8> = list
            .iter()
            .flat_map(|&(o, w)| [o.to_le_bytes(), w.to_le_bytes()].concat())
            .collect();
        let mut stretches = Stretches::new(&section);
        // The binary search alone, as the map was built before the hint.
        let reference = |wasm: u32| {
            let at = list.partition_point(|&(o, _)| o <= wasm);
            at.checked_sub(1).map_or(meta::PROBE_CODE, |i| list[i].1)
        };
        let lookups = (0..60)
            .chain((0..60).rev())
            .chain([36, 5, 49, 20, 19, 60, 0, 35]);
        for wasm in lookups {
            assert_eq!(stretches.what_at(wasm), reference(wasm), "at {wasm}");
        }
    }
}
