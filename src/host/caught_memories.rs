//! Linear memories the host makes for wasmtime itself (`Config::with_host_memory`), so
//! that it can read a component's profiler memory: wasmtime hands out no memory of the core
//! instances inside a component instance, and a trap leaves the instance closed to calls.
//! The memories are mapped as wasmtime maps its own (the whole reservation it asks for
//! reserved, its guard pages after it, the accessible part made readable and writable as
//! the memory grows), so the program's code is compiled and runs as it would without them.
//! Each memory made on a thread between [`Catching::begin`] and [`Catching::end`] is noted.
//! A memory marked for reuse ([`Caught::reuse`]) goes back to its thread's pool when its
//! store drops it (a server's profiler memory, made again for every request).

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use wasmtime::{LinearMemory, MemoryCreator, MemoryType};

/// A memory the host made: where its bytes start, how many are accessible now, its type.
#[derive(Clone)]
pub(super) struct Caught {
    base: usize,
    size: Arc<AtomicUsize>,
    /// How many of its first bytes may have been written, once it is marked for reuse.
    written: Arc<AtomicUsize>,
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

    /// Marks the memory for its thread's pool: when its store drops it, its first
    /// `written` bytes (all that were written) are zeroed and the next memory of its shape
    /// made on the thread is this one, no mapping made and unmapped, no page faulted in.
    pub(super) fn reuse(&self, written: usize) {
        self.written.store(written, Ordering::Release);
    }
}

thread_local! {
    /// The memories made on this thread since [`Catching::begin`].
    static CAUGHT: RefCell<Option<Vec<Caught>>> = const { RefCell::new(None) };
    /// The regions of the memories this thread's stores dropped after [`Caught::reuse`].
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
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
// the guard, never moved, zero-filled (fresh anonymous pages, or a pooled region whose
// written bytes were zeroed and whose pages past its minimum were made inaccessible again).
unsafe impl MemoryCreator for Creator {
    fn new_memory(
        &self,
        ty: MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        let capacity = page_up(
            reserved_size_in_bytes
                .or(maximum)
                .unwrap_or(minimum)
                .max(minimum),
        );
        let shape = Shape {
            minimum,
            capacity,
            guard: guard_size_in_bytes,
        };
        let region = match POOL.with(|pool| pool.borrow_mut().take(shape)) {
            Some(region) => region,
            None => Region::new(shape)?,
        };
        let memory = Mapped {
            region: Some(region),
            size: Arc::new(AtomicUsize::new(minimum)),
            written: Arc::new(AtomicUsize::new(usize::MAX)),
        };
        CAUGHT.with(|caught| {
            if let Some(list) = caught.borrow_mut().as_mut() {
                list.push(Caught {
                    base: memory.base() as usize,
                    size: Arc::clone(&memory.size),
                    written: Arc::clone(&memory.written),
                    ty,
                });
            }
        });
        Ok(Box::new(memory))
    }
}

/// What a memory is made as: its first accessible bytes, its reservation, its guard.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Shape {
    minimum: usize,
    capacity: usize,
    guard: usize,
}

/// An anonymous mapping of `shape`: its capacity that a memory may grow into without
/// moving, then the guard; its first `minimum` bytes readable and writable, the rest not.
/// Dropped, it is unmapped.
struct Region {
    base: *mut u8,
    shape: Shape,
    mapped: usize,
}

// SAFETY: the mapping is owned by this value; wasmtime synchronizes its own accesses.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    fn new(shape: Shape) -> Result<Region, String> {
        let mapped = (shape.capacity)
            .checked_add(shape.guard)
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
        let region = Region {
            base: base.cast(),
            shape,
            mapped,
        };
        region.protect(0, shape.minimum, libc::PROT_READ | libc::PROT_WRITE)?;
        Ok(region)
    }

    /// Gives the bytes from `from` to `to` (rounded out to pages) the protection `prot`.
    fn protect(&self, from: usize, to: usize, prot: libc::c_int) -> Result<(), String> {
        let (from, to) = (page_up(from), page_up(to));
        if to <= from {
            return Ok(());
        }
        // SAFETY: a range inside the mapping (`to` is at most `capacity`, checked by the
        // callers).
        let done = unsafe { libc::mprotect(self.base.add(from).cast(), to - from, prot) };
        match done {
            0 => Ok(()),
            _ => Err(format!(
                "cannot change the protection of a memory's pages: {}",
                std::io::Error::last_os_error()
            )),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the whole mapping this value owns.
        unsafe { libc::munmap(self.base.cast(), self.mapped) };
    }
}

/// A thread's regions ready for reuse.
#[derive(Default)]
struct Pool(Vec<Region>);

/// The regions a thread's pool keeps at most.
const POOLED_AT_MOST: usize = 4;

impl Pool {
    fn take(&mut self, shape: Shape) -> Option<Region> {
        let at = self.0.iter().position(|r| r.shape == shape)?;
        Some(self.0.swap_remove(at))
    }
}

/// A linear memory in a region: its size now, and what it wrote, once marked for reuse.
struct Mapped {
    /// Always `Some` until it is dropped.
    region: Option<Region>,
    size: Arc<AtomicUsize>,
    /// See [`Caught::reuse`]: `usize::MAX` unless marked for reuse.
    written: Arc<AtomicUsize>,
}

impl Mapped {
    fn region(&self) -> &Region {
        self.region.as_ref().expect("a live memory has its region")
    }

    fn base(&self) -> *mut u8 {
        self.region().base
    }

    /// Its region, for the pool, where it was marked for reuse and wrote no further than
    /// it said: the bytes written zeroed, the pages it grew into inaccessible again.
    fn clear_for_reuse(&mut self) -> Option<Region> {
        let written = self.written.load(Ordering::Acquire);
        let size = self.size.load(Ordering::Acquire);
        let region = self.region.take()?;
        if written > size {
            self.region = Some(region);
            return None;
        }
        // SAFETY: the first `written` bytes are accessible (at most `size`), and no store
        // uses the memory any more.
        unsafe { std::ptr::write_bytes(region.base, 0, written) };
        let minimum = region.shape.minimum;
        if size > minimum && region.protect(minimum, size, libc::PROT_NONE).is_err() {
            return None;
        }
        Some(region)
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if let Some(region) = self.clear_for_reuse() {
            // A thread's end drops its pool (and unmaps what it holds) before this.
            let _ = POOL.try_with(|pool| {
                let mut pool = pool.borrow_mut();
                if pool.0.len() < POOLED_AT_MOST {
                    pool.0.push(region);
                }
            });
        }
    }
}

// SAFETY: the base never moves; growth stays inside the reservation.
unsafe impl LinearMemory for Mapped {
    fn byte_size(&self) -> usize {
        self.size.load(Ordering::Acquire)
    }

    fn byte_capacity(&self) -> usize {
        self.region().shape.capacity
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        let capacity = self.region().shape.capacity;
        if new_size > capacity {
            return Err(wasmtime::format_err!(
                "a memory cannot grow past its reservation of {capacity} bytes"
            ));
        }
        let old = self.size.load(Ordering::Acquire);
        self.region()
            .protect(old, new_size, libc::PROT_READ | libc::PROT_WRITE)
            .map_err(|e| wasmtime::format_err!("{e}"))?;
        self.size.store(new_size.max(old), Ordering::Release);
        Ok(())
    }

    fn as_ptr(&self) -> *mut u8 {
        self.base()
    }
}

/// `bytes` rounded up to the system's page size.
fn page_up(bytes: usize) -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    bytes.div_ceil(page) * page
}
