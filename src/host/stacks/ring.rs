//! The signal side of the stack sampler: each sampled thread's ring of samples, and the
//! `SIGPROF` handler that fills it (and enables the thread's task clock again, where that
//! raises the signal: `timer`).
//!
//! The handler is async-signal-safe: it reads registers, the clock and memory it checked
//! (the frame pointers within the thread's stack, the code range, the word where wasmtime
//! notes the last exit to the host), and writes only the ring. Interrupted system calls restart (`SA_RESTART`); wasmtime's own signals (traps)
//! are others, so its trap handling is untouched.

use std::cell::Cell;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

use super::exits::Exits;

/// The most frames a sample keeps; a deeper stack counts as truncated (the decoder could
/// not place it from the root).
const MAX_DEPTH: usize = 1024;

/// Words (u64) of each thread's ring: 2 MB, about 10,000 samples of 20 frames, which the
/// drain thread empties every few milliseconds ([`Words`]).
const RING_WORDS: usize = 1 << 18;

/// A record's flag: the interrupted PC was outside the module's code, and no wasm frame
/// called the host code it was in.
const OUTSIDE: u64 = 1 << 63;
/// A record's flag: the stack was deeper than [`MAX_DEPTH`].
const TRUNCATED: u64 = 1 << 62;
/// A record's flag: the interrupted PC was in host code that wasm code called (an import,
/// one of wasmtime's own functions); the record's first address is the return address
/// into that wasm code.
const HOST: u64 = 1 << 61;
/// A record's words before its addresses: the time, then the flags and the depth.
const RECORD_HEAD: usize = 2;

thread_local! {
    /// The ring of the thread the handler interrupts (null when the thread is not sampled):
    /// a const-initialized thread-local without destructor, which a signal handler may
    /// read.
    static RING: Cell<*const Ring> = const { Cell::new(std::ptr::null()) };
}

/// One sample as the handler recorded it.
pub(super) struct Record<'a> {
    /// The time it stands for: since the thread's previous sample.
    pub(super) ns: u64,
    /// The PC was outside the module's code, and no wasm frame called the code it was in.
    pub(super) outside: bool,
    /// The PC was in host code that wasm code called: `pcs` are all return addresses.
    pub(super) host: bool,
    /// The stack was deeper than the handler walks.
    pub(super) truncated: bool,
    /// The interrupted PC (unless `host`), then the wasm frames' return addresses,
    /// innermost first.
    pub(super) pcs: &'a [usize],
}

/// One thread's samples on their way from the signal handler (the producer) to the drain
/// thread (the consumer).
pub(super) struct Ring {
    words: Words,
    /// Words written (the producer's), and words read (the consumer's).
    head: AtomicUsize,
    tail: AtomicUsize,
    /// The clock at the previous sample: each sample stands for the time since.
    last_ns: AtomicU64,
    /// Samples that found the ring full, and the time they stood for.
    dropped: AtomicU64,
    dropped_ns: AtomicU64,
    /// The module's code, and the thread's stack: what the walk may read.
    code: (usize, usize),
    stack: (usize, usize),
    /// Where wasmtime notes the thread's last exit from wasm code to the host (the word's
    /// address, 0 for none): the store's, which a thread that runs one store after another
    /// changes between them.
    exits: AtomicUsize,
    /// The clock the samples' times are read from (the timer's).
    clock: libc::clockid_t,
    /// The task clock the handler enables again after each sample (-1: none, a POSIX
    /// timer's signals need nothing).
    rearm: AtomicI32,
}

impl Ring {
    /// An empty ring for the calling thread, whose samples walk frames within `code` (the
    /// module's native code), from the host code that wasm code called through `exits`,
    /// each sample standing for the time `clock` counted since the one before.
    pub(super) fn new(
        code: (usize, usize),
        exits: Option<Exits>,
        clock: libc::clockid_t,
    ) -> anyhow::Result<Ring> {
        Ok(Ring {
            words: Words::new()?,
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            last_ns: AtomicU64::new(clock_ns(clock)),
            dropped: AtomicU64::new(0),
            dropped_ns: AtomicU64::new(0),
            code,
            stack: thread_stack()?,
            exits: AtomicUsize::new(exits.map_or(0, |e| e.word())),
            clock,
            rearm: AtomicI32::new(-1),
        })
    }

    /// The task clock whose overflows fill this ring, which the handler enables again.
    pub(super) fn set_rearm(&self, fd: Option<libc::c_int>) {
        self.rearm.store(fd.unwrap_or(-1), Ordering::Relaxed);
    }

    /// Walks from the exits of `exits` from now on (a thread's next store).
    pub(super) fn set_exits(&self, exits: Option<Exits>) {
        self.exits
            .store(exits.map_or(0, |e| e.word()), Ordering::Relaxed);
    }

