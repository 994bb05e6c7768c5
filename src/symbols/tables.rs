//! The two tables read once from a module's DWARF for lookups by code address: every row
//! of the line program (a call site's or an instruction's file:line), and every inlined
//! subroutine's ranges (the functions inlined at an instruction).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

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
    /// Where each range's function is declared (its file and first line), by range.
    decls: Vec<Option<Decl>>,
    /// Of the C and C++ units, where each function is declared: by file, (line, name)
    /// sorted. C functions do not nest, so a line belongs to the one declared nearest
    /// above it.
    declared: HashMap<Arc<str>, Vec<(u32, String)>>,
}

/// Where a function is declared: its file and first line.
type Decl = (Arc<str>, u32);

/// Where the function `entry` declares is, if it is a subprogram's declaration (not a
/// concrete copy of one, which points to it): its file, line and name.
fn declaration<'a>(
    dwarf: &gimli::Dwarf<DwarfReader<'a>>,
    unit: &gimli::Unit<DwarfReader<'a>>,
    entry: &gimli::DebuggingInformationEntry<DwarfReader<'a>>,
) -> gimli::Result<Option<(String, u32, String)>> {
    let copy = entry.attr_value(gimli::DW_AT_abstract_origin).is_some()
        || entry.attr_value(gimli::DW_AT_specification).is_some();
    if entry.tag() != gimli::DW_TAG_subprogram || copy {
        return Ok(None);
    }
    Ok(describe(dwarf, unit, entry)?.and_then(|s| Some((s.file?, s.line?, s.name))))
}

