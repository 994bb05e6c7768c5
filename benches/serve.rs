//! A server's throughput, profiled and plain: `cargo bench --bench serve`.
//!
//! fixtures/http (a wasi:http/proxy component, release build, names and DWARF kept), or
//! the fixture an argument names (`cargo bench --bench serve -- spin`: a WASI 0.3 service
//! of the same routes, Spin SDK 7's), served
//! by `cargo wasmprof serve` and by `cargo wasmprof serve --no-instrument` (the same server
//! without the profiler) in turn, ROUNDS times each, interleaved; each time a load of
//! WARM_UP then MEASURED keep-alive requests, the routes in turn, on 1 connection and on 8,
//! from a client in this process. The medians of the requests per second, and their ratio;
//! beside them `serve --metric calls` (the probes alone, no sampler) and its ratio.
//! `SERVE_ARGS` adds flags to our servers (`SERVE_ARGS="--workers 2"`).
//! Where a `wasmtime` CLI is found (`$WASMTIME`, else on `PATH`), `wasmtime serve` and
//! `wasmtime serve --profile=guest` (its GuestProfiler, sampling every millisecond as ours
//! does) under the same load, interleaved with them.

#[path = "common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cargo_wasmprof::build::{Mode, Target};
use common::median;

const ROUNDS: usize = 5;
const WARM_UP: usize = 200;
const MEASURED: usize = 3000;
/// The mixed requests: two handlers of known work, and one that does almost none.
const ROUTES: [&str; 3] = ["/fib?n=15", "/fib?n=20", "/hello"];

/// A server under the load.
#[derive(Clone, Copy, PartialEq)]
enum Server {
    /// `cargo wasmprof serve`: plain, profiled, or profiled with `--metric calls`.
    Ours { profiled: bool, calls: bool },
    /// `wasmtime serve`, with its guest profiler or not.
    Wasmtime { profiled: bool },
}

fn main() {
    let fixture = std::env::args()
        .nth(1)
        .filter(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "http".into());
    let component = common::fixture_for(&fixture, Mode::Serve, Target::Wasip2)
        .into_iter()
        .next()
        .expect("the fixture builds a component");
    let wasmtime = std::env::var_os("WASMTIME")
        .map(PathBuf::from)
        .or_else(|| which::which("wasmtime").ok());
    let mut servers = vec![
        Server::Ours {
            profiled: false,
            calls: false,
        },
        Server::Ours {
            profiled: true,
            calls: false,
        },
        Server::Ours {
            profiled: true,
            calls: true,
        },
    ];
    if wasmtime.is_some() {
        servers.extend([
            Server::Wasmtime { profiled: false },
            Server::Wasmtime { profiled: true },
        ]);
    }
    println!(
        "requests per second on {:?}, median of {ROUNDS} interleaved rounds of {MEASURED}",
        ROUTES
    );
    println!(
        "{:<12} {:>8} {:>9} {:>6} {:>8} {:>6}{}",
        "connections",
        "plain",
        "profiled",
        "ratio",
        "calls",
        "ratio",
        match wasmtime {
            Some(_) => format!(
                " {:>14} {:>15} {:>6}",
                "wasmtime serve", "--profile=guest", "ratio"
            ),
            None => String::new(),
        }
    );
    for connections in [1, 8] {
        let mut rates = vec![Vec::new(); servers.len()];
        for round in 0..ROUNDS {
            // Each round in another order.
            for k in 0..servers.len() {
                let i = (k + round) % servers.len();
                let port = 18300 + (round * servers.len() + k) as u16;
                let load = Load { connections, port };
                rates[i].push(serve(
                    servers[i],
                    &component.path,
                    wasmtime.as_deref(),
                    load,
                ));
            }
        }
        let rates: Vec<f64> = rates.into_iter().map(median).collect();
        let mut row = format!(
            "{connections:<12} {:>8.0} {:>9.0} {:>5.2}x {:>8.0} {:>5.2}x",
            rates[0],
            rates[1],
            rates[1] / rates[0],
            rates[2],
            rates[2] / rates[0]
        );
        if rates.len() == 5 {
            row += &format!(
                " {:>14.0} {:>15.0} {:>5.2}x",
                rates[3],
                rates[4],
                rates[4] / rates[3]
            );
        }
        println!("{row}");
    }
}

/// A load: its connections, and the port its server listens on.
struct Load {
    connections: usize,
    port: u16,
}

