//! The plan of one NextN/MTP block step (the drafter of speculative decoding), built from the
//! decode plan's own parts: the embedding fetch, fused rms norms, a gemv, the layer builder run
//! with block index `n_layer`, and a plain lm_head gemv.
//!
//! ```text
//! residual = embed[state.token]                                 (fetch kernel, or the host)
//! cat_q8   = [q8_1(enorm(residual)) | q8_1(hnorm(hidden_in))]   (two norms into halves of one buffer)
//! residual = eh_proj · cat_q8
//! residual = decoder layer n_layer on residual at rope position state.pos (its own cache kv.{n_layer})
//! norm     = shared_head_norm(residual)   (f32 and q8_1: the last down launch's tail)
//! logits   = head · norm_q8                                     (nodes head_start..)
//! ```
//!
//! The concatenation needs no kernel: q8_1 blocks hold 32 values each, so the hidden half's
//! norm writes its blocks `n_embd / 32` blocks into the buffer the embedding half's norm starts.
//! `hidden_in` is the only input the host writes besides the step state (and the embedding row
//! when the fetch is a host step), so the same nodes can be captured once and replayed.
//!
//! The plan has its own step state, latent cache and activations: its position is the MTP
//! position, not the decode plan's, and the decode plan's final hidden state (`act.norm`) must
//! survive a draft. Only weights and constants declared alike are shared with the decode plan
//! (`exec::shared_initialized`). The block's routed experts are always planned in VRAM (no
//! expert cache).

use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::launch::{GemvArgs, RmsnormArgs, RMSNORM_Q8_1};
use ingot_gguf::{GgmlType, Gguf};
use ingot_model::tensors::TOKEN_EMBD;
use ingot_model::ModelConfig;

use super::builder::{buf, buf_at, u32a, Builder};
use super::head::embed_args;
use super::kernels as k;
use super::nodes::{gemv_weight, nextn_name, rmsnorm_q8};
use super::{attention, ffn, PlanOptions};
use crate::buffer::BufId;
use crate::error::PlanError;
use crate::plan::Plan;

/// One MTP block step as a plan, and where its inputs and outputs live.
#[derive(Clone, Debug)]
pub struct MtpPlan {
    /// Nodes `0..head_start` run the block; `head_start..` the lm_head on its output. Its
    /// `n_layer` is the block's index plus one.
    pub plan: Plan,
    pub head_start: usize,
    /// `n_embd` f32 the host writes before a step: the main model's final hidden state (or a
    /// chained draft's [`MtpPlan::hidden_out`]).
    pub hidden_in: BufId,
    /// `n_embd` f32 after a step: the block's output after `shared_head_norm`.
    pub hidden_out: BufId,
    /// The embedding tensor the block reads (`nextn.embed_tokens`, or the model's
    /// `token_embd`); with [`Plan::host_embedding`] the host writes its row into
    /// [`Plan::residual`].
    pub embed_tensor: String,
    /// The block index (`n_layer`).
    pub block: usize,
    /// Logits the head computes: the first `head_rows` of the vocabulary
    /// ([`PlanOptions::mtp_head_rows`]); the rest of the logits buffer is never written.
    pub head_rows: usize,
}

