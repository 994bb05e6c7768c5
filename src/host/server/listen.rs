//! The HTTP/1 server: hyper on a tokio runtime of one thread, which accepts connections
//! until told to stop, hands each request to the workers' queue, and answers with the
//! response its handler gave, or with a 500 where the handler gave none.

use std::convert::Infallible;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use tokio::sync::{oneshot, watch, Notify};
use tokio::task::JoinSet;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

/// What the handler answers: its response, or the error it set.
pub(super) type Answer = Result<hyper::Response<HyperOutgoingBody>, ErrorCode>;

/// A request on its way to a worker.
pub(super) struct Job {
    /// The request.
    pub(super) request: hyper::Request<Incoming>,
    /// Its route: the method and the path (`GET /fib`).
    pub(super) route: String,
    /// When it arrived.
    pub(super) arrived: Instant,
    /// Where its handler's answer goes.
    pub(super) answer: oneshot::Sender<Answer>,
}

/// Where requests go: the workers' queue, and a notice to the workers that wait on more
/// than the queue (a WASI 0.3 service's, busy with requests that wait).
#[derive(Clone)]
pub(super) struct Queue {
    pub(super) jobs: mpsc::Sender<Job>,
    pub(super) arrivals: Arc<Notify>,
}

/// Accepts connections on `listener` and serves their requests through `jobs` until `stop`
/// is notified, or the process gets SIGINT or SIGTERM; then answers the requests in flight.
pub(super) fn run(
    listener: std::net::TcpListener,
    jobs: Queue,
    stop: &Arc<Notify>,
) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_io()
        .enable_time()
        .build()
        .context("cannot start the server's runtime")?;
    let stop = Arc::clone(stop);
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let (stopping, stopped) = watch::channel(false);
        let mut connections = JoinSet::new();
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => accepted?.0,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                () = stop.notified() => break,
                _ = tokio::signal::ctrl_c() => break,
                _ = terminate.recv() => break,
            };
            // Each response as soon as it is written: small writes wait for no ACK.
            stream.set_nodelay(true)?;
            connections.spawn(connection(stream, jobs.clone(), stopped.clone()));
        }
        // The requests in flight are answered, then every connection closes.
        let _ = stopping.send(true);
        let drained = async { while connections.join_next().await.is_some() {} };
        let _ = tokio::time::timeout(DRAIN, drained).await;
        anyhow::Ok(())
    });
    runtime.shutdown_background();
    served
}

/// How long the connections get to answer the requests in flight once the server stops.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves the requests of one connection until the client closes it, or, once `stopped`
/// says so, until its request in flight is answered.
async fn connection(
    stream: tokio::net::TcpStream,
    jobs: Queue,
    mut stopped: watch::Receiver<bool>,
) {
    let service = hyper::service::service_fn(move |request| {
        let jobs = jobs.clone();
        async move { Ok::<_, Infallible>(handle(request, &jobs).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    // A client that goes away ends its connection; the others go on.
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = async { while !*stopped.borrow_and_update() && stopped.changed().await.is_ok() {} } => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Hands `request` to a worker and gives the response its handler answered with: a 500
/// where it answered an error, or none (it trapped, or returned without answering), and a
/// 503 once the server stops.
async fn handle(
    request: hyper::Request<Incoming>,
    jobs: &Queue,
) -> hyper::Response<HyperOutgoingBody> {
    let (answer, answered) = oneshot::channel();
    let job = Job {
        route: format!("{} {}", request.method(), request.uri().path()),
        request,
        arrived: Instant::now(),
        answer,
    };
    if jobs.jobs.send(job).is_err() {
        return plain(503, "the server is stopping\n".into());
    }
    jobs.arrivals.notify_waiters();
    match answered.await {
        Ok(Ok(response)) => response,
        Ok(Err(code)) => plain(500, format!("the handler answered an error: {code:?}\n")),
        Err(_) => plain(
            500,
            "the handler trapped or returned without answering\n".into(),
        ),
    }
}

/// A response of `status` with `text` as its body.
fn plain(status: u16, text: String) -> hyper::Response<HyperOutgoingBody> {
    let body = Full::new(Bytes::from(text))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut response = hyper::Response::new(body);
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    response
}
