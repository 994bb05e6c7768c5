//! Every output format, checked against a known-answer profile and, where one is installed
//! here, loaded by its real consumer: `go tool pprof`, `callgrind_annotate`, headless
//! Chromium. Also `cargo wasmprof diff`.

mod common;

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

#[test]
fn folded_stacks_add_up_to_the_profile() {
    let p = profile(N, Metric::Instructions);
    let folded = text(&p, Format::Folded);
    let mut sum = 0u64;
    let mut fib_self = 0u64;
    let mut deepest_fib = 0;
    for line in folded.lines() {
        let (stack, weight) = line.rsplit_once(' ').expect("stack weight");
        let weight: u64 = weight.parse().expect("a number");
        let frames: Vec<&str> = stack.split(';').collect();
        assert_eq!(frames[0], "_start", "every stack starts at the export");
        sum += weight;
        if frames.last() == Some(&"fib") {
            fib_self += weight;
        }
        deepest_fib = deepest_fib.max(frames.iter().filter(|f| **f == "fib").count());
    }
    let total: u64 = p
        .functions
        .iter()
        .map(|f| f.cost.self_instructions.unwrap_or(0))
        .sum();
    assert_eq!(sum, total, "the stacks hold every instruction once");
    let fib = p.function_named("fib").unwrap();
    assert_eq!(fib_self, fib.cost.self_instructions.unwrap());
    // fib(12) -> fib(11) -> ... -> fib(1): 12 frames.
    assert_eq!(deepest_fib, N as usize);
}

#[test]
fn stack_views_refuse_the_calls_metric_with_a_reason() {
    let p = profile(N, Metric::Calls);
    for format in [Format::Folded, Format::Flamegraph, Format::Speedscope] {
        let error = format
            .render(&p, &EmitOptions::default())
            .expect_err("no contexts with the calls metric");
        assert!(error.to_string().contains("--metric time"), "{error}");
    }
    // The other views work from the arcs.
    for format in [Format::Pprof, Format::Callgrind, Format::Html, Format::Text] {
        render(&p, format);
    }
}

