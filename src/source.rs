//! Source files as people and reports see them: a path as a person reads it, and the
//! crate or library a file belongs to, read from where cargo, rustc and the C toolchains
//! put their sources.

/// A source path as a person wants to read it: `a/../b` and `./` taken out, relative to
/// the working directory when under it, the standard library's
/// `/rustc/<commit>/library/...` as `library/...`, a crate from cargo's registry as
/// `<crate>-<version>/...`, and the C library of Emscripten or wasi-libc from its tree's
/// `system/lib/...` or `wasi-libc/...`.
pub fn short_path(path: &str) -> String {
    let path = normalize(path);
    if let Some(rest) = path.strip_prefix("/rustc/") {
        if let Some((_, lib)) = rest.split_once('/') {
            return lib.to_string();
        }
    }
    // Emscripten's C library and start-up, as the path inside its tree reads
    // (`system/lib/libc/...`), wherever it was installed or packaged.
    if let Some(at) = path.find("/system/lib/") {
        return path[at + 1..].to_string();
    }
    if let Some(at) = path.find("/wasi-libc/") {
        return path[at + 1..].to_string();
    }
    if let Some((_, rest)) = path.split_once("/registry/src/") {
        if let Some((_, in_crate)) = rest.split_once('/') {
            return in_crate.to_string();
        }
    }
    crate::fsutil::relative(std::path::Path::new(&path))
}

/// `path` with its `.` components and each `name/..` pair taken out, as text (the file
/// need not exist here: a profile is read away from its build).
fn normalize(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|&p| p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// The crate or library a source file belongs to, when its path says: the standard
/// library's crates (`/rustc/<commit>/library/<crate>/...`), a crate from cargo's registry
/// or rustc's vendored dependencies (`.../<crate>-<version>/...`), the C library of wasi-libc
/// or Emscripten (`libc`).
pub fn library_of(path: &str) -> Option<String> {
    let path = normalize(path);
    if let Some(rest) = path.strip_prefix("/rustc/") {
        let (_, lib) = rest.split_once("/library/")?;
        return lib.split('/').next().map(str::to_string);
    }
    if path.contains("wasi-libc/") || path.contains("/system/lib/") {
        return Some("libc".to_string());
    }
    let (_, rest) = path
        .split_once("/registry/src/")
        .map(|(a, rest)| (a, rest.split_once('/').map_or("", |(_, r)| r)))
        .or_else(|| path.split_once("/rust/deps/"))?;
    let dir = rest.split('/').next()?;
    // `<crate>-<version>`: the version starts at the last `-` followed by a digit.
    let at = dir
        .char_indices()
        .filter(|&(i, c)| c == '-' && dir[i + 1..].starts_with(|d: char| d.is_ascii_digit()))
        .map(|(i, _)| i)
        .next_back()?;
    Some(dir[..at].to_string())
}

/// Whether a source file is of the Rust standard library's `core`, `alloc` or `std`.
pub fn is_standard_library(path: &str) -> bool {
    matches!(library_of(path).as_deref(), Some("core" | "alloc" | "std"))
        && path.starts_with("/rustc/")
}

/// Whether a source file is the toolchain's own: the Rust standard library and what it
/// vendors (libtest's getopts), the C library and start-up code of wasi-libc or
/// Emscripten. A crate from the registry is not: it is the program's dependency.
pub fn is_toolchain_file(path: &str) -> bool {
    path.starts_with("/rustc/")
        || path.contains("/rust/deps/")
        || path.starts_with("wasisdk:")
        || path.contains("wasi-libc/")
        || path.contains("/system/lib/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalized() {
        assert_eq!(
            normalize("/a/tests/../src/lexical/math.rs"),
            "/a/src/lexical/math.rs"
        );
        assert_eq!(normalize("./src/./lib.rs"), "src/lib.rs");
        assert_eq!(normalize("../x/../y.rs"), "../y.rs");
        assert_eq!(
            short_path(
                "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde-1.0.1/src/de.rs"
            ),
            "serde-1.0.1/src/de.rs"
        );
        assert_eq!(
            short_path("/rustc/abc123/library/core/src/fmt/mod.rs"),
            "library/core/src/fmt/mod.rs"
        );
    }

    #[test]
    fn standard_library_paths_are_shortened() {
        assert_eq!(
            short_path(
                "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/ops/function.rs"
            ),
            "library/core/src/ops/function.rs"
        );
    }

    #[test]
    fn c_library_paths_read_from_their_trees() {
        assert_eq!(
            short_path("/build/emscripten-Q5Hj9W/emscripten-3.1.6~dfsg/system/lib/libc/musl/src/stdio/vfprintf.c"),
            "system/lib/libc/musl/src/stdio/vfprintf.c"
        );
        assert_eq!(
            short_path("/opt/wasi-sdk/src/wasi-libc/libc-top-half/musl/src/string/memcmp.c"),
            "wasi-libc/libc-top-half/musl/src/string/memcmp.c"
        );
    }

    #[test]
    fn libraries_are_read_from_paths() {
        let std = "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/fmt/mod.rs";
        assert_eq!(library_of(std).as_deref(), Some("core"));
        assert!(is_standard_library(std));
        assert!(is_toolchain_file(std));
        let registry =
            "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/regex-syntax-0.8.12/src/lib.rs";
        assert_eq!(library_of(registry).as_deref(), Some("regex-syntax"));
        assert!(!is_toolchain_file(registry));
        let vendored = "/rust/deps/getopts-0.2.24/src/lib.rs";
        assert_eq!(library_of(vendored).as_deref(), Some("getopts"));
        assert!(is_toolchain_file(vendored));
        let libc = "wasisdk://v30.0/src/wasi-libc/dlmalloc/src/malloc.c";
        assert_eq!(library_of(libc).as_deref(), Some("libc"));
        assert!(is_toolchain_file(libc));
        assert_eq!(library_of("/work/fixtures/calls/src/lib.rs"), None);
        assert!(!is_toolchain_file("/work/fixtures/calls/src/lib.rs"));
    }
}
