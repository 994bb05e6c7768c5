//! V8's inlining budget, kept for an instrumented module as the program's own module gets
//! it (node, Chromium: [`super::Options::inlining_budget`]).
//!
//! V8 scales how far it lets a function grow by inlining others into it by the module's
//! share of small function bodies (under [`SMALL_BODY`] bytes): few small bodies look like
//! a toolchain that has inlined already. At a share of 25% or less it takes its lowest
//! budget, at 50% or more its highest, and mixes the two in between (`InliningTree::
//! BudgetScaleFactor`; node 26 traces the two budgets as twice the caller's size up to 600
//! bytes and five times up to 6,000 bytes). The probes make nearly every body 50 bytes or
//! more, so an instrumented module got the lowest budget where its program had the highest,
//! and V8 inlined less of the program's own code than in the plain run: in
//! `fixtures/emcc/parts.c`, `fib` no longer into itself and `small` no longer into its
//! caller. That is an observer effect beyond the probes' own cost, and it made the
//! recursion's share of a profile lean high (BENCHMARKS.md, "Accuracy of time under
//! node").
//!
//! So the module gets empty functions that nothing calls, as many as bring its share of
//! small bodies back to the original module's (to 50% at most, where the budget stops
//! growing). A declarative element segment names them, so that a pass that removes what
//! is not used (wasm-bindgen's) keeps them; they have no function id and no name, and V8,
//! which compiles a function when it is first called, never compiles them.

use walrus::{ElementItems, ElementKind, FunctionBuilder, Module};

/// A function body of fewer bytes than this is a small one to V8.
const SMALL_BODY: usize = 50;

/// How many of a module's defined functions have small bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct SmallBodies {
    small: u64,
    defined: u64,
}

impl SmallBodies {
    /// Counts the bodies of `wasm`'s code section (what does not parse is not counted).
    pub(super) fn of(wasm: &[u8]) -> SmallBodies {
        let mut counted = SmallBodies::default();
        for payload in wasmparser::Parser::new(0).parse_all(wasm) {
            match payload {
                Ok(wasmparser::Payload::CodeSectionEntry(body)) => {
                    counted.defined += 1;
                    counted.small += u64::from(body.range().len() < SMALL_BODY);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        counted
    }

    /// How many empty functions a module with these bodies needs for V8 to give it the
    /// inlining budget of the `original` module: none where the original's share is at
    /// most a quarter (the lowest budget either way), else enough for the original's share
    /// or half, whichever is less.
    fn fillers_for(self, original: SmallBodies) -> u64 {
        if 4 * original.small <= original.defined {
            return 0;
        }
        // The share to reach, p / q (at most a half, so q > p).
        let (p, q) = if 2 * original.small < original.defined {
            (original.small, original.defined)
        } else {
            (1, 2)
        };
        // (small + n) / (defined + n) >= p / q.
        let short = (p * self.defined).saturating_sub(q * self.small);
        short.div_ceil(q - p)
    }
}

/// Adds `count` empty functions to `module`, named in a declarative element segment.
fn add_fillers(module: &mut Module, count: u64) {
    if count == 0 {
        return;
    }
    let fillers = (0..count)
        .map(|_| {
            FunctionBuilder::new(&mut module.types, &[], &[]).finish(Vec::new(), &mut module.funcs)
        })
        .collect();
    module
        .elements
        .add(ElementKind::Declared, ElementItems::Functions(fillers));
}

/// Adds to `module` the fillers it needs for V8's inlining budget of the `original` module:
/// emits it once, its custom sections aside (they hold no code), to count its small bodies.
pub(super) fn keep(module: &mut Module, original: SmallBodies) {
    let customs = std::mem::take(&mut module.customs);
    let emitted = SmallBodies::of(&module.emit_wasm());
    module.customs = customs;
    add_fillers(module, emitted.fillers_for(original));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(small: u64, defined: u64) -> SmallBodies {
        SmallBodies { small, defined }
    }

    #[test]
    fn fillers_bring_the_share_of_small_bodies_back_to_the_originals_up_to_a_half() {
        // The original at a quarter or less: the lowest budget either way.
        assert_eq!(bodies(0, 100).fillers_for(bodies(25, 100)), 0);
        // Half or more: up to a half. (10 + 80) / (100 + 80) = 1/2.
        assert_eq!(bodies(10, 100).fillers_for(bodies(60, 100)), 80);
        assert_eq!(bodies(10, 100).fillers_for(bodies(100, 100)), 80);
        // Between: the original's share, 28 / 70 = 0.4: (17 + 24) / (78 + 24) = 0.402,
        // where 23 would give 0.396.
        assert_eq!(bodies(17, 78).fillers_for(bodies(28, 70)), 24);
        // Already there.
        assert_eq!(bodies(60, 100).fillers_for(bodies(60, 100)), 0);
    }
}
