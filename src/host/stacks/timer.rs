//! What raises each sampled thread's `SIGPROF`: a POSIX timer on the wall clock, or, for a
//! thread's CPU time, perf's task clock (`perf_event_open`'s software event, an hrtimer),
//! which fires at the interval asked for, where a POSIX CPU-time timer fires only at the
//! kernel's tick (0.24-0.25 samples per CPU millisecond at 250 Hz, asked for one). The task
//! clock's overflow signals the thread that opened it (`F_SETOWN_EX` with `F_OWNER_TID`,
//! `F_SETSIG`), as perf and async-profiler have it; each overflow disables it
//! (`PERF_EVENT_IOC_REFRESH` 1) and the handler enables it again ([`rearm`]). Where perf
//! events are closed (`perf_event_paranoid`, a container's seccomp) the POSIX CPU-time
//! timer stands in, and [`cpu_timer_fallback`] says why, for the report.

use std::sync::OnceLock;
use std::time::Duration;

/// The environment variable that makes CPU-time sampling use the POSIX CPU-time timer,
/// as where perf events are closed (`posix`): the tests' switch for the fallback.
pub const CPU_TIMER_VAR: &str = "WASMPROF_CPU_TIMER";

/// Why the threads sampled on their CPU time in this process were sampled by the POSIX
/// CPU-time timer, at the kernel's tick, when they were.
static FALLBACK: OnceLock<String> = OnceLock::new();

/// Why CPU-time sampling fell back to the POSIX CPU-time timer in this process (perf events
/// closed, or asked for by [`CPU_TIMER_VAR`]), if it did.
pub fn cpu_timer_fallback() -> Option<&'static str> {
    FALLBACK.get().map(String::as_str)
}

/// A sampled thread's timer: it raises `SIGPROF` on that thread every interval.
pub(super) enum Timer {
    /// A POSIX timer (`timer_create`, `SIGEV_THREAD_ID`).
    Posix(libc::timer_t),
    /// perf's task clock of the thread, its file descriptor.
    TaskClock(libc::c_int),
}

// SAFETY: a timer id and a file descriptor are the process's; any thread may delete them.
unsafe impl Send for Timer {}

impl Timer {
    /// Makes the timer of the calling thread, every `interval` of `clock` (the wall clock,
    /// or the thread's CPU time: perf's task clock where it opens, which fires once
    /// enabled). The `SIGPROF` handler must be installed first.
    pub(super) fn start(interval: Duration, clock: libc::clockid_t) -> anyhow::Result<Timer> {
        if clock == libc::CLOCK_THREAD_CPUTIME_ID {
            let asked_posix = std::env::var(CPU_TIMER_VAR).is_ok_and(|v| v == "posix");
            match asked_posix {
                true => {
                    let _ = FALLBACK.set(format!("{CPU_TIMER_VAR}=posix asked for it"));
                }
                false => match task_clock(interval) {
                    Ok(fd) => return Ok(Timer::TaskClock(fd)),
                    Err(e) => {
                        let _ = FALLBACK.set(format!("perf events are closed here: {e}"));
                    }
                },
            }
        }
        posix(interval, clock).map(Timer::Posix)
    }

    /// The file descriptor the handler enables again after each overflow, if any.
    pub(super) fn rearmed_fd(&self) -> Option<libc::c_int> {
        match self {
            Timer::TaskClock(fd) => Some(*fd),
            Timer::Posix(_) => None,
        }
    }

    /// Lets the task clock fire, once the thread's ring knows its descriptor (a POSIX timer
    /// runs from its start).
    pub(super) fn enable(&self) {
        if let Timer::TaskClock(fd) = self {
            rearm(*fd);
        }
    }

