//! Every output format, checked against a known-answer profile and, where one is installed
//! here, loaded by its real consumer: `go tool pprof`, `callgrind_annotate`, headless
//! Chromium. Also `cargo wasmprof diff`.

#[path = "../common/mod.rs"]
mod common;

mod cpuprofile;
mod stacks;
mod tools;

use std::path::Path;
use std::process::Command;

use cargo_wasmprof::format::{EmitOptions, Format};
use cargo_wasmprof::instrument::Options;
use cargo_wasmprof::meta::Metric;
use cargo_wasmprof::profile::Profile;
use common::{calls, fib_calls, have, output, profile_module_with, wasmprof};

/// fib(N), and a table of two functions called through `call_indirect` 6 times.
fn program(n: u32) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
  (type $unary (func (param i32) (result i32)))
  (table 2 funcref)
  (elem (i32.const 0) $inc $dbl)
  (func $fib (param $n i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $fib (i32.sub (local.get $n) (i32.const 2)))))))
  (func $inc (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func $dbl (param i32) (result i32) (i32.mul (local.get 0) (i32.const 2)))
  (func $apply (param $n i32) (result i32) (local $i i32) (local $x i32)
    (local.set $x (i32.const 1))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $x (call_indirect (type $unary) (local.get $x) (i32.rem_u (local.get $i) (i32.const 2))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $x))
  (func $main
    (drop (call $fib (i32.const {n})))
    (drop (call $apply (i32.const 6))))
  (func (export "_start") (call $main)))"#
    ))
    .expect("valid WAT")
}

const N: u32 = 12;

fn profile(n: u32, metric: Metric) -> Profile {
    let options = Options {
        metric,
        ..Options::default()
    };
    profile_module_with(&program(n), &options).0
}

fn render(p: &Profile, format: Format) -> Vec<u8> {
    format.render(p, &EmitOptions::default()).expect("renders")
}

fn text(p: &Profile, format: Format) -> String {
    String::from_utf8(render(p, format)).expect("UTF-8")
}

/// Writes `p` to a file in `dir` and returns its path.
fn save(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The text report elides a long name in its deepest generic arguments (`--full-names`
/// keeps it whole, JSON always has it) and shows source paths normalized.
#[test]
fn text_reports_elide_long_names_and_normalize_paths() {
    let long = format!(
        "core::ptr::drop_in_place<alloc::vec::Vec<{}>>",
        "regex_syntax::hir::Hir<alloc::boxed::Box<u8>>, ".repeat(2)
    );
    let mut p = profile(N, Metric::Instructions);
    rename(&mut p, "fib", &long);
    let fib = p.functions.iter_mut().find(|f| f.name == long).unwrap();
    fib.file = Some("crates/x/tests/../src/lib.rs".into());
    fib.line = Some(3);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.json");
    p.write(&file).unwrap();
    let report = |extra: &[&str]| {
        let out = output(wasmprof().arg("report").arg(&file).args(extra));
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let short = report(&[]);
    assert!(!short.contains(&long));
    assert!(
        short.contains("core::ptr::drop_in_place<alloc::vec::Vec<regex_syntax::hir::Hir<…>, "),
        "{short}"
    );
    assert!(short.contains("(crates/x/src/lib.rs:3)"), "{short}");
    assert!(!short.contains("tests/.."));
    let full = report(&["--full-names"]);
    assert!(full.contains(&long));
    let json = std::fs::read_to_string(&file).unwrap();
    assert!(json.contains(&long.replace('"', "\\\"")));
}

/// Chromium without a window, a sandbox or the network.
fn headless_chromium() -> Command {
    let mut chromium = Command::new("chromium");
    chromium.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
    ]);
    chromium
}

/// `report --format` writes every format to a file or standard output, the same bytes.
#[test]
fn report_writes_each_format() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(N, Metric::Instructions);
    let json = dir.path().join("p.json");
    p.write(&json).unwrap();
    for (format, name) in [
        ("text", "p.txt"),
        ("folded", "p.folded"),
        ("callgrind", "callgrind.out.p"),
        ("speedscope", "p.speedscope.json"),
        ("firefox", "p.firefox.json"),
        ("flamegraph", "p.svg"),
        ("html", "p.html"),
        ("pprof", "p.pb.gz"),
        ("json", "p2.json"),
    ] {
        let out = output(
            wasmprof()
                .args(["wasmprof", "report", "--format", format, "-o", name])
                .arg(&json)
                .current_dir(dir.path()),
        );
        assert!(out.status.success(), "{format}");
        assert!(String::from_utf8_lossy(&out.stderr)
            .contains(&format!("Wrote {format} report to {name}")));
        let written = std::fs::read(dir.path().join(name)).unwrap();
        let stdout = output(
            wasmprof()
                .args(["wasmprof", "report", "--format", format])
                .arg(&json),
        );
        assert!(stdout.status.success());
        assert_eq!(
            stdout.stdout, written,
            "{format}: the file and stdout agree"
        );
    }
    let text = std::fs::read_to_string(dir.path().join("p.txt")).unwrap();
    assert!(
        text.contains("Flat profile") && !text.contains('\x1b'),
        "plain text"
    );
    // The json view is the profile itself.
    assert_eq!(Profile::read(&dir.path().join("p2.json")).unwrap(), p);
}

