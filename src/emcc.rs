//! `wasmprof-emcc` and `wasmprof-emxx`: compiler wrappers that a build uses as CC and CXX.
//!
//! Every step goes to the real `emcc` (or `em++`) with the user's arguments unchanged, plus:
//! - compile steps get `-g` when the user chose no `-g` level of their own (clang's code does
//!   not change with `-g`; objects grow), so that DWARF can name functions and lines;
//! - a final link gets `-g` on the same terms (emcc then keeps the DWARF in the .wasm; at
//!   `-O2` and above it also runs fewer binaryen passes, which can cost a few percent of
//!   speed), and always when rustc links for `cargo wasmprof`: its `-g0` for a doc test,
//!   which has no debuginfo of its own, is not the user's choice;
//!   `--profiling-funcs` (names even under `-g0`), and for JS outputs the runtime as
//!   `--pre-js`. After the link the .wasm is instrumented in place and the original kept
//!   beside it as `NAME.orig.wasm`.
//!
//! `WASMPROF_METRIC` chooses what is measured besides calls, as `--metric` does.
//!
//! JS outputs (.js, .mjs, .html, no extension) are instrumented for a JS host
//! ([`crate::instrument::Options::for_js_host`]): the profiler's state in a memory of its own,
//! with the variant whose state is in a state module carried for node 20, which refuses a
//! second memory; the runtime chooses when it starts. A bare .wasm output (standalone)
//! keeps the state in a memory of its own, for wasmtime.

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

use crate::emscripten::{
    switch_on, Driver, ALLOCATIONS_VAR, CONTEXTS_VAR, MAX_LIVE_VAR, METRIC_VAR, RUSTC_LINKS_VAR,
};
use crate::error::Error;
use crate::fsutil::relative;
use crate::instrument::{instrument_in_place, original_path, Options};
use crate::meta::{Metric, Sampler};
use crate::status::{ColorChoice, Status};

/// What a command line asks of emcc, as far as the wrapper cares.
#[derive(Debug, PartialEq, Eq)]
pub struct Step {
    /// The output of a final link, when the step is one.
    pub link_output: Option<PathBuf>,
    /// Whether the user chose a `-g` level.
    pub chose_debug: bool,
    /// Whether the module is inlined into the JS (`-sSINGLE_FILE`): nothing to instrument.
    pub single_file: bool,
    /// Whether the program starts threads (`-pthread`, `-sUSE_PTHREADS`).
    pub pthreads: bool,
}

/// Flags after which emcc stops before linking, or does not build at all.
const NO_LINK: &[&str] = &[
    "-c",
    "-S",
    "-E",
    "-M",
    "-MM",
    "-fsyntax-only",
    "-r",
    "--version",
    "--help",
    "-dumpmachine",
    "-dumpversion",
    "--cflags",
    "--show-ports",
    "--clear-cache",
    "--clear-ports",
    "-###",
];

impl Step {
    /// Classifies `args` (response files `@file` are read for this; what emcc gets is
    /// unchanged). The default output of a link is `a.out.js`. A step taken for a link may
    /// still write no module (`emcc -v`); the wrapper instruments only a module the step wrote.
    pub fn classify(args: &[OsString]) -> Step {
        let args = expand_response_files(args);
        let mut output = None;
        let mut links = true;
        let mut chose_debug = false;
        let mut single_file = false;
        let mut pthreads = false;
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            if arg == "-o" {
                output = iter.next().map(PathBuf::from);
            } else if let Some(path) = arg.strip_prefix("-o").filter(|p| !p.is_empty()) {
                output = Some(PathBuf::from(path));
            } else if NO_LINK.contains(&arg.as_str()) || arg.starts_with("-print") {
                links = false;
            } else if arg.contains("SINGLE_FILE") && !arg.ends_with("=0") {
                single_file = true;
            } else if arg.starts_with("-g") {
                chose_debug = true;
            } else if arg == "-pthread" || (arg.contains("USE_PTHREADS") && !arg.ends_with("=0")) {
                pthreads = true;
            }
        }
        let link_output = output.unwrap_or_else(|| PathBuf::from("a.out.js"));
        let linked = matches!(
            Output::of(&link_output),
            Some(Output::Js { .. } | Output::Wasm)
        );
        Step {
            link_output: (links && linked && !single_file).then_some(link_output),
            chose_debug,
            single_file,
            pthreads,
        }
    }
}

/// The arguments with every `@file` replaced by the file's words (quotes and backslashes
/// as GCC reads them). An unreadable file stays as it is: emcc will say what is wrong.
fn expand_response_files(args: &[OsString]) -> Vec<String> {
    let mut out = Vec::new();
    for arg in args {
        let arg = arg.to_string_lossy();
        match arg
            .strip_prefix('@')
            .and_then(|file| std::fs::read_to_string(file).ok())
        {
            Some(text) => out.extend(split_words(&text)),
            None => out.push(arg.into_owned()),
        }
    }
    out
}

