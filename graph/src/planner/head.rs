//! The parts outside the layers: the embedding fetch and the output head.

use ingot_abi::launch::{
    ArgmaxStepArgs, EmbedArgs, GemvArgmaxArgs, GemvArgs, ARGMAX_STEP, DOWN_NORM_NONE,
};
use ingot_gguf::GgmlType;
use ingot_model::tensors::{OUTPUT_NORM, TOKEN_EMBD};

use super::builder::{buf, u32a, Builder};
use super::kernels as k;
use super::nodes::{gemv_weight, rmsnorm_q8, NextNorm, NormTailArgs};
use crate::buffer::BufId;
use crate::error::PlanError;
use crate::node::BufRef;

/// `residual = token_embd[state.token]`, dequantized: a node when the PTX has the fetch kernel
/// for the embedding's type, otherwise a host step before each replay. The node's tail also
/// writes layer 0's `attn_norm` ([`Builder::first_norm_written`]), so that norm needs no node.
pub(crate) fn embedding(b: &mut Builder<'_>) -> Result<(), PlanError> {
    let (w, info) = b.weight(TOKEN_EMBD, "embedding fetch", &|t| {
        ingot_quant::can_dequantize(t)
    })?;
    let kernel = k::embed(info.ty);
    if !k::available(&kernel.name) {
        b.host_embedding = true;
        return Ok(());
    }
    let (residual, step, n, vocab) = (b.acts.residual, b.acts.step, b.c.n_embd, b.c.vocab);
    let tail = match b.c.n_layer {
        0 => None,
        _ => Some(NextNorm::first_layer(b)?.tail(b)?),
    };
    b.first_norm_written = tail.is_some();
    b.node(
        kernel,
        "token_embd".into(),
        None,
        n,
        embed_args((w, step, residual), (n, vocab), tail),
    )
}

/// An embedding fetch's arguments: `(table, state, y)`, `(n, n_vocab)`, and its norm tail's
/// (without one the row stands in for the buffers the kernel never reads).
pub(crate) fn embed_args(
    (table, state, y): (BufId, BufId, BufId),
    (n, n_vocab): (usize, usize),
    tail: Option<NormTailArgs>,
) -> EmbedArgs<BufRef> {
    let (norm_w, norm_q8, norm_f32, count, norm, eps) =
        tail.unwrap_or((buf(y), buf(y), buf(y), buf(y), DOWN_NORM_NONE, 0.0));
    EmbedArgs {
        table: buf(table),
        state: buf(state),
        y: buf(y),
        n: u32a(n),
        n_vocab: u32a(n_vocab),
        norm_w,
        norm_q8,
        norm_f32,
        count,
        norm,
        eps,
    }
}

/// `logits = W_out·output_norm(residual)` and the greedy choice on the device: the fused
/// `gemv_argmax_*` (its last block advances the state) for the types that have it, otherwise
/// the plain gemv then `argmax_step`. Either way the last node writes `StepState.next_token`
/// (= `token`) and advances `pos`, so replays follow each other without the host; the logits
/// stay in their buffer for other samplers.
pub(crate) fn output(b: &mut Builder<'_>) -> Result<(), PlanError> {
    // The last layer's FFN down launch wrote output_norm in its tail; a model without layers
    // needs the node.
    if b.c.n_layer == 0 {
        let (norm_w, _) = b.weight(OUTPUT_NORM, "rmsnorm", &|t| t == GgmlType::F32)?;
        rmsnorm_q8(b, norm_w, "output_norm".into(), None, false)?;
    }
    // Tied output (no `output.weight`) reads the token embedding, as llama.cpp does.
    let out_name = b.c.output_tensor();
    let (w, info, ncols, nrows) = gemv_weight(b, out_name, "lm_head")?;
    let (x, logits, step) = (b.acts.norm_q8, b.acts.logits, b.acts.step);
    let items = k::gemv_items(info.ty, ncols, nrows);
    let fused = k::gemv_argmax(info.ty);
    if k::available(&fused.name) {
        // The 64-bit argmax key and the done counter must hold 0 before the fused gemv:
        // activations are zeroed at allocation and the launch's last block resets both, so
        // every replay finds them at 0.
        let acc = b.act("act.argmax_key", 8)?;
        let count = b.act("act.argmax_count", 4)?;
        b.device_argmax = true;
        return b.node(
            fused,
            "output+argmax".into(),
            None,
            items,
            GemvArgmaxArgs {
                w: buf(w),
                x: buf(x),
                y: buf(logits),
                ncols: u32a(ncols),
                nrows: u32a(nrows),
                acc: buf(acc),
                state: buf(step),
                count: buf(count),
            },
        );
    }
    b.node(
        k::gemv(info.ty),
        "output".into(),
        None,
        items,
        GemvArgs {
            w: buf(w),
            x: buf(x),
            y: buf(logits),
            ncols: u32a(ncols),
            nrows: u32a(nrows),
        },
    )?;
    b.device_argmax = true;
    b.node(
        k::fixed(&ARGMAX_STEP),
        "argmax".into(),
        None,
        1,
        ArgmaxStepArgs {
            logits: buf(logits),
            state: buf(step),
            n: u32a(nrows),
        },
    )
}
