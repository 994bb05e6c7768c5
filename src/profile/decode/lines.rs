//! Per-line costs: the instructions metric's (each counted segment's runs times its
//! instructions per line) and the stack sampler's (each sample's time at its leaf line).

use std::collections::BTreeMap;

use super::Decoder;
use crate::layout;
use crate::profile::stacks::StackSamples;
use crate::profile::LineCost;

impl Decoder<'_> {
    /// The cost of each function per source line: with the instructions metric, each
    /// counted segment's runs times the instructions each line has in it; with the stack
    /// sampler, the time of the samples placed in the tree whose innermost frame was there.
    pub(super) fn lines(&self) -> anyhow::Result<Vec<LineCost>> {
        if let Some(stacks) = self.stacks {
            return Ok(self.sampled_lines(stacks));
        }
        let (tables, l) = (&self.meta.line_tables, self.layout);
        let mut sums: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for (s, (function, lines)) in tables.segments.iter().enumerate().take(l.segments as usize) {
            let runs = self.raw.u64(l.segments_off + 8 * s as u32)?;
            if runs == 0 {
                continue;
            }
            for &[line, n] in lines {
                let sum = sums.entry((*function, line)).or_default();
                *sum = sum.saturating_add(runs.saturating_mul(u64::from(n)));
            }
        }
        Ok(sums
            .into_iter()
            .map(|((f, line), instructions)| LineCost {
                instructions,
                ..self.line_cost(f, line)
            })
            .collect())
    }

    /// The stack sampler's time per (innermost function, line).
    fn sampled_lines(&self, stacks: &StackSamples) -> Vec<LineCost> {
        let children = super::nodes::children(&self.nodes, self.layout);
        let full = self.raw.u64(layout::HDR_FOLDED).unwrap_or(0) > 0;
        let mut sums: BTreeMap<(u32, u32), (u64, u64)> = BTreeMap::new();
        for s in &stacks.stacks {
            let (Some(&function), Some(_)) = (s.frames.last(), children.place(&s.frames, full))
            else {
                continue;
            };
            let sum = sums.entry((function, s.line)).or_default();
            sum.0 += s.samples;
            sum.1 += s.ns;
        }
        sums.into_iter()
            .map(|((f, line), (samples, ns))| LineCost {
                samples: Some(samples),
                self_ns: Some(ns),
                ..self.line_cost(f, line)
            })
            .collect()
    }

    /// Line `line` (of the meta's line tables) of function `f`, with no cost yet.
    fn line_cost(&self, f: u32, line: u32) -> LineCost {
        let tables = &self.meta.line_tables;
        let name = |i: u32| tables.names.get(i as usize).cloned().unwrap_or_default();
        let at = tables.lines.get(line as usize);
        LineCost {
            function: self.name(f),
            file: at.and_then(|(file, _, _)| tables.files.get(*file as usize).cloned()),
            line: at.map_or(0, |(_, line, _)| *line),
            instructions: 0,
            self_ns: None,
            samples: None,
            inlined: at.map_or_else(Vec::new, |(_, _, chain)| {
                chain
                    .iter()
                    .map(|&[f, call_line]| crate::symbols::Inlined {
                        function: name(f),
                        call_line,
                    })
                    .collect()
            }),
        }
    }
}
