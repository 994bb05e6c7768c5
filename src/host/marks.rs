//! The benchmarks a harness names as it starts them. criterion writes `Benchmarking ID` to
//! stderr before a benchmark's first iteration (and `Benchmarking ID: Warming up ...`,
//! `... Collecting ...`, `... Analyzing` as it goes), so the embedded host reads what the
//! program writes to stderr on its way out, and takes a [`Mark`] at each new id:
//! the profiler's state at that moment. Consecutive marks, decoded, give each benchmark its
//! own iterations and cost (`harness::benchmarks`), also where one routine runs with several
//! inputs (criterion's `bench_with_input`), which the routine's arc alone sums.

use std::sync::{Arc, Mutex};

use wasmtime::{Caller, Linker, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;

use crate::profile::Dump;

/// The profiler's state when a harness named the benchmark it starts.
#[derive(Debug, Clone)]
pub struct Mark {
    /// The harness's name for the benchmark.
    pub id: String,
    /// The profiler's state then (its open activations closed at that moment), its memory
    /// kept in `memory`.
    state: Dump,
    /// The profiler's memory then, without its long runs of zeros (the live table's empty
    /// slots, the arc tables' and the tree's room to grow): a run keeps one per benchmark.
    memory: Sparse,
}

impl Mark {
    /// A mark of benchmark `id` at the state `dump`.
    fn new(id: String, mut dump: Dump) -> Mark {
        let memory = Sparse::of(&std::mem::take(&mut dump.memory));
        Mark {
            id,
            state: dump,
            memory,
        }
    }

    /// The profiler's state at the mark.
    pub fn dump(&self) -> Dump {
        Dump {
            memory: self.memory.bytes(),
            ..self.state.clone()
        }
    }
}

/// Bytes without their long runs of zeros: their length, and the other runs by offset.
#[derive(Debug, Clone)]
struct Sparse {
    len: usize,
    runs: Vec<(usize, Vec<u8>)>,
}

/// The shortest run of zeros that [`Sparse`] leaves out.
const ZEROS_LEFT_OUT: usize = 64;

impl Sparse {
    /// `bytes`, without their runs of [`ZEROS_LEFT_OUT`] zeros or more.
    fn of(bytes: &[u8]) -> Sparse {
        let mut runs: Vec<(usize, Vec<u8>)> = Vec::new();
        for (i, chunk) in bytes.chunks(ZEROS_LEFT_OUT).enumerate() {
            let at = i * ZEROS_LEFT_OUT;
            if chunk.iter().all(|&b| b == 0) {
                continue;
            }
            match runs.last_mut() {
                Some((start, run)) if *start + run.len() == at => run.extend_from_slice(chunk),
                _ => runs.push((at, chunk.to_vec())),
            }
        }
        Sparse {
            len: bytes.len(),
            runs,
        }
    }

    /// The bytes again.
    fn bytes(&self) -> Vec<u8> {
        let mut bytes = vec![0; self.len];
        for (at, run) in &self.runs {
            bytes[*at..at + run.len()].copy_from_slice(run);
        }
        bytes
    }
}

/// WASI's module, whose `fd_write` the program writes its output through.
const WASI: &str = "wasi_snapshot_preview1";

/// What criterion writes after `Benchmarking ID: ` as a benchmark goes on.
const PHASES: [&str; 5] = [
    "Warming up",
    "Collecting",
    "Analyzing",
    "Profiling",
    "Complete",
];

/// The most of one line the reader keeps (a benchmark's line is short).
const LINE_MAX: usize = 4096;

/// Has the program's `fd_write` (already in `linker`, from WASI) read stderr before it
/// writes it, and push a mark, the state `take` reads through the caller, onto `marks`
/// whenever a benchmark starts. Nothing changes where the program's memory is not one
/// [`Forward`] can pass on.
pub(super) fn watch(
    linker: &mut Linker<WasiP1Ctx>,
    store: &mut Store<WasiP1Ctx>,
    module: &Module,
    take: impl Fn(&mut Caller<'_, WasiP1Ctx>) -> anyhow::Result<Dump> + Send + Sync + 'static,
    marks: Arc<Mutex<Vec<Mark>>>,
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
                let started = reader.lock().expect("not poisoned").read(&bytes);
                for id in started {
                    let dump = take(&mut caller).map_err(wasmtime::Error::from_anyhow)?;
                    marks
                        .lock()
                        .expect("not poisoned")
                        .push(Mark::new(id, dump));
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
        let forward = Module::new(module.engine(), wat::parse_str(FORWARD)?)?;
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
/// runs.
#[derive(Debug, Default)]
struct Reader {
    /// The line not ended yet.
    pending: Vec<u8>,
    /// The id of the benchmark that started last.
    current: Option<String>,
}

impl Reader {
    /// Reads `bytes` written to stderr; the ids of the benchmarks that start in them.
    fn read(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut started = Vec::new();
        let pending = &mut self.pending;
        for &byte in bytes {
            if byte != b'\n' && byte != b'\r' {
                if pending.len() < LINE_MAX {
                    pending.push(byte);
                }
                continue;
            }
            let line = std::mem::take(pending);
            let Some(id) = benchmark_of(&String::from_utf8_lossy(&line)) else {
                continue;
            };
            if self.current.as_deref() != Some(id.as_str()) {
                self.current = Some(id.clone());
                started.push(id);
            }
        }
        started
    }
}

/// The benchmark a line of criterion's output names (`Benchmarking ID`, or `Benchmarking
/// ID: PHASE ...`), its terminal escapes left out.
fn benchmark_of(line: &str) -> Option<String> {
    let line = without_escapes(line);
    let rest = line.trim_end().strip_prefix("Benchmarking ")?;
    let id = match rest.rsplit_once(": ") {
        Some((id, phase)) if PHASES.iter().any(|p| phase.starts_with(p)) => id,
        _ => rest,
    };
    (!id.is_empty()).then(|| id.to_string())
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
    use super::{Reader, Sparse};

    #[test]
    fn a_sparse_copy_is_the_bytes() {
        let mut bytes = vec![0u8; 1000];
        bytes[3] = 1;
        bytes[130..140].fill(7);
        bytes[999] = 9;
        let sparse = Sparse::of(&bytes);
        assert_eq!(sparse.bytes(), bytes);
        let kept: usize = sparse.runs.iter().map(|(_, run)| run.len()).sum();
        assert!(kept <= 3 * 64, "{kept}");
        assert_eq!(Sparse::of(&[]).bytes(), Vec::<u8>::new());
    }

    #[test]
    fn each_benchmark_starts_once_in_either_way_criterion_writes() {
        let mut reader = Reader::default();
        // Lines, as to a pipe.
        let lines = "Benchmarking fib/10\nBenchmarking fib/10: Warming up for 3.0000 s\n\
                     Benchmarking fib/10: Collecting 10 samples in estimated 1 s (55k iterations)\n\
                     Benchmarking fib/10: Analyzing\n";
        assert_eq!(reader.read(lines.as_bytes()), ["fib/10"]);
        // Overwritten in place, as on a terminal, and written in pieces.
        assert!(reader.read(b"\r\x1b[2KBenchmarking fib/15").is_empty());
        assert_eq!(
            reader.read(b"\r\x1b[2KBenchmarking fib/15: Warming up"),
            ["fib/15"]
        );
        // Other lines start nothing; an id may hold `: `.
        assert!(reader.read(b"Gnuplot not found\n\n").is_empty());
        assert_eq!(reader.read(b"Benchmarking a: b\n"), ["a: b"]);
    }
}
