//! The formats other tools read, opened by those tools: `go tool pprof`,
//! `callgrind_annotate`, and the HTML page in headless Chromium.

use super::*;

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
