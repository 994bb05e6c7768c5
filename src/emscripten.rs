//! The wasm32-unknown-emscripten target: cargo links its binaries through `wasmprof-emcc`,
//! which instruments each .wasm as it is linked, and each test binary (a .js with the .wasm
//! beside it) runs under node, where the JS runtime saves its profile.
//!
//! A linker the user configured for the target (in `CARGO_TARGET_..._LINKER` or a cargo
//! config file) becomes the driver `wasmprof-emcc` wraps.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

use crate::emcc::{self, Driver};
use crate::error::Error;
use crate::fsutil::relative;
use crate::meta::Metric;
use crate::profile::Profile;

/// The variable through which cargo takes the target's linker.
pub const LINKER_VAR: &str = "CARGO_TARGET_WASM32_UNKNOWN_EMSCRIPTEN_LINKER";
/// The target's name in cargo's config files (`[target.<triple>] linker = ...`).
const TRIPLE: &str = "wasm32-unknown-emscripten";

/// The environment that makes cargo link through `wasmprof-emcc` with the profiler's
/// runtime, instrumenting for `metric`, and wrap the user's linker if there is one.
pub fn linker_env(metric: Metric) -> Result<Vec<(&'static str, OsString)>, Error> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let mut env = vec![
        (LINKER_VAR, wrapper()?.into_os_string()),
        (emcc::METRIC_VAR, metric.name().into()),
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

/// Whether `path` names a JS program (what Emscripten links for node), not a module.
pub fn is_program(path: &Path) -> bool {
    path.extension()
        .is_some_and(|ext| ext == "js" || ext == "mjs" || ext == "cjs")
}

/// Runs the program `js` (linked through `wasmprof-emcc`) under node with `args`, in `cwd`,
/// and returns its profile and exit code. The profile exists whatever way the program
/// ended, as long as it got as far as loading its module.
pub fn profile_run(js: &Path, args: &[String], cwd: &Path) -> Result<(Profile, i32), Error> {
    let node = which::which("node").map_err(|_| {
        anyhow::anyhow!("cannot find `node` on PATH, which runs the {TRIPLE} target's programs")
    })?;
    let dump = tempfile::Builder::new()
        .prefix("wasmprof-dump-")
        .suffix(".json")
        .tempfile()
        .context("cannot create a temporary file for the profile")?;
    let status = Command::new(&node)
        .arg(js)
        .args(args)
        .current_dir(cwd)
        .env("WASMPROF_OUT", dump.path())
        .status()
        .with_context(|| format!("cannot run {}", node.display()))?;
    let code = status.code().unwrap_or(1);
    let empty = std::fs::metadata(dump.path()).map_or(true, |m| m.len() == 0);
    if empty {
        return Err(Error::input(
            js,
            format!("exited with code {code} before it saved a profile (was it linked by wasmprof-emcc?)"),
        ));
    }
    let mut profile = Profile::read(dump.path())
        .map_err(|e| Error::input(js, format!("cannot read its profile: {e:#}")))?;
    profile.modules = vec![relative(js)];
    for run in &mut profile.runs {
        run.module = relative(js);
        run.exit_code = code; // node's own: after a trap the runtime can only guess
    }
    Ok((profile, code))
}