    /// Turns the task clock off until [`enable`](Self::enable): perf then switches no
    /// running event at the thread's context switches. (A POSIX CPU-time timer costs them
    /// nothing, and runs on.)
    pub(super) fn disable(&self) {
        if let Timer::TaskClock(fd) = self {
            // SAFETY: an ioctl on the descriptor of this timer.
            unsafe {
                libc::ioctl(*fd, PERF_EVENT_IOC_DISABLE as _, 0);
            }
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: the timer or the descriptor this value made.
        unsafe {
            match self {
                Timer::Posix(timer) => {
                    libc::timer_delete(*timer);
                }
                Timer::TaskClock(fd) => {
                    libc::close(*fd);
                }
            }
        }
    }
}

/// Enables the task clock `fd` for one more overflow (async-signal-safe: one system call).
pub(super) fn rearm(fd: libc::c_int) {
    // SAFETY: an ioctl on a descriptor of the calling thread's timer.
    unsafe {
        libc::ioctl(fd, PERF_EVENT_IOC_REFRESH as _, 1);
    }
}

/// A POSIX timer on `clock` that sends the calling thread `SIGPROF` every `interval`.
fn posix(interval: Duration, clock: libc::clockid_t) -> anyhow::Result<libc::timer_t> {
    // SAFETY: plain system calls with initialized arguments; the timer is deleted on error
    // here, and on drop of the `Timer` that holds it.
    unsafe {
        let mut event: libc::sigevent = std::mem::zeroed();
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = libc::SIGPROF;
        event.sigev_notify_thread_id = libc::gettid();
        let mut timer: libc::timer_t = std::ptr::null_mut();
        if libc::timer_create(clock, &mut event, &mut timer) != 0 {
            anyhow::bail!(
                "cannot create the sampling timer: {}",
                std::io::Error::last_os_error()
            );
        }
        let period = libc::timespec {
            tv_sec: interval.as_secs() as libc::time_t,
            tv_nsec: interval.subsec_nanos() as libc::c_long,
        };
        let spec = libc::itimerspec {
            it_interval: period,
            it_value: period,
        };
        if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
            let e = std::io::Error::last_os_error();
            libc::timer_delete(timer);
            anyhow::bail!("cannot start the sampling timer: {e}");
        }
        Ok(timer)
    }
}

/// `perf_event_attr` as far as its first version (64 bytes), which the kernel takes.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// `PERF_TYPE_SOFTWARE`, `PERF_COUNT_SW_TASK_CLOCK`.
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
/// `perf_event_attr`'s flags: `disabled`, `exclude_kernel`, `exclude_hv`.
const DISABLED: u64 = 1 << 0;
const EXCLUDE_KERNEL: u64 = 1 << 5;
const EXCLUDE_HV: u64 = 1 << 6;
/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `PERF_EVENT_IOC_DISABLE`: `_IO('$', 1)`.
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
/// `PERF_EVENT_IOC_REFRESH`: `_IO('$', 2)`.
const PERF_EVENT_IOC_REFRESH: libc::c_ulong = 0x2402;
/// `fcntl`'s `F_SETSIG`, `F_SETOWN_EX` and `F_OWNER_TID`.
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

/// `struct f_owner_ex`.
#[repr(C)]
struct OwnerEx {
    kind: libc::c_int,
    pid: libc::pid_t,
}

/// perf's task clock of the calling thread, overflowing every `interval` of its CPU time
/// and signalling it `SIGPROF`, disabled until [`Timer::enable`].
fn task_clock(interval: Duration) -> std::io::Result<libc::c_int> {
    let open = |flags: u64| {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_TASK_CLOCK,
            sample_period: interval.as_nanos().max(1) as u64,
            flags: DISABLED | EXCLUDE_HV | flags,
            wakeup_events: 1,
            ..PerfEventAttr::default()
        };
        // SAFETY: the attribute struct outlives the call; pid 0 and cpu -1: the calling
        // thread, on any CPU.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0,
                -1,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        match fd {
            -1 => Err(std::io::Error::last_os_error()),
            fd => Ok(fd as libc::c_int),
        }
    };
    // With the kernel's time too where allowed (as root), else the thread's own.
    let fd = open(0).or_else(|_| open(EXCLUDE_KERNEL))?;
    // SAFETY: fcntl and ioctl on the descriptor just opened, closed on failure.
    unsafe {
        let owner = OwnerEx {
            kind: F_OWNER_TID,
            pid: libc::gettid(),
        };
        let flags = libc::fcntl(fd, libc::F_GETFL);
        let set = libc::fcntl(fd, libc::F_SETFL, flags | libc::O_ASYNC) == 0
            && libc::fcntl(fd, F_SETSIG, libc::SIGPROF) == 0
            && libc::fcntl(fd, F_SETOWN_EX, &owner as *const OwnerEx) == 0;
        if !set {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
    }
    Ok(fd)
}