    /// Makes this the ring the handler fills when it interrupts the calling thread.
    pub(super) fn attach(&self) {
        RING.with(|r| r.set(self));
    }

    /// Makes the handler record nothing more on the calling thread, if this is its ring.
    pub(super) fn detach(&self) {
        RING.with(|r| {
            if std::ptr::eq(r.get(), self) {
                r.set(std::ptr::null());
            }
        });
    }

    /// The samples that found the ring full, and the time they stood for.
    pub(super) fn dropped(&self) -> (u64, u64) {
        (
            self.dropped.load(Ordering::Relaxed),
            self.dropped_ns.load(Ordering::Relaxed),
        )
    }

    /// Records one sample, in the signal handler: `now` and the interrupted thread's
    /// registers.
    fn record(&self, now: u64, regs: Registers) {
        let ns = now.saturating_sub(self.last_ns.swap(now, Ordering::Relaxed));
        let head = self.head.load(Ordering::Relaxed);
        let free = RING_WORDS - (head - self.tail.load(Ordering::Acquire));
        if free < RECORD_HEAD + MAX_DEPTH {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            self.dropped_ns.fetch_add(ns, Ordering::Relaxed);
            return;
        }
        let put = |at: usize, word: u64| self.words[at % RING_WORDS].store(word, Ordering::Relaxed);
        let pcs = head + RECORD_HEAD;
        let (depth, flags) = if self.in_code(regs.pc) {
            self.walk(regs, |i, ret| put(pcs + i, ret as u64))
        } else if let Some(trampoline_fp) = self.host_exit() {
            let returns = self.frame_returns(trampoline_fp);
            let (depth, flags) = self.returns(returns, 0, |i, ret| put(pcs + i, ret as u64));
            (depth, flags | HOST)
        } else {
            (0, OUTSIDE)
        };
        put(head, ns);
        put(head + 1, flags | depth as u64);
        self.head.store(pcs + depth, Ordering::Release);
    }

    /// The frame pointer of the trampoline through which wasm code called the host code
    /// the thread is in, when its frame is readable and returns into the module's code.
    fn host_exit(&self) -> Option<usize> {
        let word = self.exits.load(Ordering::Relaxed);
        if word == 0 {
            return None;
        }
        // SAFETY: the word of a store's context that `Exits` found, aligned; the store
        // outlives its exits' use here (the thread sets others before it drops it), and
        // wasmtime writes the word on this same thread, so the handler reads a whole value.
        let fp = unsafe { (word as *const usize).read_volatile() };
        // SAFETY: an aligned address of the thread's stack (checked): the trampoline's
        // frame, whose second word is its return address.
        let ret = self
            .frame_ok(fp)
            .then(|| unsafe { (fp as *const usize).add(1).read() })?;
        self.in_code(ret).then_some(fp)
    }

    /// Gives the interrupted PC, then the return address of each wasm frame outwards, to
    /// `put` with its position; how many it gave, and the truncation flag. The frame
    /// pointer chain gives the return addresses, but not the innermost one while that
    /// frame's prologue has not yet set the frame pointer or its epilogue has restored the
    /// caller's: that one comes from where the return address is then
    /// ([`Ring::unframed_return`]), or the caller would be left out of the stack.
    fn walk(&self, regs: Registers, mut put: impl FnMut(usize, usize)) -> (usize, u64) {
        put(0, regs.pc);
        let returns = self.unframed_return(&regs).into_iter();
        self.returns(returns.chain(self.frame_returns(regs.fp)), 1, put)
    }

    /// Gives the return addresses of `returns` that are in the module's code, up to the
    /// first that is not, to `put` with their positions from `depth` on; the depth reached,
    /// and the truncation flag.
    fn returns(
        &self,
        returns: impl Iterator<Item = usize>,
        mut depth: usize,
        mut put: impl FnMut(usize, usize),
    ) -> (usize, u64) {
        for ret in returns {
            if !self.in_code(ret) {
                break;
            }
            if depth == MAX_DEPTH {
                return (depth, TRUNCATED);
            }
            put(depth, ret);
            depth += 1;
        }
        (depth, 0)
    }

