//! Source lines of the original module's code, numbered compactly for the meta
//! ([`meta::LineTables`]): each line once, with its file and the functions inlined there,
//! files and names once each, in order of first use.

use std::collections::HashMap;

use crate::meta;
use crate::symbols::SymbolTable;

/// Numbers the lines of original code offsets as it is asked for them.
pub(super) struct LineInterner<'a> {
    symbols: &'a SymbolTable,
    tables: meta::LineTables,
    /// Offsets of one line-table row and inlined range share their line: each such key is
    /// looked up once.
    by_key: HashMap<(usize, Option<usize>), u32>,
    /// The last offsets looked up, `[from, to)`, which share a key, and their line: the
    /// code map asks for one instruction after another.
    last: Option<(u32, u32, u32)>,
    lines: HashMap<(u32, u32, Vec<[u32; 2]>), u32>,
    files: HashMap<String, u32>,
    names: HashMap<String, u32>,
}

impl<'a> LineInterner<'a> {
    /// An interner of `symbols`' lines, with none numbered yet.
    pub(super) fn new(symbols: &'a SymbolTable) -> LineInterner<'a> {
        LineInterner {
            symbols,
            tables: meta::LineTables::default(),
            by_key: HashMap::new(),
            last: None,
            lines: HashMap::new(),
            files: HashMap::new(),
            names: HashMap::new(),
        }
    }

    /// The number of the line the original instruction at `offset` is at (numbered now if
    /// it is new), or [`meta::NO_LINE`] where the line program says none.
    pub(super) fn line_of(&mut self, offset: u32) -> u32 {
        if offset == u32::MAX {
            return meta::NO_LINE;
        }
        if let Some((from, to, line)) = self.last {
            if (from..to).contains(&offset) {
                return line;
            }
        }
        let Some((key, until)) = self.symbols.position_key(offset.into()) else {
            return meta::NO_LINE;
        };
        let until = u32::try_from(until).unwrap_or(u32::MAX);
        if let Some(&line) = self.by_key.get(&key) {
            self.last = Some((offset, until, line));
            return line;
        }
        let pos = self
            .symbols
            .location(offset.into())
            .expect("a row covers it");
        let file = intern(&mut self.files, &mut self.tables.files, pos.file);
        let inlined = self
            .symbols
            .inlined_at(offset.into())
            .into_iter()
            .map(|i| {
                [
                    intern(&mut self.names, &mut self.tables.names, i.function),
                    i.call_line,
                ]
            })
            .collect();
        let tables = &mut self.tables;
        let line = *self
            .lines
            .entry((file, pos.line, inlined))
            .or_insert_with_key(|line| {
                tables.lines.push(line.clone());
                tables.lines.len() as u32 - 1
            });
        self.by_key.insert(key, line);
        self.last = Some((offset, until, line));
        line
    }

    /// Records the counted segments (each its function id and its original instructions'
    /// offsets): how many of a segment's instructions each line has.
    pub(super) fn add_segments(&mut self, segments: &[(u32, Vec<u32>)]) {
        for (function, offsets) in segments {
            let mut counts: Vec<[u32; 2]> = Vec::new();
            for &offset in offsets {
                let line = self.line_of(offset);
                match counts.iter_mut().find(|[l, _]| *l == line) {
                    Some([_, n]) => *n += 1,
                    None => counts.push([line, 1]),
                }
            }
            self.tables.segments.push((*function, counts));
        }
    }

    /// The tables numbered so far.
    pub(super) fn into_tables(self) -> meta::LineTables {
        self.tables
    }
}

/// `s`'s number in `list` (added to it when new).
fn intern(table: &mut HashMap<String, u32>, list: &mut Vec<String>, s: String) -> u32 {
    *table.entry(s).or_insert_with_key(|s| {
        list.push(s.clone());
        list.len() as u32 - 1
    })
}
