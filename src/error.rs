//! The errors that end a command, typed until `main` prints them, and the exit codes they
//! end with. The instrumenter's ([`InstrumentError`]) and the hosts' ([`HostError`]) are
//! defined here, at the bottom of the crate, so that every layer can return them and
//! [`Error`] can carry them up unchanged.

use std::path::PathBuf;

/// Exit code of a command that failed on bad input or for any other reason of its own.
pub const EXIT_FAILURE: i32 = 1;
/// Exit code when `diff --fail-above` found a regression.
pub const EXIT_REGRESSION: i32 = 3;
/// Exit code when the build or some tests failed: cargo's own.
pub const EXIT_BUILD_OR_TESTS_FAILED: i32 = 101;

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
    /// A module the instrumenter refused or could not rewrite.
    #[error("{}: {source}", path.display())]
    Instrument {
        /// The module's file.
        path: PathBuf,
        /// Why.
        source: InstrumentError,
    },
    /// A program that its host could not run, or whose profile it could not collect.
    #[error("{}: {source}", path.display())]
    Host {
        /// The program's file.
        path: PathBuf,
        /// Why.
        source: HostError,
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
    /// The process exit code for this error: [`EXIT_BUILD_OR_TESTS_FAILED`],
    /// [`EXIT_REGRESSION`], the program's own code, or [`EXIT_FAILURE`].
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::BuildFailed | Error::TestsFailed(_) => EXIT_BUILD_OR_TESTS_FAILED,
            Error::ProgramExit(code) => *code,
            Error::Regression(_) => EXIT_REGRESSION,
            Error::Input { .. }
            | Error::Instrument { .. }
            | Error::Host { .. }
            | Error::MissingTarget(_)
            | Error::Other(_) => EXIT_FAILURE,
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

    /// An [`Error::Instrument`] for the module at `path`.
    pub fn instrument(path: impl Into<PathBuf>, source: InstrumentError) -> Error {
        Error::Instrument {
            path: path.into(),
            source,
        }
    }

    /// An [`Error::Host`] for the program at `path`.
    pub fn host(path: impl Into<PathBuf>, source: HostError) -> Error {
        Error::Host {
            path: path.into(),
            source,
        }
    }
}

/// Why a module could not be instrumented.
#[derive(Debug, thiserror::Error)]
pub enum InstrumentError {
    /// Not a WebAssembly binary at all.
    #[error("not a WebAssembly module (no \\0asm header)")]
    NotWasm,
    /// Already carries the profiler.
    #[error("already instrumented by cargo-wasmprof")]
    AlreadyInstrumented,
    /// The module does not parse or validate.
    #[error("not a valid module: {0}")]
    Invalid(String),
    /// The module uses something the instrumenter cannot handle: the reason.
    #[error("{0}")]
    Unsupported(String),
    /// The rewritten module failed validation: a bug in the instrumenter.
    #[error("instrumentation produced an invalid module (a bug in cargo-wasmprof): {0}")]
    Produced(String),
}

/// Why a host could not run a program, or could not collect what its profiler left.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The host refused the program before it ran: it does not compile, link or
    /// instantiate, or is not a program this host runs (the reason, with its causes).
    #[error("{0}")]
    Refused(String),
    /// The program host itself is missing (`node`) or could not be started.
    #[error("{0}")]
    Unavailable(String),
    /// The program ended without leaving its profile.
    #[error(
        "the profile was lost: the program exited with code {code} before the profiler's \
         runtime could save it ({hint})"
    )]
    NoProfile {
        /// The program's exit code.
        code: i32,
        /// What may have kept the runtime from saving it.
        hint: &'static str,
    },
    /// The runner found no test to run in the binary (wasm-bindgen's: a library's unit
    /// tests without a `#[wasm_bindgen_test]`), so nothing ran and there is no profile.
    #[error("ran no test: the runner found none (nothing to profile)")]
    NoTests,
    /// What the program left cannot be read as a profile.
    #[error("cannot read its profile: {0}")]
    BadProfile(String),
}

impl HostError {
    /// A [`HostError::Refused`] with `error`'s whole chain of causes.
    pub fn refused(error: impl Into<anyhow::Error>) -> HostError {
        HostError::Refused(format!("{:#}", error.into()))
    }
}
