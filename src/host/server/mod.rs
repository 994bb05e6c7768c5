//! `serve`: a `wasi:http` component served as `wasmtime serve` serves it
//! (wasmtime-wasi-http): a WASI 0.2 proxy in a fresh instance for every request, a WASI
//! 0.3 service in instances that each serve many; each instance profiled, the profiles
//! merged as they come.
//!
//! Three parts, each in its own threads:
//! - [`listen`]: the HTTP/1 server (hyper, on a tokio runtime of one thread), which hands
//!   each request to a worker and answers with what the handler gave;
//! - [`worker`] (a proxy's) and [`p3_worker`] (a service's): threads that each run one
//!   instance at a time, no lock on the hot path, and the stack sampler walks the thread's own
//!   stack, as in `run`. Each worker's CPU time is sampled by its own clock, so a request's
//!   time is its handler's, however many requests share the CPUs;
//! - [`collect`]: one thread that decodes each request's profile and merges them, counts
//!   the requests route by route, and says when `--requests N` have been answered.

mod collect;
mod listen;
mod p3_worker;
mod worker;

pub use p3_worker::Reuse;

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use wasmtime::component::Linker;
use wasmtime_wasi::{WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::sync::ProxyPre;
use wasmtime_wasi_http::p3::bindings::ServicePre;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::component::{CompiledComponent, ComponentCtx};
use super::stacks::Clock;
use super::Prepared;
use crate::error::HostError;
use crate::meta;
use crate::profile::{Profile, Requests};
use crate::status::Status;

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Stop once this many requests have been answered (else at SIGINT or SIGTERM).
    pub requests: Option<u64>,
    /// The threads that run requests: how many are in flight at once.
    pub workers: usize,
    /// How many requests an instance of a WASI 0.3 service serves, and how many at once.
    pub instance_reuse: Reuse,
    /// The stack sampler's interval of each worker's CPU time (`None`: its own).
    pub sample_interval: Option<Duration>,
}

/// What serving left.
#[derive(Debug)]
pub struct Served {
    /// The requests' profiles merged, for a component that carries the profiler.
    pub profile: Option<Profile>,
    /// The requests, route by route.
    pub requests: Requests,
}

/// A request's store: a component's, and its wasi:http context, which shares its
/// resources.
struct ServeCtx {
    component: ComponentCtx,
    http: WasiHttpCtx,
}

impl WasiView for ServeCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.component.ctx()
    }
}

impl WasiHttpView for ServeCtx {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.component.table,
            hooks: Default::default(),
        }
    }
}

