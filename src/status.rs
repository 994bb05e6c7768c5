//! cargo-style status lines on stderr: a right-aligned, bold, colored word, then the
//! message. Colors follow `--color`, NO_COLOR and whether stderr is a terminal.

use std::io::Write as _;
use std::sync::{Mutex, MutexGuard};

use anstyle::{AnsiColor, Style};

/// When to color the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorChoice {
    /// As anstream decides: a terminal without NO_COLOR.
    Auto,
    /// Styles always.
    Always,
    /// Styles never.
    Never,
}

/// Where status lines go, and whether they go at all.
#[derive(Debug, Clone, Copy)]
pub struct Status {
    quiet: bool,
    /// Which of how many items (test binaries) the current step works on, for spinners.
    item: Option<(usize, usize)>,
}

const GREEN: Style = AnsiColor::Green.on_default().bold();
const CYAN: Style = AnsiColor::Cyan.on_default().bold();
const RED: Style = AnsiColor::Red.on_default().bold();
const YELLOW: Style = AnsiColor::Yellow.on_default().bold();

impl Status {
    /// Sets the process-wide color choice and returns a status printer.
    pub fn new(color: ColorChoice, quiet: bool) -> Status {
        let choice = match color {
            ColorChoice::Auto => anstream::ColorChoice::Auto,
            ColorChoice::Always => anstream::ColorChoice::Always,
            ColorChoice::Never => anstream::ColorChoice::Never,
        };
        choice.write_global();
        Status { quiet, item: None }
    }

    /// The same printer, for item `n` (from 1) of `of`: spinners show `[n/of]`.
    pub fn item(self, n: usize, of: usize) -> Status {
        Status {
            item: Some((n, of)),
            ..self
        }
    }

    /// A green status line: `   Finished ...`.
    pub fn done(&self, word: &str, message: impl std::fmt::Display) {
        self.line(GREEN, word, message);
    }

    /// A cyan status line for a step that follows: `Instrumenting ...`.
    pub fn step(&self, word: &str, message: impl std::fmt::Display) {
        self.line(CYAN, word, message);
    }

    /// A spinner after a cyan word while a long step runs (`Instrumenting big.wasm`), on
    /// stderr when it is a terminal; it disappears when dropped. Hidden with `--quiet`, and
    /// while another step's spinner is shown (steps that run at once show the first's).
    pub fn spinner(&self, word: &str, message: impl std::fmt::Display) -> Spinner {
        use std::io::IsTerminal as _;
        let mut shown = shown_spinner();
        if self.quiet || !std::io::stderr().is_terminal() || shown.is_some() {
            return Spinner(None);
        }
        let colored =
            anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never;
        let word = if colored {
            format!("{CYAN}{word:>12}{CYAN:#}")
        } else {
            format!("{word:>12}")
        };
        // `{` and `}` in the word or message would read as template keys.
        let template = format!(
            "{} {{msg}} {{spinner}} {{elapsed}}",
            word.replace('{', "{{").replace('}', "}}")
        );
        let message = match self.item {
            Some((n, of)) => format!("{message} [{n}/{of}]"),
            None => message.to_string(),
        };
        let bar = indicatif::ProgressBar::new_spinner().with_message(message);
        if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
            bar.set_style(style);
        }
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        *shown = Some(bar.clone());
        Spinner(Some(bar))
    }

    fn line(&self, style: Style, word: &str, message: impl std::fmt::Display) {
        if !self.quiet {
            print_line(format_args!("{style}{word:>12}{style:#} {message}"));
        }
    }
}

/// The spinner on the terminal, if one is shown: one at a time.
static SHOWN: Mutex<Option<indicatif::ProgressBar>> = Mutex::new(None);

fn shown_spinner() -> MutexGuard<'static, Option<indicatif::ProgressBar>> {
    SHOWN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes `line` on stderr, above the spinner if one is shown.
fn print_line(line: std::fmt::Arguments) {
    let write = || {
        let _ = writeln!(anstream::stderr(), "{line}");
    };
    match &*shown_spinner() {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// A spinner shown while a step runs; see [`Status::spinner`].
pub struct Spinner(Option<indicatif::ProgressBar>);

impl Spinner {
    /// Shows `message` after the word from now on.
    pub fn set_message(&self, message: impl std::fmt::Display) {
        if let Some(bar) = &self.0 {
            bar.set_message(message.to_string());
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
            *shown_spinner() = None;
        }
    }
}

/// Prints `warning: message` on stderr, as cargo does.
pub fn warning(message: impl std::fmt::Display) {
    print_line(format_args!("{YELLOW}warning{YELLOW:#}: {message}"));
}

/// Prints `error: message` on stderr, as cargo does.
pub fn error(message: impl std::fmt::Display) {
    print_line(format_args!("{RED}error{RED:#}: {message}"));
}

/// Prints `note: message` on stderr, as cargo does.
pub fn note(message: impl std::fmt::Display) {
    print_line(format_args!("{CYAN}note{CYAN:#}: {message}"));
}
