//! The prefill chunk as data: every layer of `T` prompt tokens at once, on the
//! tensor-core products (`mmq`, `mmq_moe`), the chunk's causal attention
//! (`flash_latent_prefill`) and the per-token steps of the decode kernels in their `_rows`
//! forms; then the output head on one row.
//!
//! A [`PrefillPlan`] is built for a bucket of `T` tokens ([`PREFILL_BUCKETS`]) and runs any
//! chunk of `n ≤ T` tokens at any position: the host writes the `n` embeddings (and zero rows
//! after them) into [`PrefillPlan::x`], `n` into [`PrefillPlan::rows`] and the first position
//! into `StepState::pos`, then runs nodes `..head_start`. Rows past `n` are computed like the
//! others but write no cache row and no routing (the `_rows` kernels read `n`), so they change
//! nothing a later token reads. For the chunk that ends the prompt the executor copies row
//! `n − 1` of `x` into the plan's `residual` and runs nodes `head_start..`: `output_norm` and
//! the lm_head gemv into `logits`.
//!
//! Buffers carry the decode plan's names where they are the same thing (every weight, the
//! latent caches `kv.N`, `step`, the rope and temperature tables), so an executor holding both
//! plans shares them by name; the chunk's own activations are named `pf.*`.

mod attention;
mod ffn;

use ingot_abi::launch::{
    mmq_items, GemvArgs, MmqArgs, MoeCombineArgs, RmsnormArgs, RmsnormQ8_1F32Args,
    FLASH_PREFILL_MAX_TOKENS, MOE_COMBINE, RMSNORM_Q8_1, RMSNORM_Q8_1_F32,
};
use ingot_abi::weight_types::GemvType;
use ingot_gguf::{GgmlType, Gguf};
use ingot_model::ModelConfig;

use super::builder::{buf, u32a, Builder};
use super::kernels as k;
use super::PlanOptions;
use crate::buffer::BufId;
use crate::error::PlanError;
use crate::plan::Plan;

/// Token counts a prefill plan is built for (one captured graph each). The largest is the
/// most `flash_latent_prefill` takes; smaller ones keep a short prompt from paying for 512
/// rows (the mmq tiles are 64 tokens wide, so 16 is the floor worth a graph of its own).
pub const PREFILL_BUCKETS: [usize; 4] = [16, 64, 256, FLASH_PREFILL_MAX_TOKENS as usize];

/// One prefill chunk of up to [`PrefillPlan::ntok`] tokens as data.
#[derive(Clone, Debug)]
pub struct PrefillPlan {
    /// Buffers and nodes. `plan.residual` is the head's input row (`n_embd` f32), `plan.logits`
    /// its output; `plan.host_embedding` is set (the host writes the chunk's embeddings).
    pub plan: Plan,
    /// Tokens of the bucket (`T`).
    pub ntok: usize,
    /// Index of the first node of the head; nodes before it are the chunk's layers.
    pub head_start: usize,
    /// The chunk's residual stream, `T × n_embd` f32 token-major: the host writes the
    /// embeddings of the chunk's tokens (zeros after the last), the layers update it in place.
    pub x: BufId,
    /// One `u32`: the chunk's token count `n ≤ T`, written by the host.
    pub rows: BufId,
}

/// The chunk's activations every layer shares.
pub(crate) struct ChunkActs {
    /// Tokens of the bucket.
    pub t: usize,
    pub x: BufId,
    pub rows: BufId,
    /// The normed rows as q8_1 (`T × n_embd/32` blocks) and as f32 (the router's input).
    pub h_q8: BufId,
    pub h: BufId,
}

/// Builds the prefill plan of a `ntok`-token bucket for the model whose header is `gguf`.
pub fn build_prefill_plan(
    gguf: &Gguf,
    opts: PlanOptions,
    ntok: usize,
) -> Result<PrefillPlan, PlanError> {
    let config = ModelConfig::from_gguf(gguf)?;
    build_prefill_plan_for(&config, gguf, opts, ntok)
}

