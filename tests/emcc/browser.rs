//! A `wasmprof-emcc` program's page in headless Chromium gets its profile.

use super::*;
use cargo_wasmprof::meta::StateLocation;

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
    // A current Chromium allows a module two memories: the state is the module's own.
    assert_eq!(p.runs[0].state, Some(StateLocation::OwnMemory));
    check_invariants(&p);
    assert_eq!(calls(&p, "fib"), fib_calls(10));
    assert_eq!(arc(&p, "apply", "mul"), 3);
}
