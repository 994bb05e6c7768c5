//! An SVG flame graph of the calling-context tree: one box per context, as wide as its
//! inclusive weight, children left to right in name order, each with a tooltip (name,
//! calls, weight, share). Flames grow upward; an icicle hangs down.

use std::fmt::Write as _;
use std::io::Write;

use super::tree::Tree;
use super::EmitOptions;
use crate::profile::Profile;

const WIDTH: f64 = 1200.0;
const FRAME_HEIGHT: f64 = 17.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 10.0;
const SIDE: f64 = 10.0;
/// Boxes narrower than this are left out.
const MIN_WIDTH: f64 = 0.1;
/// Roughly the width of one character of the 12px monospace labels.
const CHAR_WIDTH: f64 = 7.2;

/// Writes `profile`'s calling-context tree as an SVG flame graph (an icicle if asked).
pub(super) fn write(
    profile: &Profile,
    options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let icicle = options.icicle;
    let tree = Tree::of(profile, options.weight)?;
    let total = tree.frames[0].total.max(1);
    let scale = (WIDTH - 2.0 * SIDE) / total as f64;
    let mut depth_max = 0;
    tree.preorder(&mut |_, depth| depth_max = depth_max.max(depth));
    let height = TOP + FRAME_HEIGHT * (depth_max as f64 + 1.0) + BOTTOM;

    let mut boxes = String::new();
    let title = format!(
        "{} ({}{})",
        profile.modules.join(", "),
        if icicle { "icicle, " } else { "" },
        tree.unit_name()
    );
    let show = |w: u64| tree.amount(w);
    // Where each frame's next child goes: children start at their parent's left edge, one
    // after the other (preorder visits a parent before its children).
    let mut next_x = vec![SIDE; tree.frames.len()];
    tree.preorder(&mut |id, depth| {
        let frame = &tree.frames[id];
        let parent = frame.parent.unwrap_or(0);
        let w = frame.total as f64 * scale;
        let left = next_x[parent];
        next_x[parent] += w;
        next_x[id] = left;
        if w < MIN_WIDTH {
            return;
        }
        let y = if icicle {
            TOP + FRAME_HEIGHT * (depth as f64 - 1.0)
        } else {
            height - BOTTOM - FRAME_HEIGHT * depth as f64
        };
        let tip = format!(
            "{} ({} calls, {}, {:.2}%)",
            frame.name,
            frame.calls,
            show(frame.total),
            100.0 * frame.total as f64 / total as f64
        );
        draw_box(&mut boxes, frame.name, &tip, (left, y, w));
    });
    write!(
        out,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"{WIDTH}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {WIDTH} {height:.0}\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <style>text {{ font: 12px monospace; fill: #000; pointer-events: none; }} \
         rect:hover {{ stroke: #000; stroke-width: 0.5; }}</style>\n\
         <rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#fdfaf3\"/>\n\
         <text x=\"{:.0}\" y=\"22\" text-anchor=\"middle\" style=\"font-size: 15px\">{}</text>\n\
         {boxes}</svg>\n",
        WIDTH / 2.0,
        escape(&title)
    )?;
    Ok(())
}

/// One frame's box: a rectangle at (`left`, `y`), `w` wide, with its `tip`, labelled with
/// as much of `name` as fits.
fn draw_box(boxes: &mut String, name: &str, tip: &str, (left, y, w): (f64, f64, f64)) {
    let chars = ((w - 6.0) / CHAR_WIDTH).floor().max(0.0) as usize;
    let label = fit(name, chars);
    let _ = write!(
        boxes,
        "<g><title>{}</title><rect x=\"{:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{:.1}\" \
         fill=\"{}\" rx=\"2\"/>",
        escape(tip),
        left,
        FRAME_HEIGHT - 1.0,
        color(name)
    );
    if !label.is_empty() {
        let _ = write!(
            boxes,
            "<text x=\"{:.2}\" y=\"{:.1}\">{}</text>",
            left + 3.0,
            y + FRAME_HEIGHT - 5.0,
            escape(&label)
        );
    }
    boxes.push_str("</g>\n");
}

/// `name` cut to `chars` characters, with `..` when cut; empty when fewer than 3 fit.
fn fit(name: &str, chars: usize) -> String {
    if name.chars().count() <= chars {
        name.to_string()
    } else if chars < 3 {
        String::new()
    } else {
        let mut cut: String = name.chars().take(chars - 2).collect();
        cut.push_str("..");
        cut
    }
}

/// A warm color that stays the same for a name.
fn color(name: &str) -> String {
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let r = 205 + (hash % 50);
    let g = (hash >> 8) % 200 + 30;
    let b = (hash >> 16) % 55;
    format!("rgb({r},{g},{b})")
}

/// Escapes text for XML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
