//! pprof's profile.proto (github.com/google/pprof, proto/profile.proto), gzipped, for
//! `go tool pprof` and speedscope. The messages below carry the fields this writer fills,
//! with their numbers in that schema.
//!
//! Sample types: `calls/count` always, then `wall/nanoseconds` or
//! `instructions/count` as measured. With a calling-context tree, each context is a sample
//! (its stack, leaf first; its calls and self cost). With the calls metric, each arc is a
//! sample whose stack is callee then caller. Functions carry file and start line;
//! locations are (function, line) pairs: the definition for a leaf, the call site toward
//! the next frame for the others.
//!
//! When the program's allocations are recorded, four sample types follow the cost, Go's
//! heap profile's: `alloc_objects/count`, `alloc_space/bytes`, `inuse_objects/count`,
//! `inuse_space/bytes` (what each context allocated, and of it what was still held at the
//! end), so that `go tool pprof -sample_index=alloc_space` reads them as a Go heap profile.
//!
//! With per-line costs (the instructions metric's, or the stack sampler's times), a third
//! sample type, `line_instructions/count` or `line_wall/nanoseconds`, holds one sample per
//! line of a function: a one-frame stack whose location has the line, and, for code
//! inlined there, the inlined functions as pprof `Line` entries, innermost first (`go tool
//! pprof -sample_index=line_instructions -list FUNC` prints the exact instructions of each
//! line). These costs are not split by calling context, so they are a sample type of their
//! own and the stacks keep theirs.

use std::collections::HashMap;
use std::io::Write;

use prost::Message;

use super::EmitOptions;
use crate::meta::Unit;
use crate::profile::{Profile, HOST};

#[derive(Clone, PartialEq, Message)]
struct PprofProfile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<PprofFunction>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

/// A sample's label: `thread` names the thread of a threaded program.
#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "5")]
    filename: i64,
    #[prost(bool, tag = "7")]
    has_functions: bool,
    #[prost(bool, tag = "8")]
    has_filenames: bool,
    #[prost(bool, tag = "9")]
    has_line_numbers: bool,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    mapping_id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct PprofFunction {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
    #[prost(int64, tag = "5")]
    start_line: i64,
}

/// Builds the tables: strings, functions and locations, each interned.
struct Builder<'a> {
    profile: &'a Profile,
    out: PprofProfile,
    strings: HashMap<String, i64>,
    /// pprof function id by a function's name, file and line (the host's: [`HOST`]).
    functions: HashMap<(&'a str, Option<&'a str>, Option<u32>), u64>,
    locations: HashMap<(u64, i64), u64>,
    /// pprof function id of each inlined function, by name.
    inlined: HashMap<String, u64>,
    /// Call-site line of the first site of each arc, by (caller, callee) name.
    sites: HashMap<(&'a str, &'a str), u32>,
    by_name: rustc_hash::FxHashMap<&'a str, usize>,
}