/// Serves the prepared component on `config.addr` until `config.requests` have been
/// answered or the process is told to stop (SIGINT, SIGTERM); `status` shows the requests
/// so far.
pub fn serve(
    prepared: &Prepared,
    config: &ServeConfig,
    status: Status,
) -> Result<Served, HostError> {
    let listener = listener(prepared, config)?;
    let mut compiled = CompiledComponent::new(&prepared.wasm, prepared.meta.as_ref())
        .map_err(HostError::refused)?;
    let handler = Handler::of(&compiled, &prepared.wasm).map_err(HostError::refused)?;
    let interval = config
        .sample_interval
        .unwrap_or_else(|| crate::sampling::default_interval(meta::Sampler::Stacks));
    let sampler = compiled.sampler_on(interval, Clock::ThreadCpu);
    let module = crate::fsutil::relative(&prepared.path);
    let stopping = AtomicBool::new(false);
    let stop = Arc::new(tokio::sync::Notify::new());
    let (jobs, queue) = mpsc::channel::<listen::Job>();
    let queue = Mutex::new(queue);
    let arrivals = Arc::new(tokio::sync::Notify::new());
    let (done, reports) = mpsc::channel::<worker::Done>();
    announce(status, config, &module);
    let spinner = status.spinner("Serving", format!("http://{}/", config.addr));
    let started = Instant::now();
    let shared = worker::Shared {
        compiled: &compiled,
        sampler: sampler.as_ref(),
        queue: &queue,
        arrivals: &arrivals,
        stopping: &stopping,
    };
    let collected = std::thread::scope(|scope| {
        for _ in 0..config.workers.max(1) {
            let done = done.clone();
            let (shared, handler) = (&shared, &handler);
            scope.spawn(move || match handler {
                Handler::Proxy(pre) => worker::run(shared, pre, done),
                Handler::Service(pre) => p3_worker::run(shared, pre, config.instance_reuse, done),
            });
        }
        drop(done);
        let collector = scope.spawn(|| {
            let limit = config.requests;
            collect::run(
                reports,
                prepared.meta.as_ref(),
                &module,
                limit,
                &stop,
                &spinner,
            )
        });
        let queue = listen::Queue {
            jobs,
            arrivals: Arc::clone(&arrivals),
        };
        let listened = listen::run(listener, queue, &stop);
        stopping.store(true, std::sync::atomic::Ordering::Relaxed);
        let collected = collector.join();
        listened.map(|()| collected)
    });
    drop(sampler);
    drop(spinner);
    let collected = collected
        .map_err(HostError::refused)?
        .map_err(|_| HostError::refused(anyhow::anyhow!("the collector thread panicked")))?
        .map_err(HostError::refused)?;
    status.done(
        "Served",
        format!(
            "{} requests in {:.2}s",
            collected.requests.total(),
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(collected)
}

/// The socket to serve `prepared` on, bound to `config.addr`: a component's (a core module
/// is refused first).
fn listener(prepared: &Prepared, config: &ServeConfig) -> Result<std::net::TcpListener, HostError> {
    if !wasmparser::Parser::is_component(&prepared.wasm) {
        return Err(HostError::refused(anyhow::anyhow!(
            "is a core module: `serve` takes a wasi:http/proxy component (one built for \
             wasm32-wasip2 that exports wasi:http/incoming-handler)"
        )));
    }
    std::net::TcpListener::bind(config.addr)
        .with_context(|| format!("cannot listen on {}", config.addr))
        .map_err(HostError::refused)
}

/// Says where the server of `module` listens, and what stops it.
fn announce(status: Status, config: &ServeConfig, module: &str) {
    let stops = match config.requests {
        Some(n) => format!("stops after {n} requests"),
        None => "Ctrl-C stops it and reports".to_string(),
    };
    status.step(
        "Listening",
        format!("on http://{}/ for {module} ({stops})", config.addr),
    );
}

/// The component ready to instantiate, its imports linked: WASI's and wasi:http's, as
/// `wasmtime serve` gives them.
enum Handler {
    /// A WASI 0.2 `wasi:http/proxy` (its `wasi:http/incoming-handler`): an instance for
    /// every request.
    Proxy(ProxyPre<ServeCtx>),
    /// A WASI 0.3 service (its `wasi:http/handler@0.3`): an instance for many requests.
    Service(ServicePre<ServeCtx>),
}

impl Handler {
    /// The handler that `compiled`, the component `wasm`, exports.
    fn of(compiled: &CompiledComponent, wasm: &[u8]) -> anyhow::Result<Handler> {
        let mut linker: Linker<ServeCtx> = Linker::new(&compiled.engine);
        use crate::instrument::component::{wasi_03, Wasi03};
        if !matches!(wasi_03(wasm), Wasi03::Service(_)) {
            wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
            wasmtime_wasi_http::p2::add_only_http_to_linker_sync(&mut linker)?;
            let pre = instantiate_pre(&linker, compiled)?;
            return ProxyPre::new(pre)
                .map(Handler::Proxy)
                .map_err(anyhow::Error::from)
                .context(
                    "the component is no wasi:http/proxy component: it exports no \
                     wasi:http/incoming-handler",
                );
        }
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi::p3::add_to_linker(&mut linker)?;
        wasmtime_wasi_http::p3::add_to_linker(&mut linker)?;
        let pre = instantiate_pre(&linker, compiled)?;
        ServicePre::new(pre)
            .map(Handler::Service)
            .map_err(anyhow::Error::from)
            .context("the component's wasi:http/handler is not the one WASI 0.3.0 defines")
    }
}

/// `compiled` ready to instantiate with what `linker` gives.
fn instantiate_pre(
    linker: &Linker<ServeCtx>,
    compiled: &CompiledComponent,
) -> anyhow::Result<wasmtime::component::InstancePre<ServeCtx>> {
    linker
        .instantiate_pre(&compiled.component)
        .map_err(anyhow::Error::from)
        .context("the component imports what a wasi:http server does not give")
}
