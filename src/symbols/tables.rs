//! The two tables read once from a module's DWARF for lookups by code address: every row
//! of the line program (a call site's or an instruction's file:line), and every inlined
//! subroutine's ranges (the functions inlined at an instruction).

use std::collections::HashMap;
use std::ops::Range;

use addr2line::gimli;
use gimli::AttributeValue;
use serde::{Deserialize, Serialize};

use super::{describe, DwarfReader, SourcePos};

/// A function inlined where an instruction is: its name, and the line of the code it was
/// inlined into (`DW_AT_call_line`, in the caller's file).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Inlined {
    /// The inlined function's name, demangled.
    pub function: String,
    /// The line it was inlined at, in the code around it.
    pub call_line: u32,
}

/// Every `DW_TAG_inlined_subroutine`'s address ranges, for finding the functions inlined
/// at an instruction: each range with the nearest range that encloses it (inlined
/// subroutines nest in the code as in the DWARF tree).
#[derive(Default)]
pub(super) struct InlineTable {
    /// (start, end, the inlined function, the enclosing range's index or `usize::MAX`),
    /// sorted by start, the enclosing before the enclosed.
    ranges: Vec<(u64, u64, Inlined, usize)>,
}

impl InlineTable {
    /// Reads the table from the module's DWARF; `bodies` are the module's function bodies
    /// (code addresses, sorted).
    pub(super) fn read(
        dwarf: &gimli::Dwarf<DwarfReader<'_>>,
        bodies: &[Range<u64>],
    ) -> gimli::Result<InlineTable> {
        let mut raw: Vec<(u64, u64, Inlined)> = Vec::new();
        let mut headers = dwarf.units();
        while let Some(header) = headers.next()? {
            let unit = dwarf.unit(header)?;
            // A function inlined in many places has one abstract origin: named once.
            let mut names: HashMap<gimli::UnitOffset, Option<String>> = HashMap::new();
            let mut entries = unit.entries();
            while let Some(entry) = entries.next_dfs()? {
                if entry.tag() != gimli::DW_TAG_inlined_subroutine {
                    continue;
                }
                let origin = match entry.attr_value(gimli::DW_AT_abstract_origin) {
                    Some(AttributeValue::UnitRef(offset)) => offset,
                    _ => entry.offset(),
                };
                let name = match names.get(&origin) {
                    Some(name) => name.clone(),
                    None => {
                        let name = describe(dwarf, &unit, entry)?.map(|s| s.name);
                        names.insert(origin, name.clone());
                        name
                    }
                };
                let Some(name) = name else {
                    continue;
                };
                let call_line = entry
                    .attr_value(gimli::DW_AT_call_line)
                    .and_then(|v| v.udata_value())
                    .unwrap_or(0) as u32;
                let mut ranges = dwarf.die_ranges(&unit, entry)?;
                while let Some(range) = ranges.next()? {
                    if in_one_body(bodies, range.begin..range.end) {
                        let inlined = Inlined {
                            function: name.clone(),
                            call_line,
                        };
                        raw.push((range.begin, range.end, inlined));
                    }
                }
            }
        }
        // Enclosing ranges first: by start, then the longest.
        raw.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut ranges = Vec::with_capacity(raw.len());
        let mut open: Vec<usize> = Vec::new();
        for (start, end, inlined) in raw {
            while open.last().is_some_and(|&i| {
                let (_, open_end, _, _) = &ranges[i];
                *open_end <= start
            }) {
                open.pop();
            }
            let parent = open.last().copied().unwrap_or(usize::MAX);
            ranges.push((start, end, inlined, parent));
            open.push(ranges.len() - 1);
        }
        Ok(InlineTable { ranges })
    }

    /// The innermost range of an inlined function at `address`, by index, and the address
    /// before which the answer stays the same (where that range ends or the next one
    /// starts).
    pub(super) fn innermost(&self, address: u64) -> (Option<usize>, u64) {
        let after = self.ranges.partition_point(|r| r.0 <= address);
        let next_start = self.ranges.get(after).map_or(u64::MAX, |r| r.0);
        let mut at = after.checked_sub(1);
        while let Some(i) = at.filter(|&i| i != usize::MAX) {
            let (start, end, _, parent) = &self.ranges[i];
            if *start <= address && address < *end {
                return (Some(i), next_start.min(*end));
            }
            at = Some(*parent);
        }
        (None, next_start)
    }

    /// The functions inlined at `address`, innermost first.
    pub(super) fn at(&self, address: u64) -> Vec<Inlined> {
        let mut chain = Vec::new();
        let after = self.ranges.partition_point(|r| r.0 <= address);
        let mut at = after.checked_sub(1);
        while let Some(i) = at.filter(|&i| i != usize::MAX) {
            let (start, end, inlined, parent) = &self.ranges[i];
            if *start <= address && address < *end {
                chain.push(inlined.clone());
            }
            at = Some(*parent);
        }
        chain
    }
}

