//! The [`meta::FRAMES_SECTION`]: each function index of the instrumented module back to its
//! function id, for hosts' backtraces.

use walrus::{FunctionId, FunctionKind, Module};

use super::addresses;
use crate::meta;

/// Adds the [`meta::FRAMES_SECTION`]: every function index of the output back to its
/// function id, for hosts' backtraces (walrus assigns the indices as it emits, largest
/// functions first). With `catch`, the section also catches walrus's code transform.
pub(super) fn add_frame_table(
    module: &mut Module,
    original_funcs: &[FunctionId],
    thunks: &std::collections::BTreeMap<FunctionId, FunctionId>,
    catch: Option<addresses::Catch>,
) {
    let mut frames: Vec<(FunctionId, u32)> = original_funcs
        .iter()
        .filter(|&&id| matches!(module.funcs.get(id).kind, FunctionKind::Local(_)))
        .map(|&id| (id, id.index() as u32))
        .collect();
    frames.extend(
        thunks
            .iter()
            .map(|(&import, &thunk)| (thunk, import.index() as u32)),
    );
    module.customs.add(FrameTable { frames, catch });
}

/// The [`meta::FRAMES_SECTION`]: each function of the program (and each import's thunk),
/// with its function id; written once walrus knows the output's function indices. It
/// catches the code transform for the address map, when asked (`catch`).
#[derive(Debug)]
struct FrameTable {
    frames: Vec<(FunctionId, u32)>,
    catch: Option<addresses::Catch>,
}

impl walrus::CustomSection for FrameTable {
    fn name(&self) -> &str {
        meta::FRAMES_SECTION
    }

    fn apply_code_transform(&mut self, transform: &walrus::CodeTransform) {
        if let Some(catch) = &self.catch {
            catch.keep(transform);
        }
    }

    fn data(&self, ids: &walrus::IdsToIndices) -> std::borrow::Cow<'_, [u8]> {
        let indexed: Vec<(u32, u32)> = self
            .frames
            .iter()
            .map(|&(id, f)| (ids.get_func_index(id), f))
            .collect();
        let len = indexed
            .iter()
            .map(|&(index, _)| index + 1)
            .max()
            .unwrap_or(0);
        let mut table = vec![meta::NO_FUNCTION; len as usize];
        for (index, f) in indexed {
            table[index as usize] = f;
        }
        table
            .into_iter()
            .flat_map(u32::to_le_bytes)
            .collect::<Vec<u8>>()
            .into()
    }
}