    /// The return address each frame of the frame-pointer chain from `fp` keeps, outwards,
    /// while the frames are readable and go up the stack; each frame is read only when the
    /// one before has been taken.
    fn frame_returns(&self, fp: usize) -> impl Iterator<Item = usize> + '_ {
        let mut fp = Some(fp);
        std::iter::from_fn(move || {
            let at = fp.filter(|&at| self.frame_ok(at))?;
            // SAFETY: `at` is an aligned address of the thread's stack (checked), where a
            // wasm frame keeps the caller's frame pointer and its return address.
            let (next, ret) = unsafe {
                let frame = at as *const usize;
                (frame.read(), frame.add(1).read())
            };
            fp = (next > at).then_some(next);
            Some(ret)
        })
    }

    /// Whether `address` is in the module's native code.
    fn in_code(&self, address: usize) -> bool {
        (self.code.0..self.code.1).contains(&address)
    }

    /// Whether a frame may be read at `fp`: aligned, inside the thread's stack.
    fn frame_ok(&self, fp: usize) -> bool {
        fp.is_multiple_of(std::mem::align_of::<usize>())
            && fp >= self.stack.0
            && fp + 16 <= self.stack.1
    }

    /// The innermost frame's return address when the interrupted instruction is one at
    /// which the frame pointer is still, or again, the caller's: Cranelift's prologue
    /// `push rbp; mov rbp, rsp` before its second instruction ran, and its epilogue's
    /// `ret` (after `pop rbp`; `ret imm16` where the callee pops its stack arguments). The
    /// return address is on the top of the stack then, or under the pushed frame pointer.
    #[cfg(target_arch = "x86_64")]
    fn unframed_return(&self, regs: &Registers) -> Option<usize> {
        const PUSH_RBP: u8 = 0x55;
        const RET: u8 = 0xc3;
        const RET_IMM16: u8 = 0xc2;
        const MOV_RBP_RSP: [u8; 3] = [0x48, 0x89, 0xe5];
        let code = |i: usize| {
            // SAFETY: inside the module's code (checked), which is mapped readable.
            (regs.pc + i < self.code.1).then(|| unsafe { *(regs.pc as *const u8).add(i) })
        };
        let slot = match code(0)? {
            PUSH_RBP | RET | RET_IMM16 => 0,
            _ if [code(0), code(1), code(2)] == MOV_RBP_RSP.map(Some) => 1,
            _ => return None,
        };
        let at = regs.sp + slot * std::mem::size_of::<usize>();
        // SAFETY: an aligned address of the thread's stack (checked).
        self.frame_ok(at)
            .then(|| unsafe { (at as *const usize).read() })
    }

    /// The innermost frame's return address when the interrupted instruction is one at
    /// which the frame pointer is still, or again, the caller's: Cranelift's prologue
    /// `stp x29, x30, [sp, #-16]!; mov x29, sp` before its second instruction ran, and its
    /// epilogue's `ret` (after the `ldp` that restores both). The return address is in
    /// the link register then. (Where the callee pops its stack arguments, an `add sp`
    /// comes between the two; a sample there still leaves the caller out, since the same
    /// instruction frees a frame before the `ldp`, where the link register is stale.)
    #[cfg(target_arch = "aarch64")]
    fn unframed_return(&self, regs: &Registers) -> Option<usize> {
        const STP_FP_LR: u32 = 0xa9bf_7bfd;
        const MOV_FP_SP: u32 = 0x9100_03fd;
        const RET: u32 = 0xd65f_03c0;
        if !regs.pc.is_multiple_of(4) || regs.pc + 4 > self.code.1 {
            return None;
        }
        // SAFETY: an aligned instruction inside the module's code (checked), which is
        // mapped readable.
        let instruction = unsafe { (regs.pc as *const u32).read() };
        matches!(instruction, STP_FP_LR | MOV_FP_SP | RET).then_some(regs.lr)
    }

    /// Gives each sample recorded since the last call to `each`, oldest first.
    pub(super) fn drain(&self, mut each: impl FnMut(Record)) {
        let head = self.head.load(Ordering::Acquire);
        let mut at = self.tail.load(Ordering::Relaxed);
        let get = |at: usize| self.words[at % RING_WORDS].load(Ordering::Relaxed);
        let mut pcs = Vec::new();
        while at < head {
            let (ns, info) = (get(at), get(at + 1));
            let depth = (info & !(OUTSIDE | TRUNCATED | HOST)) as usize;
            pcs.clear();
            pcs.extend((0..depth).map(|i| get(at + RECORD_HEAD + i) as usize));
            each(Record {
                ns,
                outside: info & OUTSIDE != 0,
                host: info & HOST != 0,
                truncated: info & TRUNCATED != 0,
                pcs: &pcs,
            });
            at += RECORD_HEAD + depth;
        }
        self.tail.store(at, Ordering::Release);
    }
}

/// A ring's words: pages of their own, mapped anew (`mmap`), so that the system provides
/// each only when a sample first writes it. A zeroed allocation from the heap would reuse
/// memory the process had freed, which must then be cleared: 2 MB written before every
/// run, 0.2-0.5 ms of a short one.
struct Words(std::ptr::NonNull<AtomicU64>);

