//! The program's allocator entry points, found by their names (C's `malloc` and the rest,
//! Rust's `__rust_alloc` and the rest), its `memory.grow` instructions and the imports
//! that grow its memory from the host, and whether the probes record its allocations.

use std::collections::{HashMap, HashSet};

use walrus::ir::Instr;
use walrus::{FunctionId, FunctionKind, Module, ValType};

use super::sites::sequences;
use super::Options;
use crate::meta::{AllocKind, Allocations, Allocator};

/// The imports that grow the program's memory from the host: Emscripten's `sbrk` asks JS
/// to (`emscripten_resize_heap`), where no `memory.grow` of the module runs. Their thunks
/// record the pages the memory gained during the call.
const HOST_GROWTH: [&str; 1] = ["emscripten_resize_heap"];

/// Whether `import` grows the program's memory from the host ([`HOST_GROWTH`]).
pub(super) fn grows_from_host(module: &Module, import: FunctionId) -> bool {
    module.imports.iter().any(|i| {
        matches!(i.kind, walrus::ImportKind::Function(f) if f == import)
            && HOST_GROWTH.contains(&i.name.as_str())
    })
}

/// What the rewrite does for the program's allocations.
pub(super) struct AllocPlan {
    /// The allocator entry points whose probes record, with what each does (empty when
    /// allocations are not recorded).
    pub(super) kinds: HashMap<FunctionId, AllocKind>,
    /// What the meta says.
    pub(super) meta: Allocations,
}

/// Finds the allocator entry points and `memory.grow` instructions among `module`'s
/// functions (but those `left_alone`) and decides whether `options` let the probes record
/// them: they need the calling-context tree (a metric with a cost). In a threaded program
/// each thread's probes record in its own profiler's memory, with a live table of its own
/// (see [`crate::profile::Allocations::per_thread`]).
pub(super) fn plan(
    module: &Module,
    options: &Options,
    left_alone: &HashSet<FunctionId>,
) -> AllocPlan {
    let mut kinds = HashMap::new();
    let mut grow_sites = 0;
    for func in module.funcs.iter() {
        let FunctionKind::Local(local) = &func.kind else {
            grow_sites += u32::from(grows_from_host(module, func.id()));
            continue;
        };
        if left_alone.contains(&func.id()) {
            continue;
        }
        grow_sites += sequences(local)
            .into_iter()
            .flat_map(|seq| local.block(seq).instrs.iter())
            .filter(|(instr, _)| is_grow32(module, instr))
            .count() as u32;
        let kind = func.name.as_deref().and_then(|name| {
            let demangled = format!("{:#}", rustc_demangle::demangle(name));
            AllocKind::of_name(&demangled)
        });
        if let Some(kind) = kind.filter(|&kind| fits(module, func.ty(), kind)) {
            kinds.insert(func.id(), kind);
        }
    }
    let mut allocators: Vec<Allocator> = kinds
        .iter()
        .map(|(id, &kind)| Allocator {
            function: id.index() as u32,
            kind,
        })
        .collect();
    allocators.sort_by_key(|a| a.function);
    let not_recorded = if !options.allocations {
        Some(Allocations::NOT_ASKED)
    } else if !options.keeps_contexts() {
        Some("the calls metric keeps no calling contexts (the default metric, time, does)")
    } else if kinds.is_empty() && grow_sites == 0 {
        Some("no allocator by a known name (malloc, free, __rust_alloc, ...) and no memory.grow")
    } else {
        None
    };
    AllocPlan {
        kinds: match not_recorded {
            None => kinds,
            Some(_) => HashMap::new(),
        },
        meta: Allocations {
            allocators,
            grow_sites,
            initial_pages: module
                .memories
                .iter()
                .filter(|m| !m.memory64)
                .map(|m| m.initial)
                .sum(),
            not_recorded: not_recorded.map(str::to_string),
        },
    }
}

impl AllocPlan {
    /// Whether the probes record (the allocators' calls and the memory's growth).
    pub(super) fn records(&self) -> bool {
        self.meta.not_recorded.is_none()
    }
}

/// Whether `instr` grows a 32-bit memory (the probes record those; a 64-bit memory's
/// growth is left out, and its allocators do not fit [`AllocKind::arity`]'s `i32`s).
pub(super) fn is_grow32(module: &Module, instr: &Instr) -> bool {
    match instr {
        Instr::MemoryGrow(grow) => !module.memories.get(grow.memory).memory64,
        _ => false,
    }
}

/// Whether a function of type `ty` is what `kind`'s name says: its parameters and results,
/// all `i32`.
fn fits(module: &Module, ty: walrus::TypeId, kind: AllocKind) -> bool {
    let (params, results) = kind.arity();
    let ty = module.types.get(ty);
    let all_i32 =
        |types: &[ValType], n: usize| types.len() == n && types.iter().all(|&t| t == ValType::I32);
    all_i32(ty.params(), params) && all_i32(ty.results(), results)
}
