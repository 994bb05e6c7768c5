//! The plan of the rewrite: which functions get probes, each with its call sites numbered,
//! what it is (a thunk, an allocator, a leaf) and where its entry probe goes.

use std::collections::{BTreeMap, HashMap, HashSet};

use walrus::ir::{Instr, InstrLocId, InstrSeqId};
use walrus::{ConstExpr, ConstOp, ElementItems, ExportItem, FunctionId, FunctionKind, Module};

use super::sites::{is_call, sequences, Sites};
use super::{allocators, probes, EntryProbes};
use crate::meta;

/// The functions to rewrite, each with its call sites numbered (in two compact spaces), the
/// program's functions (but those `left_alone`) first, then the imports' `thunks`; the
/// allocators and the functions that grow a memory, as `allocs` says; each function's entry
/// probe placed as `entries` says.
pub(super) fn plan(
    module: &Module,
    original_funcs: &[FunctionId],
    left_alone: &HashSet<FunctionId>,
    thunks: &BTreeMap<FunctionId, FunctionId>,
    allocs: &allocators::AllocPlan,
    entries: EntryProbes,
) -> (Sites, Vec<Plan>) {
    // Thunks hold no sites of their own.
    let thunk_for: HashMap<FunctionId, u32> = thunks
        .iter()
        .map(|(&import, &thunk)| (thunk, import.index() as u32))
        .collect();
    // What is still called as an import has no thunk, and what is left alone no probes.
    let unprobed = |id: FunctionId| {
        left_alone.contains(&id) || matches!(module.funcs.get(id).kind, FunctionKind::Import(_))
    };
    let mut sites = Sites::default();
    let mut plans = Vec::new();
    for &id in original_funcs.iter().filter(|id| !left_alone.contains(id)) {
        if let FunctionKind::Local(func) = &module.funcs.get(id).kind {
            let f = id.index() as u32;
            let seqs = sequences(func);
            let site_ids = sites.number(func, &seqs, f, &thunk_for, &unprobed);
            let any = |pred: &dyn Fn(&walrus::ir::Instr) -> bool| {
                seqs.iter()
                    .any(|&seq| func.block(seq).instrs.iter().any(|(instr, _)| pred(instr)))
            };
            let waits = any(&probes::is_wait);
            let grows = allocs.records() && any(&|instr| allocators::is_grow32(module, instr));
            let alloc = allocs.kinds.get(&id).copied();
            let leaf = !any(&is_call) && !waits && !grows && alloc.is_none();
            plans.push(Plan {
                id,
                f,
                site_ids,
                seqs,
                thunk: false,
                waits,
                alloc,
                grows,
                inline_entry: probes::inline_entry(func, entries),
                leaf,
            });
        }
    }
    for (&import, &thunk) in thunks {
        let FunctionKind::Local(func) = &module.funcs.get(thunk).kind else {
            unreachable!("a thunk is a defined function");
        };
        plans.push(Plan {
            id: thunk,
            f: import.index() as u32,
            site_ids: Vec::new(),
            seqs: sequences(func),
            thunk: true,
            waits: false,
            alloc: None,
            grows: allocs.records() && allocators::grows_from_host(module, import),
            inline_entry: true,
            leaf: false,
        });
    }
    (sites, plans)
}

/// One function to rewrite: its walrus id, its function id, the ids of its call sites, its
/// instruction sequences (found once, for the numbering and the rewrite), whether it is
/// an import's thunk, whether it waits (`memory.atomic.wait`), the allocator it is (when
/// allocations are recorded), whether it grows a memory whose growth they record (with
/// `memory.grow`, or, a thunk, by calling the host that does), and whether its entry probe
/// goes inline ([`probes::inline_entry`]; a thunk's does), and whether its probes may call
/// nothing: it calls no function, waits on nothing, allocates and grows no memory (see
/// [`probes::Reentry`]).
pub(super) struct Plan {
    pub(super) id: FunctionId,
    pub(super) f: u32,
    pub(super) site_ids: Vec<u32>,
    pub(super) seqs: Vec<InstrSeqId>,
    pub(super) thunk: bool,
    pub(super) waits: bool,
    pub(super) alloc: Option<meta::AllocKind>,
    pub(super) grows: bool,
    pub(super) inline_entry: bool,
    pub(super) leaf: bool,
}

/// The functions that may be entered otherwise than by a direct call: those the host can
/// call (exports, the start function) and those a table or a function reference holds.
/// The others are entered only at direct call sites, which count their own calls.
pub(super) fn escaping(module: &Module) -> HashSet<FunctionId> {
    let mut escaping = HashSet::new();
    let mut referenced = |expr: &ConstExpr| match expr {
        ConstExpr::RefFunc(id) => {
            escaping.insert(*id);
        }
        ConstExpr::Extended(ops) => {
            for op in ops {
                if let ConstOp::RefFunc(id) = op {
                    escaping.insert(*id);
                }
            }
        }
        _ => {}
    };
    for element in module.elements.iter() {
        match &element.items {
            ElementItems::Functions(ids) => ids
                .iter()
                .for_each(|id| referenced(&ConstExpr::RefFunc(*id))),
            ElementItems::Expressions(_, exprs) => exprs.iter().for_each(&mut referenced),
        }
    }
    for global in module.globals.iter() {
        if let walrus::GlobalKind::Local(expr) = &global.kind {
            referenced(expr);
        }
    }
    for export in module.exports.iter() {
        if let ExportItem::Function(id) = export.item {
            referenced(&ConstExpr::RefFunc(id));
        }
    }
    if let Some(start) = module.start {
        referenced(&ConstExpr::RefFunc(start));
    }
    for (_, func) in module.funcs.iter_local() {
        let mut refs = RefFuncs(Vec::new());
        walrus::ir::dfs_in_order(&mut refs, func, func.entry_block());
        refs.0
            .iter()
            .for_each(|id| referenced(&ConstExpr::RefFunc(*id)));
    }
    escaping
}

/// The functions a body's `ref.func`s name.
struct RefFuncs(Vec<FunctionId>);

impl<'a> walrus::ir::Visitor<'a> for RefFuncs {
    fn visit_instr(&mut self, instr: &'a Instr, _: &'a InstrLocId) {
        if let Instr::RefFunc(walrus::ir::RefFunc { func }) = instr {
            self.0.push(*func);
        }
    }
}
