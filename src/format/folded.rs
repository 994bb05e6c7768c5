//! Folded stacks, one line per calling context with a self weight: `main;a;b 1234`, the
//! input of flamegraph.pl, inferno and most flame graph tools. Weights are self time in
//! nanoseconds or self instructions, or with `--weight`, bytes allocated or held.

use std::io::Write;

use super::tree::Tree;
use super::EmitOptions;
use crate::profile::Profile;

/// Writes `profile`'s calling contexts as folded stacks.
pub(super) fn write(
    profile: &Profile,
    options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let tree = Tree::of(profile, options.weight)?;
    let mut result = Ok(());
    tree.preorder(&mut |id, _| {
        let weight = tree.frames[id].self_weight;
        if weight == 0 || result.is_err() {
            return;
        }
        let path: Vec<String> = tree.path(id).iter().map(|name| frame(name)).collect();
        result = writeln!(out, "{} {weight}", path.join(";"));
    });
    Ok(result?)
}

/// A name as a folded frame: `;` separates frames, so it becomes `:` (and line breaks
/// become spaces).
fn frame(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}
