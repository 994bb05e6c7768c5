//! wasmprof-emcc and wasmprof-emxx on the C and C++ fixtures: a real Makefile, the real emcc,
//! the real node, and gprof as the native oracle of call counts.
//!
//! These tests need emcc, node, gcc and gprof (.ci/run installs them). Without them they
//! say so and pass, except under CI, where a missing tool fails them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use cargo_wasmprof::profile::{Profile, HOST};
use common::{
    arc, calls, check_invariants, context_callers, fib_calls, have, line_of, output, validate,
    wasmprof,
};

/// fixtures/emcc, built once by its Makefile with the wrappers as CC and CXX (the C++ one
/// through a link named `wasmprof-em++`, as a user would make it).
fn built() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("emcc-fixture");
        let _ = std::fs::remove_dir_all(&dir);
        common::copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/emcc"),
            &dir,
        );
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_wasmprof-emxx"),
            bin.join("wasmprof-em++"),
        )
        .unwrap();
        let out = output(
            Command::new("make")
                .current_dir(&dir)
                .arg(format!("CC={}", env!("CARGO_BIN_EXE_wasmprof-emcc")))
                .arg(format!("CXX={}", bin.join("wasmprof-em++").display())),
        );
        assert!(out.status.success(), "make builds the fixtures");
        dir
    })
}

/// Runs `node build/PROGRAM.js ARGS` in the fixture directory with the profile going to
/// `out` (or, with None, to the default place); returns the exit code and stdout.
fn node(program: &str, args: &[&str], out: Option<&Path>) -> (i32, String) {
    let mut cmd = Command::new("node");
    cmd.current_dir(built())
        .arg(format!("build/{program}.js"))
        .args(args)
        .env_remove("WASMPROF_OUT");
    if let Some(out) = out {
        cmd.env("WASMPROF_OUT", out);
    }
    let out = output(&mut cmd);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The number after `label` in the program's output.
fn printed(stdout: &str, label: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or_else(|| panic!("`{label}` in {stdout}"))
}

#[test]
fn a_makefile_build_profiles_c_under_node() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let dir = built();
    for program in ["calls", "shapes"] {
        let wasm = std::fs::read(dir.join(format!("build/{program}.wasm"))).unwrap();
        validate(&wasm);
        let original = dir.join(format!("build/{program}.orig.wasm"));
        assert!(original.exists(), "the original is kept beside it");
    }
    let (code, stdout) = node("calls", &[], None);
    assert_eq!(code, 0);
    let p = Profile::read(&dir.join("calls.wasmprof.json")).expect("the default profile file");
    check_invariants(&p);
    assert!(p.complete);
    // Recursion: fib(20) as the program's comment says.
    assert_eq!(calls(&p, "fib"), fib_calls(20));
    assert_eq!(arc(&p, "fib", "fib"), fib_calls(20) - 1);
    assert_eq!(arc(&p, "main", "fib"), 1);
    // Mutual recursion: is_even(10).
    assert_eq!(calls(&p, "is_even"), 6);
    assert_eq!(calls(&p, "is_odd"), 5);
    assert_eq!(arc(&p, "is_odd", "is_even"), 5);
    // A table of function pointers: call_indirect arcs from apply.
    for op in ["add", "sub", "mul"] {
        assert_eq!(arc(&p, "apply", op), 3, "apply -> {op}");
    }
    // libc calling back into user code: qsort's comparator, counted by the program too.
    let comparisons = printed(&stdout, "by_value calls:");
    assert_eq!(calls(&p, "by_value"), comparisons);
    let from_libc: u64 = p
        .arcs
        .iter()
        .filter(|a| a.callee == "by_value" && a.caller != "main")
        .map(|a| a.count)
        .sum();
    assert_eq!(
        from_libc, comparisons,
        "every comparison comes from qsort's code"
    );
    // Imports implemented in JS, and the host's entry into the module.
    assert!(p.arcs.iter().any(|a| a.callee.ends_with("fd_write")));
    assert!(p.arcs.iter().any(|a| a.caller == HOST));
    // Source locations from the original module's DWARF.
    let fib = p.function_named("fib").unwrap();
    let source = dir.join("calls.c");
    assert!(fib.file.as_deref().unwrap().ends_with("calls.c"));
    assert_eq!(fib.line, Some(line_of(&source, "int fib(")));
    assert!(fib.cost.total_ns > 0, "fib was timed");

    // The report reads it like any other profile.
    let out = output(
        wasmprof()
            .arg("report")
            .arg(dir.join("calls.wasmprof.json")),
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("calls.c:"));
}

