//! cargo-style status lines on stderr: a right-aligned, bold, colored word, then the
//! message. Colors follow `--color`, NO_COLOR and whether stderr is a terminal.

use std::io::Write as _;

use anstyle::{AnsiColor, Style};

use crate::cli::ColorChoice;

/// Where status lines go, and whether they go at all.
#[derive(Debug, Clone, Copy)]
pub struct Status {
    quiet: bool,
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
        Status { quiet }
    }

    /// A green status line: `   Finished ...`.
    pub fn done(&self, word: &str, message: impl std::fmt::Display) {
        self.line(GREEN, word, message);
    }

    /// A cyan status line for a step that follows: `Instrumenting ...`.
    pub fn step(&self, word: &str, message: impl std::fmt::Display) {
        self.line(CYAN, word, message);
    }

    fn line(&self, style: Style, word: &str, message: impl std::fmt::Display) {
        if !self.quiet {
            let _ = writeln!(anstream::stderr(), "{style}{word:>12}{style:#} {message}");
        }
    }
}

/// Prints `warning: message` on stderr, as cargo does.
pub fn warning(message: impl std::fmt::Display) {
    let _ = writeln!(anstream::stderr(), "{YELLOW}warning{YELLOW:#}: {message}");
}

/// Prints `error: message` on stderr, as cargo does.
pub fn error(message: impl std::fmt::Display) {
    let _ = writeln!(anstream::stderr(), "{RED}error{RED:#}: {message}");
}
