//! The meta in a binary form of the profiler's own, which the cache keeps beside an
//! instrumented module: reading the meta's JSON is a run's largest step after the
//! program's own (0.45 ms of a 157 KB meta, 1.3 ms of a debug test binary's 447 KB), most
//! of it in the numbers of the call sites and lines and the functions' names, which this
//! form holds as lengths and little-endian `u32`s. The rest, a few hundred bytes, stays
//! JSON. Only this build of the profiler reads what it wrote (the cache's entries are
//! named by the build), and a form that does not read to its end exactly is not taken.

use std::collections::HashMap;

use super::{FunctionMeta, LineTables, Meta, SiteMeta};
use crate::symbols::{SourcePos, Symbol};

/// `meta` in the binary form.
pub fn encode(meta: &Meta) -> Vec<u8> {
    // Every field named, so that a new one is placed here too.
    let rest = Meta {
        version: meta.version,
        metric: meta.metric,
        contexts: meta.contexts,
        state: meta.state,
        host_exceptions: meta.host_exceptions,
        one_memory_variant: meta.one_memory_variant,
        inlining_budget: meta.inlining_budget,
        sampler: meta.sampler,
        unoptimized: meta.unoptimized,
        layout: meta.layout,
        functions: Vec::new(),
        direct_sites: Vec::new(),
        indirect_sites: Vec::new(),
        frames: Vec::new(),
        line_tables: LineTables::default(),
        allocations: meta.allocations.clone(),
    };
    let json = serde_json::to_vec(&rest).expect("the meta is JSON");
    let mut w = Writer(Vec::with_capacity(json.len() + 64 * meta.functions.len()));
    w.len(json.len());
    w.0.extend_from_slice(&json);
    w.len(meta.functions.len());
    for f in &meta.functions {
        w.str(&f.symbol.name);
        w.option(f.symbol.file.as_deref(), Writer::str);
        w.option(f.symbol.line, Writer::u32);
        w.0.push(u8::from(f.symbol.inlinable) | u8::from(f.import) << 1);
    }
    // The sites' files once each, as the JSON has them.
    let mut files: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, u32> = HashMap::new();
    let sites = [&meta.direct_sites, &meta.indirect_sites];
    for pos in sites
        .iter()
        .flat_map(|s| s.iter())
        .filter_map(|s| s.pos.as_ref())
    {
        index.entry(&pos.file).or_insert_with(|| {
            files.push(&pos.file);
            files.len() as u32 - 1
        });
    }
    w.len(files.len());
    files.iter().for_each(|file| w.str(file));
    for sites in sites {
        w.len(sites.len());
        for site in sites {
            w.u32(site.caller);
            w.option(site.callee, Writer::u32);
            w.option(site.pos.as_ref(), |w, pos| {
                w.u32(index[pos.file.as_str()]);
                w.u32(pos.line);
            });
        }
    }
    let tables = &meta.line_tables;
    w.len(tables.segments.len());
    for (function, pairs) in &tables.segments {
        w.u32(*function);
        w.pairs(pairs);
    }
    w.len(tables.lines.len());
    for (file, line, inlined) in &tables.lines {
        w.u32(*file);
        w.u32(*line);
        w.pairs(inlined);
    }
    for strings in [&tables.files, &tables.names] {
        w.len(strings.len());
        strings.iter().for_each(|s| w.str(s));
    }
    w.len(meta.frames.len());
    meta.frames.iter().for_each(|&f| w.u32(f));
    w.0
}

/// The meta that [`encode`] wrote as `bytes`; `None` where they are not such a form.
pub fn decode(bytes: &[u8]) -> Option<Meta> {
    let mut r = Reader(bytes);
    let json = r.bytes()?;
    let mut meta: Meta = serde_json::from_slice(json).ok()?;
    meta.functions = r.list(|r| {
        let name = r.string()?;
        let file = r.option(Reader::string)?;
        let line = r.option(Reader::u32)?;
        let flags = r.byte()?;
        let symbol = Symbol {
            name,
            file,
            line,
            inlinable: flags & 1 != 0,
        };
        Some(FunctionMeta {
            symbol,
            import: flags & 2 != 0,
        })
    })?;
    let files = r.list(Reader::string)?;
    let site = |r: &mut Reader| {
        Some(SiteMeta {
            caller: r.u32()?,
            callee: r.option(Reader::u32)?,
            pos: r.option(|r| {
                Some(SourcePos {
                    file: files.get(r.u32()? as usize)?.clone(),
                    line: r.u32()?,
                })
            })?,
        })
    };
    meta.direct_sites = r.list(site)?;
    meta.indirect_sites = r.list(site)?;
    meta.line_tables = LineTables {
        segments: r.list(|r| Some((r.u32()?, r.pairs()?)))?,
        lines: r.list(|r| Some((r.u32()?, r.u32()?, r.pairs()?)))?,
        files: r.list(Reader::string)?,
        names: r.list(Reader::string)?,
    };
    meta.frames = r.list(Reader::u32)?;
    r.0.is_empty().then_some(meta)
}

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, n: u32) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).expect("fewer than 2^32 entries"));
    }

    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }

    fn option<T>(&mut self, value: Option<T>, write: impl FnOnce(&mut Writer, T)) {
        self.0.push(u8::from(value.is_some()));
        if let Some(value) = value {
            write(self, value);
        }
    }

    fn pairs(&mut self, pairs: &[[u32; 2]]) {
        self.len(pairs.len());
        pairs.iter().flatten().for_each(|&n| self.u32(n));
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (taken, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(taken)
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }

    fn option<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.byte()? {
            0 => Some(None),
            1 => read(self).map(Some),
            _ => None,
        }
    }

    /// A length, then that many entries; no more entries than bytes left, so that a
    /// corrupt length allocates nothing large.
    fn list<T>(&mut self, mut read: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let n = self.u32()? as usize;
        if n > self.0.len() {
            return None;
        }
        (0..n).map(|_| read(self)).collect()
    }

    fn pairs(&mut self) -> Option<Vec<[u32; 2]>> {
        self.list(|r| Some([r.u32()?, r.u32()?]))
    }
}