#[test]
fn cpp_virtual_calls_and_templates_have_exact_counts_and_demangled_names() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let out = built().join("shapes.test.json");
    let (code, _) = node("shapes", &[], Some(&out));
    assert_eq!(code, 0);
    let p = Profile::read(&out).unwrap();
    check_invariants(&p);
    assert_eq!(calls(&p, "Square::area() const"), 4);
    assert_eq!(calls(&p, "Circle::area() const"), 2);
    let total_area = p
        .functions
        .iter()
        .find(|f| f.name.starts_with("total_area("))
        .expect("total_area");
    assert_eq!(arc(&p, &total_area.name, "Square::area() const"), 4);
    assert_eq!(arc(&p, &total_area.name, "Circle::area() const"), 2);
    assert_eq!(calls(&p, "int bigger<int>(int, int)"), 4);
    assert_eq!(calls(&p, "double bigger<double>(double, double)"), 2);
    assert_eq!(calls(&p, "int largest<int>(int const*, int)"), 1);
    assert_eq!(calls(&p, "double largest<double>(double const*, int)"), 1);
}

#[test]
fn exit_3_leaves_the_profile_and_exits_3() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let out = built().join("calls.exit.json");
    let (code, _) = node("calls", &["12", "exit"], Some(&out));
    assert_eq!(code, 3, "the program's exit code");
    let p = Profile::read(&out).expect("a profile after exit(3)");
    assert_eq!(p.runs[0].exit_code, 3);
    assert!(!p.complete);
    assert_eq!(
        p.runs[0].open_stack.first().map(String::as_str),
        Some("main")
    );
    assert!(p.runs[0].open_stack.iter().any(|f| f == "leave"));
    assert_eq!(calls(&p, "fib"), fib_calls(12));
}

/// `-sMODULARIZE`: the glue is a factory that the page or script calls; the runtime goes
/// inside it with --pre-js and works the same.
#[test]
fn a_modularized_program_profiles_itself() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/emcc/calls.c");
    let link = output(
        Command::new(env!("CARGO_BIN_EXE_wasmprof-emcc"))
            .current_dir(dir.path())
            .arg(&source)
            .args([
                "-O1",
                "-o",
                "mod.js",
                "-sMODULARIZE",
                "-sEXPORT_NAME=createCalls",
            ]),
    );
    assert!(link.status.success());
    validate(&std::fs::read(dir.path().join("mod.wasm")).unwrap());
    std::fs::write(
        dir.path().join("main.js"),
        "require('./mod.js')({ arguments: ['15'] });\n",
    )
    .unwrap();
    let out = dir.path().join("mod.json");
    let run = output(
        Command::new("node")
            .current_dir(dir.path())
            .arg("main.js")
            .env("WASMPROF_OUT", &out),
    );
    assert!(run.status.success());
    let p = Profile::read(&out).expect("the profile");
    check_invariants(&p);
    assert_eq!(calls(&p, "fib"), fib_calls(15));
    assert_eq!(arc(&p, "apply", "mul"), 3);
}

#[test]
fn a_trap_leaves_the_profile_with_the_open_stack() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let out = built().join("calls.trap.json");
    let mut cmd = Command::new("node");
    cmd.current_dir(built())
        .args(["build/calls.js", "12", "trap"])
        .env("WASMPROF_OUT", &out);
    let run = output(&mut cmd);
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("RuntimeError: unreachable"),
        "the program's own error output stays: {stderr}"
    );
    let p = Profile::read(&out).expect("a profile after the trap");
    assert!(!p.complete);
    assert_eq!(p.runs[0].trap.as_deref(), Some("unreachable"));
    assert_eq!(
        p.runs[0].open_stack.last().map(String::as_str),
        Some("crash")
    );
    assert_eq!(calls(&p, "fib"), fib_calls(12));
}

/// The calls metric keeps no context tree: the open stack at a trap is the JS error's
/// stack, mapped back to the functions through the module's `wasmprof.frames` table.
#[test]
fn the_calls_metric_takes_a_traps_stack_from_the_js_error() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    link_calls(dir.path(), "calls");
    let out = dir.path().join("trap.json");
    let run = output(
        Command::new("node")
            .current_dir(dir.path())
            .args(["build/calls.js", "12", "trap"])
            .env("WASMPROF_OUT", &out),
    );
    assert!(!run.status.success());
    let p = Profile::read(&out).expect("a profile after the trap");
    assert_eq!(p.metric, cargo_wasmprof::meta::Metric::Calls);
    assert!(!p.complete);
    let stack = &p.runs[0].open_stack;
    assert_eq!(stack.last().map(String::as_str), Some("crash"), "{stack:?}");
    assert!(stack.iter().any(|f| f == "main"), "{stack:?}");
    assert_eq!(calls(&p, "fib"), fib_calls(12));
}

