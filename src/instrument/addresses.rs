//! The address map the stack sampler reads ([`meta::ADDRESSES_SECTION`]): what each
//! stretch of the instrumented module's code is, the program's code at a source line or
//! the probes' code, so that a sample is charged to the line it found running, or left out
//! as the probes'.
//!
//! How: every instruction the instrumenter adds has no place in the original module (its
//! `InstrLocId` is walrus's default); walrus's code transform records where each placed
//! instruction lands in the output. Before emitting, [`mark_code`] places the first
//! instruction of each stretch: a probe's instruction gets a place of its own above
//! [`PROBE_BASE`], the program's keeps its offset in the original module; every other
//! instruction, one that walrus emits right after another of the same stretch, loses its
//! place, so that walrus records a stretch once, not every instruction (for semver's
//! debug lib tests, 68,367 places instead of 180,618). The transform is caught as the
//! frame table is written ([`Catch`]); [`table`] then turns it, with the original module's
//! DWARF, into stretches.

use std::sync::{Arc, Mutex};

use walrus::ir::InstrLocId;
use walrus::{LocalFunction, Module};

use super::lines::LineInterner;
use super::sites::{nests, sequences};
use crate::meta;
use crate::symbols::SymbolTable;

/// The first of the places given to the probes' instructions: above any offset of an
/// original module (which would be 3 GiB).
pub(super) const PROBE_BASE: u32 = 0xC000_0000;

/// The place of an import's thunk's call of the import: the import's own code, at no
/// line, where the stack sampler's samples in the host return.
pub(super) const HOST_CALL: u32 = PROBE_BASE - 1;

/// Places the first instruction of each stretch of `module`'s functions, and every
/// block's end: one the instrumenter added gets a place of its own above [`PROBE_BASE`];
/// an instruction that walrus emits right after another of its stretch, the same probes'
/// code or the program's at the same line as `symbols` say, loses its place.
pub(super) fn mark_code(module: &mut Module, symbols: &SymbolTable) {
    let mut next = PROBE_BASE;
    let mut mark = |loc: &mut InstrLocId| {
        if loc.is_default() {
            *loc = InstrLocId::new(next);
            next += 1;
        }
    };
    for (_, func) in module.funcs.iter_local_mut() {
        mark_function(func, symbols, &mut mark);
    }
}

/// What the instruction that walrus emits right before another was, for the stretch the
/// other may share with it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Before {
    /// None it can share a stretch with: the start of a sequence, the end of the
    /// sequences nested in an instruction, or a thunk's call of its import.
    Nothing,
    /// The probes' code.
    Probe,
    /// The program's code at an original offset from which every offset before `until`
    /// has the same line.
    Line { from: u32, until: u64 },
    /// The program's code at no line.
    NoLine,
}

/// [`mark_code`] of one function.
fn mark_function(
    func: &mut LocalFunction,
    symbols: &SymbolTable,
    mark: &mut impl FnMut(&mut InstrLocId),
) {
    for seq in sequences(func) {
        let block = func.block_mut(seq);
        let mut before = Before::Nothing;
        for (instr, loc) in block.instrs.iter_mut() {
            let now = stretch_of(*loc, before, symbols);
            // An instruction that nests sequences is followed by them, not by the next.
            let nests = nests(instr);
            if now == before && now != Before::Nothing && !nests {
                *loc = InstrLocId::default();
            } else {
                mark(loc);
            }
            before = if nests { Before::Nothing } else { now };
        }
        mark(&mut block.end);
    }
}

/// The stretch of the instruction placed at `loc`, emitted after one of `before`'s.
fn stretch_of(loc: InstrLocId, before: Before, symbols: &SymbolTable) -> Before {
    if loc.is_default() {
        return Before::Probe;
    }
    let offset = loc.data();
    match before {
        _ if offset == HOST_CALL => Before::Nothing,
        Before::Line { from, until } if from <= offset && u64::from(offset) < until => before,
        _ => match symbols.position_key(offset.into()) {
            Some((_, until)) => Before::Line {
                from: offset,
                until,
            },
            None => Before::NoLine,
        },
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
