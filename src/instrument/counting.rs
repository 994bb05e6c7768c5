//! The instructions metric's counting: each straight-line segment of a function adds its
//! original instruction count to a local, which is added to the shared counter where
//! someone reads that (before calls and exits). Where the profiler has a memory of its
//! own, each segment also counts its runs there, so that its instructions' source lines
//! get exact costs (runs x the line's instructions in the segment).

use walrus::ir::{
    BinaryOp, Binop, Const, GlobalGet, GlobalSet, Instr, InstrLocId, InstrSeqId, Load, LoadKind,
    LocalGet, LocalSet, MemArg, Store, StoreKind, Value,
};
use walrus::{LocalFunction, MemoryId};

use super::sites::nests;

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

/// Where segments count their runs: the profiler's memory, the counters' offset, the
/// next segment's index, and each counted segment's original instructions' offsets.
pub(super) struct SegmentCounters<'a> {
    pub(super) memory: MemoryId,
    pub(super) offset: u32,
    pub(super) next: u32,
    /// Per counted segment, by index: the offsets of its original instructions.
    pub(super) segments: &'a mut Vec<Vec<u32>>,
}

impl SegmentCounters<'_> {
    /// `mem64[offset + 8 * index] += 1`.
    fn bump(&self, index: u32) -> [(Instr, InstrLocId); 6] {
        let at = InstrLocId::default();
        let arg = MemArg {
            align: 8,
            offset: u64::from(self.offset) + 8 * u64::from(index),
        };
        let address = || {
            (
                Instr::Const(Const {
                    value: Value::I32(0),
                }),
                at,
            )
        };
        [
            address(),
            address(),
            (
                Instr::Load(Load {
                    memory: self.memory,
                    kind: LoadKind::I64 { atomic: false },
                    arg,
                }),
                at,
            ),
            (
                Instr::Const(Const {
                    value: Value::I64(1),
                }),
                at,
            ),
            (
                Instr::Binop(Binop {
                    op: BinaryOp::I64Add,
                }),
                at,
            ),
            (
                Instr::Store(Store {
                    memory: self.memory,
                    kind: StoreKind::I64 { atomic: false },
                    arg,
                }),
                at,
            ),
        ]
    }
}

/// A straight-line run of rewritten instructions and how many original ones it holds
/// (and, where segments are counted, their offsets in the original module).
#[derive(Default)]
pub(super) struct Segment {
    pub(super) instrs: Vec<(Instr, InstrLocId)>,
    pub(super) original: i64,
    pub(super) offsets: Vec<u32>,
}

impl Segment {
    /// Appends the segment to `out`, preceded, with an instruction counter, by the
    /// counter's increment by the segment's original instruction count, and, with
    /// segment counters, by its own run count's.
    pub(super) fn flush_into(
        &mut self,
        out: &mut Vec<(Instr, InstrLocId)>,
        counter: Option<InstructionCounter>,
        segments: &mut Option<SegmentCounters>,
    ) {
        if let (Some(counter), true) = (counter, self.original > 0) {
            out.extend(counter.add(self.original, InstrLocId::default()));
            if let Some(counters) = segments {
                out.extend(counters.bump(counters.next));
                counters.next += 1;
                counters.segments.push(std::mem::take(&mut self.offsets));
            }
        }
        out.append(&mut self.instrs);
        self.original = 0;
        self.offsets.clear();
    }
}

/// How many segments with instructions [`Segment::flush_into`] will count in these
/// sequences of `func`: the rewrite's own split.
pub(super) fn count_segments(func: &LocalFunction, seqs: &[InstrSeqId]) -> u32 {
    let mut count = 0;
    for &seq in seqs {
        let mut open = false;
        for (instr, _) in &func.block(seq).instrs {
            open = true;
            if ends_segment(instr) {
                count += 1;
                open = false;
            }
        }
        count += u32::from(open);
    }
    count
}

/// Whether the instructions after `instr` may not run whenever it does: after a branch, a
/// return or a trap, after a nested block (which may branch past them), and after a call
/// (which a longjmp or a JS exception may leave without returning: the frame it unwinds
/// is then charged no instruction it did not run).
pub(super) fn ends_segment(instr: &Instr) -> bool {
    nests(instr)
        || matches!(
            instr,
            Instr::Call(_)
            | Instr::CallIndirect(_)
            | Instr::CallRef(_)
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
            // A thread's count is read while it waits (threaded modules).
            | Instr::AtomicWait(_)
        )
}
