//! `serve`: a wasi:http/proxy component (fixtures/http) served on loopback to a bounded load
//! from curl, sequential and concurrent; the counts follow from the handlers' code.

use std::net::TcpListener;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::components::have_target;
use super::*;

/// A free port on the loopback.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Waits until something listens on `port`: false where `server` ended first.
fn listens(port: u16, server: &mut Child) -> bool {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if server.try_wait().unwrap().is_some() {
            return false;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "serve never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// `cargo wasmprof serve ARGS` in `dir`, on `port` of the loopback, its output piped.
fn spawned(dir: &Path, port: u16, args: &[&str]) -> Child {
    wasmprof()
        .arg("serve")
        .arg(format!("--addr=127.0.0.1:{port}"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `cargo wasmprof serve ARGS` in `dir` on a free port of the loopback, once it listens:
/// the server, and the URL it serves at.
pub(super) fn serving(dir: &Path, args: &[&str]) -> (Child, String) {
    let port = free_port();
    let mut server = spawned(dir, port, args);
    assert!(listens(port, &mut server), "serve ended before it listened");
    (server, format!("http://127.0.0.1:{port}"))
}

/// `curl` of `urls` (each its body left out), with `options` first: the status codes, one
/// for each request.
pub(super) fn curl(options: &[&str], urls: &[&str]) -> Vec<u16> {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-w", "%{http_code}\\n"]).args(options);
    for url in urls {
        cmd.args(["-o", "/dev/null", url]);
    }
    let out = output(&mut cmd);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().expect("a status"))
        .collect()
}

/// The load both fixtures' servers get at `base`: `sequential` requests on one connection,
/// `/fib?n=10` and `/hello` in turn (curl keeps the connection alive), then `concurrent`
/// of `/fib?n=10` on eight connections at once; each answered 200.
pub(super) fn fib_and_hello(base: &str, sequential: usize, concurrent: usize) {
    let urls: Vec<String> = (0..sequential)
        .map(|i| match i % 2 {
            0 => format!("{base}/fib?n=10"),
            _ => format!("{base}/hello"),
        })
        .collect();
    let statuses = curl(&[], &urls.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(statuses, vec![200; sequential]);
    let glob = format!("{base}/fib?n=10&i=[1-{concurrent}]");
    let statuses = curl(&["--parallel", "--parallel-max", "8"], &[&glob]);
    assert_eq!(statuses, vec![200; concurrent]);
}

/// Checks the profile `p` of [`fib_and_hello`]'s load and one request to the route whose
/// handler calls `krate::trap` once: every call of fib and of the greeting, and the
/// trapping function's. Gives the fib requests.
pub(super) fn served_counts(
    p: &Profile,
    krate: &str,
    (sequential, concurrent): (usize, usize),
    trap: &str,
) -> u64 {
    check_invariants(p);
    let fibs = (sequential / 2 + concurrent) as u64;
    assert_eq!(calls(p, &format!("{krate}::fib")), fibs * fib_calls(10));
    assert_eq!(
        calls(p, &format!("{krate}::greeting")),
        (sequential / 2) as u64
    );
    assert_eq!(calls(p, &format!("{krate}::{trap}")), 1);
    fibs
}

/// fixtures/http built for wasm32-wasip2 in `dir`: the component.
fn component(dir: &Path) -> PathBuf {
    let out = output(
        Command::new("cargo")
            .args(["build", "--target", "wasm32-wasip2"])
            .current_dir(dir),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    dir.join("target/wasm32-wasip2/debug/http_fixture.wasm")
}

/// Sequential and concurrent requests (one of them trapping) to a profiled server: each
/// handler's calls are the requests' times its calls per request, the trapped request is
/// answered 500 and stays in the profile, and the requests are counted route by route.
#[test]
fn a_served_components_requests_are_profiled_with_the_counts_their_code_makes() {
    if !have_target("wasm32-wasip2") || !have(&["curl"]) {
        return;
    }
    let dir = copy_fixture("http");
    let wasm = component(dir.path());
    let (sequential, concurrent) = (20, 40);
    let requests = sequential + concurrent + 1;
    let (count, wasm_arg) = (requests.to_string(), wasm.to_str().unwrap());
    let args = [
        "--no-report",
        "-o",
        "served.json",
        "--requests",
        &count,
        wasm_arg,
    ];
    let (server, base) = serving(dir.path(), &args);
    fib_and_hello(&base, sequential, concurrent);
    assert_eq!(curl(&[], &[&format!("{base}/trap")]), [500]);
    let out = server.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let p = Profile::read(&dir.path().join("served.json")).unwrap();
    let fibs = served_counts(&p, "http_fixture", (sequential, concurrent), "trap");
    // Each fib request's handler calls fib once; fib calls itself for the rest.
    let outer: u64 = p
        .arcs
        .iter()
        .filter(|a| a.callee == "http_fixture::fib" && a.caller != a.callee)
        .map(|a| a.count)
        .sum();
    assert_eq!(outer, fibs);
    let served = p.requests.as_ref().expect("the requests");
    assert_eq!(served.total(), requests as u64);
    // The host called the handler once per request (an arc of the dynamic table, which the
    // workers sum by its site and callee).
    let handled: u64 = (p.arcs.iter())
        .filter(|a| a.caller == HOST && a.callee.ends_with("incoming-handler@0.2.12#handle"))
        .map(|a| a.count)
        .sum();
    assert_eq!(handled, requests as u64);
    let route = |r: &str| served.routes.iter().find(|x| x.route == r).unwrap();
    assert_eq!(route("GET /fib").requests, fibs);
    assert_eq!(route("GET /fib").server_errors, 0);
    let trap = route("GET /trap");
    assert_eq!((trap.requests, trap.trapped, trap.server_errors), (1, 1, 1));
    assert!(p.sampling.is_some_and(|s| s.cpu), "CPU time");
    // The trapped request's stack is in the profile.
    let trapped = p
        .runs
        .iter()
        .find(|r| r.trap.is_some())
        .expect("the trap's run");
    assert!(trapped.open_stack.iter().any(|f| f == "http_fixture::trap"));

    // The report of it: the requests section and the note of the trap.
    let report = output(wasmprof().arg("report").arg(dir.path().join("served.json")));
    let text = stdout(&report);
    assert!(text.contains("Requests"), "{text}");
    assert!(text.contains("GET /trap"), "{text}");
    assert!(
        text.contains("a request to GET /trap ended inside"),
        "{text}"
    );
    // A worker's CPU clock samples no thread that waits: what lands outside the program is
    // the host's work, not idleness.
    if p.sampling
        .as_ref()
        .is_some_and(|s| s.idle > 0 && s.samples > 0)
    {
        assert!(
            text.contains("outside the program's functions (the host's own work)"),
            "{text}"
        );
    }
    // What the report suggests, `serve` takes (`common::hints`).
    common::hints::check_hints(&dir.path().join("served.json"), "", |hint| {
        hint[0]
            .starts_with("--")
            .then(|| serve_once(dir.path(), &wasm, hint))
    });
}

/// `serve ARGS FILE` for one request to `/hello`: its output, or, when it refused to serve,
/// its error.
fn serve_once(dir: &Path, wasm: &Path, args: &[String]) -> Output {
    let port = free_port();
    let hint: Vec<&str> = args.iter().map(String::as_str).collect();
    let once = ["--no-report", "-o", "again.json", "--requests", "1"];
    let mut server = spawned(
        dir,
        port,
        &[&once[..], &hint, &[wasm.to_str().unwrap()]].concat(),
    );
    if listens(port, &mut server) {
        curl(&[], &[&format!("http://127.0.0.1:{port}/hello")]);
    }
    server.wait_with_output().unwrap()
}

/// Without FILE, `serve` builds the package's component for wasm32-wasip2 first; served as
/// it is (`--no-instrument -o FILE`), it reports the requests alone and writes them, and the
/// profiled server's report shows them beside its own (`--plain FILE`).
#[test]
fn serve_builds_the_packages_component_and_serves_it_plain_or_profiled() {
    if !have_target("wasm32-wasip2") || !have(&["curl"]) {
        return;
    }
    let dir = copy_fixture("http");
    for plain in [true, false] {
        let args: &[&str] = match plain {
            true => &["--requests", "2", "--no-instrument", "-o", "plain.json"],
            false => &["--requests", "2", "--plain", "plain.json"],
        };
        let (server, base) = serving(dir.path(), args);
        let hello = format!("{base}/hello");
        assert_eq!(curl(&[], &[&hello, &hello]), [200, 200]);
        let out = server.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("GET /hello"), "{text}");
        assert_eq!(text.contains("Flat profile"), !plain, "{text}");
        // The plain server's row under the profiled one's, 2 requests each.
        let rows: Vec<&str> = text.lines().filter(|l| l.contains("GET /hello")).collect();
        let shown: Vec<&str> = rows
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        match plain {
            true => assert_eq!(shown, ["2"], "{text}"),
            false => {
                assert_eq!(shown, ["2", "2"], "{text}");
                assert!(rows[1].ends_with("GET /hello (plain)"), "{text}");
            }
        }
        let profile = dir
            .path()
            .join("target/wasmprof/wasm32-wasip2/http-fixture-http_fixture-cdylib.json");
        if !plain {
            let p = Profile::read(&profile).unwrap();
            assert_eq!(calls(&p, "http_fixture::greeting"), 2);
        }
    }
    // The plain server's file reports its requests alone.
    let report = stdout(&output(
        wasmprof().arg("report").arg(dir.path().join("plain.json")),
    ));
    assert!(report.contains("GET /hello"), "{report}");
    assert!(!report.contains("Flat profile"), "{report}");
}

/// What `serve` cannot serve, each refused with one line naming the file: a core module, a
/// plain server's requests that are not, a wasi:cli command component, one that imports
/// what the proxy world does not give, and a port already taken.
#[test]
fn serve_refuses_what_it_cannot_serve() {
    if !have_target("wasm32-wasip2") {
        return;
    }
    let refused = |args: &[&str], file: &Path, says: &str| {
        let out = output(wasmprof().arg("serve").args(args).arg(file));
        assert!(!out.status.success());
        let text = stderr(&out);
        let line = text.lines().find(|l| l.starts_with("error:")).unwrap_or("");
        assert!(
            line.contains(&*file.to_string_lossy())
                || line.contains(&*file.file_name().unwrap().to_string_lossy()),
            "{text}"
        );
        assert!(line.contains(says), "{text}");
        assert!(!text.contains("panicked"), "{text}");
    };
    let core = tempfile::tempdir().unwrap();
    let module = core.path().join("core.wasm");
    std::fs::write(
        &module,
        wat::parse_str("(module (func (export \"_start\")))").unwrap(),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    refused(&["--addr", &addr], &module, "is a core module");
    // A plain server's requests that are not (read before anything is served).
    let plain = module.to_string_lossy().into_owned();
    refused(&["--plain", &plain, "--addr", &addr], &module, "not JSON");

    let order = copy_fixture("order");
    let out = output(
        Command::new("cargo")
            .args(["build", "--target", "wasm32-wasip2", "--bin", "order"])
            .current_dir(order.path()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let command = order.path().join("target/wasm32-wasip2/debug/order.wasm");
    refused(&["--addr", &addr], &command, "wasi:http/incoming-handler");

    // A component that imports an interface no server gives (served as it is: it has no
    // core module to profile).
    let foreign = core.path().join("foreign.wasm");
    let wasm =
        wat::parse_str(r#"(component (import "my:pkg/thing" (instance (export "f" (func)))))"#)
            .unwrap();
    std::fs::write(&foreign, wasm).unwrap();
    refused(
        &["--no-instrument", "--addr", &addr],
        &foreign,
        "imports what",
    );

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let http = copy_fixture("http");
    let wasm = component(http.path());
    refused(&["--addr", &addr], &wasm, "cannot listen on");
}

/// A server's workers are sampled at the interval asked for of their CPU time: perf's task
/// clock, where perf events open, gives about a sample per CPU millisecond (counted from
/// the profile's own figures: its samples over its requests' CPU, in a wide band); the
/// POSIX CPU-time timer, which `WASMPROF_CPU_TIMER=posix` chooses as where perf events are
/// closed, fires at the kernel's tick, and the profile and the report say so.
#[test]
fn a_servers_workers_are_sampled_at_the_interval_of_their_cpu_time() {
    if !have_target("wasm32-wasip2") || !have(&["curl"]) {
        return;
    }
    let dir = copy_fixture("http");
    let wasm = component(dir.path());
    for posix in [false, true] {
        let port = free_port();
        let requests = 60;
        let mut serve = wasmprof();
        serve
            .args(["serve", "-o", "served.json", "--call-graph", "0", "--addr"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--requests", &requests.to_string()])
            .arg(&wasm)
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if posix {
            serve.env(cargo_wasmprof::host::CPU_TIMER_VAR, "posix");
        }
        let mut server = serve.spawn().unwrap();
        assert!(listens(port, &mut server), "serve ended before it listened");
        // fib(25) in an unoptimized build: milliseconds of CPU a request.
        let glob = format!("http://127.0.0.1:{port}/fib?n=25&i=[1-{requests}]");
        assert_eq!(curl(&[], &[&glob]), vec![200; requests]);
        let out = server.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let p = Profile::read(&dir.path().join("served.json")).unwrap();
        let s = p.sampling.expect("sampled");
        assert!(s.cpu);
        let report = stdout(&out);
        assert_eq!(
            report.contains("sampled by POSIX CPU-time timers"),
            s.tick,
            "{report}"
        );
        if posix {
            assert!(s.tick, "the switch chooses the POSIX timer");
            continue;
        }
        if s.tick {
            eprintln!("perf events are closed here: the task clock is not checked");
            continue;
        }
        let cpu_ms: f64 = (p.requests.as_ref().unwrap().routes.iter())
            .map(|r| r.cpu_ns as f64 / 1e6)
            .sum();
        let per_ms = (s.samples + s.in_probes + s.idle) as f64 / cpu_ms;
        assert!(
            (0.5..=2.0).contains(&per_ms),
            "{per_ms:.2} samples per CPU ms ({cpu_ms:.1} ms): {s:?}"
        );
    }
}
