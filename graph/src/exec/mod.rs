//! Executors of a [`crate::Plan`]: [`cuda`] captures it into one CUDA graph, [`sim`] interprets
//! it in ptx-sim with per-node counters. Both implement [`ingot_model::Decoder`].

pub mod cuda;
pub mod sim;

use ingot_model::ModelError;

/// Executor failures surface through [`ingot_model::Decoder`] as a model error that carries
/// the executor's message.
pub(crate) fn to_model_error(e: crate::ExecError) -> ModelError {
    match e {
        crate::ExecError::Step(m) => m,
        other => ModelError::Unsupported(format!("decode step failed: {other}")),
    }
}
