//! File helpers.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

/// Writes `bytes` to `path` through a temporary file in the same directory, renamed into
/// place, so that a reader never sees a half-written file and a failure leaves none.
/// The file gets the mode of the file it replaces, else 0666 less the umask.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut builder = tempfile::Builder::new();
    // A temporary file is private (0600); the file it becomes keeps the mode of the one it
    // replaces, or gets the usual 0666 less the umask.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path).map_or(0o666, |m| m.permissions().mode() & 0o7777);
        builder.permissions(std::fs::Permissions::from_mode(mode));
    }
    let mut file = builder
        .tempfile_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// `path` relative to the working directory when it lies below it, for messages.
pub fn relative(path: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(|p| p.display().to_string()))
        .unwrap_or_else(|| path.display().to_string())
}
