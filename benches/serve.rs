//! A server's throughput, profiled and plain: `cargo bench --bench serve`.
//!
//! fixtures/http (a wasi:http/proxy component, release build, names and DWARF kept) served
//! by `cargo wasmprof serve` and by `cargo wasmprof serve --no-instrument` (the same server
//! without the profiler) in turn, ROUNDS times each, interleaved; each time a load of
//! WARM_UP then MEASURED keep-alive requests, the routes in turn, on 1 connection and on 8,
//! from a client in this process. The medians of the requests per second, and their ratio.

#[path = "common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cargo_wasmprof::build::{Mode, Target};
use common::median;

const ROUNDS: usize = 5;
const WARM_UP: usize = 200;
const MEASURED: usize = 3000;
/// The mixed requests: two handlers of known work, and one that does almost none.
const ROUTES: [&str; 3] = ["/fib?n=15", "/fib?n=20", "/hello"];

fn main() {
    let component = common::fixture_for("http", Mode::Serve, Target::Wasip2)
        .into_iter()
        .next()
        .expect("fixtures/http builds a component");
    println!(
        "`serve` against `serve --no-instrument` on {:?}: requests per second, median of {ROUNDS} interleaved rounds of {MEASURED}",
        ROUTES
    );
    println!(
        "{:<14} {:>10} {:>10} {:>8}",
        "connections", "plain", "profiled", "ratio"
    );
    for connections in [1, 8] {
        let (mut plain, mut profiled) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            for profile in [round % 2 == 0, round % 2 == 1] {
                let rate = serve(&component.path, profile, connections, 18300 + round as u16);
                match profile {
                    true => profiled.push(rate),
                    false => plain.push(rate),
                }
            }
        }
        let (plain, profiled) = (median(plain), median(profiled));
        println!(
            "{connections:<14} {plain:>10.0} {profiled:>10.0} {:>7.2}x",
            profiled / plain
        );
    }
}

/// Requests per second of one server of `component` (`profile`d or plain) on `port`, under
/// the load of `connections` clients.
fn serve(component: &std::path::Path, profile: bool, connections: usize, port: u16) -> f64 {
    let total = WARM_UP + MEASURED;
    let mut command = Command::new(env!("CARGO_BIN_EXE_cargo-wasmprof"));
    command
        .args(["wasmprof", "serve", "--quiet", "--no-report"])
        .args(["--addr", &format!("127.0.0.1:{port}")])
        .args(["--requests", &total.to_string()]);
    if profile {
        let out = std::env::temp_dir().join("wasmprof-serve-bench.json");
        command.arg("-o").arg(out);
    } else {
        command.arg("--no-instrument");
    }
    let mut server = command
        .arg(component)
        .stdout(Stdio::null())
        .spawn()
        .expect("cargo-wasmprof serve starts");
    load(port, WARM_UP, 1);
    let started = Instant::now();
    load(port, MEASURED, connections);
    let rate = MEASURED as f64 / started.elapsed().as_secs_f64();
    wait(&mut server);
    rate
}

/// `n` requests, the routes in turn, over `connections` keep-alive connections at once.
fn load(port: u16, n: usize, connections: usize) {
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
