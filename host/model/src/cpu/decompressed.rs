//! The decompressed form of a chunk's MLA attention (docs/decode-math.md#decompressed-attention):
//! each head's keys `k_nope = W_UK·c` and values `v = W_UV·c` are computed once per cache row, and
//! the chunk's queries attend to them as in ordinary multi-head attention.
//!
//! Cost per head, for a chunk of `n` tokens over `L` cache rows: `L·(d_nope + d_v)·kv_lora`
//! multiply-adds to decompress, then about `n·L·(d_qk + d_v)` (halved by the causal mask inside the
//! chunk) to attend; the absorbed form ([`super::attention::heads_chunk`]) spends `n·L·(2·kv_lora +
//! d_rope)` on attending instead. So the decompressed form wins once a chunk has enough tokens to
//! amortize the decompression; [`MlaForm::Auto`] switches at [`DECOMPRESS_FROM`] tokens and at most
//! [`DECOMPRESS_DEPTH_PER_TOKEN`] cached positions per token, measured.
//!
//! Values differ from the absorbed form's in rounding only: the weights are dequantized to f32 and
//! every product is an f32 [`gemm_nt`], where the absorbed form quantizes `q_nope` and the attended
//! latent to q8 activations. The result does not depend on the instruction set or the thread count.

use rayon::prelude::*;

use super::weights::{KeyUp, Layer};
use crate::config::ModelConfig;
use crate::error::Result;
use crate::math::gemm_nt;

/// How a chunk's attention is computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MlaForm {
    /// [`MlaForm::Decompressed`] for chunks of at least [`DECOMPRESS_FROM`] tokens after at most
    /// [`DECOMPRESS_DEPTH_PER_TOKEN`] cached positions per token, and for chunks of at least
    /// [`DECOMPRESS_AT_ANY_DEPTH`] tokens; else [`MlaForm::Absorbed`].
    #[default]
    Auto,
    /// Queries absorbed into the latent space (the decode step's form): the stepwise path's values
    /// bit for bit.
    Absorbed,
    /// Keys and values decompressed per cache row.
    Decompressed,
}

/// Smallest chunk [`MlaForm::Auto`] runs decompressed, from timing both forms on V2-Lite's
/// attention shapes (docs/perf.md, "Absorbed or decompressed attention on the CPU").
pub const DECOMPRESS_FROM: usize = 48;

/// Most cached positions per chunk token at which [`MlaForm::Auto`] decompresses: decompressing
/// costs per cached position what attending absorbed costs per (token, position) pair times about
/// 200 (the shapes' MAC counts at the two forms' measured rates), and its rate falls further once a
/// head's decompressed keys outgrow the caches. Placed by timing both forms at depths 0, 4096 and
/// 8192 for chunks of 64 to 512 tokens (docs/perf.md, "CPU prefill at depth"): every measured chunk
/// but one takes the faster form (256 tokens after 8192 rows run absorbed, 6% slower).
pub const DECOMPRESS_DEPTH_PER_TOKEN: usize = 16;

/// Chunk length from which [`MlaForm::Auto`] decompresses however deep the cache. Both forms'
/// time grows linearly with the depth once it dominates (decompressing costs per cached position,
/// attending absorbed per position and token), so at depth one chunk length divides them whatever
/// the depth: measured at 16384 rows, 256 tokens run 4% faster absorbed and 512 tokens 13% faster
/// decompressed (at 8192, 512 tokens 25% faster), docs/perf.md "CPU Q4_K rows packed at load".
pub const DECOMPRESS_AT_ANY_DEPTH: usize = 384;

impl MlaForm {
    /// Whether a chunk of `n` tokens after `start` cached positions runs decompressed.
    pub fn decompresses(self, n: usize, start: usize) -> bool {
        match self {
            MlaForm::Auto => {
                n >= DECOMPRESS_FROM
                    && (start <= DECOMPRESS_DEPTH_PER_TOKEN * n || n >= DECOMPRESS_AT_ANY_DEPTH)
            }
            MlaForm::Absorbed => false,
            MlaForm::Decompressed => true,
        }
    }
}

/// Query rows of the chunk per block of the causal loop: a block attends to the cache rows up to
/// its last token, so the mask wastes at most this many columns per row.
const ROW_BLOCK: usize = 16;

