//! Absorbed MLA attention of the CPU backend (docs/decode-math.md#mla-attention).

use rayon::prelude::*;

use super::attend::{attend_heads, attend_tokens, token_groups, Attend};
use super::batch::{self, Product};
pub(super) use super::latent::LatentCache;
use super::latent::Latents;
use super::matmul::Activation;
use super::weights::{KeyUp, Layer, QueryProj};
use super::Scratch;
use crate::cache_type::CacheType;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::math::{rmsnorm, rmsnorm_in_place};
use crate::rope::apply_rope;

/// Buffers of one head's attention, so heads can run in parallel without sharing.
pub(super) struct HeadScratch {
    q_nope: Activation,
    q_abs: Vec<f32>,
    o_lat: Activation,
    /// One dequantized `attn_kv_b` row (legacy layout only).
    kv_b_row: Vec<f32>,
}

impl HeadScratch {
    pub fn new(c: &ModelConfig) -> Self {
        HeadScratch {
            q_nope: Activation::new(c.d_nope),
            q_abs: vec![0.0; c.kv_lora],
            o_lat: Activation::new(c.kv_lora),
            kv_b_row: vec![0.0; c.kv_lora],
        }
    }
}

/// Width of the first projection's output: the query (or its low-rank latent) followed by `[c |
/// k_pe]`.
pub(super) fn proj_width(c: &ModelConfig) -> usize {
    c.q_lora.unwrap_or(c.n_head * c.d_qk()) + c.cache_row()
}

/// Attention for the token whose residual is `s.x` at `pos`, writing its cache row; leaves `W_o·o`
/// in `s.delta`.
pub(super) fn attention(
    c: &ModelConfig,
    layer: &Layer<'_>,
    cache: &mut LatentCache,
    pos: usize,
    s: &mut Scratch<'_>,
) -> Result<()> {
    let row = c.cache_row();
    rmsnorm(&s.x, &layer.attn_norm, c.rms_eps, &mut s.h);
    s.act_embd.load(&s.h);
    // The query (or its latent) and the kv latent read the same input: one batch.
    let first = match &layer.q {
        QueryProj::Direct(w) => w,
        QueryProj::LowRank { a, .. } => a,
    };
    let q_width = first.rows();
    batch::run(
        &[
            Product {
                m: *first,
                input: 0,
            },
            Product {
                m: layer.kv_a,
                input: 0,
            },
        ],
        std::slice::from_mut(&mut s.act_embd),
        &mut s.proj,
    )?;
    let (q_part, kv) = s.proj[..q_width + row].split_at_mut(q_width);
    match &layer.q {
        QueryProj::Direct(_) => s.q.copy_from_slice(q_part),
        QueryProj::LowRank { a_norm, b, .. } => {
            rmsnorm_in_place(q_part, a_norm, c.rms_eps);
            s.act_q_lora.load(q_part);
            batch::matvec(b, &mut s.act_q_lora, &mut s.q)?;
        }
    }
    store_latent(c, layer, kv, &s.cos_sin, cache, pos);
    rope_query(c, &mut s.q, &s.cos_sin);

    token_heads(
        c,
        layer,
        cache.latents(),
        pos,
        &s.q,
        (&mut s.heads, &mut s.attend),
        &mut s.heads_out,
    )?;
    s.act_heads.load(&s.heads_out);
    batch::matvec(&layer.out, &mut s.act_heads, &mut s.delta)
}

/// Normalizes the kv latent and ropes `k_pe` of `kv` (`[c | k_pe]`, the first projection's tail) in
/// place, and stores it as cache row `pos` in the cache's number format.
pub(super) fn store_latent(
    c: &ModelConfig,
    layer: &Layer<'_>,
    kv: &mut [f32],
    cos_sin: &[(f32, f32)],
    cache: &mut LatentCache,
    pos: usize,
) {
    let (lora, row) = (c.kv_lora, c.cache_row());
    rmsnorm_in_place(&mut kv[..lora], &layer.kv_a_norm, c.rms_eps);
    apply_rope(&mut kv[lora..], cos_sin);
    let at = if cache.ty == CacheType::F16 {
        pos
    } else {
        pos + cache.write_skew
    };
    cache.write_row(at, &kv[..row]);
}

