//! Maps function indices and code offsets of an original (not instrumented) module back
//! to names and source locations.
//!
//! Sources, best first: DWARF (`DW_TAG_subprogram` for a function's name and
//! declaration, the line program through addr2line for a call site's file:line), then the
//! `name` section, then the export name, then `func[N]`. Imports are `module.field`. Rust
//! and C++ linkage names are demangled. `tables` holds what is looked up by code address:
//! the line program's rows and the inlined subroutines' ranges.

use std::collections::HashMap;
use std::ops::Range;

use addr2line::gimli;
use gimli::{AttributeValue, EndianSlice, LittleEndian};
use serde::{Deserialize, Serialize};

mod facts;
mod tables;

use facts::ModuleFacts;
pub use tables::Inlined;
use tables::{InlineTable, LineTable};

/// How gimli reads the module's DWARF sections: borrowed slices, little-endian (wasm's).
type DwarfReader<'a> = EndianSlice<'a, LittleEndian>;

/// What is known of one function of the original module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Symbol {
    /// Demangled name, unique within the module.
    pub name: String,
    /// Source file of the definition, when DWARF says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Line of the definition, when DWARF says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// A small function of the standard library compiled into another crate's code (a
    /// generic or `#[inline]` one, of at most [`INLINABLE_BYTES`]), which an optimized
    /// build inlines into its callers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inlinable: bool,
}

/// The largest body of a standard-library function compiled into another crate that
/// counts as [`Symbol::inlinable`]: unoptimized code of the iterator adapters, indexing,
/// comparisons and checks that an optimized build inlines is under it; the sorts and
/// tables' algorithms are over.
pub const INLINABLE_BYTES: u64 = 1024;

/// A source position.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourcePos {
    /// Source file.
    pub file: String,
    /// Line in `file`.
    pub line: u32,
}

/// Symbols of one original module.
pub struct SymbolTable {
    functions: Vec<Symbol>,
    code_start: u64,
    lines: LineTable,
    inlines: InlineTable,
}

impl SymbolTable {
    /// Reads the symbols of `wasm`, which must be the original module (its DWARF speaks of
    /// its own code offsets); with `inlines`, also where functions were inlined (for
    /// per-line costs; the walk costs about as much as the rest).
    pub fn load(wasm: &[u8], inlines: bool) -> anyhow::Result<SymbolTable> {
        let facts = ModuleFacts::read(wasm)?;
        let dwarf = load_dwarf(&facts.debug);
        let subprograms = match &dwarf {
            Some(dwarf) => subprograms(dwarf, &facts.bodies).unwrap_or_default(),
            None => HashMap::new(),
        };
        let imported = facts.imports.len();
        let mut functions = Vec::with_capacity(imported + facts.bodies.len());
        // An import is named for what it is in the host: `module.field`.
        for import in &facts.imports {
            functions.push(Symbol {
                name: import.clone(),
                file: None,
                line: None,
                inlinable: false,
            });
        }
        for (k, body) in facts.bodies.iter().enumerate() {
            let index = (imported + k) as u32;
            let symbol = match subprograms.get(&body.start) {
                Some(sub) => sub.clone(),
                None => Symbol {
                    name: facts
                        .names
                        .get(&index)
                        .or_else(|| facts.exports.get(&index))
                        .map(|n| demangle(n))
                        .unwrap_or_else(|| format!("func[{index}]")),
                    file: None,
                    line: None,
                    inlinable: false,
                },
            };
            functions.push(symbol);
        }
        prefer_linker_names(&mut functions, &facts.names);
        make_unique(&mut functions);
        let inlines = dwarf
            .as_ref()
            .filter(|_| inlines)
            .and_then(|dwarf| InlineTable::read(dwarf, &facts.bodies).ok())
            .unwrap_or_default();
        let lines = dwarf.map(LineTable::read).unwrap_or_default();
        Ok(SymbolTable {
            functions,
            code_start: facts.code_start,
            lines,
            inlines,
        })
    }

    /// The symbols of every function, by function index (imports first).
    pub fn functions(&self) -> &[Symbol] {
        &self.functions
    }

    /// The file:line of the instruction at `file_offset` in the module, when the line
    /// program covers it.
    pub fn location(&self, file_offset: u64) -> Option<SourcePos> {
        self.lines.find(file_offset.checked_sub(self.code_start)?)
    }

    /// What tells apart the source positions of instructions cheaply: the line table's
    /// row and the innermost inlined range at `file_offset` (instructions with the same
    /// key have the same [`location`](Self::location) and
    /// [`inlined_at`](Self::inlined_at)); `None` without a line. With it, the file offset
    /// before which every instruction from `file_offset` on has the same key.
    pub fn position_key(&self, file_offset: u64) -> Option<((usize, Option<usize>), u64)> {
        let address = file_offset.checked_sub(self.code_start)?;
        let (row, row_end) = self.lines.row(address)?;
        let (inlined, inlined_until) = self.inlines.innermost(address);
        let until = row_end.min(inlined_until).saturating_add(self.code_start);
        Some(((row, inlined), until))
    }

