//! The benchmarks a harness names as it runs them. criterion writes `Benchmarking ID` to
//! stderr before a benchmark's first iteration, then `Benchmarking ID: Warming up ...`,
//! `... Collecting ...` as its measured iterations start and `... Analyzing` once they
//! end, so the embedded host reads what the program writes to stderr on its way out, and
//! takes a [`Mark`] at each new id and at each edge of its measurement: the profiler's
//! state at that moment. The marks, decoded, give each benchmark the iterations criterion
//! measured and their cost (`harness::benchmarks`), also where one routine runs with several
//! inputs (criterion's `bench_with_input`), which the routine's arc alone sums.

use std::sync::{Arc, Mutex};

use wasmtime::{Caller, Linker, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;

use super::compiled;
use crate::harness::Moment;
use crate::profile::Dump;

/// The marks of one run, in the order they were taken. Each keeps the profiler's memory as
/// it differs from the memory at the mark before (zeros before the first), so a run keeps
/// what changed between two marks, not a copy of the memory per mark.
#[derive(Debug, Clone, Default)]
pub struct Marks {
    taken: Vec<Mark>,
    /// The memory at the last mark, while marks are taken.
    last: Vec<u8>,
}

/// The profiler's state when a harness said that a benchmark starts, or that its measured
/// iterations start or end.
#[derive(Debug, Clone)]
pub struct Mark {
    /// The harness's name for the benchmark.
    pub id: String,
    /// What the harness said of it.
    pub moment: Moment,
    /// The profiler's state then (its open activations closed at that moment), without its
    /// memory.
    state: Dump,
    /// The memory's stretches that differ from the memory at the mark before.
    changed: Changes,
}

impl Marks {
    /// Takes a mark of benchmark `id` at `moment`, the state `dump`.
    fn take(&mut self, (id, moment): (String, Moment), mut dump: Dump) {
        let memory = std::mem::take(&mut dump.memory);
        let changed = Changes::between(&self.last, &memory);
        self.last = memory;
        self.taken.push(Mark {
            id,
            moment,
            state: dump,
            changed,
        });
    }

    /// The marks, the memory at the last one no longer kept.
    pub(super) fn finished(self) -> Marks {
        Marks {
            taken: self.taken,
            last: Vec::new(),
        }
    }

    /// Whether no mark was taken.
    pub fn is_empty(&self) -> bool {
        self.taken.is_empty()
    }

    /// Each mark, in order, with the profiler's state at it.
    pub fn dumps(&self) -> impl Iterator<Item = (&Mark, Dump)> {
        let mut memory = Vec::new();
        self.taken.iter().map(move |mark| {
            mark.changed.apply(&mut memory);
            let dump = Dump {
                memory: memory.clone(),
                ..mark.state.clone()
            };
            (mark, dump)
        })
    }
}

/// How one memory differs from the one before it: its length, and the chunks of
/// [`CHUNK`] bytes that differ, joined into runs, by offset.
#[derive(Debug, Clone)]
struct Changes {
    len: usize,
    runs: Vec<(usize, Vec<u8>)>,
}

/// The unit in which [`Changes`] compares two memories.
const CHUNK: usize = 64;

impl Changes {
    /// How `bytes` differ from `before` (shorter, or empty: zeros past its end).
    fn between(before: &[u8], bytes: &[u8]) -> Changes {
        let mut runs: Vec<(usize, Vec<u8>)> = Vec::new();
        for (i, chunk) in bytes.chunks(CHUNK).enumerate() {
            let at = i * CHUNK;
            let was = before
                .get(at..(at + chunk.len()).min(before.len()))
                .unwrap_or_default();
            let same = chunk[..was.len()] == *was && chunk[was.len()..].iter().all(|&b| b == 0);
            if same {
                continue;
            }
            match runs.last_mut() {
                Some((start, run)) if *start + run.len() == at => run.extend_from_slice(chunk),
                _ => runs.push((at, chunk.to_vec())),
            }
        }
        Changes {
            len: bytes.len(),
            runs,
        }
    }

    /// Turns the memory before, `memory`, into this one.
    fn apply(&self, memory: &mut Vec<u8>) {
        memory.resize(self.len, 0);
        for (at, run) in &self.runs {
            memory[*at..at + run.len()].copy_from_slice(run);
        }
    }
}

/// WASI's module, whose `fd_write` the program writes its output through.
const WASI: &str = "wasi_snapshot_preview1";

/// What criterion writes after `Benchmarking ID: ` as a benchmark goes on, and the moments
/// of a benchmark that two of them are.
const PHASES: [Phase; 5] = [
    ("Warming up", None),
    ("Collecting", Some(Moment::Measures)),
    ("Analyzing", Some(Moment::Measured)),
    ("Profiling", None),
    ("Complete", None),
];

/// The most of one line the reader keeps (a benchmark's line is short).
const LINE_MAX: usize = 4096;

/// Has the program's `fd_write` (already in `linker`, from WASI) read stderr before it
/// writes it, and push a mark, the state `take` reads through the caller, onto `marks`
/// whenever a benchmark starts and as its measurement starts and ends. Nothing changes where the program's memory is not one
/// [`Forward`] can pass on.
pub(super) fn watch(
    linker: &mut Linker<WasiP1Ctx>,
    store: &mut Store<WasiP1Ctx>,
    module: &Module,
    take: impl Fn(&mut Caller<'_, WasiP1Ctx>) -> anyhow::Result<Dump> + Send + Sync + 'static,
    marks: Arc<Mutex<Marks>>,
) -> anyhow::Result<()> {
    let Some(forward) = Forward::new(linker, store, module)? else {
        return Ok(());
    };
    let reader = Mutex::new(Reader::default());
    linker.allow_shadowing(true);
    linker.func_wrap(
        WASI,
        "fd_write",
        move |mut caller: Caller<'_, WasiP1Ctx>,
              fd: i32,
              iovs: i32,
              iovs_len: i32,
              written: i32|
              -> wasmtime::Result<i32> {
            if fd == 2 {
                let bytes = output(&mut caller, iovs, iovs_len);
                let said = reader.lock().expect("not poisoned").read(&bytes);
                for moment in said {
                    let dump = take(&mut caller).map_err(wasmtime::Error::from_anyhow)?;
                    marks.lock().expect("not poisoned").take(moment, dump);
                }
            }
            forward.call(&mut caller, (fd, iovs, iovs_len, written))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// WASI's own `fd_write`, called on the program's behalf. A host function called from the
/// host finds no memory of its caller's, so WASI's is called from a small module that
/// imports the program's memory and exports it as its own ([`FORWARD`]), instantiated at the
/// program's first write.
struct Forward {
    module: Module,
    write: wasmtime::Func,
    /// The module's `fd_write`, once instantiated.
    instance: Mutex<Option<FdWrite>>,
}

/// WASI's `fd_write(fd, iovs, iovs_len, written) -> errno`.
type FdWrite = wasmtime::TypedFunc<(i32, i32, i32, i32), i32>;

/// The module through which WASI's `fd_write` sees the program's memory.
const FORWARD: &str = r#"(module
  (import "program" "memory" (memory 0))
  (import "wasi" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (export "memory" (memory 0))
  (func (export "fd_write") (param i32 i32 i32 i32) (result i32)
    (call $write (local.get 0) (local.get 1) (local.get 2) (local.get 3))))"#;

impl Forward {
    /// WASI's `fd_write` in `linker`, for a `module` whose memory is a plain 32-bit one
    /// exported as `memory` (`None` otherwise).
    fn new(
        linker: &Linker<WasiP1Ctx>,
        store: &mut Store<WasiP1Ctx>,
        module: &Module,
    ) -> anyhow::Result<Option<Forward>> {
        let plain = matches!(module.get_export("memory"),
            Some(wasmtime::ExternType::Memory(ty)) if !ty.is_shared() && !ty.is_64());
        let write = linker.get(&mut *store, WASI, "fd_write");
        let (true, Ok(wasmtime::Extern::Func(write))) = (plain, write) else {
            return Ok(None);
        };
        let forward = compiled::module(module.engine(), &wat::parse_str(FORWARD)?)?.code;
        Ok(Some(Forward {
            module: forward,
            write,
            instance: Mutex::new(None),
        }))
    }

    /// Calls WASI's `fd_write` with `args`, as the program called it.
    fn call(
        &self,
        caller: &mut Caller<'_, WasiP1Ctx>,
        args: (i32, i32, i32, i32),
    ) -> wasmtime::Result<i32> {
        let mut instance = self.instance.lock().expect("not poisoned");
        let write = match &*instance {
            Some(write) => write.clone(),
            None => {
                let Some(memory) = caller.get_export("memory") else {
                    wasmtime::bail!("the program exports no memory");
                };
                let imports = [memory, self.write.into()];
                let forward = wasmtime::Instance::new(&mut *caller, &self.module, &imports)?;
                instance
                    .insert(forward.get_typed_func(&mut *caller, "fd_write")?)
                    .clone()
            }
        };
        drop(instance);
        write.call(caller, args)
    }
}

/// The bytes an `fd_write` of `iovs_len` buffers at `iovs` writes, read from the program's
/// memory (nothing where it exports none, or the buffers lie outside it: WASI then reports
/// the fault).
fn output(caller: &mut Caller<'_, WasiP1Ctx>, iovs: i32, iovs_len: i32) -> Vec<u8> {
    let Some(wasmtime::Extern::Memory(memory)) = caller.get_export("memory") else {
        return Vec::new();
    };
    let data = memory.data(&*caller);
    let u32_at = |at: usize| -> Option<usize> {
        let bytes = data.get(at..at + 4)?;
        Some(u32::from_le_bytes(bytes.try_into().ok()?) as usize)
    };
    let mut bytes = Vec::new();
    for i in 0..iovs_len.max(0) as usize {
        let at = iovs as u32 as usize + 8 * i;
        let (Some(buf), Some(len)) = (u32_at(at), u32_at(at + 4)) else {
            break;
        };
        bytes.extend_from_slice(data.get(buf..buf + len).unwrap_or_default());
    }
    bytes
}

/// What the program's stderr said so far: the line it has not ended, and the benchmark that
/// runs, with the moments of it said already.
#[derive(Debug, Default)]
struct Reader {
    /// The line not ended yet.
    pending: Vec<u8>,
    /// The id of the benchmark that started last.
    current: Option<String>,
    /// The moments of the current benchmark said so far.
    said: Vec<Moment>,
}

impl Reader {
    /// Reads `bytes` written to stderr; the benchmarks' moments said in them, each once.
    /// A line is read as it ends, and also as it stands once it names its phase: on a
    /// terminal criterion ends a line only when it writes the next one over it, after the
    /// iterations the line announced.
    fn read(&mut self, bytes: &[u8]) -> Vec<(String, Moment)> {
        let mut said = Vec::new();
        for &byte in bytes {
            if byte != b'\n' && byte != b'\r' {
                if self.pending.len() < LINE_MAX {
                    self.pending.push(byte);
                }
                continue;
            }
            let line = std::mem::take(&mut self.pending);
            if let Some((id, phase)) = benchmark_of(&String::from_utf8_lossy(&line)) {
                self.note(id, phase.and_then(|(_, moment)| moment), &mut said);
            }
        }
        if let Some((id, Some((_, moment)))) = benchmark_of(&String::from_utf8_lossy(&self.pending))
        {
            self.note(id, moment, &mut said);
        }
        said
    }

    /// Adds to `said` what a line said of benchmark `id` and was not said yet: that it
    /// starts, and `moment`.
    fn note(&mut self, id: String, moment: Option<Moment>, said: &mut Vec<(String, Moment)>) {
        if self.current.as_deref() != Some(id.as_str()) {
            self.current = Some(id.clone());
            self.said = vec![Moment::Starts];
            said.push((id.clone(), Moment::Starts));
        }
        if let Some(moment) = moment.filter(|m| !self.said.contains(m)) {
            self.said.push(moment);
            said.push((id, moment));
        }
    }
}

/// A phase criterion names, and the moment of a benchmark it is.
type Phase = (&'static str, Option<Moment>);

/// The benchmark a line of criterion's output names (`Benchmarking ID`, or `Benchmarking
/// ID: PHASE ...`), its terminal escapes left out, and the phase it names.
fn benchmark_of(line: &str) -> Option<(String, Option<Phase>)> {
    let line = without_escapes(line);
    let rest = line.trim_end().strip_prefix("Benchmarking ")?;
    let named = rest.rsplit_once(": ").and_then(|(id, said)| {
        let phase = PHASES.iter().find(|(p, _)| said.starts_with(p))?;
        Some((id, Some(*phase)))
    });
    let (id, phase) = named.unwrap_or((rest, None));
    (!id.is_empty()).then(|| (id.to_string(), phase))
}

/// `text` without its ANSI escape sequences (`ESC [ ... letter`: colours, clearing a line).
fn without_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Changes, Moment, Reader};

    #[test]
    fn each_memory_is_what_changed_from_the_one_before() {
        let kept = |c: &Changes| c.runs.iter().map(|(_, run)| run.len()).sum::<usize>();
        let mut first = vec![0u8; 1000];
        first[3] = 1;
        first[130..140].fill(7);
        first[999] = 9;
        let mut second = first.clone();
        second[500] = 5;
        second.resize(1100, 0);
        second[1050] = 6;
        let mut memory = Vec::new();
        let changes = Changes::between(&[], &first);
        changes.apply(&mut memory);
        assert_eq!(memory, first);
        assert!(kept(&changes) <= 3 * 64, "{}", kept(&changes));
        // Only the chunks that changed, also past the end of the memory before.
        let changes = Changes::between(&first, &second);
        changes.apply(&mut memory);
        assert_eq!(memory, second);
        assert_eq!(kept(&changes), 2 * 64);
        // A memory that shrank (another instance's) is the memory, not a change of it.
        let changes = Changes::between(&second, &first[..100]);
        changes.apply(&mut memory);
        assert_eq!(memory, first[..100]);
        assert_eq!(kept(&changes), 0);
    }

    #[test]
    fn each_moment_is_read_once_in_either_way_criterion_writes() {
        use Moment::{Measured, Measures, Starts};
        let mut reader = Reader::default();
        let said = |list: &[(&str, Moment)]| -> Vec<(String, Moment)> {
            list.iter().map(|&(id, m)| (id.to_string(), m)).collect()
        };
        // Lines, as to a pipe.
        let lines = "Benchmarking fib/10\nBenchmarking fib/10: Warming up for 3.0000 s\n\
                     Benchmarking fib/10: Collecting 10 samples in estimated 1 s (55k iterations)\n\
                     Benchmarking fib/10: Analyzing\n";
        assert_eq!(
            reader.read(lines.as_bytes()),
            said(&[
                ("fib/10", Starts),
                ("fib/10", Measures),
                ("fib/10", Measured)
            ])
        );
        // Overwritten in place, as on a terminal, and written in pieces.
        assert!(reader.read(b"\r\x1b[2KBenchmarking fib/15").is_empty());
        assert_eq!(
            reader.read(b"\r\x1b[2KBenchmarking fib/15: Warming up"),
            said(&[("fib/15", Starts)])
        );
        // A line that names its phase is read before it ends.
        let collecting = b"\r\x1b[2KBenchmarking fib/15: Collecting 10 samples";
        assert_eq!(reader.read(collecting), said(&[("fib/15", Measures)]));
        assert_eq!(reader.read(collecting), []);
        assert_eq!(
            reader.read(b"\r\x1b[2KBenchmarking fib/15: Analyzing"),
            said(&[("fib/15", Measured)])
        );
        // Other lines start nothing; an id may hold `: `.
        assert!(reader.read(b"\nGnuplot not found\n\n").is_empty());
        assert_eq!(
            reader.read(b"Benchmarking a: b\n"),
            said(&[("a: b", Starts)])
        );
    }
}
