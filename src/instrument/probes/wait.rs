//! The probe around each `memory.atomic.wait` of a threaded module: before the thread
//! blocks, it notes where it stands (the current context node, the instruction counter,
//! the address it waits on) in its profiler memory's header and sets the waiting flag;
//! when it wakes, it clears the flag. A thread blocked in a wait is the one state in which
//! the host can read another thread's profile soundly and exactly (the thread changes
//! nothing while it waits), which it does when the program ends with threads still parked
//! (a thread pool's idle workers), before it wakes them (see `host::threads`). The word
//! [`layout::HDR_WAITING`] counts waits and wakes: odd while the thread waits. With the
//! state in a state module (Emscripten's `-pthread`: a state module per worker) the work is
//! the state module's `wait_begin`/`wait_end`, and the JS runtime keeps the same word odd
//! while its worker is out of wasm, so that the main thread reads such a worker the same
//! way.

use walrus::ir::{
    BinaryOp, Binop, Call, Const, GlobalGet, Instr, InstrLocId, Load, LoadKind, LocalGet, LocalSet,
    MemArg, Store, StoreKind, UnaryOp, Unop, Value,
};
use walrus::{FunctionBuilder, FunctionId, GlobalId, LocalId, MemoryId, ValType};

use crate::layout;

/// The probe around a threaded module's waits.
#[derive(Debug, Clone)]
pub struct WaitProbe {
    /// Where the probe's work is done.
    pub(super) how: WaitHow,
    /// The program's 64-bit memories (their addresses are i64).
    pub(super) memory64: Vec<MemoryId>,
}

/// Where the wait probe's work is done.
#[derive(Debug, Clone)]
pub(super) enum WaitHow {
    /// In the function that waits: the profiler's memory is the module's own.
    Inline(WaitState),
    /// In the state module (a JS host's threads): `begin(addr: i64)` before the wait,
    /// `end()` after it.
    Call {
        begin: walrus::FunctionId,
        end: walrus::FunctionId,
    },
}

/// What the probe's work reads and writes, in the module that holds the profiler's state.
#[derive(Debug, Clone)]
pub(super) struct WaitState {
    /// The profiler's memory (shared: the host reads it from another thread).
    pub(super) memory: MemoryId,
    /// The current-context global.
    pub(super) cur: GlobalId,
    /// The instructions metric's counter.
    pub(super) instructions: Option<GlobalId>,
}

/// The locals a function with waits needs to hold a wait's operands while the probe runs.
#[derive(Debug, Clone, Copy)]
pub struct WaitLocals {
    addr32: LocalId,
    addr64: LocalId,
    expected32: LocalId,
    expected64: LocalId,
    timeout: LocalId,
}

impl WaitLocals {
    /// New locals in `locals`.
    pub fn add(locals: &mut walrus::ModuleLocals) -> WaitLocals {
        WaitLocals {
            addr32: locals.add(ValType::I32),
            addr64: locals.add(ValType::I64),
            expected32: locals.add(ValType::I32),
            expected64: locals.add(ValType::I64),
            timeout: locals.add(ValType::I64),
        }
    }
}

/// Whether `instr` is a wait.
pub fn is_wait(instr: &Instr) -> bool {
    matches!(instr, Instr::AtomicWait(_))
}

impl WaitProbe {
    /// `wait` (a `memory.atomic.wait`, its operands on the stack) with the probe around
    /// it. The instruction counter must be current (flushed) before it.
    pub fn around(&self, wait: Instr, at: InstrLocId, l: WaitLocals) -> Vec<(Instr, InstrLocId)> {
        let Instr::AtomicWait(w) = &wait else {
            unreachable!("the wait probe goes around waits");
        };
        let wide_addr = self.memory64.contains(&w.memory);
        let addr = if wide_addr { l.addr64 } else { l.addr32 };
        let expected = if w.sixty_four {
            l.expected64
        } else {
            l.expected32
        };
        let offset = w.arg.offset;
        let mut out = vec![
            Instr::LocalSet(LocalSet { local: l.timeout }),
            Instr::LocalSet(LocalSet { local: expected }),
            Instr::LocalSet(LocalSet { local: addr }),
        ];
        // The address waited on, as a u64: addr + offset.
        let mut address = vec![Instr::LocalGet(LocalGet { local: addr })];
        if !wide_addr {
            address.push(Instr::Unop(Unop {
                op: UnaryOp::I64ExtendUI32,
            }));
        }
        address.extend([
            Instr::Const(Const {
                value: Value::I64(offset as i64),
            }),
            Instr::Binop(Binop {
                op: BinaryOp::I64Add,
            }),
        ]);
        match &self.how {
            WaitHow::Inline(state) => out.extend(state.begin(address)),
            WaitHow::Call { begin, .. } => {
                out.extend(address);
                out.push(Instr::Call(Call { func: *begin }));
            }
        }
        out.extend([
            Instr::LocalGet(LocalGet { local: addr }),
            Instr::LocalGet(LocalGet { local: expected }),
            Instr::LocalGet(LocalGet { local: l.timeout }),
            wait,
        ]);
        match &self.how {
            WaitHow::Inline(state) => out.extend(state.bump_waiting()),
            WaitHow::Call { end, .. } => out.push(Instr::Call(Call { func: *end })),
        }
        // The wait keeps its place in the original module; the probe's instructions have
        // none.
        out.into_iter()
            .map(|i| {
                let loc = match i {
                    Instr::AtomicWait(_) => at,
                    _ => InstrLocId::default(),
                };
                (i, loc)
            })
            .collect()
    }
}