/// [`build_prefill_plan`] with the configuration already parsed.
pub fn build_prefill_plan_for(
    config: &ModelConfig,
    gguf: &Gguf,
    opts: PlanOptions,
    ntok: usize,
) -> Result<PrefillPlan, PlanError> {
    if ntok == 0 || ntok > FLASH_PREFILL_MAX_TOKENS as usize || ntok > opts.ctx {
        return Err(PlanError::Context {
            ctx: opts.ctx,
            reason: format!(
                "a prefill chunk of {ntok} tokens must be in 1..={} and fit the context",
                FLASH_PREFILL_MAX_TOKENS.min(opts.ctx as u32)
            ),
        });
    }
    if opts.expert_cache.is_some() {
        return Err(PlanError::UnsupportedModel(
            "batched prefill with routed experts beyond VRAM (expert cache)".into(),
        ));
    }
    let mut b = Builder::new(config, gguf, opts)?;
    b.host_embedding = true;
    let n = config.n_embd;
    let acts = ChunkActs {
        t: ntok,
        x: b.f32_act("pf.x", ntok * n)?,
        rows: b.act("pf.rows", 4)?,
        h_q8: b.q8_act("pf.h_q8", ntok * n)?,
        h: b.f32_act("pf.h", ntok * n)?,
    };
    for il in 0..config.n_layer {
        attention::layer(&mut b, &acts, il)?;
        if config.is_moe_layer(il) {
            ffn::moe(&mut b, &acts, il)?;
        } else {
            ffn::dense(&mut b, &acts, il)?;
        }
    }
    let head_start = b.nodes.len();
    let (norm_w, _) = b.weight(
        ingot_model::tensors::OUTPUT_NORM,
        "rmsnorm",
        &super::nodes::is_f32,
    )?;
    super::nodes::rmsnorm_q8(&mut b, norm_w, "output_norm".into(), None, false)?;
    let (w, info, ncols, nrows) =
        super::nodes::gemv_weight(&mut b, config.output_tensor(), "lm_head")?;
    let (x_q8, logits) = (b.acts.norm_q8, b.acts.logits);
    b.node(
        k::gemv(info.ty),
        "output".into(),
        None,
        k::gemv_items(info.ty, ncols, nrows),
        GemvArgs {
            w: buf(w),
            x: buf(x_q8),
            y: buf(logits),
            ncols: u32a(ncols),
            nrows: u32a(nrows),
        },
    )?;
    Ok(PrefillPlan {
        plan: b.finish(),
        ntok,
        head_start,
        x: acts.x,
        rows: acts.rows,
    })
}

/// One piece of a prompt: `n` tokens from `start`, run as a chunk of a `bucket`-token plan, or
/// token by token on the decode plan when `bucket` is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub start: usize,
    pub n: usize,
    pub bucket: Option<usize>,
}

/// How a prompt of `len` tokens at positions `pos0..` splits into chunks, given the buckets
/// an executor has (ascending) and the `ctx` positions of the cache: up to the largest bucket
/// per chunk, each in the smallest bucket that holds it and whose every row fits the cache
/// (`flash_latent_prefill` refuses a chunk whose last row of the bucket is past `ctx`); near
/// the end of the cache a full smaller bucket instead, and what no bucket fits goes token by
/// token.
pub fn prefill_chunks(len: usize, pos0: usize, ctx: usize, buckets: &[usize]) -> Vec<Chunk> {
    let mut out = Vec::new();
    let (mut start, mut pos) = (0, pos0);
    let largest = buckets.iter().copied().max().unwrap_or(0);
    while start < len {
        let n = (len - start).min(largest);
        let fits = |b: usize| pos + b <= ctx;
        let chunk = match buckets.iter().copied().find(|&b| b >= n && fits(b)) {
            Some(b) => Chunk {
                start,
                n,
                bucket: Some(b),
            },
            None => match buckets.iter().copied().rev().find(|&b| b <= n && fits(b)) {
                Some(b) => Chunk {
                    start,
                    n: b,
                    bucket: Some(b),
                },
                None => Chunk {
                    start,
                    n: len - start,
                    bucket: None,
                },
            },
        };
        start += chunk.n;
        pos += chunk.n;
        out.push(chunk);
    }
    out
}

/// The `mmq` type of a weight the chunk multiplies, or the error naming the types that have one.
pub(crate) fn mmq_type(
    name: &str,
    ty: GgmlType,
    role: &'static str,
) -> Result<GemvType, PlanError> {
    k::gemv_ty(ty).filter(|t| t.mmq().is_some()).ok_or_else(|| {
        let supported: Vec<&str> = GemvType::MMQ.iter().map(|&t| ggml_name(t)).collect();
        PlanError::UnsupportedType {
            name: name.into(),
            ty: ty.name(),
            role,
            supported: supported.join(", "),
        }
    })
}

/// The GGUF spelling of an `mmq` type (`Q4_K`).
fn ggml_name(t: GemvType) -> &'static str {
    GgmlType::from_u32(t.ggml_id()).map_or("?", GgmlType::name)
}

/// `ncols` checked against what the type's `mmq` kernels take.
pub(crate) fn check_mmq_cols(name: &str, t: GemvType, ncols: usize) -> Result<(), PlanError> {
    // A block (the 32-weight types), or a super-block (the k-quants, whose tile steps one).
    let m = t.block_elems();
    if ncols > 0 && ncols.is_multiple_of(m) {
        return Ok(());
    }
    Err(PlanError::UnsupportedShape {
        name: name.into(),
        reason: format!(
            "rows of {ncols} {} weights; the prefill products need a multiple of {m}",
            ggml_name(t)
        ),
    })
}

