//! The Emscripten toolchain as cargo-wasmprof uses it: its drivers (`emcc`, `em++`) and how
//! they are found, and the environment that makes cargo link the wasm32-unknown-emscripten
//! target through `wasmprof-emcc`, which instruments each .wasm as it is linked (each test
//! binary, a .js with the .wasm beside it, then runs under node: the `host` module).
//!
//! A linker the user configured for the target (in `CARGO_TARGET_..._LINKER` or a cargo
//! config file) becomes the driver `wasmprof-emcc` wraps.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::error::Error;
use crate::meta::Metric;

/// The environment variable that chooses the metric of `wasmprof-emcc`'s instrumentation
/// (`calls`, `time`, `exact-time`, `instructions`; `time` without it).
pub const METRIC_VAR: &str = "WASMPROF_METRIC";

/// The environment variable that has `wasmprof-emcc` record the program's allocations
/// (`--allocations`): set and neither empty nor `0`.
pub const ALLOCATIONS_VAR: &str = "WASMPROF_ALLOCATIONS";

/// The environment variable that has `wasmprof-emcc` count calls per calling context
/// (`--contexts`): set and neither empty nor `0`.
pub const CONTEXTS_VAR: &str = "WASMPROF_CONTEXTS";

/// The environment variable that has `wasmprof-emcc` make room for as many live
/// allocations (`--max-live-allocations`).
pub const MAX_LIVE_VAR: &str = "WASMPROF_MAX_LIVE_ALLOCATIONS";

/// The environment variable that tells `wasmprof-emcc` that rustc links (`cargo wasmprof`
/// set it): a `-g0` is then rustc's, for a crate built without debuginfo (a doc test), not
/// the user's choice, and the link keeps the DWARF anyway.
pub const RUSTC_LINKS_VAR: &str = "WASMPROF_RUSTC_LINKS";

/// Whether the switch `var` ([`ALLOCATIONS_VAR`], [`CONTEXTS_VAR`]) is on: set and neither
/// empty nor `0`.
pub fn switch_on(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The variable through which cargo takes the target's linker.
pub const LINKER_VAR: &str = "CARGO_TARGET_WASM32_UNKNOWN_EMSCRIPTEN_LINKER";
/// The target's name in cargo's config files (`[target.<triple>] linker = ...`).
const TRIPLE: &str = "wasm32-unknown-emscripten";

/// The environment that makes cargo link through `wasmprof-emcc` with the profiler's
/// runtime, instrumenting for `metric` (counting calls per context with `contexts`,
/// recording the allocations with `allocations`, with room for `max_live` live ones where
/// given), and wrap the user's linker if there is one.
pub fn linker_env(
    metric: Metric,
    contexts: bool,
    allocations: bool,
    max_live: Option<u32>,
) -> Result<Vec<(&'static str, OsString)>, Error> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let switch = |on: bool| OsString::from(if on { "1" } else { "" });
    let mut env = vec![
        (LINKER_VAR, wrapper()?.into_os_string()),
        (RUSTC_LINKS_VAR, "1".into()),
        (METRIC_VAR, metric.name().into()),
        (CONTEXTS_VAR, switch(contexts)),
        (ALLOCATIONS_VAR, switch(allocations)),
        (
            MAX_LIVE_VAR,
            max_live.map_or(String::new(), |n| n.to_string()).into(),
        ),
    ];
    match user_linker(&cwd)? {
        Some(linker) => env.push((Driver::Cc.override_var(), linker.into_os_string())),
        None => {
            Driver::Cc.find()?; // say now, not in the middle of cargo's output
        }
    }
    Ok(env)
}

/// The `wasmprof-emcc` installed beside this program, else the one on PATH.
fn wrapper() -> Result<PathBuf, Error> {
    let name = format!("wasmprof-emcc{}", std::env::consts::EXE_SUFFIX);
    std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name(&name))
        .filter(|path| path.is_file())
        .or_else(|| which::which(&name).ok())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "cannot find {name}, which links the {TRIPLE} target; it is installed with \
                 cargo-wasmprof (`cargo install cargo-wasmprof`)"
            )
            .into()
        })
}

/// The linker the user set for the target: [`LINKER_VAR`], else the nearest cargo config
/// file that names one (from `cwd` up, then `$CARGO_HOME`), as cargo itself looks. A
/// wasmprof wrapper named there is ignored (it would wrap itself).
fn user_linker(cwd: &Path) -> Result<Option<PathBuf>, Error> {
    let linker = match std::env::var_os(LINKER_VAR).filter(|v| !v.is_empty()) {
        Some(value) => Some(PathBuf::from(value)),
        None => configured_linker(cwd)?,
    };
    Ok(linker.filter(|path| {
        !path
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with("wasmprof-em"))
    }))
}

/// `target.wasm32-unknown-emscripten.linker` from the first cargo config file that sets
/// it. A value with a `/` is relative to the directory that holds the `.cargo` folder; a
/// bare name is looked up on PATH by whoever runs it.
fn configured_linker(cwd: &Path) -> Result<Option<PathBuf>, Error> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")));
    let dirs = cwd
        .ancestors()
        .map(|dir| dir.join(".cargo"))
        .chain(cargo_home);
    for dir in dirs {
        for file in [dir.join("config.toml"), dir.join("config")] {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let table: toml::Table = text
                .parse()
                .map_err(|e| Error::input(&file, format!("not valid TOML: {e}")))?;
            let linker = table
                .get("target")
                .and_then(|t| t.get(TRIPLE))
                .and_then(|t| t.get("linker"))
                .and_then(toml::Value::as_str);
            if let Some(linker) = linker {
                let base = dir.parent().unwrap_or(&dir);
                return Ok(Some(if linker.contains('/') {
                    base.join(linker)
                } else {
                    PathBuf::from(linker)
                }));
            }
        }
    }
    Ok(None)
}

/// Which of Emscripten's drivers a wrapper stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `emcc`, the C driver.
    Cc,
    /// `em++`, the C++ driver.
    Cxx,
}

impl Driver {
    /// The driver a wrapper called `argv0` stands for: C++ when the name ends in `++`,
    /// `xx` or `pp` (`wasmprof-em++`, `wasmprof-emxx`), else C.
    pub fn from_program_name(argv0: &OsStr) -> Driver {
        let name = Path::new(argv0)
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if ["++", "xx", "pp"].iter().any(|end| name.ends_with(end)) {
            Driver::Cxx
        } else {
            Driver::Cc
        }
    }

    /// The real driver's name.
    pub fn real_name(self) -> &'static str {
        match self {
            Driver::Cc => "emcc",
            Driver::Cxx => "em++",
        }
    }

    /// The environment variable that names the real driver, overriding the search.
    pub fn override_var(self) -> &'static str {
        match self {
            Driver::Cc => "WASMPROF_EMCC",
            Driver::Cxx => "WASMPROF_EMXX",
        }
    }

    /// The real driver: the override variable's value, else the first on PATH.
    pub fn find(self) -> Result<PathBuf, Error> {
        if let Some(path) = std::env::var_os(self.override_var()).filter(|p| !p.is_empty()) {
            return Ok(PathBuf::from(path));
        }
        which::which(self.real_name()).map_err(|_| {
            anyhow::anyhow!(
                "cannot find `{}` on PATH; install Emscripten, or name the driver in {}",
                self.real_name(),
                self.override_var()
            )
            .into()
        })
    }
}