/// One head's buffers.
struct HeadBufs {
    /// `[W_UK; W_UV]`: `d_nope + d_v` rows of `kv_lora`, dequantized.
    w: Vec<f32>,
    /// One dequantized row of `attn_k_b` (`d_nope` values).
    k_b_row: Vec<f32>,
    /// Per cache row `[W_UK·c | W_UV·c]` (`d_nope + d_v` values).
    kv: Vec<f32>,
    /// Per cache row `[k_nope | k_pe]` (`d_qk` values).
    keys: Vec<f32>,
    /// `W_UV·c` transposed: `d_v` rows of `L` values.
    values_t: Vec<f32>,
    /// Scores, then probabilities, of one block of query rows: `ROW_BLOCK` rows of `L`.
    p: Vec<f32>,
    /// A block's products transposed, as computed (scores: `L` rows of `ROW_BLOCK`; outputs: `d_v`
    /// rows).
    t: Vec<f32>,
    /// The head's output, `n` rows of `d_v`.
    out: Vec<f32>,
}

/// Every head of a chunk of `n` tokens at `start..start + n` (queries `q`, token-major,
/// `n_head·d_qk()` per token, `q_pe` roped) over cache rows `0..start + n` (all written), into
/// `out` (token-major, `n_head·d_v` per token).
pub(super) fn heads_chunk(
    c: &ModelConfig,
    layer: &Layer<'_>,
    cache: &[f32],
    start: usize,
    q: &[f32],
    out: &mut [f32],
) -> Result<()> {
    let (heads, dv, dqk, dn, lora) = (c.n_head, c.d_v, c.d_qk(), c.d_nope, c.kv_lora);
    let n = out.len() / (heads * dv);
    let len = start + n;
    let outs: Vec<Result<Vec<f32>>> = (0..heads)
        .into_par_iter()
        .map(|hd| {
            let mut b = HeadBufs {
                w: vec![0.0; (dn + dv) * lora],
                k_b_row: vec![0.0; dn],
                kv: vec![0.0; len * (dn + dv)],
                keys: vec![0.0; len * dqk],
                values_t: vec![0.0; dv * len],
                p: vec![0.0; ROW_BLOCK.min(n) * len],
                t: vec![0.0; ROW_BLOCK.min(n) * len.max(dv)],
                out: vec![0.0; n * dv],
            };
            head(c, layer, cache, start, hd, q, &mut b)?;
            Ok(b.out)
        })
        .collect();
    for (hd, o) in outs.into_iter().enumerate() {
        for (i, v) in o?.chunks_exact(dv).enumerate() {
            out[i * heads * dv + hd * dv..][..dv].copy_from_slice(v);
        }
    }
    Ok(())
}

/// Head `hd`: decompress, score, softmax, weight the values.
fn head(
    c: &ModelConfig,
    layer: &Layer<'_>,
    cache: &[f32],
    start: usize,
    hd: usize,
    q: &[f32],
    b: &mut HeadBufs,
) -> Result<()> {
    let (heads, dv, dqk, dn, lora, row) = (
        c.n_head,
        c.d_v,
        c.d_qk(),
        c.d_nope,
        c.kv_lora,
        c.cache_row(),
    );
    let n = b.out.len() / dv;
    let len = start + n;
    up_weights(c, layer, hd, b)?;
    // Each product below has its large operand (cache rows, keys, values) as `gemm_nt`'s first,
    // which its tiles stream once while the small one stays in cache; `dot_f32(a, b)` and
    // `dot_f32(b, a)` are the same bits (each product commutes, the order is the lanes'), so the
    // operand order changes no value. kv[t] = [W_UK·c_t | W_UV·c_t]; keys[t] = [W_UK·c_t | k_pe_t];
    // values_tᵀ = W_UV·Cᵀ.
    let kv_w = dn + dv;
    gemm_nt(cache, row, len, &b.w, lora, kv_w, lora, &mut b.kv, kv_w);
    for (t, (kv, r)) in
        b.kv.chunks_exact(kv_w)
            .zip(cache.chunks_exact(row))
            .enumerate()
    {
        let k = &mut b.keys[t * dqk..(t + 1) * dqk];
        k[..dn].copy_from_slice(&kv[..dn]);
        k[dn..].copy_from_slice(&r[lora..]);
        for (d, &v) in kv[dn..].iter().enumerate() {
            b.values_t[d * len + t] = v;
        }
    }

    let q_head = &q[hd * dqk..];
    for i0 in (0..n).step_by(ROW_BLOCK) {
        let rows = ROW_BLOCK.min(n - i0);
        // The block's last token sees rows `..cols`; earlier tokens' extra columns are masked
        // below.
        let cols = start + i0 + rows;
        // Scores transposed (`cols` rows of `rows`), then into `p` row by row.
        let st = &mut b.t[..cols * rows];
        let q_block = &q_head[i0 * heads * dqk..];
        gemm_nt(
            &b.keys,
            dqk,
            cols,
            q_block,
            heads * dqk,
            rows,
            dqk,
            st,
            rows,
        );
        for r in 0..rows {
            let pos = start + i0 + r;
            let s = &mut b.p[r * len..r * len + cols];
            s.iter_mut()
                .zip(st.iter().skip(r).step_by(rows))
                .for_each(|(s, &v)| *s = v);
            softmax_masked(s, pos + 1, c.kq_scale_at(pos));
        }
        // Outputs transposed (`d_v` rows of `rows`), then into the head's rows.
        let ot = &mut b.t[..dv * rows];
        gemm_nt(&b.values_t, len, dv, &b.p, len, rows, cols, ot, rows);
        for (r, o) in b.out[i0 * dv..].chunks_exact_mut(dv).take(rows).enumerate() {
            o.iter_mut()
                .zip(ot.iter().skip(r).step_by(rows))
                .for_each(|(o, &v)| *o = v);
        }
    }
    Ok(())
}