/// A weight the chunk multiplies with `mmq`/`mmq_moe`: buffer, type, `ncols`, and the rows of
/// the whole tensor (`rows × n_expert` for a stacked expert tensor).
pub(crate) fn mmq_weight(
    b: &mut Builder<'_>,
    name: &str,
    role: &'static str,
) -> Result<(BufId, GemvType, usize, usize), PlanError> {
    let (id, info) = b.weight(name, role, &|t| {
        k::gemv_ty(t).and_then(GemvType::mmq).is_some()
    })?;
    let t = mmq_type(name, info.ty, role)?;
    let ncols = info.ne.first().copied().unwrap_or(0) as usize;
    check_mmq_cols(name, t, ncols)?;
    let nrows = info.ne.iter().skip(1).product::<u64>() as usize;
    Ok((id, t, ncols, nrows))
}

/// `y = W·x` for the chunk's `t` rows of `x` (q8_1), `y` token-major.
pub(crate) fn mmq(
    b: &mut Builder<'_>,
    (w, ty): (BufId, GemvType),
    x_q8: BufId,
    y: BufId,
    (ncols, nrows, t): (usize, usize, usize),
    (label, il): (String, usize),
) -> Result<(), PlanError> {
    let items = mmq_items(nrows as u32, t as u32)
        .ok_or_else(|| PlanError::Overflow(format!("{label}: mmq tiles")))?;
    b.node(
        k::mmq(ty),
        label,
        Some(il),
        items as usize,
        MmqArgs {
            w: buf(w),
            x: buf(x_q8),
            y: buf(y),
            ncols: u32a(ncols),
            nrows: u32a(nrows),
            ntok: u32a(t),
        },
    )
}

/// `x += y` over the chunk's rows: `moe_combine` with no routed slot is exactly
/// `resid + (0 + shared)`, the residual add the decode path fuses into its down launches.
/// `sel`, `pair_of` and `down` are never read with `n_used = 0`; `y` stands in for them.
pub(crate) fn add_rows(
    b: &mut Builder<'_>,
    acts: &ChunkActs,
    y: BufId,
    (label, il): (String, usize),
) -> Result<(), PlanError> {
    let n = b.c.n_embd;
    b.node(
        k::fixed(&MOE_COMBINE),
        label,
        Some(il),
        acts.t * n,
        MoeCombineArgs {
            sel: buf(y),
            pair_of: buf(y),
            down: buf(y),
            shared: buf(y),
            resid: buf(acts.x),
            y: buf(acts.x),
            n_embd: u32a(n),
            ntok: u32a(acts.t),
            n_used: u32a(0),
        },
    )
}

/// `rmsnorm` of each of the chunk's rows into `h_q8` (and `h` when `need_f32`).
pub(crate) fn norm_rows(
    b: &mut Builder<'_>,
    acts: &ChunkActs,
    w: BufId,
    need_f32: bool,
    (label, il): (String, usize),
) -> Result<(), PlanError> {
    let (x, w, y, n, eps) = (
        buf(acts.x),
        buf(w),
        buf(acts.h_q8),
        u32a(b.c.n_embd),
        b.c.rms_eps,
    );
    if need_f32 {
        let y_f32 = buf(acts.h);
        let args = RmsnormQ8_1F32Args {
            x,
            w,
            y,
            y_f32,
            n,
            eps,
        };
        return b.node(k::fixed(&RMSNORM_Q8_1_F32), label, Some(il), acts.t, args);
    }
    let args = RmsnormArgs { x, w, y, n, eps };
    b.node(k::fixed(&RMSNORM_Q8_1), label, Some(il), acts.t, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_prompt_in_buckets_that_fit() {
        let b = PREFILL_BUCKETS;
        let one = |len, pos0, ctx| prefill_chunks(len, pos0, ctx, &b);
        let c = |start, n, bucket| Chunk { start, n, bucket };
        assert_eq!(one(11, 0, 4096), vec![c(0, 11, Some(16))]);
        assert_eq!(one(64, 0, 4096), vec![c(0, 64, Some(64))]);
        assert_eq!(
            one(600, 0, 4096),
            vec![c(0, 512, Some(512)), c(512, 88, Some(256))]
        );
        // Near the end of the cache: 40 tokens at 20 of 64 cannot use the 64-row bucket, so a
        // full 16 and a full 16, then the last 8 token by token (no 16 fits at 52).
        assert_eq!(
            one(40, 20, 64),
            vec![c(0, 16, Some(16)), c(16, 16, Some(16)), c(32, 8, None)]
        );
        assert_eq!(one(0, 0, 64), vec![]);
        // No bucket at all: everything token by token.
        assert_eq!(prefill_chunks(5, 0, 64, &[]), vec![c(0, 5, None)]);
        for (len, pos0, ctx) in [(1, 0, 1), (700, 3, 1000), (513, 0, 513), (77, 100, 200)] {
            let chunks = one(len, pos0, ctx);
            let mut at = 0;
            for ch in &chunks {
                assert_eq!(ch.start, at);
                if let Some(bk) = ch.bucket {
                    assert!(ch.n <= bk && pos0 + ch.start + bk <= ctx, "{ch:?}");
                }
                at += ch.n;
            }
            assert_eq!(at, len);
        }
    }
}
