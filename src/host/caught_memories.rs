//! Linear memories the host makes for wasmtime itself (`Config::with_host_memory`), so
//! that it can read a component's profiler memory: wasmtime hands out no memory of the core
//! instances inside a component instance, and a trap leaves the instance closed to calls.
//! The memories are mapped as wasmtime maps its own (the whole reservation it asks for
//! reserved, its guard pages after it, the accessible part made readable and writable as
//! the memory grows), so the program's code is compiled and runs as it would without them.
//! Each memory made on a thread between [`Catching::begin`] and [`Catching::end`] is noted.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use wasmtime::{LinearMemory, MemoryCreator, MemoryType};

/// A memory the host made: where its bytes start, how many are accessible now, its type.
#[derive(Clone)]
pub(super) struct Caught {
    base: usize,
    size: Arc<AtomicUsize>,
    /// Its type: its limits in pages, as the module declared them.
    pub(super) ty: MemoryType,
}

impl Caught {
    /// Its bytes now.
    ///
    /// # Safety
    /// The store that owns the memory must be alive, and no wasm code may run in it
    /// meanwhile.
    pub(super) unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: `size` bytes from `base` are mapped readable as long as the memory lives
        // (the caller's store), and nothing writes them while no wasm code runs.
        unsafe {
            std::slice::from_raw_parts(self.base as *const u8, self.size.load(Ordering::Acquire))
        }
    }

    /// Where its bytes start, and how many are accessible now.
    pub(super) fn span(&self) -> (*const u8, usize) {
        (self.base as *const u8, self.size.load(Ordering::Acquire))
    }
}

thread_local! {
    /// The memories made on this thread since [`Catching::begin`].
    static CAUGHT: RefCell<Option<Vec<Caught>>> = const { RefCell::new(None) };
}

/// The memories made on this thread while it lasts (an instantiation).
pub(super) struct Catching(());

impl Catching {
    /// Notes every memory made on this thread from now on.
    pub(super) fn begin() -> Catching {
        CAUGHT.with(|caught| *caught.borrow_mut() = Some(Vec::new()));
        Catching(())
    }

    /// The memories made since [`Catching::begin`], in the order they were made.
    pub(super) fn end(self) -> Vec<Caught> {
        CAUGHT.with(|caught| caught.borrow_mut().take().unwrap_or_default())
    }
}

/// The creator wasmtime asks for every linear memory of an engine configured with it.
pub(super) struct Creator;

// SAFETY: every memory it makes is mapped as `MemoryCreator` asks: the reservation, then
// the guard, never moved, zero-filled (fresh anonymous pages).
unsafe impl MemoryCreator for Creator {
    fn new_memory(
        &self,
        ty: MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        let memory = Mapped::new(
            minimum,
            maximum,
            reserved_size_in_bytes,
            guard_size_in_bytes,
        )?;
        CAUGHT.with(|caught| {
            if let Some(list) = caught.borrow_mut().as_mut() {
                list.push(Caught {
                    base: memory.base as usize,
                    size: Arc::clone(&memory.size),
                    ty,
                });
            }
        });
        Ok(Box::new(memory))
    }
}

/// An anonymous mapping: `capacity` bytes that the memory may grow into without moving,
/// then the guard; the first `size` bytes readable and writable.
struct Mapped {
    base: *mut u8,
    size: Arc<AtomicUsize>,
    capacity: usize,
    mapped: usize,
}

// SAFETY: the mapping is owned by this value; wasmtime synchronizes its own accesses.
unsafe impl Send for Mapped {}
unsafe impl Sync for Mapped {}

impl Mapped {
    fn new(
        minimum: usize,
        maximum: Option<usize>,
        reserved: Option<usize>,
        guard: usize,
    ) -> Result<Mapped, String> {
        let capacity = page_up(reserved.or(maximum).unwrap_or(minimum).max(minimum));
        let mapped = capacity
            .checked_add(guard)
            .ok_or("a memory larger than the address space")?;
        // SAFETY: a new private anonymous mapping, owned by the returned value.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "cannot reserve {mapped} bytes for a memory: {}",
                std::io::Error::last_os_error()
            ));
        }
        let memory = Mapped {
            base: base.cast(),
            size: Arc::new(AtomicUsize::new(0)),
            capacity,
            mapped,
        };
        memory.make_accessible(0, minimum)?;
        memory.size.store(minimum, Ordering::Release);
        Ok(memory)
    }

    /// Makes the bytes from `from` to `to` (rounded out to pages) readable and writable.
    fn make_accessible(&self, from: usize, to: usize) -> Result<(), String> {
        let (from, to) = (page_up(from), page_up(to));
        if to <= from {
            return Ok(());
        }
        // SAFETY: a range inside the mapping (`to` is at most `capacity`, checked by the
        // callers).
        let done = unsafe {
            libc::mprotect(
                self.base.add(from).cast(),
                to - from,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        match done {
            0 => Ok(()),
            _ => Err(format!(
                "cannot make a memory's pages accessible: {}",
                std::io::Error::last_os_error()
            )),
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the whole mapping this value owns.
        unsafe { libc::munmap(self.base.cast(), self.mapped) };
    }
}

// SAFETY: the base never moves; growth stays inside the reservation.
unsafe impl LinearMemory for Mapped {
    fn byte_size(&self) -> usize {
        self.size.load(Ordering::Acquire)
    }

    fn byte_capacity(&self) -> usize {
        self.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        if new_size > self.capacity {
            return Err(wasmtime::format_err!(
                "a memory cannot grow past its reservation of {} bytes",
                self.capacity
            ));
        }
        let old = self.size.load(Ordering::Acquire);
        self.make_accessible(old, new_size)
            .map_err(|e| wasmtime::format_err!("{e}"))?;
        self.size.store(new_size.max(old), Ordering::Release);
        Ok(())
    }

    fn as_ptr(&self) -> *mut u8 {
        self.base
    }
}

/// `bytes` rounded up to the system's page size.
fn page_up(bytes: usize) -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    bytes.div_ceil(page) * page
}
