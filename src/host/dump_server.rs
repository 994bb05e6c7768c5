//! A server of ours on 127.0.0.1 for a program that runs in a browser page: it serves the
//! profiler's JS runtime (the ES module the instrumented module imports its state from)
//! and takes the dumps the runtime posts: one so far now and then while the tests run
//! ([`DumpServer::so_far_url`]), and the last when they are done. A run that the runner ends
//! early (its timeout) still leaves the latest.
//!
//! The page is another origin (the runner's server, another port), often cross-origin
//! isolated (`Cross-Origin-Embedder-Policy: require-corp`), so every answer allows any
//! origin (CORS) and any embedder (CORP). The runtime posts the dump as `text/plain`, a
//! request that needs no preflight.

use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use tiny_http::{Header, Method, Request, Response, Server};

/// Where the runtime is served.
const RUNTIME_PATH: &str = "/wasmprof.js";
/// Where the dump is posted.
const DUMP_PATH: &str = "/dump";
/// The query of a dump posted while the tests still run.
const SO_FAR_QUERY: &str = "so-far";

/// A dump the page posted.
#[derive(Debug, PartialEq, Eq)]
pub struct Posted {
    /// The dump.
    pub dump: Vec<u8>,
    /// It was posted while the tests still ran (the page posted no dump at their end).
    pub so_far: bool,
}

/// The running server.
pub struct DumpServer {
    server: Arc<Server>,
    base: String,
    /// The runtime it serves, once [`DumpServer::serve`] gave it (it names the server's
    /// URLs, so it is written once the server is up).
    runtime: Arc<OnceLock<String>>,
    dump: Arc<Mutex<Option<Posted>>>,
    thread: Option<JoinHandle<()>>,
}

impl DumpServer {
    /// Starts the server on a free port of 127.0.0.1.
    pub fn start() -> std::io::Result<DumpServer> {
        let server = Server::http("127.0.0.1:0").map_err(std::io::Error::other)?;
        let address = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| std::io::Error::other("not an IP address"))?;
        let server = Arc::new(server);
        let runtime = Arc::new(OnceLock::new());
        let dump = Arc::new(Mutex::new(None));
        let thread = {
            let (server, runtime, dump) =
                (Arc::clone(&server), Arc::clone(&runtime), Arc::clone(&dump));
            std::thread::spawn(move || {
                for request in server.incoming_requests() {
                    answer(request, runtime.get().map(String::as_str), &dump);
                }
            })
        };
        Ok(DumpServer {
            server,
            base: format!("http://{address}"),
            runtime,
            dump,
            thread: Some(thread),
        })
    }

    /// The runtime's URL, the module name the instrumented module imports its state from.
    pub fn runtime_url(&self) -> String {
        format!("{}{RUNTIME_PATH}", self.base)
    }

    /// Where the runtime posts the dump.
    pub fn dump_url(&self) -> String {
        format!("{}{DUMP_PATH}", self.base)
    }

    /// Where the runtime posts the dump so far while the tests run.
    pub fn so_far_url(&self) -> String {
        format!("{}{DUMP_PATH}?{SO_FAR_QUERY}", self.base)
    }

    /// Serves `runtime` at [`DumpServer::runtime_url`] from now on (once; a second one is
    /// ignored).
    pub fn serve(&self, runtime: String) {
        let _ = self.runtime.set(runtime);
    }

    /// Stops the server and gives the dump the page posted last (the one posted when the
    /// tests were done, if it came), if it posted one.
    pub fn finish(mut self) -> Option<Posted> {
        self.stop();
        self.dump.lock().ok()?.take()
    }

    fn stop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.server.unblock();
            let _ = thread.join();
        }
    }
}

impl Drop for DumpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Answers one request: the runtime (once it is there), a dump, a preflight, or 404. A
/// dump so far never replaces the last one (an earlier request may come in after it).
fn answer(mut request: Request, runtime: Option<&str>, dump: &Mutex<Option<Posted>>) {
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let so_far = query == SO_FAR_QUERY;
    let response = match (request.method(), path, runtime) {
        (Method::Get, RUNTIME_PATH, Some(script)) => Response::from_string(script)
            .with_header(header("Content-Type", "text/javascript; charset=utf-8"))
            .boxed(),
        (Method::Post, DUMP_PATH, _) => {
            let mut body = Vec::new();
            match request.as_reader().read_to_end(&mut body) {
                Ok(_) => {
                    if let Ok(mut slot) = dump.lock() {
                        if !(so_far && slot.as_ref().is_some_and(|p| !p.so_far)) {
                            *slot = Some(Posted { dump: body, so_far });
                        }
                    }
                    Response::empty(204).boxed()
                }
                Err(_) => Response::empty(400).boxed(),
            }
        }
        (Method::Options, _, _) => Response::empty(204)
            .with_header(header("Access-Control-Allow-Methods", "GET, POST"))
            .with_header(header("Access-Control-Allow-Headers", "Content-Type"))
            .boxed(),
        _ => Response::empty(404).boxed(),
    };
    let response = response
        .with_header(header("Access-Control-Allow-Origin", "*"))
        .with_header(header("Cross-Origin-Resource-Policy", "cross-origin"))
        .with_header(header("Cache-Control", "no-store"));
    let _ = request.respond(response);
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("ASCII header")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    /// One HTTP/1.0 request to `base`, the answer's whole text.
    fn send(base: &str, request: &str) -> String {
        let address = base.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn serves_the_runtime_and_keeps_the_dump() {
        let server = DumpServer::start().unwrap();
        let base = server.base.clone();
        // No runtime before it is given.
        assert!(send(&base, "GET /wasmprof.js HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
        server.serve(format!("export const to = {:?};", server.dump_url()));
        let script = send(&base, "GET /wasmprof.js HTTP/1.0\r\n\r\n");
        assert!(script.starts_with("HTTP/1.0 200"), "{script}");
        assert!(
            script.contains("Access-Control-Allow-Origin: *"),
            "{script}"
        );
        assert!(script.ends_with(&format!("export const to = \"{base}/dump\";")));
        let posted = send(
            &base,
            "POST /dump HTTP/1.0\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\n{\"a\"",
        );
        assert!(posted.starts_with("HTTP/1.0 204"), "{posted}");
        assert!(send(&base, "GET /other HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
        // A dump so far that comes in after the last one is left out.
        send(
            &base,
            "POST /dump?so-far HTTP/1.0\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}",
        );
        let last = Posted {
            dump: b"{\"a\"".to_vec(),
            so_far: false,
        };
        assert_eq!(server.finish(), Some(last));
    }

    #[test]
    fn keeps_the_latest_dump_so_far() {
        let server = DumpServer::start().unwrap();
        let base = server.base.clone();
        for body in ["{1}", "{2}"] {
            let request = format!(
                "POST /dump?so-far HTTP/1.0\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\n{body}"
            );
            assert!(send(&base, &request).starts_with("HTTP/1.0 204"));
        }
        let latest = Posted {
            dump: b"{2}".to_vec(),
            so_far: true,
        };
        assert_eq!(server.finish(), Some(latest));
    }
}
