//! Where a thread left the module's code for the host: wasmtime notes, in its store's
//! context, the frame pointer of the trampoline through which wasm code last called out
//! (an import, or one of wasmtime's own functions: `memory.grow`, `memory.copy`,
//! `memory.atomic.wait`, ...). A sample that finds the thread in host code walks the wasm
//! frames from there, as wasmtime's own backtraces do, so that the time is charged to the
//! import or to the function whose instruction the host runs, under their callers.
//!
//! The store's context is found once, before the program runs: an exported function's
//! `VMFuncRef` (`Func::to_raw`) names its instance's `VMContext`, which points to the
//! store's context; the offsets come from `wasmtime-environ`, the same release as
//! wasmtime's (both pinned). A context that does not carry wasmtime's magic is not read.

use wasmtime_environ::{HostPtr, PtrSize, VMCONTEXT_MAGIC};

/// The word of a store's context that holds the last exit's trampoline frame pointer.
#[derive(Debug, Clone, Copy)]
pub(in crate::host) struct Exits {
    trampoline_fp: *const usize,
}

// SAFETY: the word belongs to a store that outlives every sampling of its thread (the host
// finishes a thread's sampling before it drops the store), and is only read.
unsafe impl Send for Exits {}
unsafe impl Sync for Exits {}

impl Exits {
    /// The exits of the store that owns `func`, a function the module defines; `None`
    /// where its context cannot be found.
    pub(in crate::host) fn of(
        store: impl wasmtime::AsContextMut,
        func: &wasmtime::Func,
    ) -> Option<Exits> {
        let ptr = HostPtr;
        let func_ref = func.to_raw(store).cast::<u8>().cast_const();
        if func_ref.is_null() {
            return None;
        }
        // SAFETY: `func_ref` is a live `VMFuncRef` of the store (`Func::to_raw`), read at
        // the offsets of the wasmtime-environ release that wasmtime was built with; its
        // `vmctx` is a core instance's `VMContext` when it starts with the magic (checked),
        // and that context's store context lives as long as the store.
        unsafe {
            let vmctx = func_ref
                .add(usize::from(ptr.vm_func_ref().vmctx()))
                .cast::<*const u8>()
                .read();
            if vmctx.is_null() || vmctx.cast::<u32>().read() != VMCONTEXT_MAGIC {
                return None;
            }
            let store_context = vmctx
                .add(usize::from(ptr.vmctx_store_context()))
                .cast::<*const u8>()
                .read();
            if store_context.is_null() {
                return None;
            }
            let at = usize::from(ptr.vm_store_context().last_wasm_exit_trampoline_fp());
            Some(Exits {
                trampoline_fp: store_context.add(at).cast(),
            })
        }
    }

    /// The exits of `store`, through a function of a module of no code of its own
    /// instantiated there: a store's core instances all point to its one context, and a
    /// component's hand out no function. `None` where it cannot be found.
    pub(in crate::host) fn of_store<T: 'static>(store: &mut wasmtime::Store<T>) -> Option<Exits> {
        let module = Exits::finder(store.engine())?;
        Exits::of_store_with(store, &module)
    }

    /// The module [`Exits::of_store_with`] instantiates, compiled once for an engine whose
    /// stores it finds the exits of.
    pub(in crate::host) fn finder(engine: &wasmtime::Engine) -> Option<wasmtime::Module> {
        let wasm = wat::parse_str(r#"(module (func (export "f")))"#).ok()?;
        crate::host::compiled::module(engine, &wasm)
            .ok()
            .map(|kept| kept.code)
    }

    /// [`Exits::of_store`] with the module of [`Exits::finder`].
    pub(in crate::host) fn of_store_with<T: 'static>(
        store: &mut wasmtime::Store<T>,
        module: &wasmtime::Module,
    ) -> Option<Exits> {
        let instance = wasmtime::Instance::new(&mut *store, module, &[]).ok()?;
        let func = instance.get_func(&mut *store, "f")?;
        Exits::of(store, &func)
    }

    /// The address of the word that holds the frame pointer of the trampoline through
    /// which the thread's wasm code last called the host (0 in it: none since it entered
    /// the module): that frame keeps the calling wasm frame's pointer and return address.
    pub(super) fn word(&self) -> usize {
        self.trampoline_fp as usize
    }
}
