//! Executors of a [`crate::Plan`]: [`cuda`] captures it into one CUDA graph, [`sim`] interprets
//! it in ptx-sim with per-node counters. Both implement [`ingot_model::Decoder`].

pub mod cuda;
pub mod expert_cache;
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

/// Rejects a greedy run of `n` steps from `pos` (already checked by
/// [`ingot_model::check_step`]) whose last position `pos + n - 1` falls outside the `ctx`
/// positions of the cache.
pub(crate) fn check_greedy_span(ctx: usize, pos: usize, n: usize) -> Result<(), ModelError> {
    match pos.checked_add(n) {
        Some(end) if end <= ctx => Ok(()),
        _ => Err(ModelError::PositionOutOfRange {
            pos: pos.saturating_add(n) - 1,
            max_ctx: ctx,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_span_must_end_inside_the_context() {
        assert!(check_greedy_span(8, 3, 0).is_ok());
        assert!(check_greedy_span(8, 3, 5).is_ok(), "positions 3..=7 fit 8");
        match check_greedy_span(8, 3, 6) {
            Err(ModelError::PositionOutOfRange { pos: 8, max_ctx: 8 }) => {}
            other => panic!("one step past the end: {other:?}"),
        }
        // A length that overflows `pos + n` is refused, not wrapped.
        match check_greedy_span(8, 3, usize::MAX) {
            Err(ModelError::PositionOutOfRange { max_ctx: 8, .. }) => {}
            other => panic!("overflowing length: {other:?}"),
        }
    }
}
