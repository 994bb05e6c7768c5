//! The workers of a WASI 0.3 service (`wasi:http/handler@0.3`, what Spin SDK 7's
//! `#[http_service]` makes): each a thread with an event loop of its own, whose instance
//! serves one request after another, up to `serve --instance-reuse N` (128 by default, as
//! `wasmtime serve` reuses an instance of a WASI 0.3 service). The profiler's state of an
//! instance holds all its requests; it is reported with the request that ends the
//! instance: the last it may serve, one whose handler trapped (that instance is done; the
//! next request gets a new one), or the server's stop.

use std::sync::mpsc;

use anyhow::Context as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
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

/// An instance and what it has served.
struct Instance<'a> {
    store: Store<ServeCtx>,
    service: Service,
    profiler: Option<Profiler<'a>>,
    served: u32,
}

/// Runs requests from the queue until the server stops, each one's report sent to `done`,
/// in instances of `pre` made on this thread's event loop, each for up to `reuse`
/// requests.
pub(super) fn run(
    shared: &Shared,
    pre: &ServicePre<ServeCtx>,
    reuse: u32,
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
    while let Some(job) = super::worker::next_job(shared) {
        // A request's CPU time includes the instantiation of the instance it is the first of.
        let cpu_started = thread_cpu_ns();
        let instance = match current.take() {
            Some(instance) => Ok(instance),
            None => runtime.block_on(instantiate(shared, pre, sampling.as_ref(), &finder)),
        };
        let report = match instance {
            Ok(instance) => {
                let served = serve_one(instance, job, (reuse, cpu_started), sampling.as_mut());
                let (report, kept) = runtime.block_on(served);
                current = kept;
                report
            }
            Err(error) => not_instantiated(job, &error, cpu_started),
        };
        if done.send(Done::Request(report)).is_err() {
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
            served: 0,
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

/// Serves `job` in `instance`, its response's body collected on the store's event loop,
/// then sent; gives the report (its CPU time from `cpu_started`) and the instance, unless
/// it is done (it trapped, or it has served `reuse` requests).
async fn serve_one<'a>(
    mut instance: Instance<'a>,
    job: Job,
    (reuse, cpu_started): (u32, u64),
    sampling: Option<&mut Sampling>,
) -> (Report, Option<Instance<'a>>) {
    let (request, io) = Request::from_http(wasmtime_wasi_http::default_hooks(), job.request);
    let Instance { store, service, .. } = &mut instance;
    let service = &*service;
    let handled = store
        .run_concurrent(async |store| {
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
            response
        })
        .await
        .and_then(|handled| handled);
    let (status, result) = match handled {
        Ok(Ok(response)) => {
            let status = response.status().as_u16();
            let _ = job.answer.send(Ok(response.map(full)));
            (status, Ok(()))
        }
        Ok(Err(code)) => {
            let _ = job.answer.send(Err(ErrorCode::InternalError(Some(code))));
            (500, Ok(()))
        }
        // The listener answers the request whose handler trapped with a 500.
        Err(trap) => (500, Err(trap)),
    };
    instance.served += 1;
    let trap = match Ending::of(&result) {
        Ending::Trapped(trap) => Some(trap),
        _ => None,
    };
    let answer = Answer {
        status,
        trapped: trap.is_some(),
        latency_ns: job.arrived.elapsed().as_nanos() as u64,
        cpu_ns: thread_cpu_ns().saturating_sub(cpu_started),
    };
    let (dump, kept) = match trap.is_some() || instance.served >= reuse {
        true => (end(instance, &result, sampling), None),
        false => (None, Some(instance)),
    };
    let report = Report {
        route: job.route,
        answer,
        trap,
        dump,
    };
    (report, kept)
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

/// The end of `instance` after a request that ended with `result`: its profiler's state,
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
