//! `wasmprof-emcc` programs in pages of headless Chromium, driven as wasm-bindgen's runner
//! drives it: ChromeDriver (W3C WebDriver), pages served cross-origin isolated, real time.
//! The known answers are the node tests': a page gets the same counts, per thread with
//! `-pthread`, through C++ exceptions of both kinds; the sampled metric gets its samples.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;
use cargo_wasmprof::meta::StateLocation;
use cargo_wasmprof::profile::NoSampler;

/// How long a page may take to run its program.
const PAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// The headers of a cross-origin isolated page: what `-pthread` and the word sampler's
/// worker need (SharedArrayBuffer).
const ISOLATED: &[(&str, &str)] = &[
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Embedder-Policy", "require-corp"),
];

/// The headers of a cross-origin isolated page that allows JS self-profiling (V8's sampler).
const PROFILING: &[(&str, &str)] = &[
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Embedder-Policy", "require-corp"),
    ("Document-Policy", "js-profiling"),
];

/// Serves the files under `root` on a free local port, until the process ends, each answer
/// with `headers`.
fn serve(root: PathBuf, headers: &'static [(&'static str, &'static str)]) -> u16 {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = server.server_addr().to_ip().unwrap().port();
    std::thread::spawn(move || {
        for request in server.incoming_requests() {
            let file = root.join(request.url().trim_start_matches('/'));
            let kind = match file.extension().and_then(|e| e.to_str()) {
                Some("html") => "text/html",
                Some("js") => "text/javascript",
                Some("wasm") => "application/wasm",
                _ => "application/octet-stream",
            };
            let header = |name: &str, value: &str| {
                tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap()
            };
            let _ = match std::fs::read(&file) {
                Ok(body) => {
                    let mut response = tiny_http::Response::from_data(body)
                        .with_header(header("Content-Type", kind));
                    for (name, value) in headers {
                        response = response.with_header(header(name, value));
                    }
                    request.respond(response)
                }
                Err(_) => request.respond(tiny_http::Response::empty(404)),
            };
        }
    });
    port
}

/// A free local port.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A WebDriver request to the server on `port` (`body`: a POST's parameters): its answer's
/// `value`. ChromeDriver keeps the connection open, so the answer is read by its length.
fn webdriver(port: u16, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        anyhow::ensure!(
            reader.read_line(&mut line)? > 0,
            "the answer ended in its headers"
        );
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse()?;
            }
        }
    }
    let mut json = vec![0; length];
    reader.read_exact(&mut json)?;
    let mut answer: Value = serde_json::from_slice(&json)?;
    Ok(answer["value"].take())
}