/// Splits a response file into words: whitespace separates, quotes group, `\` escapes.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (c, quote) {
            ('\\', _) => word.get_or_insert_with(String::new).extend(chars.next()),
            (q, None) if q == '"' || q == '\'' => {
                quote = Some(q);
                word.get_or_insert_with(String::new);
            }
            (q, Some(open)) if q == open => quote = None,
            (c, None) if c.is_whitespace() => words.extend(word.take()),
            (c, _) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// What a final link writes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Output {
    /// JS glue (or an HTML page with it) beside a .wasm file.
    Js {
        /// The .wasm file the glue loads.
        wasm: PathBuf,
    },
    /// A standalone .wasm.
    Wasm,
}

impl Output {
    /// What emcc writes for output path `path`, when it is a final link's output.
    fn of(path: &Path) -> Option<Output> {
        let ext = path.extension().and_then(OsStr::to_str);
        match ext {
            Some("wasm") => Some(Output::Wasm),
            Some("js" | "mjs" | "html" | "htm") | None => Some(Output::Js {
                wasm: path.with_extension("wasm"),
            }),
            Some(_) => None,
        }
    }
}

/// Runs the wrapper for `driver` with the user's `args` (without `argv[0]`); returns the exit
/// code to leave with.
pub(crate) fn run(driver: Driver, args: &[OsString]) -> Result<i32, Error> {
    let real = driver.find()?;
    let step = Step::classify(args);
    let mut command = Command::new(&real);
    command.args(args);
    // After the arguments, so that it overrides rustc's `-g0` (the last `-g` level counts).
    let rustc_links = std::env::var_os(RUSTC_LINKS_VAR).is_some_and(|v| v == "1");
    if !step.chose_debug || (rustc_links && step.link_output.is_some()) {
        command.arg("-g");
    }
    if step.single_file {
        crate::status::warning(
            "-sSINGLE_FILE inlines the module into the JS, where wasmprof cannot instrument it; \
             linking without the profiler",
        );
    }
    let Some(output) = step.link_output.clone() else {
        return exit_code(&real, command);
    };
    command.arg("--profiling-funcs");
    let kind = Output::of(&output).expect("a link output has a kind");
    // The runtime knows the .wasm by name and the metric; it lives as long as the link.
    let metric = metric_from_env()?;
    // Threads keep the word sampler (`instrument::Options` says why): the runtime starts its
    // worker early.
    let sampler = match step.pthreads {
        true => Sampler::Word,
        false => Sampler::V8,
    };
    let runtime = match &kind {
        Output::Js { wasm } => Some(runtime_file(wasm, metric, sampler)?),
        Output::Wasm => None,
    };
    if let Some(runtime) = &runtime {
        command.arg("--pre-js").arg(runtime.path());
    }
    let started = std::time::SystemTime::now();
    let code = exit_code(&real, command)?;
    let (wasm, for_js) = match kind {
        Output::Js { wasm } => (wasm, true),
        Output::Wasm => (output, false),
    };
    // What this step wrote: a module modified since it started (with room for file systems
    // that keep whole seconds) that does not carry the profiler yet.
    let recent = started - std::time::Duration::from_secs(2);
    let written = std::fs::metadata(&wasm)
        .and_then(|m| m.modified())
        .is_ok_and(|modified| modified >= recent);
    if code == 0 && written {
        let options = Options {
            metric,
            contexts: switch_on(CONTEXTS_VAR),
            allocations: switch_on(ALLOCATIONS_VAR),
            max_live_allocations: max_live_from_env()?,
            ..Options::default()
        };
        let options = if for_js {
            options.for_js_host()
        } else {
            options
        };
        if let Some(meta) = instrument_in_place(&wasm, &options)? {
            Status::new(ColorChoice::Auto, false).done(
                "Instrumented",
                format!(
                    "{} ({} functions; original kept as {})",
                    relative(&wasm),
                    meta.functions.len(),
                    relative(&original_path(&wasm))
                ),
            );
        }
    }
    Ok(code)
}

/// Runs the real driver, with our stdio, and returns its exit code.
fn exit_code(real: &Path, mut command: Command) -> Result<i32, Error> {
    let status = command
        .status()
        .with_context(|| format!("cannot run {}", real.display()))?;
    Ok(status.code().unwrap_or(1))
}