/// `called` of each function in gprof's call graph (`1+21890` counts 21891).
fn gprof_calls(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter(|l| l.starts_with('['))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let (called, name) = (words.get(4)?, words.get(5)?);
            if name.starts_with('<') {
                return None; // a cycle as a whole
            }
            let total = called
                .split('+')
                .map(|n| n.parse::<u64>().ok())
                .sum::<Option<u64>>()?;
            Some((name.to_string(), total))
        })
        .collect()
}

#[test]
fn gprof_of_the_native_build_agrees_on_call_counts() {
    if !have(&["emcc", "node", "make", "gcc", "gprof"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = built().join("calls.c");
    let native = dir.path().join("calls-native");
    let gcc = output(
        Command::new("gcc")
            .args(["-pg", "-O1", "-o"])
            .arg(&native)
            .arg(&source),
    );
    assert!(gcc.status.success());
    assert!(output(Command::new(&native).current_dir(dir.path()))
        .status
        .success());
    let gprof = output(
        Command::new("gprof")
            .args(["-b", "-q"])
            .arg(&native)
            .arg(dir.path().join("gmon.out")),
    );
    let oracle = gprof_calls(&String::from_utf8_lossy(&gprof.stdout));
    let names: Vec<&str> = oracle.iter().map(|(n, _)| n.as_str()).collect();
    for expected in ["fib", "is_even", "is_odd", "add", "sub", "mul", "apply"] {
        assert!(names.contains(&expected), "gprof lists {expected}");
    }

    let out = built().join("calls.gprof.json");
    assert_eq!(node("calls", &[], Some(&out)).0, 0);
    let p = Profile::read(&out).unwrap();
    for (name, count) in &oracle {
        assert_eq!(
            calls(&p, name),
            *count,
            "{name}: wasm profile against gprof"
        );
    }
}

#[test]
fn an_emcc_error_passes_through_unchanged() {
    if !have(&["emcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.c"),
        "int main(void) { return nope; }\n",
    )
    .unwrap();
    let run = |cmd: &mut Command| {
        let out = output(
            cmd.current_dir(dir.path())
                .args(["-c", "broken.c", "-o", "broken.o"]),
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (real_code, real_err) = run(&mut Command::new("emcc"));
    assert_ne!(real_code, Some(0));
    // The subcommand form, and the wrapper as a link step: the same code, the same message.
    let (code, err) = run(wasmprof().args(["emcc", "--"]));
    assert_eq!(code, real_code);
    assert!(err.contains("use of undeclared identifier 'nope'"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("error")).count(),
        real_err.lines().filter(|l| l.contains("error")).count()
    );
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_wasmprof-emcc"))
            .current_dir(dir.path())
            .args(["missing.o", "-o", "prog.js"]),
    );
    assert_ne!(out.status.code(), Some(0), "a failed link stays failed");
    assert!(!dir.path().join("prog.orig.wasm").exists());
}

/// Serves the files under `root` over HTTP on a free local port, until the process ends.
fn serve(root: PathBuf) -> u16 {
    use std::io::{BufRead as _, BufReader, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = String::new();
            let _ = BufReader::new(&stream).read_line(&mut request);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let file = root.join(path.trim_start_matches('/'));
            let kind = match file.extension().and_then(|e| e.to_str()) {
                Some("html") => "text/html",
                Some("js") => "text/javascript",
                Some("wasm") => "application/wasm",
                _ => "application/octet-stream",
            };
            let response = match std::fs::read(&file) {
                Ok(body) => {
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    [head.into_bytes(), body].concat()
                }
                Err(_) => {
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_vec()
                }
            };
            let _ = stream.write_all(&response);
        }
    });
    port
}

/// Runs `build/PROGRAM.js` with `args` in a page served from `dir` in headless Chromium,
/// as a user would write the page (it asks for the profile with the runtime's console API
/// when the program has run), and decodes the profile the page got.
fn browser_profile(dir: &Path, program: &str, args: &[&str]) -> Profile {
    let page = format!(
        r#"<!doctype html>
<html><body><pre id="profile">pending</pre>
<script>
var Module = {{
  arguments: {},
  postRun: [function () {{
    document.getElementById('profile').textContent =
      typeof wasmprof.save === 'function' ? JSON.stringify(wasmprof.profile()) : 'no save()';
  }}]
}};
</script>
<script src="build/{program}.js"></script>
</body></html>
"#,
        serde_json::to_string(args).unwrap()
    );
    let html = format!("browser-{program}.html");
    std::fs::write(dir.join(&html), page).unwrap();
    let port = serve(dir.to_path_buf());
    let profile_dir = tempfile::tempdir().unwrap();
    let out = output(
        Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--dump-dom",
                "--virtual-time-budget=20000",
            ])
            .arg(format!("--user-data-dir={}", profile_dir.path().display()))
            .arg(format!("http://127.0.0.1:{port}/{html}")),
    );
    assert!(out.status.success());
    let dom = String::from_utf8_lossy(&out.stdout);
    let text = dom
        .split_once("<pre id=\"profile\">")
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(text, _)| text)
        .expect("the page has its profile element");
    let json = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    assert!(
        json.starts_with('{'),
        "the page got the profile: {json:.200}"
    );
    let file = profile_dir.path().join(format!("{program}.wasmprof.json"));
    std::fs::write(&file, json).unwrap();
    Profile::read(&file).expect("the browser's dump decodes")
}

