//! The output formats. Each is a view of the one [`Profile`]: its functions, its arcs and
//! its calling-context tree, with the names and source positions it carries.
//!
//! [`Format::emit`] is the one entry point. Each format lives in a module of its own and is
//! one function of the same signature, [`Writer`]; `tree` is the calling-context tree as
//! the flame-graph views draw it, `units` how every view writes figures. A new format is a
//! module, a variant of [`Format`] and its line in [`Format::writer`].

pub mod annotate;
mod callgrind;
mod cpuprofile;
mod firefox;
mod flamegraph;
mod folded;
mod html;
mod pprof;
mod speedscope;
mod text;
mod tree;
pub mod units;

use std::io::Write;

pub use text::requests_report;

use crate::profile::Profile;

/// What every format is: a function that writes its view of a profile.
pub type Writer = fn(&Profile, &EmitOptions, &mut dyn Write) -> anyhow::Result<()>;

/// The formats a profile can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/`: gprof's report.
    Text,
    /// The profile's own JSON.
    Json,
    /// `pprof`: profile.proto, gzipped.
    Pprof,
    /// `callgrind`: callgrind's profile format.
    Callgrind,
    /// `folded`: one line per stack.
    Folded,
    /// `flamegraph`: SVG.
    Flamegraph,
    /// `speedscope`: its evented JSON.
    Speedscope,
    /// `firefox`: the Firefox Profiler's processed profile.
    Firefox,
    /// `cpuprofile`: Chrome DevTools', VS Code's and `node --cpu-prof`'s `.cpuprofile`.
    Cpuprofile,
    /// `html`: `templates/report.html` with the profile inside.
    Html,
}

/// What shapes a view besides the profile (each format takes what applies to it).
#[derive(Debug, Clone, Default)]
pub struct EmitOptions {
    /// Limit each section of the text report to its first N rows (all when `None`).
    pub top: Option<usize>,
    /// The text report's call graph: the costliest of the flat profile's functions, or
    /// all.
    pub call_graph: CallGraph,
    /// List the runtime's scaffolding in the text report instead of folding it.
    pub show_runtime: bool,
    /// List the standard library's helpers of an unoptimized build in the text report
    /// instead of folding them into their callers ([`crate::profile::Profile::helpers`]).
    pub show_helpers: bool,
    /// List the functions inlined into others as rows of their own in the text report's
    /// flat profile (from the per-line costs; their instructions leave their hosts' self).
    pub inlined: bool,
    /// Draw the flame graph from the top down.
    pub icicle: bool,
    /// Print names whole in the text report (else long ones are elided in their generic
    /// arguments; every other format has them whole).
    pub full_names: bool,
    /// List each thread of a threaded program in the text report: its total and its
    /// costliest functions.
    pub threads: bool,
    /// What the stack-shaped views (folded, flame graph, speedscope, firefox) weigh each
    /// calling context by.
    pub weight: Weight,
}

/// What the stack-shaped views weigh each calling context by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Weight {
    /// Its self cost in the profile's metric.
    #[default]
    Cost,
    /// The bytes the allocations made there asked for.
    AllocBytes,
    /// The bytes of those still held at the end.
    HeldBytes,
}

/// Which functions the text report's call graph has entries for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// The N costliest, by inclusive cost, of the functions the flat profile shows.
    Top(usize),
    /// Every function, as gprof.
    Full,
}

impl Default for CallGraph {
    fn default() -> Self {
        CallGraph::Top(DEFAULT_CALL_GRAPH)
    }
}

/// How many entries the call graph has unless asked: few enough that the report fits on a
/// screen or two.
pub const DEFAULT_CALL_GRAPH: usize = 3;

impl Format {
    /// Every format.
    pub const ALL: [Format; 10] = [
        Format::Text,
        Format::Json,
        Format::Pprof,
        Format::Callgrind,
        Format::Folded,
        Format::Flamegraph,
        Format::Speedscope,
        Format::Firefox,
        Format::Cpuprofile,
        Format::Html,
    ];

    /// The format's name, as `--format` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Pprof => "pprof",
            Format::Callgrind => "callgrind",
            Format::Folded => "folded",
            Format::Flamegraph => "flamegraph",
            Format::Speedscope => "speedscope",
            Format::Firefox => "firefox",
            Format::Cpuprofile => "cpuprofile",
            Format::Html => "html",
        }
    }

    /// The usual file extension for the format.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Text => "txt",
            Format::Json | Format::Speedscope | Format::Firefox => "json",
            Format::Pprof => "pb.gz",
            Format::Callgrind => "callgrind",
            Format::Folded => "folded",
            Format::Flamegraph => "svg",
            Format::Cpuprofile => "cpuprofile",
            Format::Html => "html",
        }
    }

    /// A default file name for the view of a profile called `stem`
    /// (`callgrind.out.STEM` for callgrind, as its tools look for that name).
    pub fn file_name(self, stem: &str) -> String {
        match self {
            Format::Callgrind => format!("callgrind.out.{stem}"),
            Format::Speedscope => format!("{stem}.speedscope.json"),
            Format::Firefox => format!("{stem}.firefox.json"),
            Format::Json => format!("{stem}.profile.json"),
            other => format!("{stem}.{}", other.extension()),
        }
    }

    /// Whether the format is binary (not for a terminal).
    pub fn is_binary(self) -> bool {
        self == Format::Pprof
    }

    /// The function that writes this format.
    pub fn writer(self) -> Writer {
        match self {
            Format::Text => text::write,
            Format::Json => write_json,
            Format::Pprof => pprof::write,
            Format::Callgrind => callgrind::write,
            Format::Folded => folded::write,
            Format::Flamegraph => flamegraph::write,
            Format::Speedscope => speedscope::write,
            Format::Firefox => firefox::write,
            Format::Cpuprofile => cpuprofile::write,
            Format::Html => html::write,
        }
    }

    /// Writes `profile` in this format to `out`, as for a file: the text report without
    /// its terminal styles (see [`print_text`]).
    pub fn emit(
        self,
        profile: &Profile,
        options: &EmitOptions,
        out: &mut dyn Write,
    ) -> anyhow::Result<()> {
        match self {
            // The text report's headings are styled; a file gets them plain.
            Format::Text => {
                let styled = text::render(profile, options);
                write!(out, "{}", anstream::adapter::strip_str(&styled))?;
                Ok(())
            }
            other => (other.writer())(profile, options, out),
        }
    }

    /// The view as bytes.
    pub fn render(self, profile: &Profile, options: &EmitOptions) -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.emit(profile, options, &mut out)?;
        Ok(out)
    }
}

/// Prints the text report on standard output, styled where the terminal and the color
/// choice allow. A closed output (a pipe into `head`) just ends it.
pub fn print_text(profile: &Profile, options: &EmitOptions) {
    let _ = text::write(profile, options, &mut anstream::stdout());
}

/// The json format: the profile itself.
fn write_json(
    profile: &Profile,
    _options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, profile)?;
    out.write_all(b"\n")?;
    Ok(())
}
