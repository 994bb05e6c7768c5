//! Call-site numbering: every call of every defined function gets an id in one of two
//! compact spaces (direct calls; indirect and reference calls), in the order the rewrite
//! meets them, with its source position for the meta; a call of a function without an
//! entry probe gets none.

use std::collections::HashMap;

use walrus::ir::{Instr, InstrSeqId};
use walrus::{FunctionId, LocalFunction};

use crate::layout::INDIRECT_SITE;
use crate::meta::SiteMeta;
use crate::symbols::SymbolTable;

/// The call sites found so far, numbered in two compact spaces.
#[derive(Default)]
pub(super) struct Sites {
    /// Direct call sites, numbered from 1.
    pub(super) direct: Vec<Site>,
    /// Indirect call sites (`call_indirect`, `call_ref`), numbered from 0.
    pub(super) indirect: Vec<Site>,
}

/// One call site, as the rewrite finds it.
pub(super) struct Site {
    /// Function id of the function that holds the call.
    caller: u32,
    /// Function id of the callee, for direct calls.
    callee: Option<u32>,
    /// The call's offset in the original module, when walrus knows it.
    offset: Option<u32>,
}

impl Site {
    /// The site's table entry, with its source position from `symbols`.
    pub(super) fn locate(&self, symbols: &SymbolTable) -> SiteMeta {
        SiteMeta {
            caller: self.caller,
            callee: self.callee,
            pos: self
                .offset
                .and_then(|offset| symbols.location(offset.into())),
        }
    }
}

impl Sites {
    /// Numbers the call sites of `func` (function id `caller`), in the order
    /// [`rewrite_function`] meets them. A direct call of a function that has no entry probe
    /// to take its site (`unprobed`: wasm-bindgen's intrinsics, which its bindgen step
    /// replaces by table instructions) gets none, 0: a site left set would be taken by the
    /// next entry, the host's, as a call from it.
    pub(super) fn number(
        &mut self,
        func: &LocalFunction,
        seqs: &[InstrSeqId],
        caller: u32,
        thunk_for: &HashMap<FunctionId, u32>,
        unprobed: &dyn Fn(FunctionId) -> bool,
    ) -> Vec<u32> {
        // A thunk stands for its import.
        let callee_id = |id: FunctionId| thunk_for.get(&id).copied().unwrap_or(id.index() as u32);
        let mut ids = Vec::new();
        for &seq in seqs {
            for (instr, loc) in &func.block(seq).instrs {
                let (direct, callee) = match instr {
                    Instr::Call(walrus::ir::Call { func })
                    | Instr::ReturnCall(walrus::ir::ReturnCall { func })
                        if unprobed(*func) =>
                    {
                        ids.push(0);
                        continue;
                    }
                    Instr::Call(c) => (true, Some(callee_id(c.func))),
                    Instr::ReturnCall(c) => (true, Some(callee_id(c.func))),
                    Instr::CallIndirect(_)
                    | Instr::ReturnCallIndirect(_)
                    | Instr::CallRef(_)
                    | Instr::ReturnCallRef(_) => (false, None),
                    _ => continue,
                };
                let site = Site {
                    caller,
                    callee,
                    offset: (!loc.is_default()).then(|| loc.data()),
                };
                if direct {
                    self.direct.push(site);
                    ids.push(self.direct.len() as u32);
                } else {
                    ids.push(INDIRECT_SITE | self.indirect.len() as u32);
                    self.indirect.push(site);
                }
            }
        }
        ids
    }
}

/// Whether `site` is a direct call site's id (not 0, a call without one, nor an indirect
/// site's, which has [`INDIRECT_SITE`] set).
pub(super) fn is_direct(site: u32) -> bool {
    (1..INDIRECT_SITE).contains(&site)
}

/// Whether `instr` calls a function, in any of the ways a call site can.
pub(super) fn is_call(instr: &Instr) -> bool {
    matches!(
        instr,
        Instr::Call(_)
            | Instr::ReturnCall(_)
            | Instr::CallIndirect(_)
            | Instr::ReturnCallIndirect(_)
            | Instr::CallRef(_)
            | Instr::ReturnCallRef(_)
    )
}

/// Whether `instr` nests instruction sequences, which walrus emits between it and the
/// instruction after it.
pub(super) fn nests(instr: &Instr) -> bool {
    matches!(
        instr,
        Instr::Block(_) | Instr::Loop(_) | Instr::IfElse(_) | Instr::TryTable(_) | Instr::Try(_)
    )
}

/// Every instruction sequence of `func`, in a fixed order.
pub(super) fn sequences(func: &LocalFunction) -> Vec<InstrSeqId> {
    let mut found = Vec::new();
    let mut stack = vec![func.entry_block()];
    while let Some(id) = stack.pop() {
        found.push(id);
        for (instr, _) in func.block(id).instrs.iter().rev() {
            match instr {
                Instr::Block(b) => stack.push(b.seq),
                Instr::Loop(l) => stack.push(l.seq),
                Instr::IfElse(i) => {
                    stack.push(i.alternative);
                    stack.push(i.consequent);
                }
                Instr::TryTable(t) => stack.push(t.seq),
                Instr::Try(t) => {
                    for catch in t.catches.iter().rev() {
                        match catch {
                            walrus::ir::LegacyCatch::Catch { handler, .. }
                            | walrus::ir::LegacyCatch::CatchAll { handler } => stack.push(*handler),
                            walrus::ir::LegacyCatch::Delegate { .. } => {}
                        }
                    }
                    stack.push(t.seq);
                }
                _ => {}
            }
        }
    }
    found
}