#[test]
fn in_headless_chromium_the_page_gets_the_profile() {
    if !have(&["emcc", "make", "chromium"]) {
        return;
    }
    let p = browser_profile(built(), "calls", &["10"]);
    check_invariants(&p);
    assert_eq!(calls(&p, "fib"), fib_calls(10));
    assert_eq!(arc(&p, "apply", "mul"), 3);
}

/// Links fixtures/emcc/calls.c with `WASMPROF_METRIC=time` into `dir/build/calls.js`.
fn link_calls(dir: &Path, metric: &str) {
    std::fs::create_dir_all(dir.join("build")).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/emcc/calls.c");
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_wasmprof-emcc"))
            .current_dir(dir)
            .env("WASMPROF_METRIC", metric)
            .args(["-O1", "-g"])
            .arg(&source)
            .args(["-o", "build/calls.js"]),
    );
    assert!(out.status.success(), "wasmprof-emcc links");
    validate(&std::fs::read(dir.join("build/calls.wasm")).unwrap());
}

/// Whether the toolchain has the standard library for `target`; under CI it must.
fn have_rust_target(target: &str) -> bool {
    let sysroot = output(Command::new("rustc").args(["--print", "sysroot"]));
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    if Path::new(&sysroot)
        .join("lib/rustlib")
        .join(target)
        .exists()
    {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have the {target} target (.ci/run adds it)"
    );
    eprintln!("skipped: the {target} target is not installed");
    false
}

/// The calls and arcs of the crate's own functions that ran: what must not depend on the
/// target. (Generic code of std instantiated for the crate's types may differ: the
/// emscripten target unwinds, so a slice's drop glue is a function of its own there.)
/// Names that clash are told apart by function index, which differs between the targets;
/// the index is left out.
fn crate_counts(p: &Profile) -> Vec<(String, u64)> {
    let own = |name: &str| name.starts_with("calls::") || name.starts_with("<calls::");
    let plain = |name: &str| match name.find(" [func ") {
        Some(at) => name[..at].to_string(),
        None => name.to_string(),
    };
    let mut counts: Vec<(String, u64)> = p
        .functions
        .iter()
        .filter(|f| f.calls > 0 && own(&f.name))
        .map(|f| (plain(&f.name), f.calls))
        .chain(
            p.arcs
                .iter()
                .filter(|a| own(&a.caller) && own(&a.callee))
                .map(|a| {
                    let arc = format!("{} -> {}", plain(&a.caller), plain(&a.callee));
                    (arc, a.count)
                }),
        )
        .collect();
    counts.sort();
    counts
}

