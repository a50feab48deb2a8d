//! The parts outside the layers: the embedding fetch and the output head.

use ingot_gguf::GgmlType;
use ingot_model::tensors::{OUTPUT, OUTPUT_NORM, TOKEN_EMBD};

use super::ffn::{gemv_weight, rmsnorm_q8};
use super::kernels as k;
use super::{buf, u32a, Builder};
use crate::error::PlanError;

/// `residual = token_embd[state.token]`, dequantized: a node when the PTX has the fetch kernel
/// for the embedding's type, otherwise a host step before each replay.
pub(crate) fn embedding(b: &mut Builder<'_>) -> Result<(), PlanError> {
    let (w, info) = b.weight(TOKEN_EMBD, "embedding fetch", &|t| {
        ingot_quant::can_dequantize(t)
    })?;
    let kernel = k::embed(info.ty);
    if !k::available(&kernel) {
        b.host_embedding = true;
        return Ok(());
    }
    let (residual, step, n, vocab) = (b.acts.residual, b.acts.step, b.c.n_embd, b.c.vocab);
    b.node(
        kernel,
        "token_embd".into(),
        None,
        n,
        vec![buf(w), buf(step), buf(residual), u32a(n), u32a(vocab)],
    )
}

/// `logits = W_out·rmsnorm(residual)`, and the argmax into the step state when the PTX has
/// the fused kernel (otherwise the host takes the argmax of the logits).
pub(crate) fn output(b: &mut Builder<'_>) -> Result<(), PlanError> {
    let (norm_w, _) = b.weight(OUTPUT_NORM, "rmsnorm", &|t| t == GgmlType::F32)?;
    rmsnorm_q8(b, norm_w, "output_norm".into(), None, false)?;
    let (w, info, ncols, nrows) = gemv_weight(b, OUTPUT, "lm_head")?;
    let (x, logits, step) = (b.acts.norm_q8, b.acts.logits, b.acts.step);
    let fused = k::lm_head_argmax(info.ty);
    if k::available(&fused) {
        b.device_argmax = true;
        return b.node(
            fused,
            "output".into(),
            None,
            k::gemv_items(info.ty, ncols, nrows),
            vec![
                buf(w),
                buf(x),
                buf(logits),
                buf(step),
                u32a(ncols),
                u32a(nrows),
            ],
        );
    }
    b.node(
        k::gemv(info.ty),
        "output".into(),
        None,
        k::gemv_items(info.ty, ncols, nrows),
        vec![buf(w), buf(x), buf(logits), u32a(ncols), u32a(nrows)],
    )
}