/// Builds the plan of the model's first NextN/MTP block (block `n_layer`) at `opts.ctx`
/// positions; `opts.expert_cache` is ignored (the block's experts are in VRAM).
pub fn build_mtp_plan_for(
    config: &ModelConfig,
    gguf: &Gguf,
    opts: PlanOptions,
) -> Result<MtpPlan, PlanError> {
    if config.n_nextn == 0 {
        return Err(PlanError::UnsupportedModel(
            "the model has no NextN/MTP block (nextn_predict_layers is 0)".into(),
        ));
    }
    super::check_ctx(config, opts)?;
    let opts = PlanOptions {
        expert_cache: None,
        ..opts
    };
    let mut b = Builder::new(config, gguf, opts)?;
    let c = config;
    let (il, d) = (c.n_layer, c.n_embd);
    let label = |s: &str| format!("blk.{il} {s}");

    let optional = |s: &str| Some(nextn_name(il, s)).filter(|n| gguf.tensor(n).is_some());
    let embed_tensor = optional("embed_tokens").unwrap_or_else(|| TOKEN_EMBD.to_owned());
    let head_tensor = optional("shared_head_head").unwrap_or_else(|| c.output_tensor().into());

    // residual = embed[token]
    let (w, info) = b.weight(&embed_tensor, "embedding fetch", &|t| {
        ingot_quant::can_dequantize(t)
    })?;
    let rows = info.ne.get(1).copied().unwrap_or(0) as usize;
    if info.ne.first().copied() != Some(d as u64) || rows != c.vocab {
        return Err(PlanError::UnsupportedShape {
            name: embed_tensor,
            reason: format!("shape {:?}, expected [{d}, {}]", info.ne, c.vocab),
        });
    }
    let kernel = k::embed(info.ty);
    let (residual, step) = (b.acts.residual, b.acts.step);
    if k::available(&kernel.name) {
        b.node(
            kernel,
            label("nextn embed"),
            Some(il),
            d,
            embed_args((w, step, residual), (d, c.vocab), None),
        )?;
    } else {
        b.host_embedding = true;
    }

    // cat_q8 = [q8_1(enorm(embedding)) | q8_1(hnorm(hidden_in))]
    let cat_q8 = b.q8_act("act.mtp_cat_q8", 2 * d)?;
    let hidden_in = b.f32_act("act.mtp_hidden_in", d)?;
    let half = (d / 32 * size_of::<BlockQ8_1>()) as u64;
    let f32_w = |t: GgmlType| t == GgmlType::F32;
    let enorm = b.weight(&nextn_name(il, "enorm"), "rmsnorm", &f32_w)?.0;
    let hnorm = b.weight(&nextn_name(il, "hnorm"), "rmsnorm", &f32_w)?.0;
    norm_q8_into(&mut b, (residual, enorm), (cat_q8, 0), label("nextn enorm"))?;
    norm_q8_into(
        &mut b,
        (hidden_in, hnorm),
        (cat_q8, half),
        label("nextn hnorm"),
    )?;

    // residual = eh_proj · cat_q8
    let eh = nextn_name(il, "eh_proj");
    let (w, info, ncols, nrows) = gemv_weight(&mut b, &eh, "eh_proj")?;
    if (ncols, nrows) != (2 * d, d) {
        return Err(PlanError::UnsupportedShape {
            name: eh,
            reason: format!("{ncols} x {nrows}, expected {} x {d}", 2 * d),
        });
    }
    b.node(
        k::gemv(info.ty),
        label("nextn eh_proj"),
        Some(il),
        k::gemv_items(info.ty, ncols, nrows),
        GemvArgs {
            w: buf(w),
            x: buf(cat_q8),
            y: buf(residual),
            ncols: u32a(ncols),
            nrows: u32a(nrows),
        },
    )?;

    // The decoder layer: its attn_norm here (a decode plan's layer finds it written by the
    // previous layer's down launch), then the layer builder, whose last down launch writes
    // shared_head_norm in its tail (`NextNorm::after_ffn` for a block past `n_layer - 1`).
    let attn_norm = b
        .weight(&format!("blk.{il}.attn_norm.weight"), "rmsnorm", &f32_w)?
        .0;
    rmsnorm_q8(&mut b, attn_norm, label("attn_norm"), Some(il), false)?;
    attention::layer(&mut b, il)?;
    if c.is_moe_layer(il) {
        ffn::moe(&mut b, il)?;
    } else {
        ffn::dense(&mut b, il)?;
    }

    // logits = head · shared_head_norm(x)
    let head_start = b.nodes.len();
    let (w, info, ncols, nrows) = gemv_weight(&mut b, &head_tensor, "lm_head")?;
    if (ncols, nrows) != (d, c.vocab) {
        return Err(PlanError::UnsupportedShape {
            name: head_tensor,
            reason: format!("{ncols} x {nrows}, expected {d} x {}", c.vocab),
        });
    }
    // Drafts among the first `rows` ids read only those logits: the head's first `rows` rows
    // (each row's bits do not depend on how many rows the launch has).
    let rows = match opts.mtp_head_rows {
        None => nrows,
        Some(r) if (1..=nrows).contains(&r) => r,
        Some(r) => {
            return Err(PlanError::UnsupportedModel(format!(
                "an MTP head of {r} rows: the vocabulary has {nrows}"
            )))
        }
    };
    let (norm_q8, logits, hidden_out) = (b.acts.norm_q8, b.acts.logits, b.acts.norm);
    b.node(
        k::gemv(info.ty),
        label("nextn head"),
        None,
        k::gemv_items(info.ty, ncols, rows),
        GemvArgs {
            w: buf(w),
            x: buf(norm_q8),
            y: buf(logits),
            ncols: u32a(ncols),
            nrows: u32a(rows),
        },
    )?;
    let mut plan = b.finish();
    // Its nodes are layer `n_layer`'s: the plan spans blocks `0..=n_layer`, the first `n_layer`
    // without nodes (what `Plan::summary` indexes by).
    plan.n_layer = il + 1;
    Ok(MtpPlan {
        plan,
        head_start,
        hidden_in,
        hidden_out,
        embed_tensor,
        block: il,
        head_rows: rows,
    })
}

/// `y_q8[at..] = q8_1(rmsnorm(x)·w)` over `n_embd` values (`rmsnorm_q8_1`).
fn norm_q8_into(
    b: &mut Builder<'_>,
    (x, w): (BufId, BufId),
    (y_q8, at): (BufId, u64),
    label: String,
) -> Result<(), PlanError> {
    let (n, eps, il) = (b.c.n_embd, b.c.rms_eps, Some(b.c.n_layer));
    b.node(
        k::fixed(&RMSNORM_Q8_1),
        label,
        il,
        1,
        RmsnormArgs {
            x: buf(x),
            w: buf(w),
            y: buf_at(y_q8, at),
            n: u32a(n),
            eps,
        },
    )
}