/// `run --format` writes the views beside the profile and says where (a dotted module name
/// keeps its dots).
#[test]
fn run_writes_the_requested_views() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prog.v2.wasm"), program(N)).unwrap();
    let out = output(
        wasmprof()
            .args([
                "wasmprof",
                "run",
                "--metric",
                "instructions",
                "--format",
                "text,html,folded",
                "prog.v2.wasm",
            ])
            .current_dir(dir.path()),
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Flat profile"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Wrote html report to prog.v2.html"),
        "{stderr}"
    );
    assert!(stderr.contains("Wrote folded report to prog.v2.folded"));
    assert!(dir.path().join("prog.v2.html").exists());
    assert!(dir.path().join("prog.v2.wasmprof.json").exists());
}

/// `diff`: fib(12) against fib(14) in instructions; `--fail-above` gates on the total.
#[test]
fn diff_ranks_changes_and_gates_on_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    let new = dir.path().join("new.json");
    let (pb, pn) = (
        profile(N, Metric::Instructions),
        profile(N + 2, Metric::Instructions),
    );
    pb.write(&base).unwrap();
    pn.write(&new).unwrap();
    let out = output(
        wasmprof()
            .args(["wasmprof", "diff"])
            .arg(&base)
            .arg(&new)
            .args(["--format", "json"]),
    );
    assert!(out.status.success());
    let diff: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(diff["metric"], "instructions");
    let first = &diff["functions"][0];
    assert_eq!(first["name"], "fib", "the largest change first");
    assert_eq!(first["base_calls"], fib_calls(N));
    assert_eq!(first["new_calls"], fib_calls(N + 2));
    let change = diff["change_percent"].as_f64().unwrap();
    assert!(
        change > 100.0,
        "fib(14) costs more than twice fib(12): {change}"
    );

    let gated = output(
        wasmprof()
            .args(["wasmprof", "diff", "--fail-above", "5"])
            .arg(&base)
            .arg(&new),
    );
    assert_eq!(gated.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&gated.stderr);
    assert!(stderr.contains("instructions grew by"), "{stderr}");
    assert!(String::from_utf8_lossy(&gated.stdout).contains("fib"));

    let same = output(
        wasmprof()
            .args(["wasmprof", "diff", "--fail-above", "0"])
            .arg(&base)
            .arg(&base),
    );
    assert!(same.status.success());
    assert!(String::from_utf8_lossy(&same.stdout).contains("No function changed."));

    // For a pull request's comment: Markdown, the largest regression first.
    let md = output(
        wasmprof()
            .args(["wasmprof", "diff", "--format", "markdown"])
            .arg(&base)
            .arg(&new),
    );
    assert!(md.status.success());
    let md = String::from_utf8_lossy(&md.stdout).into_owned();
    assert!(md.starts_with("**self instructions: "), "{md}");
    let first_row = md.lines().find(|l| l.starts_with("| `")).unwrap();
    assert!(
        first_row.starts_with("| `fib` |")
            && first_row.contains(&format!("{} → {}", fib_calls(N), fib_calls(N + 2))),
        "{md}"
    );

    // Profiles of different programs: one line that says so.
    let mut other = pb.clone();
    let names: Vec<String> = other.functions.iter().map(|f| f.name.clone()).collect();
    for name in names {
        rename(&mut other, &name, &format!("other::{name}"));
    }
    let other_file = dir.path().join("other.json");
    other.write(&other_file).unwrap();
    let refused = output(
        wasmprof()
            .args(["wasmprof", "diff"])
            .arg(&base)
            .arg(&other_file),
    );
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no function in common"), "{stderr}");

    // Different metrics compare on calls, or fail with a reason when asked for more.
    let timed = dir.path().join("timed.json");
    profile(N, Metric::ExactTime).write(&timed).unwrap();
    let mixed = output(wasmprof().args(["wasmprof", "diff"]).arg(&base).arg(&timed));
    assert!(mixed.status.success());
    assert!(String::from_utf8_lossy(&mixed.stdout).contains("Total calls"));
    let refused = output(
        wasmprof()
            .args(["wasmprof", "diff", "--metric", "instructions"])
            .arg(&base)
            .arg(&timed),
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("NEW measured exact-time"));
}

/// Renames function `from` to `to` throughout `p`.
fn rename(p: &mut Profile, from: &str, to: &str) {
    for f in p.functions.iter_mut().filter(|f| f.name == from) {
        f.name = to.into();
    }
    for a in &mut p.arcs {
        for end in [&mut a.caller, &mut a.callee] {
            if end == from {
                *end = to.into();
            }
        }
    }
}