#[test]
fn speedscope_events_nest_and_cover_the_run() {
    let p = profile(N, Metric::Instructions);
    let file: serde_json::Value = serde_json::from_slice(&render(&p, Format::Speedscope)).unwrap();
    assert_eq!(
        file["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = file["shared"]["frames"].as_array().unwrap();
    let fib = frames.iter().position(|f| f["name"] == "fib").unwrap();
    let profile = &file["profiles"][0];
    assert_eq!(profile["type"], "evented");
    let total: u64 = p
        .functions
        .iter()
        .map(|f| f.cost.self_instructions.unwrap_or(0))
        .sum();
    assert_eq!(profile["endValue"], total);
    let mut open: Vec<u64> = Vec::new();
    let mut last = 0;
    let mut fib_opens = 0;
    for event in profile["events"].as_array().unwrap() {
        let at = event["at"].as_u64().unwrap();
        let frame = event["frame"].as_u64().unwrap();
        assert!(at >= last, "time goes forward");
        last = at;
        match event["type"].as_str().unwrap() {
            "O" => {
                open.push(frame);
                fib_opens += usize::from(frame as usize == fib);
            }
            "C" => assert_eq!(open.pop(), Some(frame), "closes the innermost frame"),
            other => panic!("event type {other}"),
        }
    }
    assert!(open.is_empty());
    assert_eq!(last, total);
    // One opening per fib context: fib(12)'s tree has a path for each distinct chain.
    let fib_contexts = p
        .contexts
        .iter()
        .filter(|c| {
            c.function
                .is_some_and(|f| p.functions[f as usize].name == "fib")
        })
        .count();
    assert_eq!(fib_opens, fib_contexts);
}

#[test]
fn flamegraph_svg_has_a_box_per_context() {
    // Instructions: even fib's leaves (5 of about 4,300) are wider than the 0.1 px cut-off.
    let p = profile(N, Metric::Instructions);
    let svg = text(&p, Format::Flamegraph);
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<g>").count(), svg.matches("</g>").count());
    assert_eq!(
        svg.matches("<g>").count(),
        p.contexts.len() - 1,
        "one box per context but the host's"
    );
    assert!(svg.contains("<title>_start (1 calls,"));
    assert!(
        svg.contains("100.00%)</title>"),
        "the outermost box is the whole run"
    );
    assert!(svg.contains("<title>fib (1 calls,"));
    let icicle = String::from_utf8(
        Format::Flamegraph
            .render(
                &p,
                &EmitOptions {
                    icicle: true,
                    ..EmitOptions::default()
                },
            )
            .unwrap(),
    )
    .unwrap();
    assert!(icicle.contains("icicle"));
    assert_ne!(svg, icicle);
}

/// `go tool pprof -top` of `file` by the sample type `index`.
fn pprof_top(file: &Path, index: &str) -> String {
    let out = output(
        Command::new("go")
            .args(["tool", "pprof", "-top"])
            .arg(format!("-sample_index={index}"))
            .arg(file),
    );
    assert!(
        out.status.success(),
        "go tool pprof reads {}",
        file.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `go tool pprof` reads the gzipped profile.proto: the flat calls of each function are
/// its exact calls, for a profile with contexts and one with arcs only.
#[test]
fn pprof_opens_in_go_tool_pprof() {
    let dir = tempfile::tempdir().unwrap();
    for metric in [Metric::ExactTime, Metric::Instructions, Metric::Calls] {
        let p = profile(N, metric);
        let bytes = render(&p, Format::Pprof);
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzipped");
        let file = save(dir.path(), &format!("{}.pb.gz", metric.name()), &bytes);
        if !have(&["go"]) {
            return;
        }
        let top = pprof_top(&file, "calls");
        for name in ["fib", "inc", "dbl"] {
            let row = top
                .lines()
                .find(|l| l.split_whitespace().last() == Some(name))
                .unwrap_or_else(|| panic!("{name} in\n{top}"));
            let flat: u64 = row.split_whitespace().next().unwrap().parse().unwrap();
            assert_eq!(flat, calls(&p, name), "{metric:?} {name}");
        }
        assert!(calls(&p, "fib") == fib_calls(N));
        if metric == Metric::Instructions {
            let raw = pprof_top(&file, "instructions");
            let fib = p.function_named("fib").unwrap();
            let row = raw.lines().find(|l| l.ends_with(" fib")).unwrap();
            let flat: u64 = row.split_whitespace().next().unwrap().parse().unwrap();
            assert_eq!(flat, fib.cost.self_instructions.unwrap());
        }
    }
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

/// pprof's default view simplifies names that look like demangled C++ (it drops `<...>`
/// and `(...)`), so two Rust `drop`s would be one `::drop`; ours come through whole and
/// apart, and a merged profile's `File:` names every module.
#[test]
fn go_tool_pprof_keeps_full_names_and_names_every_module() {
    if !have(&["go"]) {
        return;
    }
    let names = [
        (
            "inc",
            "<alloc::vec::Vec<u8> as core::ops::drop::Drop>::drop",
        ),
        ("dbl", "<alloc::rc::Rc<str> as core::ops::drop::Drop>::drop"),
        (
            "apply",
            "std::vector<int, std::allocator<int> >::push_back(int const&)",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for metric in [Metric::Instructions, Metric::Calls] {
        let mut a = profile(N, metric);
        for (from, to) in names {
            rename(&mut a, from, to);
        }
        let mut b = a.clone();
        a.modules = vec!["target/deps/first-1.wasm".into()];
        b.modules = vec!["target/deps/second-2.wasm".into()];
        let merged = Profile::merge(&[a.clone(), b]);
        let file = save(dir.path(), "m.pb.gz", &render(&merged, Format::Pprof));
        let top = pprof_top(&file, "calls");
        assert!(
            top.lines()
                .any(|l| l == "File: first-1.wasm, second-2.wasm"),
            "{top}"
        );
        for (_, name) in names {
            let row = top
                .lines()
                .find(|l| l.ends_with(&format!(" {name}")))
                .unwrap_or_else(|| panic!("{name} in\n{top}"));
            let flat: u64 = row.split_whitespace().next().unwrap().parse().unwrap();
            assert_eq!(flat, 2 * calls(&a, name), "{metric:?} {name}");
        }
        assert!(!top.contains(" ::drop"), "{top}");
    }
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

/// callgrind_annotate reads the file: fib's self cost, and the calls= line of its arc.
#[test]
fn callgrind_opens_in_callgrind_annotate() {
    let p = profile(N, Metric::Instructions);
    let file_text = text(&p, Format::Callgrind);
    assert!(file_text.starts_with("# callgrind format\n"));
    assert!(file_text.contains("events: Ir\n"));
    assert!(
        file_text.contains(&format!("calls={} ", fib_calls(N) - 1)),
        "the recursive arc's count"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = save(dir.path(), "callgrind.out.1", file_text.as_bytes());
    if !have(&["callgrind_annotate"]) {
        return;
    }
    let out = output(Command::new("callgrind_annotate").arg(&file));
    assert!(out.status.success());
    let annotated = String::from_utf8_lossy(&out.stdout);
    let fib = p
        .function_named("fib")
        .unwrap()
        .cost
        .self_instructions
        .unwrap();
    let row = annotated
        .lines()
        .find(|l| l.ends_with(":fib"))
        .unwrap_or_else(|| panic!("fib in\n{annotated}"));
    // callgrind_annotate groups digits with commas.
    let shown: String = row
        .split_whitespace()
        .next()
        .unwrap()
        .chars()
        .filter(|c| *c != ',')
        .collect();
    assert_eq!(shown, fib.to_string(), "{row}");
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

/// The HTML page renders in headless Chromium without console messages and shows the
/// hottest function selected; the screenshot is kept in the test artifacts.
#[test]
fn html_report_renders_in_chromium() {
    let p = profile(N, Metric::Instructions);
    let page = text(&p, Format::Html);
    assert!(!page.contains("/*__WASMPROF_DATA__*/"), "the data is in");
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "no network"
    );
    if !have(&["chromium"]) {
        return;
    }
    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR")).join("formats");
    std::fs::create_dir_all(&artifacts).unwrap();
    let file = save(&artifacts, "report.html", page.as_bytes());
    let profile_dir = tempfile::tempdir().unwrap();
    let chromium = |extra: &[&str]| {
        output(
            headless_chromium()
                .args([
                    "--disable-component-update",
                    "--disable-sync",
                    "--enable-logging=stderr",
                    "--v=0",
                    "--window-size=1280,1200",
                ])
                .args(extra)
                .arg(format!("--user-data-dir={}", profile_dir.path().display()))
                .arg(format!("file://{}", file.display())),
        )
    };
    let dom = chromium(&["--dump-dom"]);
    assert!(dom.status.success());
    let stderr = String::from_utf8_lossy(&dom.stderr);
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    let dom = String::from_utf8_lossy(&dom.stdout);
    // fib has the most self instructions; the page selects it and lists every function.
    assert!(
        dom.contains("<span id=\"selected-name\">fib</span>"),
        "{dom:.2000}"
    );
    for name in ["fib", "apply", "inc", "dbl", "main", "_start"] {
        assert!(
            dom.contains(&format!(">{name}</td>")),
            "{name} in the flat profile"
        );
    }
    assert!(
        dom.contains(&format!(">{}</td>", fib_calls(N))),
        "fib's calls"
    );
    // The page says how long it took to draw (the benchmark reads it) and has the
    // controls of the report's views.
    assert!(dom.contains("data-render-ms=\""), "{dom:.500}");
    for id in ["focus", "ignore", "group", "source"] {
        assert!(dom.contains(&format!("id=\"{id}\"")), "{id}");
    }
    let shot = artifacts.join("report.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&[&format!("--screenshot={}", shot.display())]);
    assert!(shot.exists(), "a screenshot at {}", shot.display());
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
            .arg("--json"),
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

/// speedscope's own page (the npm package's `index.html`, opened as its CLI opens a local
/// file: a script that calls `speedscope.loadFileFromBase64`) imports our file in headless
/// Chromium: the title and the toolbar name the profile and its unit, which the page
/// shows only once an import has succeeded.
#[test]
fn speedscope_page_loads_the_file() {
    if !have(&["chromium", "npm"]) {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("speedscope-1.25.0");
    let page = dir.join("node_modules/speedscope/dist/release/index.html");
    if !page.exists() {
        let out = output(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&dir)
                .arg("speedscope@1.25.0"),
        );
        assert!(out.status.success(), "npm install speedscope failed");
    }
    let file = text(&profile(N, Metric::Instructions), Format::Speedscope);
    let name = serde_json::from_str::<serde_json::Value>(&file).unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    use base64::Engine as _;
    let script = format!(
        "speedscope.loadFileFromBase64(\"p.speedscope.json\", \"{}\")",
        base64::engine::general_purpose::STANDARD.encode(&file)
    );
    let loader = save(&dir, "load.js", script.as_bytes());
    let user_data = tempfile::tempdir().unwrap();
    let dom = output(
        headless_chromium()
            .args(["--virtual-time-budget=10000", "--dump-dom"])
            .arg(format!("--user-data-dir={}", user_data.path().display()))
            .arg(format!(
                "file://{}#localProfilePath={}",
                page.display(),
                loader.display()
            )),
    );
    assert!(dom.status.success());
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains(&format!("<title>{name} - speedscope</title>")),
        "{dom:.3000}"
    );
    assert!(
        dom.contains(&format!("{name} (instructions)")),
        "{dom:.3000}"
    );
}

/// The Firefox Profiler's processed format: every context a sample whose stack resolves,
/// through the stack, frame and function tables, to the context's path; the weights are
/// the exact self costs and sum to the whole profile's. (profiler.firefox.com itself is
/// not reachable from the test machines; the tables are what it reads.)
#[test]
fn firefox_profile_stacks_resolve_to_the_contexts() {
    let p = profile(N, Metric::Instructions);
    let file: serde_json::Value = serde_json::from_str(&text(&p, Format::Firefox)).unwrap();
    assert!(file["meta"]["preprocessedProfileVersion"].as_u64().unwrap() > 0);
    let thread = &file["threads"][0];
    let ints = |v: &serde_json::Value| -> Vec<Option<u64>> {
        v.as_array().unwrap().iter().map(|x| x.as_u64()).collect()
    };
    let strings: Vec<&str> = thread["stringArray"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let (prefix, frame) = (
        ints(&thread["stackTable"]["prefix"]),
        ints(&thread["stackTable"]["frame"]),
    );
    let func = ints(&thread["frameTable"]["func"]);
    let name = ints(&thread["funcTable"]["name"]);
    let path = |mut stack: usize| -> Vec<&str> {
        let mut names = Vec::new();
        loop {
            let f = func[frame[stack].unwrap() as usize].unwrap() as usize;
            names.push(strings[name[f].unwrap() as usize]);
            match prefix[stack] {
                Some(up) => stack = up as usize,
                None => break,
            }
        }
        names.reverse();
        names
    };
    let samples = &thread["samples"];
    let (stacks, weights) = (ints(&samples["stack"]), ints(&samples["weight"]));
    let total: u64 = p
        .functions
        .iter()
        .map(|f| f.cost.self_instructions.unwrap())
        .sum();
    assert_eq!(weights.iter().map(|w| w.unwrap()).sum::<u64>(), total);
    // Self instructions per function, summed from the samples' leaves.
    let mut by_leaf: std::collections::HashMap<&str, u64> = Default::default();
    for (stack, weight) in stacks.iter().zip(&weights) {
        let names = path(stack.unwrap() as usize);
        assert_eq!(names[0], "_start", "{names:?}");
        *by_leaf.entry(names.last().unwrap()).or_default() += weight.unwrap();
    }
    for f in &p.functions {
        assert_eq!(
            by_leaf.get(f.name.as_str()).copied().unwrap_or(0),
            f.cost.self_instructions.unwrap(),
            "{}",
            f.name
        );
    }
}