/// One Chromium at a time: on two CPUs, browsers started side by side by the tests that
/// run in parallel kept ChromeDriver from being ready in time, and the pages' samplers
/// from getting a CPU.
static ONE_BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A headless Chromium in a WebDriver session of its own ChromeDriver; both end with it.
struct Chromium {
    driver: Child,
    port: u16,
    session: String,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl Chromium {
    fn start() -> Chromium {
        // A test that failed while it held the turn leaves it poisoned, and free.
        let turn = ONE_BROWSER.lock().unwrap_or_else(|e| e.into_inner());
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let since = Instant::now();
        while webdriver(port, "GET", "/status", None).map_or(true, |status| status["ready"] != true)
        {
            assert!(
                since.elapsed() < Duration::from_secs(20),
                "chromedriver is ready"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
        ];
        let capabilities = json!({
            "capabilities": { "alwaysMatch": { "goog:chromeOptions": { "args": args } } }
        });
        let session = webdriver(port, "POST", "/session", Some(&capabilities)).unwrap();
        let session = session["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a WebDriver session: {session}"))
            .to_string();
        Chromium {
            driver,
            port,
            session,
            _turn: turn,
        }
    }

    /// A command of the session.
    fn command(&self, path: &str, body: Value) -> Value {
        let path = format!("/session/{}/{path}", self.session);
        webdriver(self.port, "POST", &path, Some(&body)).unwrap()
    }

    /// The value of the script `body` (a function body) in the page.
    fn eval(&self, body: &str) -> Value {
        self.command("execute/sync", json!({ "script": body, "args": [] }))
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let path = format!("/session/{}", self.session);
        let _ = webdriver(self.port, "DELETE", &path, None);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// What a page of `dir/build/PROGRAM.js ARGS` left: the lines the program printed, the
/// profile it got with `wasmprof.stop()`, and the one `wasmprof.profile()` gave just before.
struct PageRun {
    printed: String,
    profile: Profile,
    before_stop: Profile,
}

/// Runs `build/PROGRAM.js` with `args` in a cross-origin isolated page served from `dir`,
/// written as a user would write it (it asks for the profile with the runtime's API once
/// the program has run), and decodes the profile the page got.
fn page_run(dir: &Path, program: &str, args: &[&str]) -> PageRun {
    page_run_served(dir, program, args, ISOLATED)
}

/// [`page_run`], the page served with `headers`.
fn page_run_served(
    dir: &Path,
    program: &str,
    args: &[&str],
    headers: &'static [(&'static str, &'static str)],
) -> PageRun {
    let page = format!(
        r#"<!doctype html>
<html><body>
<script>
var printed = [];
var Module = {{
  arguments: {},
  print: function (line) {{ printed.push(line); }},
  printErr: function (line) {{ printed.push(line); }},
  postRun: [function () {{
    window.wasmprofBefore = JSON.stringify(wasmprof.profile());
    wasmprof.stop().then(function (dump) {{ window.wasmprofDump = JSON.stringify(dump); }});
  }}]
}};
['warn', 'error'].forEach(function (k) {{
  var write = console[k];
  console[k] = function () {{ printed.push(k + ': ' + Array.from(arguments).join(' ')); write.apply(console, arguments); }};
}});
window.onerror = function (message) {{ printed.push('uncaught: ' + message); }};
</script>
<script src="build/{program}.js"></script>
</body></html>
"#,
        serde_json::to_string(args).unwrap()
    );
    // A page of its own for each program and its arguments: tests run side by side.
    let html = format!("page-{program}{}.html", args.concat());
    std::fs::write(dir.join(&html), page).unwrap();
    let port = serve(dir.to_path_buf(), headers);
    let chromium = Chromium::start();
    chromium.command(
        "url",
        json!({ "url": format!("http://127.0.0.1:{port}/{html}") }),
    );
    let since = Instant::now();
    let (printed, dump, before) = loop {
        let state = chromium.eval(
            "return [typeof printed === 'object' ? printed.join('\\n') : '', window.wasmprofDump || null, window.wasmprofBefore || null];",
        );
        let printed = state[0].as_str().unwrap_or_default().to_string();
        if let (Some(dump), Some(before)) = (state[1].as_str(), state[2].as_str()) {
            break (printed, dump.to_string(), before.to_string());
        }
        assert!(
            since.elapsed() < PAGE_TIMEOUT,
            "the page of {program} ran its program in {PAGE_TIMEOUT:?}; it printed:\n{printed}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("--- the page of {program} {args:?} printed:\n{printed}");
    let decoded = |dump: String| {
        let file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
        std::fs::write(file.path(), dump).unwrap();
        let profile = Profile::read(file.path()).expect("the page's dump decodes");
        // A current Chromium allows a module two memories: the state is the module's own.
        assert_eq!(profile.runs[0].state, Some(StateLocation::OwnMemory));
        profile
    };
    PageRun {
        printed,
        profile: decoded(dump),
        before_stop: decoded(before),
    }
}

fn browser_ready() -> bool {
    have(&["emcc", "make", "chromium", "chromedriver"])
}

#[test]
fn in_headless_chromium_the_page_gets_the_profile() {
    if !browser_ready() {
        return;
    }
    let run = page_run(built(), "calls", &["10"]);
    let p = &run.profile;
    check_invariants(p);
    assert_eq!(calls(p, "fib"), fib_calls(10));
    assert_eq!(arc(p, "apply", "mul"), 3);
    assert!(run.printed.contains("fib(10) = 55"), "{}", run.printed);
}

/// fixtures/emcc/threads.c in a page: the pool's workers each keep their own state, and
/// the main thread gets every thread's exact counts when the program ends, as under node
/// (tests/emcc/threads.rs).
#[test]
fn pthreads_in_a_page_have_exact_counts_per_thread() {
    if !browser_ready() {
        return;
    }
    let run = page_run(built(), "threads", &[]);
    let p = &run.profile;
    let sum: u64 = [100u64, 200, 300, 50, 7]
        .iter()
        .map(|n| n * (n - 1) / 2)
        .sum();
    assert!(
        run.printed.contains(&format!("sum {sum}")),
        "{}",
        run.printed
    );
    assert_eq!(p.threads.len(), 5, "main and four pthreads");
    assert!(p.runs[0].threads_lost.is_empty());
    let steps = |q: &Profile| q.function_named("step").map_or(0, |f| f.calls);
    let mut workers: Vec<u64> = p
        .threads
        .iter()
        .filter(|t| t.id != 0)
        .map(|t| steps(&t.profile))
        .collect();
    workers.sort_unstable();
    let main = p
        .threads
        .iter()
        .find(|t| t.id == 0)
        .expect("the main thread");
    assert_eq!(
        (steps(&main.profile), workers),
        (7, vec![50, 100, 200, 300])
    );
    assert_eq!(calls(p, "work"), 5);
    check_invariants(p);
}

/// With the sampled metric (the fixture's build), the page's one sampler samples every
/// pthread in its own profile: with `long` each thread takes its steps 100,000 times over,
/// and every pthread's profile has sampled time in `work` or `step`, as under node
/// (tests/emcc/threads.rs).
#[test]
fn pthreads_in_a_page_are_sampled_each_in_its_own_profile() {
    if !browser_ready() {
        return;
    }
    let run = page_run(built(), "threads", &["long"]);
    let p = &run.profile;
    let sum: u64 = [100u64, 200, 300, 50, 7]
        .iter()
        .map(|n| n * (n - 1) / 2)
        .sum();
    // The program's int sum wraps, as C's does here.
    let printed = format!("sum {}", (sum * LONG_ROUNDS) as u32 as i32);
    assert!(run.printed.contains(&printed), "{}", run.printed);
    assert_eq!(p.threads.len(), 5, "main and four pthreads");
    assert_eq!(calls(p, "step"), 657 * LONG_ROUNDS);
    each_pthread_sampled(p, "the page");
}

/// C++ exceptions through instrumented frames in a page, as wasm exceptions
/// (-fwasm-exceptions) and as JS exceptions (-fexceptions: JS trampolines): every frame
/// closes, the counts and arcs are the node tests' (tests/emcc/unwinding.rs).
#[test]
fn cpp_exceptions_in_a_page_close_the_frames_they_unwind() {
    if !browser_ready() {
        return;
    }
    for program in ["exceptions", "jsexceptions"] {
        let run = page_run(built(), program, &[]);
        let p = &run.profile;
        assert!(
            run.printed.contains("sum: -9"),
            "{program}: {}",
            run.printed
        );
        check_invariants(p);
        assert!(p.complete, "{program}: every activation ended");
        assert_eq!(calls(p, "dive(int)"), 15, "{program}");
        assert_eq!(arc(p, "dive(int)", "dive(int)"), 12, "{program}");
        assert_eq!(calls(p, "after(int)"), 1, "{program}");
        assert_eq!(
            context_callers(p, "after(int)"),
            ["__original_main"],
            "{program}"
        );
    }
}

/// The sampled metric in a page that does not allow V8's sampler: a module that keeps its
/// calling contexts (`WASMPROF_CONTEXTS=1`) takes the word sampler, whose worker samples in
/// real time; the counts stay exact, and fib(32) (7 M calls) holds most of the program's
/// samples, as under node (`the_sampled_metric_samples_under_node`). The report says that
/// V8's compiling at first calls counts as the callers' time. A module without its
/// contexts (the default) has the counts, and its profile says why it has no times.
#[test]
fn the_sampled_metric_samples_in_a_page() {
    if !browser_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    link_calls(dir.path(), "time");
    let run = page_run(dir.path(), "calls", &["20"]);
    assert_eq!(calls(&run.profile, "fib"), fib_calls(20));
    let sampling = run.profile.sampling.expect("a sampled profile");
    assert_eq!(sampling.no_sampler, Some(NoSampler::NoV8Sampler));
    link_calls_with(dir.path(), &[("WASMPROF_CONTEXTS", "1")]);
    let run = page_run(dir.path(), "calls", &["32"]);
    let p = &run.profile;
    check_invariants(p);
    assert_eq!(calls(p, "fib"), fib_calls(32));
    let sampling = p.sampling.expect("a sampled profile");
    assert_eq!(sampling.sampler, cargo_wasmprof::meta::Sampler::Word);
    assert!(sampling.samples >= 20, "{sampling:?}");
    let text = hottest_and_report(p, "fib", dir.path());
    assert!(
        text.contains("V8 compiles each function at its first call"),
        "{text}"
    );
}

/// Checks that `hottest` has the most self time of `p`, and gives `p`'s text report (the
/// profile written to `dir`, read back by `cargo wasmprof report`).
fn hottest_and_report(p: &Profile, hottest: &str, dir: &Path) -> String {
    let most = p.functions.iter().max_by_key(|f| f.cost.self_ns).unwrap();
    assert_eq!(most.name, hottest, "{:?}", p.sampling);
    let file = dir.join("page.json");
    p.write(&file).unwrap();
    let report = output(wasmprof().arg("report").arg(&file));
    String::from_utf8_lossy(&report.stdout).into_owned()
}

/// The default metric in a page that allows JS self-profiling (`Document-Policy:
/// js-profiling`): V8's sampler runs there, its samples come with `wasmprof.stop()`, and
/// fib(38) (126 M calls, a few hundred milliseconds) holds most of them; the counts are
/// exact. `wasmprof.profile()` before the stop has the counts, and says why it has no
/// times.
#[test]
fn a_page_that_allows_js_self_profiling_is_sampled_by_v8() {
    if !browser_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    link_calls(dir.path(), "time");
    let run = page_run_served(dir.path(), "calls", &["38"], PROFILING);
    let p = &run.profile;
    check_invariants(p);
    assert_eq!(calls(p, "fib"), fib_calls(38));
    let sampling = p.sampling.expect("a sampled profile");
    assert_eq!(sampling.sampler, cargo_wasmprof::meta::Sampler::V8);
    assert!(
        sampling.in_page && sampling.no_sampler.is_none(),
        "{sampling:?}"
    );
    assert!(sampling.samples >= 10, "{sampling:?}");
    let before = run.before_stop.sampling.expect("a sampled profile");
    assert_eq!(calls(&run.before_stop, "fib"), fib_calls(38));
    assert_eq!(
        (before.samples, before.no_sampler),
        (0, Some(NoSampler::NotStopped))
    );
    let text = hottest_and_report(p, "fib", dir.path());
    assert!(
        text.contains("by V8's sampler (the page's JS Self-Profiling)"),
        "{text}"
    );
}

/// The word sampler (the sampled metric of a module that keeps its contexts) in a page that
/// is not cross-origin isolated: no worker can share the memory, so the counts are exact,
/// there are no times, and the console and the profile say why.
#[test]
fn a_page_not_isolated_has_counts_and_says_why_it_has_no_times() {
    if !browser_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    link_calls_with(dir.path(), &[("WASMPROF_CONTEXTS", "1")]);
    let run = page_run_served(dir.path(), "calls", &["20"], &[]);
    let p = &run.profile;
    check_invariants(p);
    assert_eq!(calls(p, "fib"), fib_calls(20));
    let sampling = p.sampling.expect("a sampled profile");
    assert_eq!(sampling.samples, 0, "{sampling:?}");
    assert_eq!(sampling.no_sampler, Some(NoSampler::NotIsolated));
    assert!(
        run.printed
            .contains("warn: wasmprof: the page is not cross-origin isolated"),
        "{}",
        run.printed
    );
}
