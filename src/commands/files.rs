//! The commands that work on files alone: `instrument` (a module in, an instrumented
//! module out), `report` (a profile in any format), `annotate` (a profile's per-line costs
//! beside the source) and `diff` (two profiles compared).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::cli::{AnnotateRequest, DiffRequest, InstrumentRequest, ReportFileRequest};
use crate::diff::Diff;
use crate::error::Error;
use crate::format::{self, Format};
use crate::fsutil::{relative, write_atomic};
use crate::instrument;
use crate::profile::Profile;
use crate::status::Status;

/// `instrument`: an instrumented copy of a module, for any host.
pub(super) fn instrument(args: InstrumentRequest, status: Status) -> Result<(), Error> {
    let bytes = std::fs::read(&args.input).map_err(|e| Error::input(&args.input, e))?;
    let spinner = status.spinner("Instrumenting", relative(&args.input));
    let done = instrument::instrument(&bytes, &args.options)
        .map_err(|source| Error::instrument(&args.input, source))?;
    drop(spinner);
    write_atomic(&args.output, &done.wasm)?;
    status.done(
        "Instrumented",
        format!(
            "{} -> {} ({} functions, {} direct and {} indirect call sites)",
            relative(&args.input),
            relative(&args.output),
            done.meta.functions.len(),
            done.meta.direct_sites.len(),
            done.meta.indirect_sites.len()
        ),
    );
    Ok(())
}

/// `report`: a profile (or a dump) in any format, to a file or standard output.
pub(super) fn report(args: ReportFileRequest, status: Status) -> Result<(), Error> {
    use std::io::{IsTerminal as _, Write as _};
    let (source, profile) = read_merged(&args.profiles)?;
    let profile = profile
        .into_view(&args.filter)
        .map_err(|e| Error::input(&source, format!("{e:#}")))?;
    if args.format == Format::Text && args.output.is_none() {
        format::print_text(&profile, &args.emit);
        return Ok(());
    }
    let bytes = args
        .format
        .render(&profile, &args.emit)
        .map_err(|e| Error::input(&source, format!("{e:#}")))?;
    match &args.output {
        Some(file) => {
            write_atomic(file, &bytes)?;
            status.done(
                "Wrote",
                format!("{} report to {}", args.format.name(), relative(file)),
            );
        }
        None if args.format.is_binary() && std::io::stdout().is_terminal() => {
            return Err(anyhow::anyhow!(
                "{} is binary; write it to a file with -o FILE",
                args.format.name()
            )
            .into());
        }
        None => {
            std::io::stdout()
                .write_all(&bytes)
                .context("cannot write to standard output")?;
        }
    }
    Ok(())
}

/// The profile in `paths`, or the profiles there merged into one (each refused, by its
/// file, if it does not merge with the first); and what to call it in a message.
fn read_merged(paths: &[PathBuf]) -> Result<(PathBuf, Profile), Error> {
    let read =
        |path: &PathBuf| Profile::read(path).map_err(|e| Error::input(path, format!("{e:#}")));
    let [first, rest @ ..] = paths else {
        unreachable!("clap requires a profile");
    };
    let profile = read(first)?;
    if rest.is_empty() {
        return Ok((first.clone(), profile));
    }
    let mut profiles = vec![profile];
    for path in rest {
        let other = read(path)?;
        profiles[0].merges_with(&other).map_err(|why| {
            Error::input(
                path,
                format!("does not merge with {}: {why}", relative(first)),
            )
        })?;
        profiles.push(other);
    }
    let source = PathBuf::from(format!("{} and {} more", relative(first), rest.len()));
    Ok((source, Profile::merge(&profiles)))
}

/// `annotate`: the source of some functions, each line's executed instructions beside it.
pub(super) fn annotate(args: AnnotateRequest) -> Result<(), Error> {
    use std::io::Write as _;
    let profile =
        Profile::read(&args.profile).map_err(|e| Error::input(&args.profile, format!("{e:#}")))?;
    let text = format::annotate::annotate(&profile, &args.selection, args.options)
        .map_err(|e| Error::input(&args.profile, format!("{e:#}")))?;
    let _ = write!(anstream::stdout(), "{text}");
    Ok(())
}

/// `diff`: two profiles compared; a regression past `--fail-above` is an error.
pub(super) fn diff(args: DiffRequest) -> Result<(), Error> {
    use std::io::Write as _;
    let read = |path: &Path| Profile::read(path).map_err(|e| Error::input(path, format!("{e:#}")));
    let view = |path: &Path| {
        read(path)?
            .into_view(&args.filter)
            .map_err(|e| Error::input(path, format!("{e:#}")))
    };
    let (base, new) = (view(&args.base)?, view(&args.new)?);
    let diff = Diff::of(&base, &new, args.metric)?;
    let text = diff.write(args.format, args.top, args.full_names);
    let _ = write!(anstream::stdout(), "{text}");
    match args.fail_above {
        Some(limit) if diff.change_percent > limit => Err(Error::Regression(format!(
            "{} grew by {:.2}% from {} to {}, above the {limit}% allowed",
            diff.metric.name(),
            diff.change_percent,
            relative(&args.base),
            relative(&args.new)
        ))),
        _ => Ok(()),
    }
}