/// Ropes the `q_pe` part of every head of `q`.
pub(super) fn rope_query(c: &ModelConfig, q: &mut [f32], cos_sin: &[(f32, f32)]) {
    for q_head in q.chunks_exact_mut(c.d_qk()) {
        apply_rope(&mut q_head[c.d_nope..], cos_sin);
    }
}

/// Every head's attention for one token's queries `q` (`n_head × [q_nope | q_pe]`, roped) at `pos`,
/// over cache rows `0..=pos`, into `out` (`n_head × d_v`): [`key_up`] per head, [`attend_heads`]
/// for all heads, then `W_UV` per head. The stepwise and the chunked paths both run it, so they
/// compute the same values in the same order.
pub(super) fn token_heads(
    c: &ModelConfig,
    layer: &Layer<'_>,
    cache: Latents<'_>,
    pos: usize,
    q: &[f32],
    (heads, att): (&mut [HeadScratch], &mut Attend),
    out: &mut [f32],
) -> Result<()> {
    let (dqk, lora) = (c.d_qk(), c.kv_lora);
    heads
        .par_iter_mut()
        .enumerate()
        .try_for_each(|(hd, hs)| key_up(c, layer, hd, &q[hd * dqk..][..c.d_nope], hs))?;
    for (hd, hs) in heads.iter().enumerate() {
        att.set_query(c, hd, &hs.q_abs, &q[hd * dqk + c.d_nope..][..c.d_rope]);
    }
    attend_heads(c, cache, pos, att);
    heads
        .par_iter_mut()
        .zip(out.par_chunks_mut(c.d_v))
        .enumerate()
        .try_for_each(|(hd, (hs, o))| {
            hs.o_lat.load(&att.o_lat[hd * lora..(hd + 1) * lora]);
            layer.v_b[hd].matvec_serial(&mut hs.o_lat, o)
        })
}

/// `hs.q_abs = W_UK[hd]ᵀ·q_nope`, the query absorbed into the latent space.
fn key_up(
    c: &ModelConfig,
    layer: &Layer<'_>,
    hd: usize,
    q_nope: &[f32],
    hs: &mut HeadScratch,
) -> Result<()> {
    match &layer.k_up {
        KeyUp::PerHead(k_b) => {
            hs.q_nope.load(q_nope);
            k_b[hd].matvec_serial(&mut hs.q_nope, &mut hs.q_abs)?;
        }
        KeyUp::Legacy(kv_b) => {
            // q_abs = Σ_d q_nope[d] · kv_b[h·(d_nope+d_v) + d]: the transposed product, row by row.
            hs.q_abs.fill(0.0);
            let first = hd * (c.d_nope + c.d_v);
            for (d, &qd) in q_nope.iter().enumerate() {
                kv_b.dequantize_row(first + d, &mut hs.kv_b_row)?;
                hs.q_abs
                    .iter_mut()
                    .zip(&hs.kv_b_row)
                    .for_each(|(a, w)| *a += qd * w);
            }
        }
    }
    Ok(())
}

/// Most tokens of a chunk that attend together ([`attend_tokens`]): their buffers take `GROUP ×
/// n_head` query rows (at V2-Lite's shapes 2 MiB of partials per span).
const GROUP: usize = 4;

