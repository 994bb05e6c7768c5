//! `serve`: a `wasi:http` component served under load, each request profiled.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Arg, Args, ValueEnum};

use super::profile::ProfileArgs;
use super::requests::{ProgramToRun, ServeRequest};
use super::run::RunCargoArgs;
use super::value_enums::{MetricArg, SamplerArg, StateArg, TargetArg};
use super::UiOptions;
use crate::build::{Mode, Target};

/// `serve`'s `--metric`: a served component takes what needs no host function of the
/// profiler's, and its workers' time is CPU time.
pub(super) fn metric(arg: Arg) -> Arg {
    arg.value_parser(only::<MetricArg>(&["time", "calls"]))
        .help(
            "What to measure: `time` (CPU time per function, calling context and line, \
             sampled from each worker's stacks, with exact calls and arcs) or `calls` (exact \
             calls and arcs alone)",
        )
        .long_help(None)
}

/// `serve`'s `--target`: a server is a wasm32-wasip2 component.
pub(super) fn target(arg: Arg) -> Arg {
    arg.value_parser(only::<TargetArg>(&["wasm32-wasip2"]))
        .help("Build for this target: wasm32-wasip2, the only one whose components serve (the default)")
        .long_help(None)
}

/// `serve`'s `--sampler`: the stack sampler alone samples a component.
pub(super) fn sampler(arg: Arg) -> Arg {
    arg.value_parser(only::<SamplerArg>(&["stacks"]))
        .help("How the workers are sampled: `stacks`, their stacks walked (the only sampler of a component)")
        .long_help(None)
}

/// `serve`'s `--state`: a component's profiler keeps its state in a memory of its own.
pub(super) fn state(arg: Arg) -> Arg {
    arg.value_parser(only::<StateArg>(&["own-memory"]))
        .help("Where the profiler keeps its state: `own-memory`, a memory of its own in the component's module (the only place a component allows)")
        .long_help(None)
}

/// A parser of `T` that takes only the values `names` of it.
fn only<T: ValueEnum + Clone + Send + Sync + 'static>(
    names: &'static [&'static str],
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(names)
        .map(|name| T::from_str(&name, false).expect("one of the enum's own names"))
}

/// `cargo wasmprof serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen, HOST:PORT: the loopback unless asked (a profiler opens no port to
    /// the network of its own accord).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Stop once N requests have been answered, then report (else at Ctrl-C or SIGTERM).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// The threads that run requests, each with an instance of its own at a time: of a WASI
    /// 0.2 proxy, the most requests in flight at once (an instance each); of a WASI 0.3
    /// service, the most instances at once.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub workers: u16,
    /// How many requests an instance of a WASI 0.3 service serves before a new one takes
    /// over: 128, as `wasmtime serve` reuses one; 1, an instance per request. (A WASI 0.2
    /// proxy gets an instance per request.)
    #[arg(long, value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
    pub instance_reuse: u32,
    /// How many requests an instance of a WASI 0.3 service serves at once, as their
    /// handlers wait (on I/O, timers, other tasks): 16, as `wasmtime serve`; 1, one after
    /// another. An instance takes more while every worker is busy.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub instance_concurrency: u16,
    /// Serve the component as it is, without the profiler: the same server, for load tests
    /// side by side.
    #[arg(long)]
    pub no_instrument: bool,
    /// A plain server's requests, as `serve --no-instrument -o FILE` wrote them: the report
    /// shows their latencies and CPU time beside the profiled ones, route by route.
    #[arg(long, value_name = "FILE", conflicts_with = "no_instrument")]
    pub plain: Option<PathBuf>,
    /// The component to serve, built for wasm32-wasip2: a WASI 0.2 wasi:http/proxy (it
    /// exports wasi:http/incoming-handler) or a WASI 0.3 service (it exports
    /// wasi:http/handler@0.3, as Spin SDK 7's #[http_service] makes). Without FILE, the
    /// package's is built, as `cargo build --target wasm32-wasip2` builds it (a bin, or a
    /// cdylib library).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Without FILE: what cargo builds.
    #[command(flatten)]
    pub cargo: RunCargoArgs,
    /// The profile and report (the profile goes to FILE.wasmprof.json unless --output).
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Colors and status lines.
    #[command(flatten)]
    pub ui: UiOptions,
}

impl ServeArgs {
    /// The request these arguments make.
    pub fn to_request(&self) -> ServeRequest {
        let profile = self.profile.to_request();
        let program = match &self.file {
            Some(file) => ProgramToRun::File(file.clone()),
            None => ProgramToRun::Build(super::cargo::quiet(
                self.cargo
                    .to_build(&profile.instrument, Mode::Serve, Target::Wasip2),
                self.ui.quiet,
            )),
        };
        ServeRequest {
            program,
            addr: self.addr,
            requests: self.requests,
            workers: usize::from(self.workers),
            instance_reuse: self.instance_reuse,
            instance_concurrency: self.instance_concurrency,
            instrument: !self.no_instrument,
            plain: self.plain.clone(),
            profile,
        }
    }
}
