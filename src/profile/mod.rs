//! The profile: one data model that every report and output format is a view of.
//!
//! A profile is self-contained: it carries the names and source locations of its
//! functions, so a report never needs the build that made it. It is decoded from the
//! profiler's memory with the module's meta ([`crate::meta`]).
//!
//! - [`model`](Profile): the types, and lookups by name;
//! - `alloc`: the program's allocations, per context and as a whole;
//! - `decode`: a run's [`Dump`] and the module's meta into a profile;
//! - `merge`: several runs' profiles as one;
//! - `compensate`: the probes' measured cost subtracted from a timed profile;
//! - `counts`: a view's counts where the contexts were sampled, which count no calls;
//! - `helpers`: the standard library's helpers of an unoptimized build folded into their callers;
//! - `io`: profile files, and the [`DumpFile`] a JS host saves;
//! - `outermost`: inclusive costs counted once per outermost activation;
//! - `samples`: how the sampled times were taken ([`Sampling`]);
//! - `stacks`: the stack sampler's samples, and how a stack finds its context;
//! - `sum`: runs whose state is counters alone summed into one run's dump ([`DumpSum`]);
//! - `threads`: a threaded run's profile, the merge of its threads', each thread kept;
//! - `view`: the profile's stacks through some functions, or grouped by file or crate.

mod alloc;
mod compensate;
mod counts;
mod decode;
mod helpers;
mod io;
mod merge;
mod model;
mod outermost;
mod requests;
mod samples;
mod stacks;
mod sum;
mod threads;
mod view;

pub use alloc::{Allocations, Allocs};
pub use compensate::Compensation;
pub use decode::{context_of, Dump};
pub use io::{DumpFile, DumpThread, RunDump, DUMP_FIELDS, DUMP_FORMAT, DUMP_THREAD_FIELDS};
pub use merge::MergedNames;
pub use model::*;
pub use requests::{Answer, Requests, Route};
pub use samples::{NoSampler, Sampling, FEW_SAMPLES};
pub use stacks::{StackSample, StackSamples};
pub use sum::DumpSum;
pub use threads::{Thread, ThreadDump};
pub use view::{crate_of, Filter, Grouping, View};