/// `cargo wasmprof test --target wasm32-unknown-emscripten`: cargo links through
/// wasmprof-emcc, which wraps the linker the crate configured; the tests run under node;
/// the profiles have the same counts and arcs as on wasm32-wasip1.
#[test]
fn rust_through_emscripten_matches_wasip1() {
    if !have(&["emcc", "node"]) || !have_rust_target("wasm32-unknown-emscripten") {
        return;
    }
    let dir = common::copy_fixture("calls");
    let root = dir.path();
    // The user's own linker for the target: a script that notes its arguments, then links.
    std::fs::create_dir_all(root.join("tools")).unwrap();
    std::fs::create_dir_all(root.join(".cargo")).unwrap();
    let linker = root.join("tools/my-emcc");
    std::fs::write(
        &linker,
        "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/linker.log\"\nexec emcc \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&linker, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        root.join(".cargo/config.toml"),
        "[target.wasm32-unknown-emscripten]\nlinker = \"tools/my-emcc\"\n",
    )
    .unwrap();

    let em = output(
        wasmprof()
            .args(["wasmprof", "test", "--target", "wasm32-unknown-emscripten"])
            .current_dir(root),
    );
    assert!(em.status.success(), "the tests pass under node");
    let stdout = String::from_utf8_lossy(&em.stdout);
    assert!(stdout.contains("test tests::fib_of_20 ... ok"));
    assert!(stdout.contains("Flat profile"));
    let log =
        std::fs::read_to_string(root.join("tools/linker.log")).expect("the user's linker ran");
    assert!(log.contains("--pre-js"), "through the wrapper: {log}");
    let deps = root.join("target/wasm32-unknown-emscripten/debug/deps");
    let mut modules = 0;
    for entry in std::fs::read_dir(&deps).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".wasm") && !name.ends_with(".orig.wasm") {
            validate(&std::fs::read(&path).unwrap());
            modules += 1;
        }
    }
    assert_eq!(modules, 2, "the lib's and the integration test's modules");

    let wasi = output(
        wasmprof()
            .args(["wasmprof", "test", "--no-report"])
            .current_dir(root),
    );
    assert!(wasi.status.success());
    for name in ["calls-calls-lib.json", "calls-integration-test.json"] {
        let on_wasi = Profile::read(&root.join("target/wasmprof").join(name)).unwrap();
        let on_em = Profile::read(
            &root
                .join("target/wasmprof/wasm32-unknown-emscripten")
                .join(name),
        )
        .unwrap();
        check_invariants(&on_em);
        assert!(on_em.modules[0].ends_with(".js"), "{:?}", on_em.modules);
        assert_eq!(crate_counts(&on_em), crate_counts(&on_wasi), "{name}");
    }
    let em_lib = "target/wasmprof/wasm32-unknown-emscripten/calls-calls-lib.json";
    let lib = Profile::read(&root.join(em_lib)).unwrap();
    assert_eq!(calls(&lib, "calls::fib"), fib_calls(20));
    assert_eq!(arc(&lib, "calls::fib", "calls::fib"), fib_calls(20) - 1);
    // Through trait objects, so through call_indirect.
    let closure = "calls::total_area2::{closure#0}";
    assert_eq!(
        arc(&lib, closure, "<calls::Square as calls::Shape>::area2"),
        2
    );
    assert_eq!(
        arc(&lib, closure, "<calls::Triangle as calls::Shape>::area2"),
        1
    );

    // Another metric: cargo does not link again, so the module is made again from its
    // original.
    let again = output(
        wasmprof()
            .args([
                "wasmprof",
                "test",
                "--target",
                "wasm32-unknown-emscripten",
                "--metric",
                "instructions",
                "--lib",
                "--no-report",
            ])
            .current_dir(root),
    );
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("Instrumented"));
    let lib = Profile::read(&root.join(em_lib)).unwrap();
    assert_eq!(lib.metric, cargo_wasmprof::meta::Metric::Instructions);
    assert_eq!(calls(&lib, "calls::fib"), fib_calls(20));
}

/// C++ exceptions built with -fwasm-exceptions (the legacy proposal, which node 20 runs)
/// unwind through instrumented frames: each frame runs its exit probe on the way, so the
/// profile is complete and what runs after the catch belongs to main.
#[test]
fn cpp_exceptions_unwind_through_the_profiler() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let out = built().join("exceptions.json");
    let (code, stdout) = node("exceptions", &[], Some(&out));
    assert_eq!(code, 0);
    assert!(
        stdout.contains("sum: -9"),
        "the program computes what it did: {stdout}"
    );
    let p = Profile::read(&out).unwrap();
    check_invariants(&p);
    assert!(p.complete, "every activation ended");
    assert_eq!(calls(&p, "dive(int)"), 15);
    assert_eq!(arc(&p, "dive(int)", "dive(int)"), 12);
    assert_eq!(arc(&p, "catcher(int)", "dive(int)"), 3);
    // clang's DWARF names the program's main `main`, like Emscripten's wrapper; the
    // linker's name tells them apart.
    assert_eq!(arc(&p, "__original_main", "catcher(int)"), 3);
    assert_eq!(arc(&p, "__original_main", "after(int)"), 1);
    assert_eq!(context_callers(&p, "after(int)"), ["__original_main"]);
    let total = |name: &str| p.function_named(name).unwrap().cost.total_ns;
    assert!(total("dive(int)") > 0 && total("dive(int)") <= total("catcher(int)"));
}

