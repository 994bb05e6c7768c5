//! The stack sampler where there is none: hosts other than Linux on x86-64 or aarch64.
//! A module instrumented for it (`--sampler stacks`) is refused with one line when it is
//! compiled; the word sampler works everywhere.

use std::path::Path;
use std::time::Duration;

use crate::meta::Meta;
use crate::profile::StackSamples;

/// Never made: [`CodeMap::new`] refuses.
pub(in crate::host) struct CodeMap(());

impl CodeMap {
    /// Refuses: this host has no stack sampler.
    pub(in crate::host) fn new(
        _module: &wasmtime::Module,
        _wasm: &[u8],
        _meta: &Meta,
        _compiled: Option<&Path>,
    ) -> anyhow::Result<CodeMap> {
        anyhow::bail!(
            "the stack sampler (`--sampler stacks`) needs Linux on x86-64 or aarch64; \
             instrument with `--sampler word`"
        )
    }

    /// Refuses: this host has no stack sampler.
    pub(in crate::host) fn of_component(
        _component: &wasmtime::component::Component,
        _index: u32,
        _offset: usize,
        _wasm: &[u8],
        _meta: &Meta,
        _compiled: Option<&Path>,
    ) -> anyhow::Result<CodeMap> {
        anyhow::bail!("the stack sampler needs Linux on x86-64 or aarch64")
    }

    /// Refuses: this host has no stack sampler.
    pub(in crate::host) fn plain(_module: &wasmtime::Module) -> anyhow::Result<CodeMap> {
        anyhow::bail!("the stack sampler needs Linux on x86-64 or aarch64")
    }
}

/// Never made: no stack sampler runs here.
#[derive(Debug, Clone, Copy)]
pub(in crate::host) struct Exits(());

impl Exits {
    /// None: no stack sampler runs here.
    pub(in crate::host) fn of(
        _store: impl wasmtime::AsContextMut,
        _func: &wasmtime::Func,
    ) -> Option<Exits> {
        None
    }

    /// None: no stack sampler runs here.
    pub(in crate::host) fn of_store<T: 'static>(_store: &mut wasmtime::Store<T>) -> Option<Exits> {
        None
    }

    /// None: no stack sampler runs here.
    pub(in crate::host) fn finder(_engine: &wasmtime::Engine) -> Option<wasmtime::Module> {
        None
    }

    /// None: no stack sampler runs here.
    pub(in crate::host) fn of_store_with<T: 'static>(
        _store: &mut wasmtime::Store<T>,
        _module: &wasmtime::Module,
    ) -> Option<Exits> {
        None
    }
}

/// Never made: it needs a [`CodeMap`].
pub(super) struct StackSampler(());

/// The environment variable that makes CPU-time sampling use the POSIX CPU-time timer (no
/// sampler runs here).
pub const CPU_TIMER_VAR: &str = "WASMPROF_CPU_TIMER";

/// No thread is sampled here, so none fell back to a timer at the kernel's tick.
pub fn cpu_timer_fallback() -> Option<&'static str> {
    None
}

/// What a sampler's interval counts (no sampler runs here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::host) enum Clock {
    /// The wall clock.
    Wall,
    /// The sampled thread's own CPU time.
    ThreadCpu,
}

impl StackSampler {
    /// Unreachable: no [`CodeMap`] exists to start from.
    pub(super) fn start(_map: CodeMap, _interval: Duration) -> StackSampler {
        unreachable!("no code map is made without a stack sampler")
    }

    /// Unreachable: no [`CodeMap`] exists to start from.
    pub(in crate::host) fn start_on(
        _map: CodeMap,
        _interval: Duration,
        _clock: Clock,
    ) -> StackSampler {
        unreachable!("no code map is made without a stack sampler")
    }

    /// Unreachable: no [`StackSampler`] exists.
    pub(super) fn sample_this_thread(&self, _exits: Option<Exits>) -> anyhow::Result<Sampling> {
        unreachable!("no stack sampler is made here")
    }
}

/// Never made: it needs a [`StackSampler`].
pub(super) struct Sampling(());

impl Sampling {
    /// Unreachable: no [`Sampling`] exists.
    pub(super) fn so_far(&self) -> SoFar {
        unreachable!("no thread is stack-sampled here")
    }

    /// Unreachable: no [`Sampling`] exists.
    pub(in crate::host) fn set_exits(&self, _exits: Option<Exits>) {
        unreachable!("no thread is stack-sampled here")
    }

    /// Unreachable: no [`Sampling`] exists.
    pub(in crate::host) fn take(&mut self) -> StackSamples {
        unreachable!("no thread is stack-sampled here")
    }

    /// Unreachable: no [`Sampling`] exists.
    pub(super) fn finish(self) -> StackSamples {
        unreachable!("no thread is stack-sampled here")
    }
}

/// Never made: it needs a [`Sampling`].
#[derive(Clone)]
pub(super) struct SoFar(());

impl SoFar {
    /// Unreachable: no [`SoFar`] exists.
    pub(super) fn samples(&self) -> StackSamples {
        unreachable!("no thread is stack-sampled here")
    }
}