impl WaitState {
    /// Before a wait: notes the current context, the address waited on (`address`: code
    /// that pushes it, an i64) and the instruction counter in the header, then makes the
    /// waiting word odd.
    fn begin(&self, address: Vec<Instr>) -> Vec<Instr> {
        // header.wait_cur = cur
        let mut out = vec![
            i32_const(0),
            Instr::GlobalGet(GlobalGet { global: self.cur }),
            self.store(StoreKind::I32 { atomic: false }, layout::HDR_WAIT_CUR),
            i32_const(0),
        ];
        // header.wait_addr = address
        out.extend(address);
        out.push(self.store(StoreKind::I64 { atomic: false }, layout::HDR_WAIT_ADDR));
        if let Some(counter) = self.instructions {
            out.extend([
                i32_const(0),
                Instr::GlobalGet(GlobalGet { global: counter }),
                self.store(
                    StoreKind::I64 { atomic: false },
                    layout::HDR_WAIT_INSTRUCTIONS,
                ),
            ]);
        }
        // The word last, atomically: whoever sees it odd sees the fields above.
        out.extend(self.bump_waiting());
        out
    }

    /// The state module's `begin(addr: i64)` and `end()` of [`WaitHow::Call`].
    pub(super) fn build_calls(&self, module: &mut walrus::Module) -> (FunctionId, FunctionId) {
        let addr = module.locals.add(ValType::I64);
        let mut builder = FunctionBuilder::new(&mut module.types, &[ValType::I64], &[]);
        builder.name("__wasmprof_wait_begin".into());
        let mut body = builder.func_body();
        for instr in self.begin(vec![Instr::LocalGet(LocalGet { local: addr })]) {
            body.instr(instr);
        }
        let begin = builder.finish(vec![addr], &mut module.funcs);
        let mut builder = FunctionBuilder::new(&mut module.types, &[], &[]);
        builder.name("__wasmprof_wait_end".into());
        let mut body = builder.func_body();
        for instr in self.bump_waiting() {
            body.instr(instr);
        }
        let end = builder.finish(Vec::new(), &mut module.funcs);
        (begin, end)
    }

    /// `waiting += 1` (only this thread writes it; the store is atomic for the host's
    /// reads): odd from the wait until the wake, so that the host also sees a wake and a
    /// new wait between two of its reads.
    fn bump_waiting(&self) -> [Instr; 6] {
        [
            i32_const(0),
            i32_const(0),
            Instr::Load(Load {
                memory: self.memory,
                kind: LoadKind::I32 { atomic: false },
                arg: MemArg {
                    align: 4,
                    offset: layout::HDR_WAITING.into(),
                },
            }),
            i32_const(1),
            Instr::Binop(Binop {
                op: BinaryOp::I32Add,
            }),
            self.store(StoreKind::I32 { atomic: true }, layout::HDR_WAITING),
        ]
    }

    fn store(&self, kind: StoreKind, offset: u32) -> Instr {
        let align = match kind {
            StoreKind::I64 { .. } => 8,
            _ => 4,
        };
        Instr::Store(Store {
            memory: self.memory,
            kind,
            arg: MemArg {
                align,
                offset: offset.into(),
            },
        })
    }
}

fn i32_const(value: i32) -> Instr {
    Instr::Const(Const {
        value: Value::I32(value),
    })
}
