//! The instructions metric's counting: each straight-line segment of a function adds its
//! original instruction count to a local, which is added to the shared counter where
//! someone reads that (before calls and exits).

use walrus::ir::{
    BinaryOp, Binop, Const, GlobalGet, GlobalSet, Instr, InstrLocId, LocalGet, LocalSet, Value,
};

/// The instructions metric's counting in one function: a local that each straight-line
/// segment adds its length to, and the shared counter it is added to where it is read.
#[derive(Clone, Copy)]
pub(super) struct InstructionCounter {
    /// The shared counter (the probes' clock).
    pub(super) global: walrus::GlobalId,
    /// The function's own count since the last flush.
    pub(super) local: walrus::LocalId,
}

impl InstructionCounter {
    /// `local += n`.
    fn add(self, n: i64, at: InstrLocId) -> [(Instr, InstrLocId); 4] {
        [
            (Instr::LocalGet(LocalGet { local: self.local }), at),
            (
                Instr::Const(Const {
                    value: Value::I64(n),
                }),
                at,
            ),
            (
                Instr::Binop(Binop {
                    op: BinaryOp::I64Add,
                }),
                at,
            ),
            (Instr::LocalSet(LocalSet { local: self.local }), at),
        ]
    }

    /// `global += local; local = 0`: before a call (the callee's entry reads the counter)
    /// and before the exit probe.
    pub(super) fn flush(self, at: InstrLocId) -> Vec<(Instr, InstrLocId)> {
        vec![
            (
                Instr::GlobalGet(GlobalGet {
                    global: self.global,
                }),
                at,
            ),
            (Instr::LocalGet(LocalGet { local: self.local }), at),
            (
                Instr::Binop(Binop {
                    op: BinaryOp::I64Add,
                }),
                at,
            ),
            (
                Instr::GlobalSet(GlobalSet {
                    global: self.global,
                }),
                at,
            ),
            (
                Instr::Const(Const {
                    value: Value::I64(0),
                }),
                at,
            ),
            (Instr::LocalSet(LocalSet { local: self.local }), at),
        ]
    }
}

/// A straight-line run of rewritten instructions and how many original ones it holds.
#[derive(Default)]
pub(super) struct Segment {
    pub(super) instrs: Vec<(Instr, InstrLocId)>,
    pub(super) original: i64,
}

impl Segment {
    /// Appends the segment to `out`, preceded, with an instruction counter, by the
    /// counter's increment by the segment's original instruction count.
    pub(super) fn flush_into(
        &mut self,
        out: &mut Vec<(Instr, InstrLocId)>,
        counter: Option<InstructionCounter>,
    ) {
        if let (Some(counter), true) = (counter, self.original > 0) {
            out.extend(counter.add(self.original, InstrLocId::default()));
        }
        out.append(&mut self.instrs);
        self.original = 0;
    }
}

/// Whether the instructions after `instr` may not run whenever it does: after a branch, a
/// return or a trap, after a nested block (which may branch past them), and after a call
/// (which a longjmp or a JS exception may leave without returning: the frame it unwinds
/// is then charged no instruction it did not run).
pub(super) fn ends_segment(instr: &Instr) -> bool {
    matches!(
        instr,
        Instr::Call(_)
            | Instr::CallIndirect(_)
            | Instr::CallRef(_)
            | Instr::Block(_)
            | Instr::Loop(_)
            | Instr::IfElse(_)
            | Instr::TryTable(_)
            | Instr::Try(_)
            | Instr::Br(_)
            | Instr::BrIf(_)
            | Instr::BrTable(_)
            | Instr::BrOnNull(_)
            | Instr::BrOnNonNull(_)
            | Instr::BrOnCast(_)
            | Instr::BrOnCastFail(_)
            | Instr::Return(_)
            | Instr::ReturnCall(_)
            | Instr::ReturnCallIndirect(_)
            | Instr::ReturnCallRef(_)
            | Instr::Unreachable(_)
            | Instr::Throw(_)
            | Instr::ThrowRef(_)
            | Instr::Rethrow(_)
    )
}
