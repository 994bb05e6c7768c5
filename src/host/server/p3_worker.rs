//! The workers of a WASI 0.3 service (`wasi:http/handler@0.3`, what Spin SDK 7's
//! `#[http_service]` makes): each a thread with an event loop of its own, whose instance
//! serves requests as `wasmtime serve` serves a WASI 0.3 service: up to `serve
//! --instance-reuse N` of them (128 by default), up to `--instance-concurrency N` at once
//! (16): a worker busy with requests that wait takes the next from the queue when every
//! other worker is busy too. The profiler's state of an instance holds all its requests;
//! it is reported with the request that ends the instance: the last it may serve, one whose
//! handler trapped (that instance is done; the next request gets a new one), or the
//! server's stop.
//!
//! A request's CPU time is the worker thread's while it was in flight, shared equally with
//! the requests in flight beside it in the same instance (their tasks take turns on one
//! thread); the first request of an instance carries its instantiation.

use std::collections::HashMap;
use std::sync::mpsc;

use anyhow::Context as _;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use wasmtime::component::Accessor;
use wasmtime::Store;
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::p3::bindings::{Service, ServicePre};
use wasmtime_wasi_http::p3::Request;

use super::listen::Job;
use super::worker::{new_store, thread_cpu_ns, Done, Report, Shared};
use super::ServeCtx;
use crate::host::caught_memories::Catching;
use crate::host::component::Profiler;
use crate::host::instance::Ending;
use crate::host::stacks::{Exits, Sampling};
use crate::profile::{Answer, Dump};

/// How an instance of a WASI 0.3 service serves: how many requests in all, and how many
/// at once.
#[derive(Debug, Clone, Copy)]
pub struct Reuse {
    /// Requests an instance serves before a new one takes over.
    pub requests: u32,
    /// Requests an instance serves at once.
    pub at_once: u16,
}

/// An instance and what it has served.
struct Instance<'a> {
    store: Store<ServeCtx>,
    service: Service,
    profiler: Option<Profiler<'a>>,
    accepted: u32,
}

/// Runs requests from the queue until the server stops, each one's report sent to `done`,
/// in instances of `pre` made on this thread's event loop, each serving as `reuse` says.
pub(super) fn run(
    shared: &Shared,
    pre: &ServicePre<ServeCtx>,
    reuse: Reuse,
    done: mpsc::Sender<Done>,
) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let mut sampling = shared
        .sampler
        .and_then(|sampler| sampler.sample_this_thread(None).ok());
    let finder = Exits::finder(&shared.compiled.engine);
    let mut current: Option<Instance> = None;
    while let Some(job) =
        super::worker::waiting(sampling.as_ref(), || super::worker::next_job(shared))
    {
        // A request's CPU time includes the instantiation of the instance it is the first of.
        let cpu_started = thread_cpu_ns();
        let instance = match current.take() {
            Some(instance) => Ok(instance),
            None => runtime.block_on(instantiate(shared, pre, sampling.as_ref(), &finder)),
        };
        let mut instance = match instance {
            Ok(instance) => instance,
            Err(error) => {
                let report = not_instantiated(job, &error, cpu_started);
                if done.send(Done::Request(report)).is_err() {
                    break;
                }
                continue;
            }
        };
        let mut batch = Batch::new(job, cpu_started, &done);
        let result = runtime.block_on(batch.serve(&mut instance, shared, reuse));
        // Its requests in flight when the event loop failed end with it.
        let lost = Ending::of(&result).exit().1;
        let result = result.and(batch.trap.take().map_or(Ok(()), Err));
        let dump = match result.is_err() || instance.accepted >= reuse.requests {
            true => end(instance, &result, sampling.as_mut()),
            false => {
                current = Some(instance);
                None
            }
        };
        if !batch.finish(lost, dump) {
            break;
        }
    }
    if let Some(instance) = current {
        let dump = end(instance, &Ok(()), sampling.as_mut());
        if let Some(dump) = dump {
            let _ = done.send(Done::Summed(dump));
        }
    }
    if let Some(sampling) = sampling {
        drop(sampling.finish());
    }
}

/// A new instance of `pre`, its profiler found, its store's exits walked by the sampler.
async fn instantiate<'a>(
    shared: &Shared<'a>,
    pre: &ServicePre<ServeCtx>,
    sampling: Option<&Sampling>,
    finder: &Option<wasmtime::Module>,
) -> anyhow::Result<Instance<'a>> {
    let mut store = new_store(shared.compiled);
    if let (Some(sampling), Some(finder)) = (sampling, finder) {
        sampling.set_exits(Exits::of_store_with(&mut store, finder));
    }
    let catching = Catching::begin();
    let service = pre.instantiate_async(&mut store).await;
    let memories = catching.end();
    let made = service
        .map_err(anyhow::Error::from)
        .context("cannot instantiate the service")
        .and_then(|service| Ok((service, shared.compiled.profiler(memories)?)));
    match made {
        Ok((service, profiler)) => Ok(Instance {
            store,
            service,
            profiler,
            accepted: 0,
        }),
        Err(error) => {
            // The sampler walks no store that is gone: its exits are let go first.
            if let Some(sampling) = sampling {
                sampling.set_exits(None);
            }
            drop(store);
            Err(error)
        }
    }
}

