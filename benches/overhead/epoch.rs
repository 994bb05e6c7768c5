//! wasmtime's own sampler, for comparison: what `GuestProfiler` records, on the plain
//! module. A thread raises the engine's epoch every interval; at each epoch deadline the
//! store's wasm backtrace (`WasmBacktrace::capture`, the stack `GuestProfiler::sample`
//! takes) is one sample, weighed by the wall time since the previous one.
//! (`GuestProfiler` itself is behind wasmtime's `profiling` feature, which builds ittapi
//! into every binary; its samples are these.) Epoch deadlines are checked only at
//! function entries and loop headers, so a sample lands where the program next reaches
//! one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::{Config, Engine, Linker, Module, Store, UpdateDeadline, WasmBacktrace};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

/// A run's samples: for each of the functions asked about, the sampled wall time of the
/// stacks it was on (inclusive), and how many samples were taken.
pub struct EpochSamples {
    pub inclusive_ns: Vec<f64>,
    pub samples: u64,
}

struct State {
    wasi: WasiP1Ctx,
    /// The demangled names (without hashes) to look for on each stack.
    functions: Vec<String>,
    inclusive_ns: Vec<f64>,
    samples: u64,
    last: Instant,
}

/// Runs the command module `wasm` with `args` (the working directory `dir` preopened as
/// `.`), sampled every `interval` at epoch deadlines.
pub fn sample(
    wasm: &[u8],
    dir: &Path,
    args: &[&str],
    interval: Duration,
    functions: &[&str],
) -> EpochSamples {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config).unwrap();
    let module = Module::new(&engine, wasm).unwrap();
    let mut linker: Linker<State> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s| &mut s.wasi).unwrap();
    let argv: Vec<&str> = std::iter::once("program.wasm")
        .chain(args.iter().copied())
        .collect();
    let wasi = WasiCtxBuilder::new()
        .args(&argv)
        .preopened_dir(dir, ".", FsPerms::ReadWrite)
        .unwrap()
        .build_p1();
    let mut store = Store::new(
        &engine,
        State {
            wasi,
            functions: functions.iter().map(|f| f.to_string()).collect(),
            inclusive_ns: vec![0.0; functions.len()],
            samples: 0,
            last: Instant::now(),
        },
    );
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut cx| {
        let trace = WasmBacktrace::capture(&cx);
        let names: Vec<String> = trace
            .frames()
            .iter()
            .filter_map(|f| f.func_name())
            .map(|n| format!("{:#}", rustc_demangle::demangle(n)))
            .collect();
        let state = cx.data_mut();
        let now = Instant::now();
        let dt = now.duration_since(state.last).as_nanos() as f64;
        state.last = now;
        state.samples += 1;
        for (k, f) in state.functions.iter().enumerate() {
            if names.iter().any(|n| n == f) {
                state.inclusive_ns[k] += dt;
            }
        }
        Ok(UpdateDeadline::Continue(1))
    });
    let instance = linker.instantiate(&mut store, &module).unwrap();
    let start = instance
        .get_typed_func::<(), ()>(&mut store, "_start")
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (engine, stop) = (engine.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(interval);
                engine.increment_epoch();
            }
        })
    };
    store.data_mut().last = Instant::now();
    if let Err(e) = start.call(&mut store, ()) {
        assert_eq!(e.downcast_ref::<I32Exit>().map(|e| e.0), Some(0), "{e:?}");
    }
    stop.store(true, Ordering::Relaxed);
    ticker.join().unwrap();
    let state = store.into_data();
    EpochSamples {
        inclusive_ns: state.inclusive_ns,
        samples: state.samples,
    }
}