/// `cargo wasmprof run --metric instructions build/PROGRAM.js ARGS` in the fixture directory
/// (which instruments the program's module again, for that metric): the profile, and the
/// program's stdout.
fn instructions_profile(program: &str, args: &[&str]) -> (Profile, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(format!("{program}.json"));
    let run = output(
        wasmprof()
            .current_dir(built())
            .args(["run", "--metric", "instructions", "--no-report", "-o"])
            .arg(&out)
            .arg(format!("build/{program}.js"))
            .args(args),
    );
    assert!(run.status.success(), "{program} runs");
    let profile = Profile::read(&out).unwrap();
    check_invariants(&profile);
    (profile, String::from_utf8_lossy(&run.stdout).into_owned())
}

/// The self instructions of each context of `name` that calls `name` again: the frames
/// of a recursion above its deepest.
fn recursing_contexts(p: &Profile, name: &str) -> Vec<u64> {
    let f = p.function_named(name).unwrap().id;
    p.contexts
        .iter()
        .filter(|c| c.function == Some(f))
        .filter(|c| {
            p.contexts
                .iter()
                .any(|child| child.parent == Some(c.id) && child.function == Some(f))
        })
        .map(|c| c.cost.self_instructions.unwrap())
        .collect()
}

/// Self instructions of `name`.
fn self_instructions(p: &Profile, name: &str) -> u64 {
    p.function_named(name)
        .unwrap_or_else(|| panic!("no function {name}"))
        .cost
        .self_instructions
        .unwrap()
}

#[test]
fn a_longjmp_closes_the_frames_it_unwinds() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let (rounds, depth) = (20u64, 6u64);
    let (p, stdout) = instructions_profile("longjmp", &[&rounds.to_string(), &depth.to_string()]);
    assert!(stdout.contains(&format!("caught: {rounds}")), "{stdout}");
    assert!(p.complete, "every activation was closed");
    // `guarded` calls `dive` through the trampoline once a round; dive recurses `depth`
    // frames and longjmps out of the deepest.
    assert_eq!(calls(&p, "dive"), rounds * (depth + 1));
    assert_eq!(arc(&p, "env.invoke_vi", "dive"), rounds);
    assert_eq!(arc(&p, HOST, "dive"), 0);
    // The trampoline keeps only its thunk's `local.get, local.get, call`; what it calls
    // after the longjmp (stackRestore) is its callee.
    assert_eq!(self_instructions(&p, "env.invoke_vi"), 3 * rounds);
    assert_eq!(context_callers(&p, "stackRestore"), ["env.invoke_vi"]);
    // Every unwound frame keeps its cost: the frames above the deepest run the same body,
    // so their contexts cost the same, and twice the rounds cost twice as much.
    let mut inner = recursing_contexts(&p, "dive");
    assert_eq!(inner.len() as u64, depth);
    inner.dedup();
    assert_eq!(inner.len(), 1, "the inner frames cost alike: {inner:?}");
    assert!(inner[0] > 0);
    let (twice, _) =
        instructions_profile("longjmp", &[&(2 * rounds).to_string(), &depth.to_string()]);
    assert_eq!(
        self_instructions(&twice, "dive"),
        2 * self_instructions(&p, "dive")
    );
    // The time metric keeps the same rules.
    let out = built().join("longjmp-time.json");
    let run = output(
        wasmprof()
            .current_dir(built())
            .args(["run", "--no-report", "-o"])
            .arg(&out)
            .args(["build/longjmp.js", "5", "3"]),
    );
    assert!(run.status.success());
    let timed = Profile::read(&out).unwrap();
    check_invariants(&timed);
    assert_eq!(arc(&timed, "env.invoke_vi", "dive"), 5);
}

