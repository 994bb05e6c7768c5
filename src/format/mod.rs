//! The output formats. Each is a view of the one [`Profile`]: its functions, its arcs and
//! its calling-context tree, with the names and source positions it carries.
//!
//! [`Format::emit`] is the one entry point; each format lives in a module of its own.

mod callgrind;
mod flamegraph;
mod folded;
mod html;
mod pprof;
mod speedscope;
mod tree;

use std::io::Write;

use crate::profile::Profile;
use crate::report::{self, ReportOptions};

/// The formats a profile can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The gprof-style report: flat profile, call graph, tests by cost.
    Text,
    /// The profile itself, as cargo-wasmprof reads it back.
    Json,
    /// gzipped profile.proto, for `go tool pprof` and speedscope.
    Pprof,
    /// A callgrind.out file, for KCachegrind, QCachegrind and callgrind_annotate.
    Callgrind,
    /// Folded stacks (`a;b;c value`), for flamegraph tools.
    Folded,
    /// An SVG flame graph (`--icicle` hangs it from the top).
    Flamegraph,
    /// speedscope's JSON file format.
    Speedscope,
    /// One self-contained HTML page: flat profile, flame graph, call graph, search.
    Html,
}

/// What shapes a view besides the profile.
#[derive(Debug, Clone, Default)]
pub struct EmitOptions {
    /// Limit each section of the text report to its first N rows.
    pub top: Option<usize>,
    /// Draw the flame graph from the top down.
    pub icicle: bool,
}

impl Format {
    /// The usual file extension for the format.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Text => "txt",
            Format::Json | Format::Speedscope => "json",
            Format::Pprof => "pb.gz",
            Format::Callgrind => "callgrind",
            Format::Folded => "folded",
            Format::Flamegraph => "svg",
            Format::Html => "html",
        }
    }

    /// A default file name for the view of a profile called `stem`
    /// (`callgrind.out.STEM` for callgrind, as its tools look for that name).
    pub fn file_name(self, stem: &str) -> String {
        match self {
            Format::Callgrind => format!("callgrind.out.{stem}"),
            Format::Speedscope => format!("{stem}.speedscope.json"),
            Format::Json => format!("{stem}.profile.json"),
            other => format!("{stem}.{}", other.extension()),
        }
    }

    /// Whether the format is binary (not for a terminal).
    pub fn is_binary(self) -> bool {
        self == Format::Pprof
    }

    /// Writes `profile` in this format to `out`.
    pub fn emit(
        self,
        profile: &Profile,
        options: &EmitOptions,
        out: &mut dyn Write,
    ) -> anyhow::Result<()> {
        match self {
            Format::Text => {
                // Plain text: the terminal's colors are for `anstream` to add, not for files.
                let text = report::render(profile, &ReportOptions { top: options.top });
                write!(out, "{}", anstream::adapter::strip_str(&text))?;
            }
            Format::Json => {
                serde_json::to_writer_pretty(&mut *out, profile)?;
                out.write_all(b"\n")?;
            }
            Format::Pprof => pprof::write(profile, out)?,
            Format::Callgrind => callgrind::write(profile, out)?,
            Format::Folded => folded::write(profile, out)?,
            Format::Flamegraph => flamegraph::write(profile, options.icicle, out)?,
            Format::Speedscope => speedscope::write(profile, out)?,
            Format::Html => html::write(profile, out)?,
        }
        Ok(())
    }

    /// The view as bytes.
    pub fn render(self, profile: &Profile, options: &EmitOptions) -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.emit(profile, options, &mut out)?;
        Ok(out)
    }
}