impl InlineTable {
    /// Reads the table from the module's DWARF; `bodies` are the module's function bodies
    /// (code addresses, sorted).
    pub(super) fn read(
        dwarf: &gimli::Dwarf<DwarfReader<'_>>,
        bodies: &[Range<u64>],
    ) -> gimli::Result<InlineTable> {
        let mut raw: Vec<(u64, u64, Inlined, Option<Decl>)> = Vec::new();
        let mut files: HashMap<String, Arc<str>> = HashMap::new();
        let mut file = |name: String| -> Arc<str> {
            files
                .entry(name)
                .or_insert_with_key(|n| Arc::from(n.as_str()))
                .clone()
        };
        let mut declared: HashMap<Arc<str>, Vec<(u32, String)>> = HashMap::new();
        let mut headers = dwarf.units();
        while let Some(header) = headers.next()? {
            let unit = dwarf.unit(header)?;
            // A function inlined in many places has one abstract origin: named once.
            let mut names: HashMap<gimli::UnitOffset, Option<(String, Option<Decl>)>> =
                HashMap::new();
            let mut entries = unit.entries();
            let mut c_like = false;
            while let Some(entry) = entries.next_dfs()? {
                if entry.tag() == gimli::DW_TAG_compile_unit {
                    c_like = !matches!(
                        entry.attr_value(gimli::DW_AT_language),
                        Some(AttributeValue::Language(gimli::DW_LANG_Rust)) | None
                    );
                }
                if c_like {
                    if let Some((f, line, name)) = declaration(dwarf, &unit, entry)? {
                        declared.entry(file(f)).or_default().push((line, name));
                    }
                }
                if entry.tag() != gimli::DW_TAG_inlined_subroutine {
                    continue;
                }
                let origin = match entry.attr_value(gimli::DW_AT_abstract_origin) {
                    Some(AttributeValue::UnitRef(offset)) => offset,
                    _ => entry.offset(),
                };
                let described = match names.get(&origin) {
                    Some(described) => described.clone(),
                    None => {
                        let described = describe(dwarf, &unit, entry)?.map(|s| {
                            let decl = s.file.zip(s.line).map(|(f, line)| (file(f), line));
                            (s.name, decl)
                        });
                        names.insert(origin, described.clone());
                        described
                    }
                };
                let Some((name, decl)) = described else {
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
                        raw.push((range.begin, range.end, inlined, decl.clone()));
                    }
                }
            }
        }
        declared.values_mut().for_each(|v| v.sort_unstable());
        let mut table = InlineTable::nested(raw);
        table.declared = declared;
        Ok(table)
    }

    /// The table of the ranges `raw` (start, end, the function, its declaration), each
    /// with the nearest range that encloses it.
    fn nested(mut raw: Vec<(u64, u64, Inlined, Option<Decl>)>) -> InlineTable {
        // Enclosing ranges first: by start, then the longest.
        raw.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut ranges = Vec::with_capacity(raw.len());
        let mut decls = Vec::with_capacity(raw.len());
        let mut open: Vec<usize> = Vec::new();
        for (start, end, inlined, decl) in raw {
            while open.last().is_some_and(|&i| {
                let (_, open_end, _, _) = &ranges[i];
                *open_end <= start
            }) {
                open.pop();
            }
            let parent = open.last().copied().unwrap_or(usize::MAX);
            ranges.push((start, end, inlined, parent));
            decls.push(decl);
            open.push(ranges.len() - 1);
        }
        InlineTable {
            ranges,
            decls,
            declared: HashMap::new(),
        }
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

    /// The functions inlined at `address`, whose line is `line`, innermost first. Where
    /// that line comes before the innermost function's declaration in its file, the
    /// compiler inlined another function there and its DWARF lost that frame (clang -O2
    /// does): the function declared nearest above the line (of a C or C++ unit) is put
    /// first, with no call line.
    pub(super) fn at(&self, address: u64, line: Option<&SourcePos>) -> Vec<Inlined> {
        let mut chain = Vec::new();
        let mut innermost = None;
        let after = self.ranges.partition_point(|r| r.0 <= address);
        let mut at = after.checked_sub(1);
        while let Some(i) = at.filter(|&i| i != usize::MAX) {
            let (start, end, inlined, parent) = &self.ranges[i];
            if *start <= address && address < *end {
                innermost.get_or_insert(i);
                chain.push(inlined.clone());
            }
            at = Some(*parent);
        }
        let decl = innermost.and_then(|i| self.decls[i].as_ref());
        if let (Some((file, first)), Some(pos)) = (decl, line) {
            if **file == *pos.file && pos.line < *first {
                let above = self.declared.get(file).and_then(|functions| {
                    let at = functions.partition_point(|(l, _)| *l <= pos.line);
                    at.checked_sub(1).map(|i| functions[i].1.clone())
                });
                if let Some(function) = above {
                    chain.insert(
                        0,
                        Inlined {
                            function,
                            call_line: 0,
                        },
                    );
                }
            }
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
            ..Default::default()
        };
        assert_eq!(inlines.innermost(2), (Some(0), 5));
        assert_eq!(inlines.innermost(6), (Some(1), 8));
        assert_eq!(inlines.innermost(9), (Some(0), 20));
        assert_eq!(inlines.innermost(25), (None, 30));
        assert_eq!(inlines.innermost(45), (None, u64::MAX));
    }

    /// A line before the declaration of the innermost inlined function, in its file, is
    /// another function's, inlined there with its frame lost: the one declared nearest above.
    #[test]
    fn a_line_above_its_frames_declaration_is_of_the_function_declared_above_it() {
        let file: std::sync::Arc<str> = "a.c".into();
        let inlines = super::InlineTable {
            ranges: vec![(
                0,
                20,
                crate::symbols::Inlined {
                    function: "write".into(),
                    call_line: 90,
                },
                usize::MAX,
            )],
            decls: vec![Some((file.clone(), 50))],
            declared: [(
                file,
                vec![(10, "len".to_string()), (50, "write".to_string())],
            )]
            .into(),
        };
        let at = |line: u32| {
            let pos = super::SourcePos {
                file: "a.c".into(),
                line,
            };
            inlines
                .at(4, Some(&pos))
                .into_iter()
                .map(|i| (i.function, i.call_line))
                .collect::<Vec<_>>()
        };
        assert_eq!(at(12), [("len".into(), 0), ("write".into(), 90)]);
        assert_eq!(at(55), [("write".to_string(), 90)]);
    }
}
