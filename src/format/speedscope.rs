//! speedscope's file format (<https://www.speedscope.app/file-format-schema.json>): an
//! "evented" profile that lays the calling-context tree out on a line, each context open
//! for its inclusive weight, children in name order, so speedscope's flame chart, left
//! heavy and sandwich views all show the tree.

use std::collections::HashMap;
use std::io::Write;

use serde_json::json;

use super::tree::Tree;
use super::EmitOptions;
use crate::profile::Profile;

/// Writes `profile` as a speedscope file: one profile of the whole run, and for a threaded
/// program one more per thread (speedscope's profile menu switches between them).
pub(super) fn write(
    profile: &Profile,
    options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let name = profile.modules.join(", ");
    let mut frames = Frames::default();
    let mut profiles = vec![evented(profile, &name, options.weight, &mut frames)?];
    for t in &profile.threads {
        profiles.push(evented(
            &t.profile,
            &format!("{name}: {}", t.label()),
            options.weight,
            &mut frames,
        )?);
    }
    let file = json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "name": name,
        "exporter": concat!("cargo-wasmprof ", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": { "frames": frames.list },
        "profiles": profiles,
    });
    serde_json::to_writer(&mut *out, &file)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// speedscope's shared frames: one per function name (and one for lost paths).
#[derive(Default)]
struct Frames {
    list: Vec<serde_json::Value>,
    by_name: HashMap<String, usize>,
}

/// One evented profile of `profile`'s calling-context tree, named `name`, weighed by
/// `weight`.
fn evented(
    profile: &Profile,
    name: &str,
    weight: super::Weight,
    frames: &mut Frames,
) -> anyhow::Result<serde_json::Value> {
    let tree = Tree::of(profile, weight)?;
    let mut frame_index = |id: usize| -> usize {
        let frame = &tree.frames[id];
        if let Some(&i) = frames.by_name.get(frame.name) {
            return i;
        }
        let mut value = json!({ "name": frame.name });
        if let Some(f) = frame.function.map(|f| &profile.functions[f as usize]) {
            if let Some(file) = &f.file {
                value["file"] = json!(file);
            }
            if let Some(line) = f.line {
                value["line"] = json!(line);
            }
        }
        frames.list.push(value);
        frames
            .by_name
            .insert(frame.name.to_string(), frames.list.len() - 1);
        frames.list.len() - 1
    };
    // Open and close events, depth first.
    let mut events = Vec::new();
    let mut stack: Vec<(usize, bool)> = tree.frames[0]
        .children
        .iter()
        .rev()
        .map(|&c| (c, true))
        .collect();
    let mut at = 0u64;
    let mut starts = vec![0u64; tree.frames.len()];
    while let Some((id, opening)) = stack.pop() {
        let frame = frame_index(id);
        if opening {
            starts[id] = at;
            events.push(json!({ "type": "O", "frame": frame, "at": at }));
            stack.push((id, false));
            stack.extend(tree.frames[id].children.iter().rev().map(|&c| (c, true)));
        } else {
            at = starts[id] + tree.frames[id].total;
            events.push(json!({ "type": "C", "frame": frame, "at": at }));
        }
    }
    let unit = match (tree.is_time(), tree.unit_name()) {
        (true, _) => "nanoseconds",
        (false, "bytes") => "bytes",
        _ => "none",
    };
    Ok(json!({
        "type": "evented",
        "name": format!("{name} ({})", tree.unit_name()),
        "unit": unit,
        "startValue": 0,
        "endValue": tree.frames[0].total,
        "events": events,
    }))
}
