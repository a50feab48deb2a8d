//! Initial bytes of a plan's buffers for the executors: the file's tensors as they are, the
//! derived weights computed by their [`crate::recipe::Recipe`], the constants.

use ingot_gguf::GgufFile;

use crate::buffer::{BufferDecl, BufferKind};
use crate::error::ExecError;

/// The initial bytes of an initialized buffer: a slice of the memory map for weights, owned
/// bytes for derived weights and constants.
pub fn initial_bytes<'f>(
    file: &'f GgufFile,
    decl: &'f BufferDecl,
) -> Result<Option<std::borrow::Cow<'f, [u8]>>, ExecError> {
    let err = |reason: String| ExecError::Weight {
        name: decl.name.clone(),
        reason,
    };
    Ok(match &decl.kind {
        BufferKind::Weight { tensor, .. } => {
            let bytes = file.tensor_bytes(tensor).map_err(|e| err(e.to_string()))?;
            if bytes.len() as u64 != decl.bytes {
                return Err(err(format!(
                    "the file holds {} bytes, the plan expects {}",
                    bytes.len(),
                    decl.bytes
                )));
            }
            Some(std::borrow::Cow::Borrowed(bytes))
        }
        BufferKind::Derived { from, ty, recipe } => {
            let info = file
                .header()
                .tensor(from)
                .ok_or_else(|| err(format!("source tensor {from} is missing")))?;
            let src = file.tensor_bytes(from).map_err(|e| err(e.to_string()))?;
            let out = recipe.derive(info.ty, src, *ty).map_err(err)?;
            Some(std::borrow::Cow::Owned(out))
        }
        BufferKind::Constant { data } => Some(std::borrow::Cow::Borrowed(data.as_slice())),
        BufferKind::Activation
        | BufferKind::KvCache { .. }
        | BufferKind::StepState
        | BufferKind::ExpertSlots { .. }
        | BufferKind::ExpertTable { .. } => None,
    })
}