impl<'a> Builder<'a> {
    fn new(profile: &'a Profile) -> Builder<'a> {
        let mut b = Builder {
            profile,
            out: PprofProfile::default(),
            strings: HashMap::new(),
            functions: HashMap::new(),
            inlined: HashMap::new(),
            locations: HashMap::new(),
            sites: HashMap::new(),
            by_name: Default::default(),
        };
        b.read(profile);
        b.string(""); // string_table[0] must be ""
        b
    }

    /// Makes `profile` (the whole one, or one thread's) the one whose functions, arcs and
    /// contexts the next samples refer to; the tables go on.
    fn read(&mut self, profile: &'a Profile) {
        self.profile = profile;
        self.sites = profile
            .arcs
            .iter()
            .filter_map(|a| {
                let line = a.sites.first()?.pos.line;
                Some(((a.caller.as_str(), a.callee.as_str()), line))
            })
            .collect();
        self.by_name = profile.index_by_name();
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = self.out.string_table.len() as i64;
        self.out.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), id);
        id
    }

    /// The pprof function for profile function `index` (`functions.len()` is the host).
    fn function(&mut self, index: usize) -> u64 {
        let profile: &'a Profile = self.profile;
        let key = match profile.functions.get(index) {
            Some(f) => (f.name.as_str(), f.file.as_deref(), f.line),
            None => (HOST, None, None),
        };
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let (name, file, line) = key;
        let id = self.out.function.len() as u64 + 1;
        let name = self.string(name);
        let filename = self.string(file.unwrap_or(""));
        self.out.function.push(PprofFunction {
            id,
            name,
            // pprof takes a name equal to its system name for one it may demangle, and
            // one that looks like C++ loses its `<...>` and `(...)` (so every Rust `drop`
            // becomes `::drop`); a name with another system name is demangled already.
            // The profile keeps no linkage names: the system name is left empty.
            system_name: 0,
            filename,
            start_line: line.map_or(0, i64::from),
        });
        self.functions.insert(key, id);
        id
    }

    /// The pprof function of a function inlined into others (it may have no entry of its
    /// own in the profile), named and in `file` when known.
    fn inlined_function(&mut self, name: &str, file: Option<&str>) -> u64 {
        if let Some(&id) = self.inlined.get(name) {
            return id;
        }
        let id = self.out.function.len() as u64 + 1;
        let (name_id, filename) = (self.string(name), self.string(file.unwrap_or("")));
        self.out.function.push(PprofFunction {
            id,
            name: name_id,
            system_name: 0,
            filename,
            start_line: 0,
        });
        self.inlined.insert(name.to_string(), id);
        id
    }

    /// A location of its own for one line cost: the line, in the inlined functions
    /// (innermost first) and the function they were inlined into.
    fn line_location(&mut self, l: &crate::profile::LineCost) -> Option<u64> {
        let host = *self.by_name.get(l.function.as_str())?;
        let mut lines = Vec::with_capacity(l.inlined.len() + 1);
        let mut line = i64::from(l.line);
        for (depth, inlined) in l.inlined.iter().enumerate() {
            // The innermost inlined function's file is the line's; the others' unknown.
            let file = if depth == 0 { l.file.as_deref() } else { None };
            let function_id = self.inlined_function(&inlined.function, file);
            lines.push(Line { function_id, line });
            line = i64::from(inlined.call_line);
        }
        lines.push(Line {
            function_id: self.function(host),
            line,
        });
        let id = self.out.location.len() as u64 + 1;
        self.out.location.push(Location {
            id,
            mapping_id: 1,
            line: lines,
        });
        Some(id)
    }

    /// The location for `line` in profile function `index`.
    fn location(&mut self, index: usize, line: Option<u32>) -> u64 {
        let function_id = self.function(index);
        let line = line
            .or_else(|| self.profile.functions.get(index).and_then(|f| f.line))
            .map_or(0, i64::from);
        let next = self.out.location.len() as u64 + 1;
        let id = *self.locations.entry((function_id, line)).or_insert(next);
        if id == next {
            self.out.location.push(Location {
                id,
                mapping_id: 1,
                line: vec![Line { function_id, line }],
            });
        }
        id
    }

    /// The location of a frame of `caller` that calls `callee`: the call site's line.
    fn call_site(&mut self, caller: usize, callee: usize) -> u64 {
        let name = |i: usize| {
            self.profile
                .functions
                .get(i)
                .map_or(HOST, |f| f.name.as_str())
        };
        let line = self.sites.get(&(name(caller), name(callee))).copied();
        self.location(caller, line)
    }
}

/// Writes `profile` as a gzipped profile.proto.
pub(super) fn write(
    profile: &Profile,
    _options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut b = Builder::new(profile);
    let types = sample_types(&mut b, profile);
    describe(&mut b, profile);

    // A threaded program's samples are each thread's, labelled with it (pprof's
    // `-tagfocus thread=...`, `-tags`); their sums are the whole profile's.
    let parts: Vec<(&Profile, Vec<Label>)> = match profile.threads.as_slice() {
        [] => vec![(profile, Vec::new())],
        threads => threads
            .iter()
            .map(|t| {
                let label = Label {
                    key: b.string("thread"),
                    str: b.string(&t.label()),
                };
                (&t.profile, vec![label])
            })
            .collect(),
    };
    for (part, label) in parts {
        b.read(part);
        stack_samples(&mut b, part, types, label);
    }
    b.read(profile);
    for l in profile.lines.iter().filter(|_| types.by_line) {
        if let Some(location) = b.line_location(l) {
            let mut value = vec![0; types.count()];
            value[types.count() - 1] = l.cost(profile.metric) as i64;
            b.out.sample.push(Sample {
                location_id: vec![location],
                value,
                label: Vec::new(),
            });
        }
    }
    let bytes = b.out.encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?;
    Ok(())
}

/// Which sample types follow calls and the metric's cost.
#[derive(Clone, Copy)]
struct Types {
    /// The metric has a cost (its value follows calls).
    cost: bool,
    /// Go's four heap sample types.
    allocs: bool,
    /// Per-line costs, last.
    by_line: bool,
}

impl Types {
    /// How many values a sample has.
    fn count(&self) -> usize {
        1 + usize::from(self.cost) + 4 * usize::from(self.allocs) + usize::from(self.by_line)
    }
}

