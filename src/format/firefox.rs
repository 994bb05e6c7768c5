//! The Firefox Profiler's processed profile format (for profiler.firefox.com), written
//! with samply's `fxprof-processed-profile`: one thread (one per thread of a threaded
//! program) whose samples are the
//! calling-context tree laid out on a line, as the speedscope view lays it: each context a
//! sample with its stack (function names, outermost first) weighted by its self cost
//! (nanoseconds or instructions), at the point of the line where its inclusive cost
//! begins. The call tree, flame graph and stack chart all show the tree; the weights are
//! the profile's exact (or sampled) costs, not sample counts.

use std::io::Write;

use fxprof_processed_profile::{
    CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, Profile as Firefox, ReferenceTimestamp,
    SamplingInterval, StackHandle, Timestamp, WeightType,
};

use super::tree::Tree;
use super::EmitOptions;
use crate::profile::Profile;

/// Writes `profile` in the Firefox Profiler's processed format: one thread, or, for a
/// threaded program, one Firefox thread per thread of the program.
pub(super) fn write(
    profile: &Profile,
    options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let name = profile.modules.join(", ");
    let mut ff = Firefox::new(
        &format!("cargo-wasmprof: {name}"),
        ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        SamplingInterval::from_nanos(1),
    );
    let process = ff.add_process(&name, 1, Timestamp::from_nanos_since_reference(0));
    let tracks: Vec<(String, &Profile)> = match profile.threads.as_slice() {
        [] => vec![(profile.metric.name().to_string(), profile)],
        threads => threads.iter().map(|t| (t.label(), &t.profile)).collect(),
    };
    for (i, (label, p)) in tracks.into_iter().enumerate() {
        add_thread(&mut ff, process, (i as u32 + 1, &label), p, options.weight)?;
    }
    serde_json::to_writer(&mut *out, &ff)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// One Firefox thread (`tid`, named `label`) whose samples lay out `profile`'s tree.
fn add_thread(
    ff: &mut Firefox,
    process: fxprof_processed_profile::ProcessHandle,
    (tid, label): (u32, &str),
    profile: &Profile,
    weight: super::Weight,
) -> anyhow::Result<()> {
    let tree = Tree::of(profile, weight)?;
    let thread = ff.add_thread(
        process,
        tid,
        Timestamp::from_nanos_since_reference(0),
        tid == 1,
    );
    ff.set_thread_name(thread, &format!("{label} ({})", tree.unit_name()));
    ff.set_thread_samples_weight_type(thread, WeightType::Samples);
    // Each frame's stack, parents first: frame k's stack is its parent's plus itself.
    let mut stacks: Vec<Option<StackHandle>> = vec![None; tree.frames.len()];
    let mut at = 0u64;
    let mut order = Vec::with_capacity(tree.frames.len());
    tree.preorder(&mut |id, _depth| order.push(id));
    for id in order {
        let frame = &tree.frames[id];
        let label = ff.intern_string(frame.name);
        let handle = ff.intern_frame(
            thread,
            FrameInfo {
                frame: Frame::Label(label),
                category_pair: CategoryHandle::OTHER.into(),
                flags: FrameFlags::empty(),
            },
        );
        let parent = frame.parent.and_then(|p| stacks[p]);
        let stack = ff.intern_stack(thread, parent, handle);
        stacks[id] = Some(stack);
        // A weight is an i32: a larger self cost is several samples.
        let mut left = frame.self_weight;
        while left > 0 {
            let weight = left.min(i32::MAX as u64);
            ff.add_sample(
                thread,
                Timestamp::from_nanos_since_reference(at),
                Some(stack),
                CpuDelta::ZERO,
                weight as i32,
            );
            left -= weight;
        }
        at += frame.self_weight.max(1);
    }
    Ok(())
}