/// Whether `range` is code of one function body of `bodies` (sorted): an inlined
/// subroutine's range that is not is no code's. Code the linker discarded starts at 0 or at
/// a tombstone, and Binaryen's rewrite of the DWARF (emcc's link at -O2 -g) leaves some
/// inlined subroutines with a high_pc of 2^32, a range that would claim every function
/// after its own: those are left out, so that their code stays its function's own.
fn in_one_body(bodies: &[Range<u64>], range: Range<u64>) -> bool {
    let at = bodies.partition_point(|body| body.start <= range.start);
    let body = at.checked_sub(1).map(|i| &bodies[i]);
    !range.is_empty() && body.is_some_and(|body| range.end <= body.end)
}

/// Every row of the line program, read once: address ranges, sorted by start, with their
/// file (an index into `files`) and line. Looking up thousands of call sites one by one
/// through addr2line costs far more than one sweep.
#[derive(Default)]
pub(super) struct LineTable {
    rows: Vec<(u64, u64, u32, u32)>,
    files: Vec<String>,
}

impl LineTable {
    pub(super) fn read(dwarf: gimli::Dwarf<DwarfReader<'_>>) -> LineTable {
        let mut table = LineTable::default();
        let Ok(context) = addr2line::Context::from_dwarf(dwarf) else {
            return table;
        };
        let Ok(ranges) = context.find_location_range(0, u64::MAX) else {
            return table;
        };
        let mut file_ids: HashMap<String, u32> = HashMap::new();
        for (start, len, location) in ranges {
            let (Some(file), Some(line)) = (location.file, location.line) else {
                continue;
            };
            let file = uri_tail(file);
            let id = match file_ids.get(file) {
                Some(&id) => id,
                None => {
                    let id = table.files.len() as u32;
                    table.files.push(file.to_string());
                    file_ids.insert(file.to_string(), id);
                    id
                }
            };
            table.rows.push((start, start + len, id, line));
        }
        table.rows.sort_unstable();
        table
    }

    /// The row that covers `address`, and the address before which it stays the row (where
    /// it ends or the next one starts).
    pub(super) fn row(&self, address: u64) -> Option<(usize, u64)> {
        let after = self.rows.partition_point(|row| row.0 <= address);
        let at = after.checked_sub(1)?;
        let end = self.rows[at].1;
        let next_start = self.rows.get(after).map_or(u64::MAX, |row| row.0);
        (address < end).then_some((at, end.min(next_start)))
    }

    pub(super) fn find(&self, address: u64) -> Option<SourcePos> {
        let after = self.rows.partition_point(|row| row.0 <= address);
        let &(_, end, file, line) = self.rows.get(after.checked_sub(1)?)?;
        (address < end).then(|| SourcePos {
            file: self.files[file as usize].clone(),
            line,
        })
    }
}

/// A path from addr2line as `join_path` (in the parent module) makes it: addr2line joins a URI-like name
/// (wasi-sdk's `wasisdk://v30.0/src/...`) to its directory as if it were relative, so the
/// last URI in the path is the file.
fn uri_tail(path: &str) -> &str {
    match path.rfind("://") {
        Some(at) => &path[path[..at].rfind('/').map_or(0, |i| i + 1)..],
        None => path,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_joined_uri_is_the_file() {
        assert_eq!(
            super::uri_tail("wasisdk://v30.0/build/x-build/wasisdk://v30.0/src/a/malloc.c"),
            "wasisdk://v30.0/src/a/malloc.c"
        );
        assert_eq!(
            super::uri_tail("wasisdk://v30.0/src/a.c"),
            "wasisdk://v30.0/src/a.c"
        );
        assert_eq!(super::uri_tail("/work/src/lib.rs"), "/work/src/lib.rs");
    }

    /// The instrumenter asks for one instruction after another and keeps an answer for the
    /// addresses before the bound these give: a row until it ends or the next row starts,
    /// an inlined range until it ends or the next range starts.
    #[test]
    fn answers_hold_until_their_row_or_range_ends_or_the_next_starts() {
        let lines = super::LineTable {
            rows: vec![(0, 10, 0, 1), (4, 8, 0, 2), (10, 12, 0, 3)],
            files: vec!["a.c".into()],
        };
        assert_eq!(lines.row(1), Some((0, 4)));
        assert_eq!(lines.row(5), Some((1, 8)));
        assert_eq!(lines.row(10), Some((2, 12)));
        assert_eq!(lines.row(12), None);
        let inlined = |function: &str| crate::symbols::Inlined {
            function: function.into(),
            call_line: 1,
        };
        // f at [0, 20), g inside it at [5, 8); h after both at [30, 40).
        let inlines = super::InlineTable {
            ranges: vec![
                (0, 20, inlined("f"), usize::MAX),
                (5, 8, inlined("g"), 0),
                (30, 40, inlined("h"), usize::MAX),
            ],
        };
        assert_eq!(inlines.innermost(2), (Some(0), 5));
        assert_eq!(inlines.innermost(6), (Some(1), 8));
        assert_eq!(inlines.innermost(9), (Some(0), 20));
        assert_eq!(inlines.innermost(25), (None, 30));
        assert_eq!(inlines.innermost(45), (None, u64::MAX));
    }
}