/// A request in flight: what its report needs besides its answer.
struct InFlight {
    route: String,
    arrived: std::time::Instant,
    /// Its share of the thread's CPU time so far.
    cpu_ns: u64,
}

/// The requests an instance serves from one visit of its event loop to the next: the
/// first, and those it takes from the queue while requests are in flight. Each one's
/// report is sent as it is answered, but for the one the instance's profile goes with (a
/// trapped request's, else the last's), held until the instance is done or kept.
struct Batch<'d> {
    /// The request that started the batch, until it is taken.
    first: Option<Job>,
    /// The requests in flight, by the batch's number of each.
    in_flight: HashMap<u32, InFlight>,
    /// The thread's CPU time when it was last shared out among the requests in flight.
    cpu_seen: u64,
    /// The report the instance's profile may go with, not yet sent.
    held: Option<Report>,
    /// The first trap of a request's handler: the instance's end.
    trap: Option<wasmtime::Error>,
    /// Where the reports go: the collector.
    done: &'d mpsc::Sender<Done>,
    /// Whether the collector took every report so far.
    sent_all: bool,
}

impl<'d> Batch<'d> {
    fn new(first: Job, cpu_started: u64, done: &'d mpsc::Sender<Done>) -> Batch<'d> {
        Batch {
            first: Some(first),
            in_flight: HashMap::new(),
            cpu_seen: cpu_started,
            held: None,
            trap: None,
            done,
            sent_all: true,
        }
    }

    /// Shares the thread's CPU time since it was last shared among the requests in flight.
    fn share_cpu(&mut self) {
        let now = thread_cpu_ns();
        let n = self.in_flight.len() as u64;
        if let Some(each) = now.saturating_sub(self.cpu_seen).checked_div(n) {
            self.in_flight.values_mut().for_each(|r| r.cpu_ns += each);
        }
        self.cpu_seen = now;
    }

    /// Serves the first request in `instance`, and more from the queue while it has room
    /// (as `reuse` says) and requests in flight, until none is; gives the event loop's end
    /// (an error where the instance trapped outside a request's handler).
    async fn serve(
        &mut self,
        instance: &mut Instance<'_>,
        shared: &Shared<'_>,
        reuse: Reuse,
    ) -> wasmtime::Result<()> {
        let Instance {
            store,
            service,
            accepted,
            ..
        } = instance;
        let service = &*service;
        store
            .run_concurrent(async |store| {
                let mut handlers = FuturesUnordered::new();
                let mut next_id = 0u32;
                loop {
                    // Listening for arrivals before the queue is looked at, none is missed.
                    let arrived = shared.arrivals.notified();
                    tokio::pin!(arrived);
                    arrived.as_mut().enable();
                    // Take what there is room for: the first request, then the queue's.
                    while self.trap.is_none()
                        && handlers.len() < usize::from(reuse.at_once)
                        && *accepted < reuse.requests
                    {
                        let Some(job) =
                            self.first.take().or_else(|| super::worker::try_job(shared))
                        else {
                            break;
                        };
                        self.share_cpu();
                        *accepted += 1;
                        next_id += 1;
                        let id = next_id;
                        self.in_flight.insert(
                            id,
                            InFlight {
                                route: job.route,
                                arrived: job.arrived,
                                cpu_ns: 0,
                            },
                        );
                        handlers.push(async move {
                            (id, handle(store, service, job.request, job.answer).await)
                        });
                    }
                    if handlers.is_empty() {
                        return;
                    }
                    tokio::select! {
                        Some((id, result)) = handlers.next() => self.answered(id, result),
                        () = arrived => {}
                    }
                }
            })
            .await
    }

    /// The request `id` answered (its handler's `result`): its report sent, or held.
    fn answered(&mut self, id: u32, result: (u16, wasmtime::Result<()>)) {
        self.share_cpu();
        let Some(request) = self.in_flight.remove(&id) else {
            return;
        };
        let (status, result) = result;
        let trap = match Ending::of(&result) {
            Ending::Trapped(trap) => Some(trap),
            _ => None,
        };
        // The instance's profile goes with its first trapped request, else with its last.
        let keep = self.trap.is_none();
        if trap.is_some() && keep {
            self.trap = result.err();
        }
        let report = Report {
            route: request.route,
            answer: Answer {
                status,
                trapped: trap.is_some(),
                latency_ns: request.arrived.elapsed().as_nanos() as u64,
                cpu_ns: request.cpu_ns,
            },
            trap,
            dump: None,
        };
        let send = match keep {
            true => self.held.replace(report),
            false => Some(report),
        };
        if let Some(report) = send {
            self.send(report);
        }
    }

    fn send(&mut self, report: Report) {
        self.sent_all &= self.done.send(Done::Request(report)).is_ok();
    }

    /// After the event loop ended: the requests it left in flight (where it failed, with
    /// `lost`, its error, each answered 500 by the listener) and the held report sent, the
    /// instance's `dump` with a trapped request's report where one is, else with the held
    /// one. Gives whether the collector took them all.
    fn finish(mut self, lost: Option<String>, dump: Option<Dump>) -> bool {
        self.share_cpu();
        let mut reports: Vec<Report> = std::mem::take(&mut self.in_flight)
            .into_values()
            .map(|request| Report {
                route: request.route,
                answer: Answer {
                    status: 500,
                    trapped: true,
                    latency_ns: request.arrived.elapsed().as_nanos() as u64,
                    cpu_ns: request.cpu_ns,
                },
                trap: lost.clone(),
                dump: None,
            })
            .collect();
        reports.extend(self.held.take());
        let carrier = (reports.iter())
            .position(|r| r.trap.is_some())
            .or(reports.len().checked_sub(1));
        if let Some(at) = carrier {
            reports[at].dump = dump;
        }
        for report in reports {
            self.send(report);
        }
        self.sent_all
    }
}

/// Calls the service's handler with `request` in the instance of `store`, its response's
/// body collected on the store's event loop, then sent to `answer`; gives the status and
/// the handler's end (a trap, or none).
async fn handle(
    store: &Accessor<ServeCtx>,
    service: &Service,
    request: hyper::Request<hyper::body::Incoming>,
    answer: tokio::sync::oneshot::Sender<super::listen::Answer>,
) -> (u16, wasmtime::Result<()>) {
    let (request, io) = Request::from_http(wasmtime_wasi_http::default_hooks(), request);
    let (response, _) = tokio::join!(
        async {
            let response = match service.handle(store, request).await? {
                Ok(response) => response,
                Err(code) => return wasmtime::Result::Ok(Err(format!("{code:?}"))),
            };
            let response = store.with(|s| response.into_http(s, async { Ok(()) }))?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await.map_err(|e| {
                wasmtime::Error::msg(format!("cannot read the response's body: {e:?}"))
            })?;
            Ok(Ok(hyper::Response::from_parts(parts, body.to_bytes())))
        },
        io
    );
    match response {
        Ok(Ok(response)) => {
            let status = response.status().as_u16();
            let _ = answer.send(Ok(response.map(full)));
            (status, Ok(()))
        }
        Ok(Err(code)) => {
            let _ = answer.send(Err(ErrorCode::InternalError(Some(code))));
            (500, Ok(()))
        }
        // The listener answers the request whose handler trapped with a 500.
        Err(trap) => (500, Err(trap)),
    }
}

/// The report of a request for which no instance could be made: the listener answers it
/// with a 500 (its answer is dropped here), and it counts as one whose handler trapped.
fn not_instantiated(job: Job, error: &anyhow::Error, cpu_started: u64) -> Report {
    Report {
        route: job.route,
        answer: Answer {
            status: 500,
            trapped: true,
            latency_ns: job.arrived.elapsed().as_nanos() as u64,
            cpu_ns: thread_cpu_ns().saturating_sub(cpu_started),
        },
        trap: Some(format!("{error:#}")),
        dump: None,
    }
}

/// The end of `instance` after its event loop ended with `result`: its profiler's state,
/// with the samples taken since the last instance ended, and its memory given back.
fn end(
    instance: Instance,
    result: &wasmtime::Result<()>,
    sampling: Option<&mut Sampling>,
) -> Option<Dump> {
    let Instance {
        store, profiler, ..
    } = instance;
    let stacks = sampling.map(|sampling| {
        sampling.set_exits(None);
        sampling.take()
    });
    let profiler = profiler?;
    // SAFETY (both): the store that owns the memory is alive, and its code has stopped.
    let dump = unsafe { profiler.dump(result, stacks) }.ok();
    unsafe { profiler.reuse_memory() };
    drop(store);
    dump
}

/// A response's collected body, as the listener sends bodies.
fn full(body: Bytes) -> wasmtime_wasi_http::p2::body::HyperOutgoingBody {
    Full::new(body)
        .map_err(|never| match never {})
        .boxed_unsync()
}