/// Every head of a chunk of `n` tokens at `start..start + n` (queries `q`, token-major,
/// `n_head·d_qk()` per token), into `out` (token-major, `n_head·d_v` per token): [`token_heads`]'s
/// values bit for bit. With per-head `attn_k_b`, the key and value up-projections of each head run
/// as one product over the chunk's tokens (each weight row read once per chunk); the legacy layout
/// runs [`token_heads`] per token.
pub(super) fn heads_chunk(
    c: &ModelConfig,
    layer: &Layer<'_>,
    cache: Latents<'_>,
    start: usize,
    q: &[f32],
    out: &mut [f32],
) -> Result<()> {
    let (heads, dv, dqk, lora) = (c.n_head, c.d_v, c.d_qk(), c.kv_lora);
    let n = out.len() / (heads * dv);
    let KeyUp::PerHead(k_b) = &layer.k_up else {
        return out
            .par_chunks_mut(heads * dv)
            .enumerate()
            .try_for_each_init(
                || {
                    let hs: Vec<HeadScratch> = (0..heads).map(|_| HeadScratch::new(c)).collect();
                    (hs, Attend::new(c))
                },
                |(hs, att), (i, o)| -> Result<()> {
                    let q_token = &q[i * heads * dqk..(i + 1) * heads * dqk];
                    token_heads(c, layer, cache, start + i, q_token, (hs, att), o)
                },
            );
    };
    // Head-major from here: `acts[hd·n + i]` is token i's input to head hd's up-projections.
    let mut acts: Vec<Activation> = (0..heads * n)
        .map(|j| {
            let (hd, i) = (j / n, j % n);
            let mut a = Activation::new(lora.max(c.d_nope));
            a.load(&q[i * heads * dqk + hd * dqk..][..c.d_nope]);
            a
        })
        .collect();
    // Heads in parallel, each head's product on one thread: per head it is small (`n` tokens
    // through a 512 × 128 matrix), so splitting its rows would cost more in fork/join than it
    // saves.
    let own: Vec<usize> = (0..n).collect();
    let mut q_abs = vec![0.0; heads * n * lora];
    acts.par_chunks_mut(n)
        .zip(q_abs.par_chunks_mut(n * lora))
        .zip(k_b.par_iter())
        .try_for_each(|((acts, qa), k)| -> Result<()> {
            batch::prepare(k, acts, &own)?;
            let inputs: Vec<&Activation> = acts.iter().collect();
            batch::matmul_prepared(k, &inputs, qa, false)
        })?;
    // Token-major: `o_tok[i]` is token i's attended latents, `heads × kv_lora`. Runs of tokens
    // attend together ([`attend_tokens`]: each cache block read once for the run), runs in parallel
    // beside the spans within each run.
    let o_tok: Vec<f32> = token_groups(start, n, GROUP)
        .into_par_iter()
        .map_init(
            || Attend::for_tokens(c, GROUP),
            |att, g| {
                for i in g.clone() {
                    for hd in 0..heads {
                        let q_pe = &q[i * heads * dqk + hd * dqk + c.d_nope..][..c.d_rope];
                        let q_abs = &q_abs[(hd * n + i) * lora..][..lora];
                        att.set_token_query(c, i - g.start, hd, q_abs, q_pe);
                    }
                }
                attend_tokens(c, cache, start + g.start, g.len(), att);
                att.o_lat[..g.len() * heads * lora].to_vec()
            },
        )
        .collect::<Vec<Vec<f32>>>()
        .concat();
    let o_lat: Vec<f32> = (0..heads * n)
        .flat_map(|j| {
            let (hd, i) = (j / n, j % n);
            o_tok[(i * heads + hd) * lora..][..lora].iter().copied()
        })
        .collect();
    for (a, o) in acts.iter_mut().zip(o_lat.chunks_exact(lora)) {
        a.load(o);
    }
    let mut values = vec![0.0; heads * n * dv];
    acts.par_chunks_mut(n)
        .zip(values.par_chunks_mut(n * dv))
        .zip(layer.v_b.par_iter())
        .try_for_each(|((acts, vals), v)| -> Result<()> {
            batch::prepare(v, acts, &own)?;
            let inputs: Vec<&Activation> = acts.iter().collect();
            batch::matmul_prepared(v, &inputs, vals, false)
        })?;
    for (hd, vals) in values.chunks_exact(n * dv).enumerate() {
        for (i, val) in vals.chunks_exact(dv).enumerate() {
            out[i * heads * dv + hd * dv..][..dv].copy_from_slice(val);
        }
    }
    Ok(())
}
