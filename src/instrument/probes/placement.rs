//! Where each function's entry probe goes, where the probes are on the module's own
//! memory: inline, or a call of `enter`.

/// Functions of fewer instructions than this get the entry probe inline, the others a call
/// of `enter` (on the module's own memory: `TimedProbes::Own`). The inline entry is about
/// 60 instructions, in every function: most of what the probes add to a module's code,
/// which the host compiles before the program runs. A call of `enter` costs a few
/// nanoseconds more a call, which a small function (fib, a getter) would feel and a larger
/// one, doing more per call, less. BENCHMARKS.md ("The context tree's lookup", and the
/// file's history) has the figures.
pub const INLINE_ENTRY_BELOW: u64 = 40;

/// Where the entry probes go, where the probes are on the module's own memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EntryProbes {
    /// Inline in the functions of fewer than [`INLINE_ENTRY_BELOW`] instructions, a call of
    /// `enter` in the others: the code the host compiles weighed against the run time of
    /// small functions called often.
    #[default]
    BySize,
    /// A call of `enter` in every function: the least code to compile, for a module that
    /// runs briefly once compiled (a doc test, whose compilation is most of its run); a call
    /// of a small function costs a few nanoseconds more.
    Calls,
}

/// Whether `func`'s entry probe goes inline (where the probes are on the module's own
/// memory), as `entries` says.
pub fn inline_entry(func: &walrus::LocalFunction, entries: EntryProbes) -> bool {
    entries == EntryProbes::BySize && func.size() < INLINE_ENTRY_BELOW
}
