//! speedscope's file format (<https://www.speedscope.app/file-format-schema.json>): an
//! "evented" profile that lays the calling-context tree out on a line, each context open
//! for its inclusive weight, children in name order, so speedscope's flame chart, left
//! heavy and sandwich views all show the tree.

use std::io::Write;

use serde_json::json;

use super::tree::{Tree, Unit};
use super::EmitOptions;
use crate::profile::Profile;

/// Writes `profile` as a speedscope file.
pub(super) fn write(
    profile: &Profile,
    _options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let tree = Tree::of(profile)?;
    // One speedscope frame per function (and one for lost paths).
    let mut frames = Vec::new();
    let mut frame_of_function = vec![None; profile.functions.len()];
    let mut lost_frame = None;
    let mut frame_index = |id: usize, frames: &mut Vec<serde_json::Value>| -> usize {
        let frame = &tree.frames[id];
        let slot = match frame.function {
            Some(f) => &mut frame_of_function[f as usize],
            None => &mut lost_frame,
        };
        *slot.get_or_insert_with(|| {
            let mut value = json!({ "name": frame.name });
            if let Some(f) = frame.function.map(|f| &profile.functions[f as usize]) {
                if let Some(file) = &f.file {
                    value["file"] = json!(file);
                }
                if let Some(line) = f.line {
                    value["line"] = json!(line);
                }
            }
            frames.push(value);
            frames.len() - 1
        })
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
        let frame = frame_index(id, &mut frames);
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
    let unit = match tree.unit {
        Unit::Nanoseconds => "nanoseconds",
        Unit::Instructions => "none",
    };
    let name = profile.modules.join(", ");
    let file = json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "name": name,
        "exporter": concat!("cargo-wasmprof ", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": [{
            "type": "evented",
            "name": format!("{name} ({})", tree.unit.name()),
            "unit": unit,
            "startValue": 0,
            "endValue": tree.frames[0].total,
            "events": events,
        }],
    });
    serde_json::to_writer(&mut *out, &file)?;
    out.write_all(b"\n")?;
    Ok(())
}
