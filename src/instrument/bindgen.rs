//! What the instrumenter leaves alone in a wasm-bindgen module.
//!
//! A `wasm32-unknown-unknown` module that uses wasm-bindgen is not run as it is: the
//! `wasm-bindgen` CLI (inside `wasm-bindgen-test-runner`) first *interprets* some of its
//! functions with a tiny interpreter of its own, to learn the types of what crosses the
//! boundary, then deletes them and rewrites the imports and exports. That interpreter
//! knows calls, locals, the stack pointer and its one import, `__wbindgen_describe`;
//! a probe (a call into the state module, a store into the profiler's memory) makes it
//! panic (`Interpreter::interpret_descriptor`). So the profiler sits *before* bindgen, in
//! the module cargo built, and leaves untouched what the interpreter runs:
//!
//! - the descriptor functions, exported as `__wbindgen_describe_*`, and every function
//!   they reach by direct calls;
//! - the functions that call the `__wbindgen_describe_generic_import` import (interpreted
//!   up to that call, then replaced by an import: each gets a thunk, as an import does);
//! - `__wbindgen_skip_interpret_calls`, whose body lists the calls the interpreter skips
//!   (`__wasm_call_ctors`): they stay as they are, and the walk does not enter them.
//!
//! and gives no thunk to bindgen's own intrinsics: the `__wbindgen_describe*` imports,
//! which only the interpreter calls, and the `__wbindgen_externref_xform__` imports,
//! which bindgen replaces by table instructions where they are called. Having no entry
//! probe, they get no call-site id either (`sites`): the id their caller set would stay
//! set until the next entry, the host's, and count it as a call of theirs. Every other import
//! of the placeholder module is a JS function (the glue's), and gets its thunk as any
//! import does, so calls into JS and the callbacks from there are arcs. None of what is
//! left alone runs once bindgen is done (it deletes the descriptors), so the profile
//! misses nothing of the program's run. Verified with wasm-bindgen 0.2.130
//! (`tests/bindgen/`).

use std::collections::HashSet;

use walrus::ir::{self, Visitor};
use walrus::{ExportItem, FunctionId, FunctionKind, ImportKind, Module};

/// The module wasm-bindgen's macros import their intrinsics and JS functions from.
const PLACEHOLDER: &str = "__wbindgen_placeholder__";
/// The module of the intrinsics that bindgen's externref pass replaces.
const EXTERNREF_XFORM: &str = "__wbindgen_externref_xform__";

/// What the instrumenter treats apart in a wasm-bindgen module (nothing in any other).
#[derive(Default)]
pub(super) struct Bindgen {
    /// The imports that get no thunk: wasm-bindgen's intrinsics.
    pub(super) intrinsics: HashSet<FunctionId>,
    /// The defined functions its interpreter runs, left uninstrumented.
    pub(super) left_alone: HashSet<FunctionId>,
    /// The generic-import shims, which get thunks as imports do.
    pub(super) shims: HashSet<FunctionId>,
}

impl Bindgen {
    /// What `module` has of them: nothing unless it was built for wasm-bindgen (it imports
    /// from its placeholder module).
    pub(super) fn of(module: &Module) -> Bindgen {
        let uses_bindgen = module
            .imports
            .iter()
            .any(|i| i.module == PLACEHOLDER || i.module == EXTERNREF_XFORM);
        if !uses_bindgen {
            return Bindgen::default();
        }
        Bindgen {
            intrinsics: intrinsics(module),
            left_alone: interpreted(module),
            shims: generic_import_shims(module),
        }
    }
}

/// The imported functions that get no thunk: wasm-bindgen's intrinsics.
fn intrinsics(module: &Module) -> HashSet<FunctionId> {
    module
        .imports
        .iter()
        .filter(|i| {
            (i.module == PLACEHOLDER && i.name.starts_with("__wbindgen_describe"))
                || i.module == EXTERNREF_XFORM
        })
        .filter_map(|i| match i.kind {
            ImportKind::Function(id) => Some(id),
            _ => None,
        })
        .collect()
}

/// The generic-import shims: the defined functions that call the
/// `__wbindgen_describe_generic_import` marker (`wbg_cast`'s identity adapters and generic
/// imports' monomorphisations). Bindgen interprets each up to the marker, then replaces it
/// by a JS import and points every call of it there; so each gets a thunk, as an import
/// does, which then calls the JS function, and the calls from there back into the module
/// (`__externref_table_alloc`) are its arcs.
fn generic_import_shims(module: &Module) -> HashSet<FunctionId> {
    let Some(marker) = module
        .imports
        .iter()
        .find(|i| i.module == PLACEHOLDER && i.name == "__wbindgen_describe_generic_import")
        .and_then(|i| match i.kind {
            ImportKind::Function(id) => Some(id),
            _ => None,
        })
    else {
        return HashSet::new();
    };
    module
        .funcs
        .iter_local()
        .filter(|(id, _)| calls(module, *id).contains(&marker))
        .map(|(id, _)| id)
        .collect()
}

/// The defined functions that wasm-bindgen's interpreter runs, left uninstrumented.
fn interpreted(module: &Module) -> HashSet<FunctionId> {
    let exported = |name: &'static str| {
        module.exports.iter().filter_map(move |e| match e.item {
            ExportItem::Function(id) if e.name.starts_with(name) => Some(id),
            _ => None,
        })
    };
    let skip: Vec<FunctionId> = exported("__wbindgen_skip_interpret_calls").collect();
    let skipped: HashSet<FunctionId> = skip.iter().flat_map(|&f| calls(module, f)).collect();
    let mut roots: Vec<FunctionId> = exported("__wbindgen_describe_").collect();
    roots.extend(generic_import_shims(module));
    let mut left: HashSet<FunctionId> = skip.into_iter().collect();
    while let Some(f) = roots.pop() {
        if skipped.contains(&f) || !left.insert(f) {
            continue;
        }
        roots.extend(calls(module, f));
    }
    left.retain(|&f| matches!(module.funcs.get(f).kind, FunctionKind::Local(_)));
    left
}

/// The functions `f` calls directly (defined or imported).
fn calls(module: &Module, f: FunctionId) -> Vec<FunctionId> {
    struct Calls(Vec<FunctionId>);
    impl Visitor<'_> for Calls {
        fn visit_call(&mut self, call: &ir::Call) {
            self.0.push(call.func);
        }
        fn visit_return_call(&mut self, call: &ir::ReturnCall) {
            self.0.push(call.func);
        }
    }
    let FunctionKind::Local(func) = &module.funcs.get(f).kind else {
        return Vec::new();
    };
    let mut found = Calls(Vec::new());
    ir::dfs_in_order(&mut found, func, func.entry_block());
    found.0
}
