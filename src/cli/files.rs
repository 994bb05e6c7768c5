//! The commands that work on files alone: `instrument`, `report`, `annotate`, `diff`.

use std::path::PathBuf;

use clap::Args;

use super::profile::InstrumentFlags;
use super::requests::{AnnotateRequest, DiffRequest, InstrumentRequest, ReportFileRequest};
use super::value_enums::{DiffFormatArg, FormatArg, MetricArg};
use super::view::{parse_regex, parse_top, FilterArgs, Top, ViewArgs};
use super::UiOptions;
use crate::diff::DiffFormat;
use crate::format::annotate::{AnnotateOptions, Selection};

/// `cargo wasmprof instrument`.
#[derive(Debug, Args)]
pub struct InstrumentArgs {
    /// The module to instrument.
    #[arg(value_name = "IN.wasm")]
    pub input: PathBuf,
    /// Where to write the instrumented module.
    #[arg(short, long, value_name = "OUT.wasm")]
    pub output: PathBuf,
    /// What the instrumentation measures.
    #[command(flatten)]
    pub instrument: InstrumentFlags,
    /// Colors and status lines.
    #[command(flatten)]
    pub ui: UiOptions,
}

/// `cargo wasmprof report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A profile written by cargo-wasmprof (or a dump of the JS runtime). Several are
    /// merged into one, as `test` merges its binaries' (functions by name and definition,
    /// contexts by call path): they must be of one metric.
    #[arg(value_name = "PROFILE.json", required = true, num_args = 1..)]
    pub profiles: Vec<PathBuf>,
    /// The format to write.
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub format: FormatArg,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// What the report shows.
    #[command(flatten)]
    pub view: ViewArgs,
    /// Colors.
    #[command(flatten)]
    pub ui: UiOptions,
}

/// `cargo wasmprof annotate`.
#[derive(Debug, Args)]
pub struct AnnotateArgs {
    /// A profile made with `--metric instructions` or `--metric time --sampler stacks`.
    #[arg(value_name = "PROFILE.json")]
    pub profile: PathBuf,
    /// What to annotate: the functions whose names match a regular expression, or a
    /// source file (a path or its end, `src/lib.rs`). Without it, the costliest functions
    /// of the program's own code.
    #[arg(value_name = "FUNCTION|FILE")]
    pub what: Option<String>,
    /// Without FUNCTION: how many of the costliest functions to annotate.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub top: usize,
    /// Lines of source to show around each line with a cost.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub context: u32,
    /// Colors.
    #[command(flatten)]
    pub ui: UiOptions,
}

impl AnnotateArgs {
    /// What to annotate: a file when WHAT names one (it has a `/` or a source file's
    /// extension), else a regular expression on function names.
    fn selection(&self) -> Result<Selection, String> {
        let Some(what) = &self.what else {
            return Ok(Selection::Top(self.top));
        };
        let extensions = [".rs", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".zig"];
        if what.contains('/') || extensions.iter().any(|e| what.ends_with(e)) {
            return Ok(Selection::File(what.clone()));
        }
        parse_regex(what).map(Selection::Functions)
    }
}

/// `cargo wasmprof diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The profile to compare against.
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The profile to compare.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// What to compare: calls, time or instructions (default: what both measured; calls
    /// when they measured different things).
    #[arg(long, value_name = "METRIC")]
    pub metric: Option<MetricArg>,
    /// Exit with code 3 when the whole cost grew by more than PCT percent.
    #[arg(long, value_name = "PCT")]
    pub fail_above: Option<f64>,
    /// Show only the N functions that changed most (`all`: every one).
    #[arg(long, value_name = "N|all", default_value = "25", value_parser = parse_top)]
    pub top: Top,
    /// Which stacks and groups to compare.
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Print function names whole (long ones are elided in their generic arguments
    /// otherwise; JSON has them whole).
    #[arg(long)]
    pub full_names: bool,
    /// How to write the comparison: `text` (a table), `json`, or `markdown` (a table for
    /// a pull request or `$GITHUB_STEP_SUMMARY`, largest regression first).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub format: DiffFormatArg,
    /// The same as `--format json`.
    #[arg(long, hide = true)]
    pub json: bool,
    /// Colors.
    #[command(flatten)]
    pub ui: UiOptions,
}

impl InstrumentArgs {
    /// The request these arguments make.
    pub fn to_request(&self) -> InstrumentRequest {
        InstrumentRequest {
            input: self.input.clone(),
            output: self.output.clone(),
            options: self.instrument.to_options(),
        }
    }
}

impl ReportArgs {
    /// The request these arguments make.
    pub fn to_request(&self) -> ReportFileRequest {
        ReportFileRequest {
            profiles: self.profiles.clone(),
            format: self.format.into(),
            output: self.output.clone(),
            emit: self.view.to_emit_options(),
            filter: self.view.filter.to_filter(),
        }
    }
}

impl AnnotateArgs {
    /// The request these arguments make; FUNCTION that is no regular expression is
    /// refused.
    pub fn to_request(&self) -> Result<AnnotateRequest, String> {
        Ok(AnnotateRequest {
            profile: self.profile.clone(),
            selection: self
                .selection()
                .map_err(|e| format!("FUNCTION is not a regular expression: {e}"))?,
            options: AnnotateOptions {
                context: self.context,
            },
        })
    }
}

impl DiffArgs {
    /// The request these arguments make.
    pub fn to_request(&self) -> DiffRequest {
        DiffRequest {
            base: self.base.clone(),
            new: self.new.clone(),
            metric: self.metric.map(Into::into),
            fail_above: self.fail_above,
            top: self.top.0,
            filter: self.filter.to_filter(),
            full_names: self.full_names,
            format: match self.json {
                true => DiffFormat::Json,
                false => self.format.into(),
            },
        }
    }
}