/// `s[..seen] = softmax(scale·s[..seen])`, `s[seen..] = 0` (the causal mask).
fn softmax_masked(s: &mut [f32], seen: usize, scale: f32) {
    let (live, masked) = s.split_at_mut(seen);
    let mut max = f32::NEG_INFINITY;
    for v in live.iter_mut() {
        *v *= scale;
        max = max.max(*v);
    }
    let mut sum = 0.0f32;
    for v in live.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in live.iter_mut() {
        *v /= sum;
    }
    masked.fill(0.0);
}

/// `b.w = [W_UK; W_UV]` of head `hd` in f32, `kv_lora` columns per row.
fn up_weights(c: &ModelConfig, layer: &Layer<'_>, hd: usize, b: &mut HeadBufs) -> Result<()> {
    let (dn, dv, lora) = (c.d_nope, c.d_v, c.kv_lora);
    let (w_uk, w_uv) = b.w.split_at_mut(dn * lora);
    match &layer.k_up {
        KeyUp::PerHead(k_b) => {
            // attn_k_b holds W_UKᵀ: its row l is column l of W_UK.
            for l in 0..lora {
                k_b[hd].dequantize_row(l, &mut b.k_b_row)?;
                for (d, &v) in b.k_b_row.iter().enumerate() {
                    w_uk[d * lora + l] = v;
                }
            }
        }
        KeyUp::Legacy(kv_b) => {
            for (d, r) in w_uk.chunks_exact_mut(lora).enumerate() {
                kv_b.dequantize_row(hd * (dn + dv) + d, r)?;
            }
        }
    }
    for (d, r) in w_uv.chunks_exact_mut(lora).enumerate() {
        layer.v_b[hd].dequantize_row(d, r)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Auto` decompresses from 48 tokens while the cache holds at most 16 positions per chunk
    /// token (the measured boundaries); the other forms are fixed.
    #[test]
    fn auto_decompresses_long_chunks_over_shallow_caches() {
        for (n, start, want) in [
            (47, 0, false),
            (48, 0, true),
            (512, 0, true),
            (64, 1_024, true),
            (64, 1_025, false),
            (64, 4_096, false),
            (256, 4_096, true),
            (256, 8_192, false),
            (256, 16_384, false),
            (383, 8_192, false),
            (384, 8_192, true),
            (512, 8_192, true),
            (512, 16_384, true),
            (512, 1 << 20, true),
        ] {
            assert_eq!(
                MlaForm::Auto.decompresses(n, start),
                want,
                "{n} tokens after {start}"
            );
            assert!(MlaForm::Decompressed.decompresses(n, start));
            assert!(!MlaForm::Absorbed.decompresses(n, start));
        }
    }
}
