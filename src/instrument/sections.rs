//! The sections the instrumenter appends to the module it rewrote: the stack sampler's
//! address map (`wasmprof.addresses`) and the meta (`wasmprof`), with the names, source
//! positions and lines of the original module's symbols.

use super::addresses;
use super::lines::LineInterner;
use super::sites::{Site, Sites};
use super::{Instrumented, Options};
use crate::layout::Layout;
use crate::meta::{self, FunctionMeta, Meta};
use crate::symbols::SymbolTable;

/// The rewritten module, and what its meta needs from the rewrite.
pub(super) struct Rewritten {
    /// The emitted module.
    pub(super) wasm: Vec<u8>,
    /// The layout of the profiler's state.
    pub(super) layout: Layout,
    /// Whether each function, by index, is an import.
    pub(super) imported: Vec<bool>,
    /// The call sites, numbered.
    pub(super) sites: Sites,
    /// The function id of each function index of the output ([`Meta::frames`]).
    pub(super) frames: Vec<u32>,
    /// Each counted segment's function id and its original instructions' offsets.
    pub(super) segments: Vec<(u32, Vec<u32>)>,
    /// For the stack sampler, walrus's code transform: the offset in the output of the
    /// first instruction of each stretch of code, and its place (see `addresses`).
    pub(super) code_map: Option<Vec<(usize, u32)>>,
    /// What the module records of the program's allocations.
    pub(super) allocations: meta::Allocations,
    /// The options it was instrumented with, as the module made them
    /// (`Options::for_threads`).
    pub(super) options: Options,
}

impl Rewritten {
    /// Writes the meta, with the names and source positions from `symbols`, into the
    /// module's `wasmprof` section.
    pub(super) fn finish(self, symbols: &SymbolTable) -> Instrumented {
        let options = &self.options;
        let functions = symbols
            .functions()
            .iter()
            .zip(&self.imported)
            .map(|(symbol, &import)| FunctionMeta {
                symbol: symbol.clone(),
                import,
            })
            .collect();
        let locate = |sites: &[Site]| sites.iter().map(|site| site.locate(symbols)).collect();
        let mut lines = LineInterner::new(symbols);
        lines.add_segments(&self.segments);
        let stretches = self
            .code_map
            .as_deref()
            .map(|map| addresses::table(map, &mut lines));
        let line_tables = lines.into_tables();
        let meta = Meta {
            version: meta::VERSION,
            metric: options.metric,
            contexts: options.keeps_contexts(),
            state: options.state,
            host_exceptions: options.host_exceptions,
            one_memory_variant: options.carries_one_memory_variant(),
            inlining_budget: options.inlining_budget,
            sampler: options.sampler,
            unoptimized: options.unoptimized,
            layout: self.layout,
            functions,
            direct_sites: locate(&self.sites.direct),
            indirect_sites: locate(&self.sites.indirect),
            frames: self.frames,
            line_tables,
            allocations: self.allocations,
        };
        // A custom section may come last: appending it leaves the module as it was.
        let mut wasm = self.wasm;
        if let Some(stretches) = stretches {
            wasm_encoder::Section::append_to(
                &wasm_encoder::CustomSection {
                    name: meta::ADDRESSES_SECTION.into(),
                    data: addresses::section(&stretches).into(),
                },
                &mut wasm,
            );
        }
        let data = serde_json::to_vec(&meta).expect("meta serializes");
        wasm_encoder::Section::append_to(
            &wasm_encoder::CustomSection {
                name: meta::SECTION.into(),
                data: data.into(),
            },
            &mut wasm,
        );
        Instrumented { wasm, meta }
    }
}
