//! The stack views (folded stacks, speedscope, the SVG flame graph, the Firefox Profiler's
//! format), each checked against the profile's tree and loaded by its real consumer.

use super::*;

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
        assert!(
            error.to_string().contains("the default metric, time"),
            "{error}"
        );
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

/// speedscope's own page (the npm package's `index.html`, opened as its CLI opens a local
/// file: a script that calls `speedscope.loadFileFromBase64`) imports our file in headless
/// Chromium: the title and the toolbar name the profile and its unit, which the page
/// shows only once an import has succeeded.
#[test]
fn speedscope_page_loads_the_file() {
    if !have(&["chromium", "npm"]) {
        return;
    }
    let file = text(&profile(N, Metric::Instructions), Format::Speedscope);
    let name = serde_json::from_str::<serde_json::Value>(&file).unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    let dom = speedscope_dom("p.speedscope.json", file.as_bytes());
    assert!(
        dom.contains(&format!("<title>{name} - speedscope</title>")),
        "{dom:.3000}"
    );
    assert!(
        dom.contains(&format!("{name} (instructions)")),
        "{dom:.3000}"
    );
}

/// speedscope's page imports a profile weighed by the bytes its contexts allocated
/// (`--weight alloc-bytes`, unit `bytes`): here each of fib's contexts is given 64 bytes.
#[test]
fn speedscope_page_loads_a_profile_weighed_by_bytes() {
    if !have(&["chromium", "npm"]) {
        return;
    }
    let mut p = profile(N, Metric::Instructions);
    let fib = p.function_named("fib").unwrap().id;
    for c in p.contexts.iter_mut().filter(|c| c.function == Some(fib)) {
        c.alloc = Some(cargo_wasmprof::profile::Allocs {
            allocs: 1,
            alloc_bytes: 64,
            ..Default::default()
        });
    }
    p.allocations = Some(Default::default());
    let options = EmitOptions {
        weight: cargo_wasmprof::format::Weight::AllocBytes,
        ..EmitOptions::default()
    };
    let file = String::from_utf8(Format::Speedscope.render(&p, &options).unwrap()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&file).unwrap();
    assert_eq!(json["profiles"][0]["unit"], "bytes");
    let contexts = p
        .contexts
        .iter()
        .filter(|c| c.function == Some(fib))
        .count();
    assert_eq!(json["profiles"][0]["endValue"], 64 * contexts as u64);
    let name = json["name"].as_str().unwrap().to_string();
    let dom = speedscope_dom("bytes.speedscope.json", file.as_bytes());
    assert!(dom.contains(&format!("{name} (bytes)")), "{dom:.3000}");
}

/// The DOM of speedscope's page (its npm package, installed once under the test's target
/// dir) after it imported `bytes` as the file `name`, in headless Chromium.
pub(crate) fn speedscope_dom(name: &str, bytes: &[u8]) -> String {
    let dir = speedscope_package();
    let page = dir.join("node_modules/speedscope/dist/release/index.html");
    use base64::Engine as _;
    let script = format!(
        "speedscope.loadFileFromBase64({name:?}, \"{}\")",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    );
    let loader = save(dir, &format!("load-{name}.js"), script.as_bytes());
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
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

/// speedscope's npm package, installed once under the test's target dir. The tests that
/// load its page run in parallel: one installs, the others wait for it. The install goes
/// to a directory of this process that is renamed into place, so no test (of this run or
/// another) sees a half-installed package.
fn speedscope_package() -> &'static Path {
    static PACKAGE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PACKAGE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("speedscope-1.25.0");
        if dir
            .join("node_modules/speedscope/dist/release/index.html")
            .exists()
        {
            return dir;
        }
        let partial = dir.with_file_name(format!("speedscope-partial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&partial);
        let out = output(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&partial)
                .arg("speedscope@1.25.0"),
        );
        assert!(out.status.success(), "npm install speedscope failed");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&partial, &dir).unwrap();
        dir
    })
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
