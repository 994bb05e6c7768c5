//! What a report shows of a profile, for every command that writes one: the text report's
//! rows and call graph, the formats' options, and the view (`--focus`, `--ignore`, `--by`).

use clap::Args;

use super::value_enums::{GroupingArg, WeightArg};
use crate::format::{CallGraph, EmitOptions};
use crate::profile::Filter;

/// What a report shows of a profile, for every command that writes one.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Report options")]
pub struct ViewArgs {
    /// Show the N costliest functions in the flat profile, and the N costliest tests
    /// (`all`: every one).
    #[arg(long, value_name = "N|all", default_value = "10", value_parser = parse_top)]
    pub top: Top,
    /// The call graph's entries: the N costliest (by inclusive cost) of the functions the
    /// flat profile shows, or `full`, gprof's whole graph.
    #[arg(long, value_name = "N|full", default_value = "3", value_parser = parse_call_graph)]
    pub call_graph: CallGraph,
    /// List the runtime's scaffolding (the start-up, the test harness, the standard
    /// library and WASI calls that only they make) function by function; it is one
    /// folded line otherwise. It is measured either way.
    #[arg(long)]
    pub show_runtime: bool,
    /// In an unoptimized build (cargo's dev and test profiles), list the standard
    /// library's small generic and `#[inline]` functions (iterator adapters, indexing,
    /// comparisons, checks) function by function; they are folded into their callers
    /// otherwise, as an optimized build inlines them. Measured either way.
    #[arg(long)]
    pub show_helpers: bool,
    /// With per-line costs (`--metric instructions`, or `--sampler stacks`): list the
    /// functions inlined into others as rows of their own in the flat profile, marked
    /// `[inlined]` (their cost leaves the self cost of the functions they were inlined
    /// into).
    #[arg(long)]
    pub inlined: bool,
    /// Draw flame graphs from the top down (icicle).
    #[arg(long)]
    pub icicle: bool,
    /// What the stack views (folded, flamegraph, speedscope, firefox) weigh each calling
    /// context by: its `cost` in the profile's metric, or, where allocations were
    /// recorded, the bytes allocated there (`alloc-bytes`) or still held at the end
    /// (`held-bytes`); the text report's allocations section ranks its functions by the
    /// bytes held with `held-bytes`, else by the bytes allocated.
    #[arg(long, value_name = "WHAT", default_value = "cost")]
    pub weight: WeightArg,
    /// Print function names whole in the text report (long ones are elided in their
    /// generic arguments otherwise; the other formats always have them whole).
    #[arg(long)]
    pub full_names: bool,
    /// List each thread of a threaded program (wasm32-wasip1-threads) in the text report:
    /// its total, how it ended and its costliest functions (the other sections show their
    /// sum; speedscope, Firefox and pprof files have a track or label per thread).
    #[arg(long)]
    pub threads: bool,
    /// Which stacks to show and how to group them.
    #[command(flatten)]
    pub filter: FilterArgs,
}

impl ViewArgs {
    /// The options of the formats.
    pub fn to_emit_options(&self) -> EmitOptions {
        EmitOptions {
            top: self.top.0,
            call_graph: self.call_graph,
            show_runtime: self.show_runtime,
            show_helpers: self.show_helpers,
            inlined: self.inlined,
            icicle: self.icicle,
            full_names: self.full_names,
            threads: self.threads,
            weight: self.weight.into(),
        }
    }
}

/// pprof's focus and ignore, and grouping: a view of the profile that every format draws.
#[derive(Debug, Clone, Args)]
pub struct FilterArgs {
    /// Only the stacks through a function whose name matches REGEX, with costs re-rooted
    /// there (its callers left out), as pprof's `--focus`.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub focus: Option<regex::Regex>,
    /// Leave out the stacks through a function whose name matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub ignore: Option<regex::Regex>,
    /// Group the costs by function, by source file or by crate (a C library, an import
    /// module).
    #[arg(long, value_name = "WHAT", default_value = "function")]
    pub by: GroupingArg,
}

impl FilterArgs {
    /// The view these options ask for.
    pub fn to_filter(&self) -> Filter {
        Filter {
            focus: self.focus.clone(),
            ignore: self.ignore.clone(),
            by: self.by.into(),
        }
    }
}

/// How many rows a report shows: `None` for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Top(pub Option<usize>);

/// `N` or `all` as a number of rows.
pub(super) fn parse_top(text: &str) -> Result<Top, String> {
    match text {
        "all" => Ok(Top(None)),
        n => n
            .parse::<usize>()
            .map(|n| Top(Some(n)))
            .map_err(|_| "expected a number of rows or `all`".to_string()),
    }
}

/// `N` or `full` as the call graph's entries.
fn parse_call_graph(text: &str) -> Result<CallGraph, String> {
    match text {
        "full" | "all" => Ok(CallGraph::Full),
        n => n
            .parse::<usize>()
            .map(CallGraph::Top)
            .map_err(|_| "expected a number of entries or `full`".to_string()),
    }
}

/// A regular expression, its error on one line.
pub(super) fn parse_regex(text: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(text).map_err(|e| match e {
        regex::Error::Syntax(message) => message
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map_or("not a regular expression", str::trim)
            .to_string(),
        other => other.to_string(),
    })
}