/// More flags for our servers, from `SERVE_ARGS` (`SERVE_ARGS="--workers 2"`).
fn extra_args() -> Vec<String> {
    std::env::var("SERVE_ARGS")
        .map(|a| a.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

/// Requests per second of one `server` of `component` under `load`.
fn serve(server: Server, component: &Path, wasmtime: Option<&Path>, load: Load) -> f64 {
    let total = WARM_UP + MEASURED;
    let addr = format!("127.0.0.1:{}", load.port);
    let profile_file = std::env::temp_dir().join("wasmprof-serve-bench.json");
    let mut command = match server {
        Server::Ours { profiled, calls } => {
            let mut command = Command::new(env!("CARGO_BIN_EXE_cargo-wasmprof"));
            command
                .args([
                    "wasmprof",
                    "serve",
                    "--quiet",
                    "--no-report",
                    "--addr",
                    &addr,
                ])
                .args(["--requests", &total.to_string()])
                .args(extra_args());
            if calls {
                command.args(["--metric", "calls"]);
            }
            match profiled {
                true => command.arg("-o").arg(&profile_file),
                false => command.arg("--no-instrument"),
            };
            command
        }
        Server::Wasmtime { profiled } => {
            let mut command = Command::new(wasmtime.expect("a wasmtime CLI"));
            // `-S cli`: the WASI interfaces beside the proxy world (Rust's std imports
            // wasi:cli/environment), as `cargo wasmprof serve` gives them.
            command.args(["serve", "-S", "cli", "--addr", &addr]);
            if profiled {
                let path = profile_file.display();
                command.arg(format!("--profile=guest,{path},1ms"));
            }
            command.stderr(Stdio::null());
            command
        }
    };
    let mut child = command
        .arg(component)
        .stdout(Stdio::null())
        .spawn()
        .expect("the server starts");
    run_load(load.port, WARM_UP, 1);
    let started = Instant::now();
    run_load(load.port, MEASURED, load.connections);
    let rate = MEASURED as f64 / started.elapsed().as_secs_f64();
    match server {
        Server::Ours { .. } => wait(&mut child),
        // `wasmtime serve` serves until stopped.
        Server::Wasmtime { .. } => {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    rate
}

/// `n` requests, the routes in turn, over `connections` keep-alive connections at once.
fn run_load(port: u16, n: usize, connections: usize) {
    std::thread::scope(|scope| {
        for c in 0..connections {
            let share = n / connections + usize::from(c < n % connections);
            scope.spawn(move || {
                let mut client = Client::connect(port);
                for i in 0..share {
                    client.get(ROUTES[(c + i) % ROUTES.len()]);
                }
            });
        }
    });
}

/// The server's end, which `--requests` makes.
fn wait(server: &mut Child) {
    let status = server.wait().expect("the server ends");
    assert!(status.success(), "serve: {status}");
}

/// An HTTP/1.1 client of one keep-alive connection.
struct Client(BufReader<TcpStream>);

impl Client {
    /// Connects to the server on `port`, waiting for it to listen.
    fn connect(port: u16) -> Client {
        let started = Instant::now();
        loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(stream) => {
                    stream.set_nodelay(true).unwrap();
                    return Client(BufReader::new(stream));
                }
                Err(e) if started.elapsed() < Duration::from_secs(60) => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("the server does not listen on {port}: {e}"),
            }
        }
    }

    /// GETs `path`, reads the whole response, and checks that it is a 200.
    fn get(&mut self, path: &str) {
        let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        self.0.get_mut().write_all(request.as_bytes()).unwrap();
        let mut line = String::new();
        self.0.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{path}: {line}");
        let (mut length, mut chunked) = (None, false);
        loop {
            line.clear();
            self.0.read_line(&mut line).unwrap();
            let header = line.trim_end().to_ascii_lowercase();
            if header.is_empty() {
                break;
            }
            if let Some(n) = header.strip_prefix("content-length:") {
                length = n.trim().parse::<usize>().ok();
            }
            chunked |= header == "transfer-encoding: chunked";
        }
        match (length, chunked) {
            (Some(n), _) => self.skip(n),
            (None, true) => loop {
                line.clear();
                self.0.read_line(&mut line).unwrap();
                let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
                self.skip(size + 2);
                if size == 0 {
                    break;
                }
            },
            (None, false) => panic!("{path}: a response of no known length"),
        }
    }

    fn skip(&mut self, n: usize) {
        let mut buf = vec![0; n];
        self.0.read_exact(&mut buf).unwrap();
    }
}