// SAFETY: the mapping is owned by the ring and its words are atomics, which any thread may
// read and write.
unsafe impl Send for Words {}
unsafe impl Sync for Words {}

impl Words {
    /// The bytes of [`RING_WORDS`] words.
    const BYTES: usize = RING_WORDS * std::mem::size_of::<AtomicU64>();

    /// Maps the words, all zero.
    fn new() -> anyhow::Result<Words> {
        // SAFETY: a new anonymous private mapping, unmapped on drop.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Words::BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        match std::ptr::NonNull::new(at.cast::<AtomicU64>()) {
            Some(words) if at != libc::MAP_FAILED => Ok(Words(words)),
            _ => anyhow::bail!(
                "cannot map the stack sampler's ring: {}",
                std::io::Error::last_os_error()
            ),
        }
    }
}

impl std::ops::Deref for Words {
    type Target = [AtomicU64];

    fn deref(&self) -> &[AtomicU64] {
        // SAFETY: the mapping holds RING_WORDS words, zero (a valid `AtomicU64`) until
        // written, aligned to a page; it lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr(), RING_WORDS) }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made, no longer borrowed.
        unsafe {
            libc::munmap(self.0.as_ptr().cast(), Words::BYTES);
        }
    }
}

thread_local! {
    /// The calling thread's stack, once [`thread_stack`] has read it.
    static STACK: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// The calling thread's stack: its lowest and highest address. Read once a thread: for the
/// process's main thread, where the embedded host runs a program, glibc reads it from
/// `/proc/self/maps` (55-90 µs on the M3 machine of BENCHMARKS.md), and a thread's
/// stack stays where it is.
fn thread_stack() -> anyhow::Result<(usize, usize)> {
    if let Some(stack) = STACK.with(Cell::get) {
        return Ok(stack);
    }
    let stack = read_thread_stack()?;
    STACK.with(|s| s.set(Some(stack)));
    Ok(stack)
}

/// The calling thread's stack, as its attributes say.
fn read_thread_stack() -> anyhow::Result<(usize, usize)> {
    // SAFETY: the attributes of the calling thread, destroyed after reading.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            anyhow::bail!("cannot read the thread's stack");
        }
        let mut base: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut base, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        anyhow::ensure!(ok, "cannot read the thread's stack");
        Ok((base as usize, base as usize + size))
    }
}

/// `clock`'s reading, in nanoseconds (async-signal-safe).
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    unsafe {
        libc::clock_gettime(clock, &mut now);
    }
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Installs the `SIGPROF` handler, once for the process.
pub(super) fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: a handler that is async-signal-safe (see `on_sample`).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sample as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut());
        }
    });
}

/// The `SIGPROF` handler: records the interrupted thread's sample in its ring, if it has
/// one.
extern "C" fn on_sample(
    _signal: libc::c_int,
    _info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    let ring = RING.with(Cell::get);
    if ring.is_null() {
        return;
    }
    // SAFETY: the errno location of this thread; the context the kernel passed; the ring
    // the thread set, which it clears (in its normal context) before it drops it.
    unsafe {
        let errno = *libc::__errno_location();
        let regs = registers(&*(context as *const libc::ucontext_t));
        (*ring).record(clock_ns((*ring).clock), regs);
        let rearm = (*ring).rearm.load(Ordering::Relaxed);
        if rearm >= 0 {
            super::timer::rearm(rearm);
        }
        *libc::__errno_location() = errno;
    }
}

/// What the handler reads of the interrupted thread's registers.
struct Registers {
    /// The program counter.
    pc: usize,
    /// The frame pointer.
    fp: usize,
    /// The stack pointer (x86-64: where a return address is, outside a frame).
    #[cfg(target_arch = "x86_64")]
    sp: usize,
    /// The link register (aarch64: the return address, outside a frame).
    #[cfg(target_arch = "aarch64")]
    lr: usize,
}

/// The interrupted thread's registers.
#[cfg(target_arch = "x86_64")]
fn registers(context: &libc::ucontext_t) -> Registers {
    let regs = &context.uc_mcontext.gregs;
    Registers {
        pc: regs[libc::REG_RIP as usize] as usize,
        fp: regs[libc::REG_RBP as usize] as usize,
        sp: regs[libc::REG_RSP as usize] as usize,
    }
}

/// The interrupted thread's registers.
#[cfg(target_arch = "aarch64")]
fn registers(context: &libc::ucontext_t) -> Registers {
    let m = &context.uc_mcontext;
    Registers {
        pc: m.pc as usize,
        fp: m.regs[29] as usize,
        lr: m.regs[30] as usize,
    }
}