    /// The functions inlined at the instruction at `file_offset`, innermost first (none
    /// where it is its own function's code).
    pub fn inlined_at(&self, file_offset: u64) -> Vec<Inlined> {
        file_offset
            .checked_sub(self.code_start)
            .map_or_else(Vec::new, |address| {
                self.inlines
                    .at(address, self.location(file_offset).as_ref())
            })
    }
}

fn load_dwarf<'a>(debug: &HashMap<&'a str, &'a [u8]>) -> Option<gimli::Dwarf<DwarfReader<'a>>> {
    if !debug.contains_key(".debug_info") {
        return None;
    }
    let dwarf = gimli::Dwarf::load(|id| -> Result<DwarfReader<'a>, gimli::Error> {
        let data = debug.get(id.name()).copied().unwrap_or(&[]);
        Ok(EndianSlice::new(data, LittleEndian))
    });
    dwarf.ok()
}

/// The first `DW_TAG_subprogram` that starts at each of the function bodies `bodies`,
/// keyed by its `DW_AT_low_pc`.
fn subprograms(
    dwarf: &gimli::Dwarf<DwarfReader<'_>>,
    bodies: &[Range<u64>],
) -> gimli::Result<HashMap<u64, Symbol>> {
    let sizes: HashMap<u64, u64> = bodies.iter().map(|b| (b.start, b.end - b.start)).collect();
    let mut found = HashMap::new();
    let mut headers = dwarf.units();
    while let Some(header) = headers.next()? {
        let unit = dwarf.unit(header)?;
        // The standard library's own units are compiled (optimized) with it.
        let foreign = unit
            .name
            .is_some_and(|name| !name.to_string_lossy().starts_with("/rustc/"));
        let mut entries = unit.entries();
        while let Some(entry) = entries.next_dfs()? {
            if entry.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let Some(low) = entry.attr_value(gimli::DW_AT_low_pc) else {
                continue;
            };
            let Some(low) = dwarf.attr_address(&unit, low)? else {
                continue;
            };
            // Code the linker discarded has a low_pc outside every body (0, or a tombstone).
            let Some(&size) = sizes.get(&low).filter(|_| !found.contains_key(&low)) else {
                continue;
            };
            if let Some(mut symbol) = describe(dwarf, &unit, entry)? {
                symbol.inlinable = foreign
                    && size <= INLINABLE_BYTES
                    && symbol
                        .file
                        .as_deref()
                        .is_some_and(crate::source::is_standard_library);
                found.insert(low, symbol);
            }
        }
    }
    Ok(found)
}

/// Name and declaration of a subprogram, following `DW_AT_specification` and
/// `DW_AT_abstract_origin` to the declaration where the definition lacks them.
fn describe<'a>(
    dwarf: &gimli::Dwarf<DwarfReader<'a>>,
    unit: &gimli::Unit<DwarfReader<'a>>,
    entry: &gimli::DebuggingInformationEntry<DwarfReader<'a>>,
) -> gimli::Result<Option<Symbol>> {
    let mut linkage = None;
    let mut short = None;
    let mut decl_file = None;
    let mut decl_line = None;
    let mut current = entry.clone();
    for _ in 0..4 {
        let string = |attr| -> gimli::Result<Option<String>> {
            match current.attr_value(attr) {
                Some(v) => Ok(Some(
                    dwarf.attr_string(unit, v)?.to_string_lossy().into_owned(),
                )),
                None => Ok(None),
            }
        };
        if linkage.is_none() {
            linkage = string(gimli::DW_AT_linkage_name)?;
        }
        if short.is_none() {
            short = string(gimli::DW_AT_name)?;
        }
        if decl_file.is_none() {
            if let Some(AttributeValue::FileIndex(index)) =
                current.attr_value(gimli::DW_AT_decl_file)
            {
                decl_file = file_name(dwarf, unit, index);
            }
        }
        if decl_line.is_none() {
            decl_line = current
                .attr_value(gimli::DW_AT_decl_line)
                .and_then(|v| v.udata_value());
        }
        let next = [gimli::DW_AT_specification, gimli::DW_AT_abstract_origin]
            .into_iter()
            .find_map(|attr| match current.attr_value(attr) {
                Some(AttributeValue::UnitRef(offset)) => Some(offset),
                _ => None,
            });
        match next {
            Some(offset) => current = unit.entry(offset)?,
            None => break,
        }
    }
    let name = match (linkage, short) {
        (Some(linkage), short) => qualify_generic(demangle(&linkage), short.as_deref()),
        (None, Some(short)) => short,
        (None, None) => return Ok(None),
    };
    Ok(Some(Symbol {
        name,
        file: decl_file,
        line: decl_line.map(|l| l as u32),
        inlinable: false,
    }))
}

