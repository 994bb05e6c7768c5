//! The workers: each a thread that takes one request at a time from the queue and runs its
//! handler in a fresh instance of its own (as `wasmtime serve` does), synchronously, its
//! CPU time sampled by its own clock, then reports what the request cost.

use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use wasmtime::Store;
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::p2::bindings::sync::ProxyPre;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpView as _};

use super::listen::Job;
use super::ServeCtx;
use crate::host::caught_memories::Catching;
use crate::host::component::{CompiledComponent, ComponentCtx};
use crate::host::instance::Ending;
use crate::host::stacks::{Exits, Sampling, StackSampler};
use crate::profile::{Answer, Dump, DumpSum};

/// What the workers share.
pub(super) struct Shared<'a> {
    pub(super) compiled: &'a CompiledComponent<'a>,
    pub(super) sampler: Option<&'a StackSampler>,
    pub(super) queue: &'a Mutex<mpsc::Receiver<Job>>,
    /// Notified as each request is queued, for the workers that wait on more than the queue.
    pub(super) arrivals: &'a tokio::sync::Notify,
    pub(super) stopping: &'a AtomicBool,
}

/// What a worker tells the collector.
pub(super) enum Done {
    /// A request was answered.
    Request(Report),
    /// The worker stops: the sum of the profiler states of the requests it summed.
    Summed(Dump),
}

/// What one request cost, and how it was answered.
pub(super) struct Report {
    /// Its route.
    pub(super) route: String,
    /// How it was answered, how long it took and its CPU time.
    pub(super) answer: Answer,
    /// Its trap's message, if its handler trapped.
    pub(super) trap: Option<String>,
    /// Its instance's profiler state, for a component that carries the profiler, unless
    /// the worker summed it.
    pub(super) dump: Option<Dump>,
}

/// How often an idle worker looks whether the server is stopping.
const IDLE_CHECK: Duration = Duration::from_millis(50);

/// Runs requests from the queue until the server stops, each one's report sent to `done`,
/// each in a new instance of `pre`; then the sum of the states it summed (each request
/// that ended cleanly, where the state is counters alone: decoding each would cost more
/// than the request).
pub(super) fn run(shared: &Shared, pre: &ProxyPre<ServeCtx>, done: mpsc::Sender<Done>) {
    let mut sampling = shared
        .sampler
        .and_then(|sampler| sampler.sample_this_thread(None).ok());
    let finder = Exits::finder(&shared.compiled.engine);
    let mut sum = shared.compiled.meta.and_then(DumpSum::new);
    while let Some(job) = waiting(sampling.as_ref(), || next_job(shared)) {
        let report = serve_one(
            shared,
            pre,
            job,
            (sampling.as_mut(), sum.as_mut()),
            finder.as_ref(),
        );
        if done.send(Done::Request(report)).is_err() {
            break;
        }
    }
    if let Some(sampling) = sampling {
        drop(sampling.finish());
    }
    if let Some(dump) = sum.and_then(DumpSum::into_dump) {
        let _ = done.send(Done::Summed(dump));
    }
}

/// `wait` for the next request, the thread's sampling (if any) idle meanwhile.
pub(super) fn waiting<T>(sampling: Option<&Sampling>, wait: impl FnOnce() -> T) -> T {
    match sampling {
        Some(sampling) => sampling.idle(wait),
        None => wait(),
    }
}

/// The next request from the queue; none once the server stops.
pub(super) fn next_job(shared: &Shared) -> Option<Job> {
    while !shared.stopping.load(Ordering::Relaxed) {
        let job = shared
            .queue
            .lock()
            .map_err(|_| ())
            .and_then(|queue| queue.recv_timeout(IDLE_CHECK).map_err(|_| ()));
        if let Ok(job) = job {
            return Some(job);
        }
    }
    None
}

/// The next request from the queue, if one is there and no other worker is waiting on it
/// (that one takes it).
pub(super) fn try_job(shared: &Shared) -> Option<Job> {
    shared.queue.try_lock().ok()?.try_recv().ok()
}

