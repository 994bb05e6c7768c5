//! Errors that end a command, each with its exit code.

use std::path::PathBuf;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file that is not what the command needs.
    #[error("{}: {message}", path.display())]
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The toolchain cannot build for this target.
    #[error(
        "the {0} target is not installed for this toolchain; \
         install it with `rustup target add {0}`"
    )]
    MissingTarget(&'static str),
    /// cargo failed; it has printed its own diagnostics.
    #[error("could not build the test binaries (cargo's messages are above)")]
    BuildFailed,
    /// Some test binaries failed; their profiles were still written.
    #[error("{0}")]
    TestsFailed(String),
    /// The profiled program exited with this non-zero code; nothing more to say.
    #[error("the program exited with code {0}")]
    ProgramExit(i32),
    /// `diff --fail-above`: the new profile costs more than allowed.
    #[error("{0}")]
    Regression(String),
    /// Anything else.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl Error {
    /// The process exit code for this error (cargo's 101 for build and test failures).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::BuildFailed | Error::TestsFailed(_) => 101,
            Error::ProgramExit(code) => *code,
            Error::Regression(_) => 3,
            Error::Input { .. } | Error::MissingTarget(_) | Error::Other(_) => 1,
        }
    }

    /// Whether the message is worth printing (a program's own exit code is not).
    pub fn is_silent(&self) -> bool {
        matches!(self, Error::ProgramExit(_))
    }

    /// An [`Error::Input`] for `path`.
    pub fn input(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Error {
        Error::Input {
            path: path.into(),
            message: message.to_string(),
        }
    }
}