#[test]
fn js_exceptions_close_the_frames_they_unwind() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    // fixtures/emcc/exceptions.cpp built with -fexceptions: a throw is a JS exception,
    // and the calls that may throw go through JS trampolines (env.invoke_*).
    let (p, stdout) = instructions_profile("jsexceptions", &[]);
    assert!(stdout.contains("sum: -9"), "{stdout}");
    assert!(p.complete, "every activation ended");
    assert_eq!(calls(&p, "dive(int)"), 15);
    assert_eq!(arc(&p, "dive(int)", "dive(int)"), 12);
    // catcher calls dive(4) through the trampoline, three times.
    assert_eq!(arc(&p, "env.invoke_ii", "dive(int)"), 3);
    assert_eq!(arc(&p, HOST, "dive(int)"), 0);
    assert_eq!(self_instructions(&p, "env.invoke_ii"), 3 * 3);
    assert_eq!(context_callers(&p, "after(int)"), ["__original_main"]);
    // The four frames above the deepest run the same body: their contexts cost alike.
    let mut costs = recursing_contexts(&p, "dive(int)");
    assert_eq!(costs.len(), 4);
    costs.dedup();
    assert_eq!(costs.len(), 1, "{costs:?}");
}

#[test]
fn a_stack_overflow_in_the_glue_still_leaves_the_profile() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    // With a tiny native stack, the glue overflows as the program prints, and its own
    // error handler overflows next: node exits with 7. The runtime saves the profile
    // when the overflow leaves the program, before that.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("overflow.json");
    let run = output(
        Command::new("node")
            .current_dir(built())
            .args(["--stack-size=50", "build/calls.js"])
            .env("WASMPROF_OUT", &out),
    );
    assert_eq!(run.status.code(), Some(7));
    let p = Profile::read(&out).expect("the profile was saved");
    check_invariants(&p);
    assert!(!p.complete);
    let trap = p.runs[0].trap.as_deref().unwrap_or_default();
    assert!(trap.contains("call stack"), "{trap}");
    assert_eq!(calls(&p, "fib"), fib_calls(20));
}

/// `WASMPROF_METRIC=time`: the sampled metric under node, where a worker samples the
/// state module's shared memory. The counts stay exact, and a run of fib(32) (7 M calls,
/// tens of milliseconds) has its samples, most of them in fib.
#[test]
fn the_sampled_metric_samples_under_node() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    link_calls(dir.path(), "time");
    let profile = dir.path().join("calls.json");
    let run = output(
        Command::new("node")
            .current_dir(dir.path())
            .args(["build/calls.js", "32"])
            .env("WASMPROF_OUT", &profile),
    );
    assert!(run.status.success());
    let p = Profile::read(&profile).unwrap();
    check_invariants(&p);
    assert_eq!(calls(&p, "fib"), fib_calls(32));
    let sampling = p.sampling.expect("a sampled profile");
    assert!(sampling.samples > 0, "{sampling:?}");
    let hottest = p.functions.iter().max_by_key(|f| f.cost.self_ns).unwrap();
    assert_eq!(hottest.name, "fib", "{sampling:?}");
}

/// fixtures/emcc/threads.c linked by plain emcc (`make OUT=plain`), for its output and
/// exit code without the profiler.
fn plain_threads() -> PathBuf {
    static PLAIN: OnceLock<PathBuf> = OnceLock::new();
    PLAIN
        .get_or_init(|| {
            let out = output(
                Command::new("make")
                    .current_dir(built())
                    .args(["OUT=plain", "plain/threads.js"]),
            );
            assert!(out.status.success(), "make builds the plain threads.js");
            built().join("plain/threads.js")
        })
        .clone()
}