/// A request's store, for an instance of `compiled`: WASI with the server's stdout, stderr
/// and environment, and wasi:http.
pub(super) fn new_store(compiled: &CompiledComponent) -> Store<ServeCtx> {
    Store::new(
        &compiled.engine,
        ServeCtx {
            component: ComponentCtx {
                wasi: WasiCtxBuilder::new()
                    .inherit_stdout()
                    .inherit_stderr()
                    .inherit_env()
                    .build(),
                table: wasmtime::component::ResourceTable::new(),
            },
            http: WasiHttpCtx::new(),
        },
    )
}

/// Runs `job`'s handler in an instance of `pre` of its own and reports what it cost, its
/// profiler state added to `sum` where it ended cleanly and the sum has room.
fn serve_one(
    shared: &Shared,
    pre: &ProxyPre<ServeCtx>,
    job: Job,
    (mut sampling, sum): (Option<&mut Sampling>, Option<&mut DumpSum>),
    finder: Option<&wasmtime::Module>,
) -> Report {
    let cpu_started = thread_cpu_ns();
    let status = Arc::new(AtomicU16::new(0));
    let mut store = new_store(shared.compiled);
    if let (Some(sampling), Some(finder)) = (sampling.as_deref_mut(), finder) {
        sampling.set_exits(Exits::of_store_with(&mut store, finder));
    }
    let catching = Catching::begin();
    let result = instantiate_and_handle(&mut store, pre, job.request, job.answer, &status);
    let memories = catching.end();
    let latency_ns = job.arrived.elapsed().as_nanos() as u64;
    let trap = match Ending::of(&result) {
        Ending::Trapped(trap) => Some(trap),
        _ => None,
    };
    if let Some(sampling) = sampling.as_deref_mut() {
        sampling.set_exits(None);
    }
    let stacks = sampling.map(|s| s.take());
    let profiler = shared.compiled.profiler(memories).ok().flatten();
    // SAFETY (all): the store that owns the memory is alive, and its code has stopped.
    let dump = match (&profiler, sum) {
        (Some(profiler), Some(sum)) if trap.is_none() => {
            match sum.add(unsafe { profiler.state() }, stacks) {
                Ok(()) => None,
                Err(stacks) => unsafe { profiler.dump(&result, stacks) }.ok(),
            }
        }
        (Some(profiler), _) => unsafe { profiler.dump(&result, stacks) }.ok(),
        _ => None,
    };
    // The next request's instance takes this one's profiler memory, zeroed.
    if let Some(profiler) = &profiler {
        unsafe { profiler.reuse_memory() };
    }
    drop(store);
    let answered = status.load(Ordering::Relaxed);
    Report {
        route: job.route,
        answer: Answer {
            // A handler that never answered is answered 500 by the server.
            status: if answered == 0 { 500 } else { answered },
            trapped: trap.is_some(),
            latency_ns,
            cpu_ns: thread_cpu_ns().saturating_sub(cpu_started),
        },
        trap,
        dump,
    }
}

/// Instantiates the component in `store` and calls its handler with `request`, its
/// answer (and the status it had) going to `answer` and `status`.
fn instantiate_and_handle(
    store: &mut Store<ServeCtx>,
    pre: &ProxyPre<ServeCtx>,
    request: hyper::Request<hyper::body::Incoming>,
    answer: tokio::sync::oneshot::Sender<super::listen::Answer>,
    status: &Arc<AtomicU16>,
) -> wasmtime::Result<()> {
    let request = store
        .data_mut()
        .http()
        .new_incoming_request(Scheme::Http, request)?;
    let status = Arc::clone(status);
    let answer = Mutex::new(Some(answer));
    let out = store
        .data_mut()
        .http()
        .new_response_outparam_from_callback(move |response| {
            let code = response.as_ref().map_or(500, |r| r.status().as_u16());
            status.store(code, Ordering::Relaxed);
            if let Some(answer) = answer.lock().ok().and_then(|mut a| a.take()) {
                let _ = answer.send(response);
            }
        })?;
    let proxy = pre.instantiate(&mut *store)?;
    proxy
        .wasi_http_incoming_handler()
        .call_handle(&mut *store, request, out)
}

/// The calling thread's CPU time, in nanoseconds.
pub(super) fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now);
    }
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}
