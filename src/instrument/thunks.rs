//! Import thunks: each imported function gets a defined function that calls it, and every
//! reference to the import goes through the thunk, so that calls into the host are
//! counted and timed like any other. So does each function that becomes an import after
//! the instrumenter (wasm-bindgen's generic-import shims, `bindgen::generic_import_shims`).

use std::collections::{BTreeMap, HashSet};

use walrus::ir::{Instr, InstrLocId, VisitorMut};
use walrus::{FunctionBuilder, FunctionId, FunctionKind, Module};

use super::bindgen::Bindgen;
use super::probes::HostFunctions;

/// Which of `funcs` (a module's functions, in index order) run in the host: each whether
/// it is an import or a shim, and the same for the probes.
pub(super) fn host_functions(
    module: &Module,
    funcs: &[FunctionId],
    shims: &HashSet<FunctionId>,
) -> (Vec<bool>, HostFunctions) {
    let import = |id: FunctionId| matches!(module.funcs.get(id).kind, FunctionKind::Import(_));
    let mut shims_in_order: Vec<u32> = shims.iter().map(|id| id.index() as u32).collect();
    shims_in_order.sort_unstable(); // the output is the same on every run
    let host = HostFunctions {
        // Imports come first among the function ids.
        imports: funcs.iter().filter(|&&id| import(id)).count() as u32,
        shims: shims_in_order,
    };
    let imported = funcs
        .iter()
        .map(|&id| import(id) || shims.contains(&id))
        .collect();
    (imported, host)
}

/// Adds a thunk for every imported function but wasm-bindgen's intrinsics, and for every
/// generic-import shim (defined functions that become imports later): a defined function
/// that calls it. Returns import (or shim) -> thunk, in index order (so that the output is
/// deterministic).
pub(super) fn add_import_thunks(
    module: &mut Module,
    funcs: &[FunctionId],
    bindgen: &Bindgen,
) -> BTreeMap<FunctionId, FunctionId> {
    let mut thunks = BTreeMap::new();
    for &id in funcs {
        let gets_thunk = match module.funcs.get(id).kind {
            FunctionKind::Import(_) => !bindgen.intrinsics.contains(&id),
            _ => bindgen.shims.contains(&id),
        };
        if !gets_thunk {
            continue;
        }
        let ty = module.funcs.get(id).ty();
        let (params, results) = module.types.params_results(ty);
        let (params, results) = (params.to_vec(), results.to_vec());
        let args: Vec<_> = params.iter().map(|&t| module.locals.add(t)).collect();
        let mut builder = FunctionBuilder::new(&mut module.types, &params, &results);
        let mut body = builder.func_body();
        for &arg in &args {
            body.local_get(arg);
        }
        body.call(id);
        // The call is the import's own time, not the probes' (the stack sampler's samples
        // in the host return to it).
        if let Some((_, loc)) = body.instrs_mut().last_mut() {
            *loc = InstrLocId::new(super::addresses::HOST_CALL);
        }
        let thunk = builder.finish(args, &mut module.funcs);
        let name = module.funcs.get(id).name.clone();
        module.funcs.get_mut(thunk).name = name.map(|n| format!("{n} (wasmprof thunk)"));
        thunks.insert(id, thunk);
    }
    thunks
}

/// Points every call, `ref.func`, table slot, global initializer, export and start function
/// that names an import at its thunk instead (only the thunks' own calls keep the import), so that a call
/// of a re-exported import from the host is counted too, as `<host>` -> the import. The
/// bodies of the functions in `untouched` keep their calls of the imports.
pub(super) fn redirect_to_thunks(
    module: &mut Module,
    thunks: &BTreeMap<FunctionId, FunctionId>,
    untouched: &HashSet<FunctionId>,
) {
    let swap = |id: &mut FunctionId| {
        if let Some(&thunk) = thunks.get(id) {
            *id = thunk;
        }
    };
    let thunk_ids: HashSet<FunctionId> = thunks.values().copied().collect();
    for (id, func) in module.funcs.iter_local_mut() {
        if thunk_ids.contains(&id) || untouched.contains(&id) {
            continue;
        }
        let entry = func.entry_block();
        walrus::ir::dfs_pre_order_mut(&mut Redirect(&swap), func, entry);
    }
    for element in module.elements.iter_mut() {
        match &mut element.items {
            walrus::ElementItems::Functions(ids) => ids.iter_mut().for_each(&swap),
            walrus::ElementItems::Expressions(_, exprs) => {
                for expr in exprs {
                    redirect_const(expr, &swap);
                }
            }
        }
    }
    let globals: Vec<_> = module.globals.iter().map(|g| g.id()).collect();
    for id in globals {
        if let walrus::GlobalKind::Local(expr) = &mut module.globals.get_mut(id).kind {
            redirect_const(expr, &swap);
        }
    }
    for export in module.exports.iter_mut() {
        if let walrus::ExportItem::Function(id) = &mut export.item {
            swap(id);
        }
    }
    if let Some(start) = &mut module.start {
        swap(start);
    }
}

fn redirect_const(expr: &mut walrus::ConstExpr, swap: &impl Fn(&mut FunctionId)) {
    match expr {
        walrus::ConstExpr::RefFunc(id) => swap(id),
        walrus::ConstExpr::Extended(ops) => {
            for op in ops {
                if let walrus::ConstOp::RefFunc(id) = op {
                    swap(id);
                }
            }
        }
        _ => {}
    }
}

struct Redirect<'a, F: Fn(&mut FunctionId)>(&'a F);

impl<F: Fn(&mut FunctionId)> VisitorMut for Redirect<'_, F> {
    fn visit_instr_mut(&mut self, instr: &mut Instr, _: &mut InstrLocId) {
        match instr {
            Instr::Call(walrus::ir::Call { func })
            | Instr::ReturnCall(walrus::ir::ReturnCall { func })
            | Instr::RefFunc(walrus::ir::RefFunc { func }) => (self.0)(func),
            _ => {}
        }
    }
}