/// `node PROGRAM ARGS` in the fixture directory (`--no-experimental-fetch`: a plain
/// 3.1.6 program loads its module with fetch under node 18+, which fails on a path):
/// exit code and stdout.
fn node_output(program: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = output(
        Command::new("node")
            .current_dir(built())
            .arg("--no-experimental-fetch")
            .arg(program)
            .args(args),
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `cargo wasmprof run --metric METRIC build/threads.js ARGS`: exit code, stdout, profile.
/// One at a time: each run instruments the program's module in place for its metric.
fn threads_run(metric: &str, args: &[&str]) -> (Option<i32>, String, Profile) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("threads.json");
    let run = output(
        wasmprof()
            .current_dir(built())
            .args(["run", "--metric", metric, "--no-report", "-o"])
            .arg(&out)
            .arg("build/threads.js")
            .args(args),
    );
    let profile = Profile::read(&out).expect("a profile of every run");
    if metric != "calls" {
        check_invariants(&profile); // of the context tree, which the calls metric lacks
    }
    (
        run.status.code(),
        String::from_utf8_lossy(&run.stdout).into_owned(),
        profile,
    )
}

/// `step`'s calls in each thread of a profile of threads.js: the main thread's, and the
/// workers' by id.
fn steps_per_thread(p: &Profile) -> (u64, Vec<u64>) {
    let steps = |q: &Profile| q.function_named("step").map_or(0, |f| f.calls);
    let main = p
        .threads
        .iter()
        .find(|t| t.id == 0)
        .expect("the main thread");
    let workers = p.threads.iter().filter(|t| t.id != 0);
    (
        steps(&main.profile),
        workers.map(|t| steps(&t.profile)).collect(),
    )
}

/// fixtures/emcc/threads.c, three pthreads of 100, 200 and 300 steps, then one of 50 in a
/// worker that ran one of them, then 7 steps on the main thread: under every metric each
/// thread's profile has its exact counts (the reused worker's two pthreads apart), the
/// merged profile their sum, and the output and exit code are the plain build's.
#[test]
fn pthreads_have_exact_counts_per_thread_under_node() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let (plain_code, plain_stdout) = node_output(&plain_threads(), &[]);
    let sum: u64 = [100u64, 200, 300, 50, 7]
        .iter()
        .map(|n| n * (n - 1) / 2)
        .sum();
    assert_eq!(plain_stdout, format!("sum {sum}\n"));
    for metric in ["calls", "instructions", "exact-time", "time"] {
        let (code, stdout, p) = threads_run(metric, &[]);
        assert_eq!((code, &stdout), (plain_code, &plain_stdout), "{metric}");
        assert_eq!(p.threads.len(), 5, "{metric}: main and four pthreads");
        assert!(p.complete, "{metric}");
        assert!(p.runs[0].threads_lost.is_empty());
        let (main, mut workers) = steps_per_thread(&p);
        workers.sort_unstable();
        assert_eq!((main, workers), (7, vec![50, 100, 200, 300]), "{metric}");
        assert_eq!(calls(&p, "step"), 657, "{metric}");
        assert_eq!(calls(&p, "work"), 5, "{metric}");
        for t in &p.threads {
            assert_eq!(t.how, "returned", "{metric}: thread {}", t.id);
        }
        if metric == "instructions" {
            // step's body is straight-line code: the same instructions every call.
            let per_call = self_instructions(&p, "step") / 657;
            for t in &p.threads {
                let q = &t.profile;
                let step = q.function_named("step").unwrap();
                assert_eq!(
                    step.cost.self_instructions,
                    Some(step.calls * per_call),
                    "thread {}",
                    t.id
                );
            }
        }
    }
}

/// The thread of 200 steps traps once the other two have returned: the program exits as
/// the plain build does, the profile names the thread and its open stack, and every
/// thread keeps its counts.
#[test]
fn a_trapping_pthread_leaves_every_threads_profile() {
    if !have(&["emcc", "node", "make"]) {
        return;
    }
    let (plain_code, plain_stdout) = node_output(&plain_threads(), &["trap"]);
    assert_ne!(plain_code, Some(0));
    for metric in ["calls", "instructions"] {
        let (code, stdout, p) = threads_run(metric, &["trap"]);
        assert_eq!((code, &stdout), (plain_code, &plain_stdout), "{metric}");
        assert!(!p.complete);
        let trapper = p
            .threads
            .iter()
            .find(|t| t.how.starts_with("trapped"))
            .expect("the trapping thread");
        assert_eq!(trapper.how, "trapped: unreachable");
        assert_eq!(
            p.runs[0].trap.as_deref(),
            Some(format!("thread {}: unreachable", trapper.id).as_str())
        );
        assert_eq!(
            p.runs[0].open_stack.last().map(String::as_str),
            Some("work"),
            "{metric}"
        );
        assert_eq!(calls(&trapper.profile, "step"), 200);
        let (main, mut workers) = steps_per_thread(&p);
        workers.sort_unstable();
        assert_eq!((main, workers), (0, vec![100, 200, 300]), "{metric}");
        for t in p.threads.iter().filter(|t| t.id != trapper.id && t.id != 0) {
            assert_eq!(t.how, "returned");
        }
        let main = p.threads.iter().find(|t| t.id == 0).unwrap();
        assert_eq!(main.how, format!("ended by thread {}'s trap", trapper.id));
    }
}