/// Rust's legacy mangling leaves out generic arguments and closure numbers, so
/// `largest::<u32>` and `largest::<f64>` demangle alike, and so do two closures of one
/// function; DWARF's `DW_AT_name` (`largest<u32>`, `{closure#1}`) tells them apart.
fn qualify_generic(demangled: String, short: Option<&str>) -> String {
    let Some(short) = short else {
        return demangled;
    };
    let (path, last) = match demangled.rsplit_once("::") {
        Some((path, last)) => (Some(path), last),
        None => (None, demangled.as_str()),
    };
    let generic =
        short.ends_with('>') && short.starts_with(last) && short[last.len()..].starts_with('<');
    let closure = last == "{{closure}}" && short.starts_with("{closure#");
    if !(generic || closure) {
        return demangled;
    }
    match path {
        Some(path) => format!("{path}::{short}"),
        None => short.to_string(),
    }
}

fn file_name(
    dwarf: &gimli::Dwarf<DwarfReader<'_>>,
    unit: &gimli::Unit<DwarfReader<'_>>,
    index: u64,
) -> Option<String> {
    let header = unit.line_program.as_ref()?.header();
    let file = header.file(index)?;
    let text = |value| {
        dwarf
            .attr_string(unit, value)
            .ok()
            .map(|s| s.to_string_lossy().into_owned())
    };
    // Relative paths are relative to the file's directory, and that to the compilation
    // directory (DWARF 4 leaves directory 0, the compilation directory, implicit).
    let mut path = unit
        .comp_dir
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(dir) = file.directory(header).and_then(text) {
        path = join_path(&path, &dir);
    }
    Some(join_path(&path, &text(file.path_name())?))
}

/// `base/part`, or `part` alone when it is absolute: a Unix path, or a URI-like path such
/// as wasi-sdk's `wasisdk://v30.0/src/...`.
fn join_path(base: &str, part: &str) -> String {
    if base.is_empty() || part.starts_with('/') || part.contains("://") {
        part.to_string()
    } else {
        format!("{}/{part}", base.trim_end_matches('/'))
    }
}

/// Demangles a Rust (legacy or v0) or C++ (Itanium) symbol; anything else is returned as is.
pub fn demangle(raw: &str) -> String {
    if raw.starts_with("_R") || is_legacy_rust(raw) {
        if let Ok(rust) = rustc_demangle::try_demangle(raw) {
            // Legacy mangling writes a `-` as `.`: a function type's `->` reads `.>`.
            return format!("{rust:#}").replace(" .> ", " -> ");
        }
    }
    if raw.starts_with("_Z") {
        if let Ok(symbol) = cpp_demangle::Symbol::new(raw) {
            if let Ok(text) = symbol.demangle(&cpp_demangle::DemangleOptions::default()) {
                return text;
            }
        }
    }
    raw.to_string()
}

/// Rust's legacy symbols end in `17h` + 16 hex digits + `E`.
fn is_legacy_rust(raw: &str) -> bool {
    let Some(body) = raw.strip_suffix('E') else {
        return false;
    };
    body.len() > 19
        && body[body.len() - 19..].starts_with("17h")
        && body[body.len() - 16..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
}

/// Where a function named by DWARF (for its source) shares its name with one that DWARF
/// does not describe, and the name section calls it something else that no other function
/// is called, that name tells them apart: Emscripten's `main` (no DWARF) calls the
/// program's main, which clang's DWARF calls `main` and the linker `__original_main`.
fn prefer_linker_names(functions: &mut [Symbol], names: &HashMap<u32, String>) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut undescribed: HashMap<String, usize> = HashMap::new();
    for symbol in functions.iter() {
        *seen.entry(symbol.name.clone()).or_default() += 1;
        if symbol.file.is_none() {
            *undescribed.entry(symbol.name.clone()).or_default() += 1;
        }
    }
    for (index, symbol) in functions.iter_mut().enumerate() {
        if seen[&symbol.name] < 2
            || symbol.file.is_none()
            || !undescribed.contains_key(&symbol.name)
        {
            continue;
        }
        let Some(linker) = names.get(&(index as u32)).map(|n| demangle(n)) else {
            continue;
        };
        if linker != symbol.name && !seen.contains_key(&linker) {
            *seen.get_mut(&symbol.name).expect("counted") -= 1;
            seen.insert(linker.clone(), 1);
            symbol.name = linker;
        }
    }
}