/// Writes the runtime for the module `wasm`, instrumented for `metric` and `sampler`, to a
/// temporary file.
fn runtime_file(
    wasm: &Path,
    metric: Metric,
    sampler: Sampler,
) -> Result<tempfile::NamedTempFile, Error> {
    let name = wasm
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = crate::js_runtime::for_emscripten(&name, metric, sampler);
    let mut file = tempfile::Builder::new()
        .prefix("wasmprof-runtime-")
        .suffix(".js")
        .tempfile()
        .context("cannot write the profiler's runtime to a temporary file")?;
    file.write_all(text.as_bytes())
        .context("cannot write the profiler's runtime to a temporary file")?;
    Ok(file)
}

/// The metric named by [`METRIC_VAR`], else the default one (the sampled time), as for
/// `cargo wasmprof` (tested under node and in a cross-origin isolated page; a page that is
/// not isolated has no worker to sample it, and the runtime says so on its console).
fn metric_from_env() -> Result<Metric, Error> {
    match std::env::var(METRIC_VAR) {
        Ok(name) if !name.is_empty() => {
            Metric::from_name(&name.to_ascii_lowercase()).ok_or_else(|| {
                anyhow::anyhow!(
                    "{METRIC_VAR}={name}: expected calls, time, exact-time or instructions"
                )
                .into()
            })
        }
        _ => Ok(Metric::default()),
    }
}

/// The live allocations named by [`MAX_LIVE_VAR`], else the default.
fn max_live_from_env() -> Result<u32, Error> {
    use crate::layout::MAX_LIVE;
    match std::env::var(MAX_LIVE_VAR) {
        Ok(n) if !n.is_empty() => n
            .parse()
            .ok()
            .filter(|n| (1..=MAX_LIVE).contains(n))
            .ok_or_else(|| {
                anyhow::anyhow!("{MAX_LIVE_VAR}={n}: expected a number from 1 to {MAX_LIVE}").into()
            }),
        _ => Ok(MAX_LIVE),
    }
}

/// The wrappers' `main`: the driver chosen by the program's name.
pub fn main() -> ! {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let args: Vec<OsString> = args.collect();
    let driver = Driver::from_program_name(&argv0);
    let code = run(driver, &args).unwrap_or_else(|error| {
        crate::status::error(format!("wasmprof-{}: {error}", driver.real_name()));
        error.exit_code()
    });
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(args: &[&str]) -> Step {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        Step::classify(&args)
    }

    #[test]
    fn compile_steps_are_not_links() {
        for args in [
            &["-c", "a.c", "-o", "a.o"][..],
            &["-E", "a.c"],
            &["-M", "a.c"],
            &["--version"],
            &["-print-search-dirs"],
        ] {
            assert_eq!(step(args).link_output, None, "{args:?}");
        }
    }

    #[test]
    fn links_and_their_outputs() {
        assert_eq!(
            step(&["a.o", "b.o", "-o", "out/prog.js"]).link_output,
            Some(PathBuf::from("out/prog.js"))
        );
        assert_eq!(
            step(&["a.o", "-oprog.html"]).link_output,
            Some(PathBuf::from("prog.html"))
        );
        assert_eq!(step(&["a.o"]).link_output, Some(PathBuf::from("a.out.js")));
        assert_eq!(step(&["a.o", "-o", "liba.a"]).link_output, None);
        assert_eq!(
            Output::of(Path::new("out/prog.js")),
            Some(Output::Js {
                wasm: PathBuf::from("out/prog.wasm")
            })
        );
        assert_eq!(Output::of(Path::new("prog.wasm")), Some(Output::Wasm));
    }

    #[test]
    fn a_chosen_debug_level_is_kept() {
        assert!(step(&["-g0", "-c", "a.c"]).chose_debug);
        assert!(step(&["-gline-tables-only", "a.o"]).chose_debug);
        assert!(!step(&["-O2", "-c", "a.c"]).chose_debug);
    }

    #[test]
    fn response_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let rsp = dir.path().join("args.rsp");
        std::fs::write(&rsp, "-c \"my file.c\" -o 'a b.o'\n").unwrap();
        let at = format!("@{}", rsp.display());
        assert_eq!(step(&[&at]).link_output, None);
        assert_eq!(
            split_words("-c \"my file.c\" -o 'a b.o' x\\ y"),
            ["-c", "my file.c", "-o", "a b.o", "x y"]
        );
    }

    #[test]
    fn the_driver_follows_the_program_name() {
        assert_eq!(
            Driver::from_program_name(OsStr::new("/usr/bin/wasmprof-em++")),
            Driver::Cxx
        );
        assert_eq!(
            Driver::from_program_name(OsStr::new("wasmprof-emxx")),
            Driver::Cxx
        );
        assert_eq!(
            Driver::from_program_name(OsStr::new("wasmprof-emcc")),
            Driver::Cc
        );
    }
}
