//! What a module records of the program's allocations ([`Allocations`]): the allocator entry
//! points found by name ([`AllocKind`]) and whether their probes are there.

use serde::{Deserialize, Serialize};

/// What a module records of the program's allocations: the allocator entry points found
/// by name, and whether their probes are there (the layout then has the live table).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocations {
    /// Each allocator entry point found, by function id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocators: Vec<Allocator>,
    /// The `memory.grow` instructions of the program.
    #[serde(default)]
    pub grow_sites: u32,
    /// The 64 KiB pages the program's 32-bit memories have at the start, together.
    #[serde(default)]
    pub initial_pages: u64,
    /// Why the allocations are not recorded, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_recorded: Option<String>,
}

/// One allocator entry point of the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocator {
    /// Its function id.
    pub function: u32,
    /// What it does.
    pub kind: AllocKind,
}

/// The allocator entry points the probes know, by the names the toolchains give them: C's
/// (wasi-libc's and Emscripten's dlmalloc and emmalloc) and Rust's global allocator shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocKind {
    /// `malloc(size) -> ptr`.
    Malloc,
    /// `calloc(count, size) -> ptr`.
    Calloc,
    /// `realloc(ptr, size) -> ptr`.
    Realloc,
    /// `free(ptr)`.
    Free,
    /// `aligned_alloc(align, size) -> ptr`.
    AlignedAlloc,
    /// `memalign(align, size) -> ptr`.
    Memalign,
    /// `posix_memalign(out, align, size) -> error`, the pointer stored at `out`.
    PosixMemalign,
    /// `__rust_alloc(size, align) -> ptr`.
    RustAlloc,
    /// `__rust_alloc_zeroed(size, align) -> ptr`.
    RustAllocZeroed,
    /// `__rust_realloc(ptr, old_size, align, new_size) -> ptr`.
    RustRealloc,
    /// `__rust_dealloc(ptr, size, align)`.
    RustDealloc,
}

impl AllocKind {
    /// Every kind.
    pub const ALL: [AllocKind; 11] = [
        AllocKind::Malloc,
        AllocKind::Calloc,
        AllocKind::Realloc,
        AllocKind::Free,
        AllocKind::AlignedAlloc,
        AllocKind::Memalign,
        AllocKind::PosixMemalign,
        AllocKind::RustAlloc,
        AllocKind::RustAllocZeroed,
        AllocKind::RustRealloc,
        AllocKind::RustDealloc,
    ];

    /// The entry point's name (Rust's are in the `__rustc` namespace when mangled).
    pub fn name(self) -> &'static str {
        match self {
            AllocKind::Malloc => "malloc",
            AllocKind::Calloc => "calloc",
            AllocKind::Realloc => "realloc",
            AllocKind::Free => "free",
            AllocKind::AlignedAlloc => "aligned_alloc",
            AllocKind::Memalign => "memalign",
            AllocKind::PosixMemalign => "posix_memalign",
            AllocKind::RustAlloc => "__rust_alloc",
            AllocKind::RustAllocZeroed => "__rust_alloc_zeroed",
            AllocKind::RustRealloc => "__rust_realloc",
            AllocKind::RustDealloc => "__rust_dealloc",
        }
    }

    /// The kind a function of this (demangled) name is: `malloc`, `__rust_alloc` or
    /// `__rustc::__rust_alloc`; C's also under the names of the allocators' own functions,
    /// which the name section has where `malloc` is an alias: dlmalloc's `dlmalloc`
    /// (Emscripten's default allocator) and emmalloc's `emmalloc_malloc`.
    pub fn of_name(name: &str) -> Option<AllocKind> {
        let rust = name.strip_prefix("__rustc::").unwrap_or(name);
        if let Some(kind) = AllocKind::ALL.into_iter().find(|kind| kind.name() == rust) {
            return Some(kind);
        }
        let c = name
            .strip_prefix("emmalloc_")
            .or_else(|| name.strip_prefix("dl"))?;
        AllocKind::ALL
            .into_iter()
            .find(|kind| !kind.name().starts_with("__rust") && kind.name() == c)
    }

    /// Its parameters and results, all `i32` in a 32-bit memory: (parameters, results).
    pub fn arity(self) -> (usize, usize) {
        match self {
            AllocKind::Malloc => (1, 1),
            AllocKind::Free => (1, 0),
            AllocKind::PosixMemalign => (3, 1),
            AllocKind::RustRealloc => (4, 1),
            AllocKind::RustDealloc => (3, 0),
            _ => (2, 1),
        }
    }
}

impl Allocations {
    /// [`Allocations::not_recorded`] where none were asked for.
    pub const NOT_ASKED: &'static str = "not asked for (--allocations records them)";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocator_entry_points_are_known_by_their_names_and_aliases() {
        assert_eq!(AllocKind::of_name("malloc"), Some(AllocKind::Malloc));
        assert_eq!(AllocKind::of_name("dlfree"), Some(AllocKind::Free));
        assert_eq!(
            AllocKind::of_name("emmalloc_posix_memalign"),
            Some(AllocKind::PosixMemalign)
        );
        assert_eq!(
            AllocKind::of_name("__rustc::__rust_dealloc"),
            Some(AllocKind::RustDealloc)
        );
        assert_eq!(
            AllocKind::of_name("__rust_realloc"),
            Some(AllocKind::RustRealloc)
        );
        for other in [
            "dl__rust_alloc",
            "dlmalloc_usable_size",
            "mallocx",
            "free_list",
        ] {
            assert_eq!(AllocKind::of_name(other), None, "{other}");
        }
    }
}