/// `name` without the ` [func N]` that symbolization gives functions of one module that
/// share a name: N is the module's own index, so it is no part of what the function is.
pub fn without_index(name: &str) -> &str {
    match name.rfind(INDEX_SUFFIX) {
        Some(at)
            if name.ends_with(']')
                && name[at + INDEX_SUFFIX.len()..name.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_digit()) =>
        {
            &name[..at]
        }
        _ => name,
    }
}

/// What [`make_unique`] puts between a name and its function index.
const INDEX_SUFFIX: &str = " [func ";

/// Gives functions that share a name (identical C statics in two files, say) the suffix
/// ` [func N]`, so that a name identifies one function in a profile.
fn make_unique(functions: &mut [Symbol]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for symbol in functions.iter() {
        *seen.entry(symbol.name.clone()).or_default() += 1;
    }
    for (index, symbol) in functions.iter_mut().enumerate() {
        if seen[&symbol.name] > 1 {
            symbol.name = format!("{}{INDEX_SUFFIX}{index}]", symbol.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_index_suffix_is_taken_off() {
        assert_eq!(without_index("f [func 12]"), "f");
        assert_eq!(without_index("f [func x]"), "f [func x]");
        assert_eq!(
            without_index("<[u8] as Debug>::fmt"),
            "<[u8] as Debug>::fmt"
        );
    }

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(demangle("_ZN5calls3fib17hd5e666969e9c91f6E"), "calls::fib");
        assert_eq!(demangle("_Z3fibi"), "fib(int)");
        assert_eq!(demangle("_ZN5Shape4areaEv"), "Shape::area()");
        assert_eq!(demangle("main"), "main");
        // quickcheck's impl for functions, whose `->` legacy mangling writes as `.>`.
        let testable = "_ZN80_$LT$fn$LP$A$C$B$RP$$u20$.$GT$$u20$T$u20$as$u20$quickcheck..tester..Testable$GT$6result17h711ca172f414bb86E";
        assert_eq!(
            demangle(testable),
            "<fn(A,B) -> T as quickcheck::tester::Testable>::result"
        );
    }

    #[test]
    fn generic_arguments_come_from_dwarf() {
        assert_eq!(
            qualify_generic("calls::largest".into(), Some("largest<u32>")),
            "calls::largest<u32>"
        );
        assert_eq!(
            qualify_generic("calls::fib".into(), Some("fib")),
            "calls::fib"
        );
        assert_eq!(
            qualify_generic("calls::t::{{closure}}".into(), Some("{closure#1}")),
            "calls::t::{closure#1}"
        );
        assert_eq!(
            qualify_generic("largest".into(), Some("largest<u8>")),
            "largest<u8>"
        );
    }

    #[test]
    fn dwarf_paths_join_unless_absolute() {
        assert_eq!(
            join_path("/src/crate", "src/lib.rs"),
            "/src/crate/src/lib.rs"
        );
        assert_eq!(
            join_path("/src/crate", "/rustc/abc/library/core/src/lib.rs"),
            "/rustc/abc/library/core/src/lib.rs"
        );
        assert_eq!(
            join_path("/build", "wasisdk://v30.0/src/dlmalloc.c"),
            "wasisdk://v30.0/src/dlmalloc.c"
        );
        assert_eq!(join_path("", "a.c"), "a.c");
    }

    #[test]
    fn shared_names_get_their_index() {
        let sym = |n: &str| Symbol {
            name: n.into(),
            file: None,
            line: None,
            inlinable: false,
        };
        let mut functions = vec![sym("a"), sym("b"), sym("a")];
        make_unique(&mut functions);
        let names: Vec<_> = functions.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a [func 0]", "b", "a [func 2]"]);
    }

    #[test]
    fn a_source_name_that_clashes_takes_the_linker_name() {
        let sym = |n: &str, file: Option<&str>| Symbol {
            name: n.into(),
            file: file.map(String::from),
            line: file.map(|_| 3),
            inlinable: false,
        };
        // Emscripten's main wrapper, the program's main, and two closures both in DWARF.
        let mut functions = vec![
            sym("main", None),
            sym("main", Some("prog.c")),
            sym("f::{closure#0}", Some("lib.rs")),
            sym("f::{closure#0}", Some("lib.rs")),
        ];
        let names = HashMap::from([
            (0, "main".to_string()),
            (1, "__original_main".to_string()),
            (
                2,
                "_ZN1f28_$u7b$$u7b$closure$u7d$$u7d$17h0123456789abcdefE".to_string(),
            ),
            (
                3,
                "_ZN1f28_$u7b$$u7b$closure$u7d$$u7d$17hfedcba9876543210E".to_string(),
            ),
        ]);
        prefer_linker_names(&mut functions, &names);
        make_unique(&mut functions);
        let names: Vec<_> = functions.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "main",
                "__original_main",
                "f::{closure#0} [func 2]",
                "f::{closure#0} [func 3]"
            ]
        );
    }
}
