//! The address map the stack sampler reads ([`meta::ADDRESSES_SECTION`]): what each
//! stretch of the instrumented module's code is, the program's code at a source line or
//! the probes' code, so that a sample is charged to the line it found running, or left out
//! as the probes'.
//!
//! How: every instruction the instrumenter adds has no place in the original module (its
//! `InstrLocId` is walrus's default); before emitting, [`mark_probe_code`] gives each of
//! them a place of its own above [`PROBE_BASE`], so that walrus's code transform, which
//! records where each placed instruction lands in the output, records them all. The
//! transform is caught as the frame table is written ([`Catch`]); [`table`] then turns it,
//! with the original module's DWARF, into stretches.

use std::sync::{Arc, Mutex};

use walrus::ir::InstrLocId;
use walrus::{LocalFunction, Module};

use super::lines::LineInterner;
use super::sites::sequences;
use crate::meta;

/// The first of the places given to the probes' instructions: above any offset of an
/// original module (which would be 3 GiB).
pub(super) const PROBE_BASE: u32 = 0xC000_0000;

/// The place of an import's thunk's call of the import: the import's own code, at no
/// line, where the stack sampler's samples in the host return.
pub(super) const HOST_CALL: u32 = PROBE_BASE - 1;

/// Gives every instruction (and every block's end) of `module`'s functions that has no
/// place in the original module a place of its own above [`PROBE_BASE`].
pub(super) fn mark_probe_code(module: &mut Module) {
    let mut next = PROBE_BASE;
    let mut mark = |loc: &mut InstrLocId| {
        if loc.is_default() {
            *loc = InstrLocId::new(next);
            next += 1;
        }
    };
    for (_, func) in module.funcs.iter_local_mut() {
        mark_function(func, &mut mark);
    }
}

fn mark_function(func: &mut LocalFunction, mark: &mut impl FnMut(&mut InstrLocId)) {
    for seq in sequences(func) {
        let block = func.block_mut(seq);
        for (_, loc) in block.instrs.iter_mut() {
            mark(loc);
        }
        mark(&mut block.end);
    }
}

/// Where walrus's code transform is caught while the module is emitted: each placed
/// instruction's place and its offset in the output, sorted by offset.
#[derive(Debug, Clone, Default)]
pub(super) struct Catch(Arc<Mutex<Vec<(usize, u32)>>>);

impl Catch {
    /// Keeps the transform's instruction map.
    pub(super) fn keep(&self, transform: &walrus::CodeTransform) {
        let mut map: Vec<(usize, u32)> = transform
            .instruction_map
            .iter()
            .map(|&(loc, offset)| (offset, loc.data()))
            .collect();
        map.sort_unstable();
        *self.0.lock().expect("not poisoned") = map;
    }

    /// The map kept.
    pub(super) fn take(&self) -> Vec<(usize, u32)> {
        std::mem::take(&mut *self.0.lock().expect("not poisoned"))
    }
}

/// The address map's stretches from the transform's `map` (output offset, place): each
/// stretch's first offset and what it is, a line of `lines` (interned there),
/// [`meta::NO_LINE`] or [`meta::PROBE_CODE`]; consecutive instructions of one kind share
/// a stretch.
pub(super) fn table(map: &[(usize, u32)], lines: &mut LineInterner) -> Vec<(u32, u32)> {
    let mut stretches: Vec<(u32, u32)> = Vec::new();
    for &(offset, place) in map {
        let what = match place {
            HOST_CALL => meta::NO_LINE,
            PROBE_BASE.. => meta::PROBE_CODE,
            original => lines.line_of(original),
        };
        if stretches.last().is_none_or(|&(_, last)| last != what) {
            stretches.push((offset as u32, what));
        }
    }
    stretches
}

/// The section's bytes: the stretches as little-endian `u32` pairs.
pub(super) fn section(stretches: &[(u32, u32)]) -> Vec<u8> {
    stretches
        .iter()
        .flat_map(|&(offset, what)| [offset.to_le_bytes(), what.to_le_bytes()])
        .flatten()
        .collect()
}