/// Go's heap profile's sample types, as a context's allocations give them.
const HEAP_TYPES: [(&str, &str); 4] = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
];

/// The profile's sample types: calls, the metric's cost, the allocations when recorded,
/// and with per-line costs, those (asked for; the stacks' cost is the default view).
fn sample_types(b: &mut Builder<'_>, profile: &Profile) -> Types {
    let unit = profile.metric.facts().unit;
    let mut types = vec![("calls", "count")];
    match unit {
        Unit::Nanoseconds => types.push(("wall", "nanoseconds")),
        Unit::Instructions => types.push(("instructions", "count")),
        Unit::Calls => {}
    }
    let default = *types.last().expect("calls");
    let allocs = profile.records_allocations();
    if allocs {
        types.extend(HEAP_TYPES);
    }
    let by_line = unit != Unit::Calls && !profile.lines.is_empty();
    if by_line {
        types.push(match unit {
            Unit::Nanoseconds => ("line_wall", "nanoseconds"),
            _ => ("line_instructions", "count"),
        });
    }
    for (kind, unit) in &types {
        let value_type = ValueType {
            r#type: b.string(kind),
            unit: b.string(unit),
        };
        b.out.sample_type.push(value_type);
    }
    b.out.default_sample_type = b.string(default.0);
    Types {
        cost: unit != Unit::Calls,
        allocs,
        by_line,
    }
}

/// The profile's mapping (its modules), comment and duration.
fn describe(b: &mut Builder<'_>, profile: &Profile) {
    // pprof's `File:` line shows what follows the first mapping's last `/`: every
    // module's file name with no `/` in it, so that a merged profile names them all (a doc
    // test's label, `doc test src/lib.rs (line 7)`, word by word).
    let files: Vec<String> = profile
        .modules
        .iter()
        .map(|m| {
            m.split(' ')
                .map(|word| word.rsplit(['/', '\\']).next().unwrap_or(word))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let module = b.string(&files.join(", "));
    b.out.mapping.push(Mapping {
        id: 1,
        filename: module,
        has_functions: true,
        has_filenames: true,
        has_line_numbers: true,
    });
    let comment = b.string(concat!("cargo-wasmprof ", env!("CARGO_PKG_VERSION")));
    b.out.comment.push(comment);
    // `go tool pprof -comments` shows what the report's notes say of held bytes.
    if profile
        .allocations
        .as_ref()
        .is_some_and(|a| a.held_is_upper_bound())
    {
        let comment = b.string("inuse_objects, inuse_space: an upper bound (a threaded program: a block freed on another thread than its allocation's counts as in use)");
        b.out.comment.push(comment);
    }
    b.out.duration_nanos = profile.runs.iter().map(|r| r.wall_ns as i64).sum();
}

/// The samples of `profile`'s stacks, each labelled `label`: one per calling context (the
/// stack from it up to the root, its calls and self cost), or, for the calls metric, one
/// per arc (the callee under its caller).
fn stack_samples(b: &mut Builder<'_>, profile: &Profile, types: Types, label: Vec<Label>) {
    let metric = profile.metric;
    let host = profile.functions.len();
    if metric.has_cost() {
        for c in profile.contexts.iter().skip(1) {
            let Some(leaf) = c.function.map(|f| f as usize) else {
                continue;
            };
            let mut stack = vec![b.location(leaf, None)];
            let mut callee = leaf;
            let mut at = c.parent.map(|p| &profile.contexts[p as usize]);
            while let Some(frame) = at {
                let Some(caller) = frame.function.map(|f| f as usize) else {
                    break;
                };
                stack.push(b.call_site(caller, callee));
                callee = caller;
                at = frame.parent.map(|p| &profile.contexts[p as usize]);
            }
            let mut value = vec![c.calls as i64, c.cost.get(metric).0 as i64];
            if types.allocs {
                let a = c.alloc.unwrap_or_default();
                value.extend([a.allocs, a.alloc_bytes, a.held, a.held_bytes].map(|x| x as i64));
            }
            if types.by_line {
                value.push(0);
            }
            b.out.sample.push(Sample {
                location_id: stack,
                value,
                label: label.clone(),
            });
        }
    } else {
        for arc in &profile.arcs {
            let Some(&callee) = b.by_name.get(arc.callee.as_str()) else {
                continue;
            };
            let caller = b.by_name.get(arc.caller.as_str()).copied().unwrap_or(host);
            let mut stack = vec![b.location(callee, None)];
            if caller != host {
                stack.push(b.call_site(caller, callee));
            }
            b.out.sample.push(Sample {
                location_id: stack,
                value: vec![arc.count as i64],
                label: label.clone(),
            });
        }
    }
}
