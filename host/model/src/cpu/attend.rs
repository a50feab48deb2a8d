//! The softmax attention of every head over the latent cache at one position, each cache row read once
//! per pass for all heads (the cache is the one operand that grows with the context).

use rayon::prelude::*;

use super::latent::Latents;
use crate::config::ModelConfig;
use crate::math::{gemm_nt_split_fused, weighted_rows_add_fused};

/// Cache rows per span of [`attend_heads`]: at least [`SPAN_MIN`], and few enough spans that their
/// partials stay at most [`MAX_SPANS`]. A function of the row count alone, so the values never depend on
/// how many threads run the spans.
fn span_len(rows: usize) -> usize {
    rows.div_ceil(MAX_SPANS).max(SPAN_MIN)
}

const SPAN_MIN: usize = 128;
const MAX_SPANS: usize = 64;

/// f32 values of cache rows a span decodes at a time from a cache not stored as f32 (on the stack: 32
/// KiB, 14 rows of DeepSeek-V2's 576), read by every head while they are in L1.
const DECODED: usize = 8192;

/// Cache rows per block of [`attend_heads`]: the rows of one decoded part ([`DECODED`] values), at least
/// one.
fn block_rows(width: usize) -> usize {
    (DECODED / width).max(1)
}

/// Calls `f(first, rows, n)` over rows `t0..t0 + len` of `cache` in order, `rows` their f32 values
/// (stride: the row width) from row `t0 + first` on: one call borrowing the rows of an f32 cache, parts of up to
/// [`DECODED`] values decoded on the stack otherwise.
fn for_rows(cache: Latents<'_>, t0: usize, len: usize, mut f: impl FnMut(usize, &[f32], usize)) {
    let width = cache.width();
    if let Some(rows) = cache.as_f32() {
        return f(0, &rows[t0 * width..(t0 + len) * width], len);
    }
    let mut stack = [0.0f32; DECODED];
    let mut heap = Vec::new();
    let per = DECODED / width;
    let (buf, per): (&mut [f32], usize) = if per == 0 {
        heap.resize(width, 0.0);
        (&mut heap, 1)
    } else {
        (&mut stack, per)
    };
    let mut first = 0;
    while first < len {
        let n = per.min(len - first);
        cache.decode(t0 + first, n, &mut buf[..n * width]);
        f(first, &buf[..n * width], n);
        first += n;
    }
}

/// What [`attend_heads`] reads and writes: every head's query in the latent space, the attended latents,
/// and the per-span work buffers.
pub(super) struct Attend {
    /// `n_head` rows of `[q_abs | q_pe]` (a cache row's width): each head's absorbed query
    /// `W_UK[h]ᵀ·q_nope` and its roped `q_pe`, the vector a cache row `[c | k_pe]` is scored against.
    q: Vec<f32>,
    /// `n_head × kv_lora`: each head's attended latent `Σ_t softmax_t · c_t`.
    pub o_lat: Vec<f32>,
    /// Per span, the current block's `n_head × rows` scores, then their `exp(score − max)`.
    scores: Vec<f32>,
    /// Span-major: per head, the span's running maximum score.
    maxima: Vec<f32>,
    /// Span-major: per head, the span's sum of `exp(score − max)`.
    sums: Vec<f32>,
    /// Span-major: per head, the span's `Σ exp(score_t − max)·c_t` (`kv_lora`).
    partials: Vec<f32>,
}

impl Attend {
    pub fn new(c: &ModelConfig) -> Self {
        let (heads, lora) = (c.n_head, c.kv_lora);
        Attend {
            q: vec![0.0; heads * c.cache_row()],
            o_lat: vec![0.0; heads * lora],
            scores: vec![0.0; MAX_SPANS * heads * block_rows(c.cache_row())],
            maxima: vec![0.0; MAX_SPANS * heads],
            sums: vec![0.0; MAX_SPANS * heads],
            partials: vec![0.0; MAX_SPANS * heads * lora],
        }
    }

    /// Head `hd`'s query: its absorbed `q_abs` (`kv_lora`) and roped `q_pe` (`d_rope`).
    pub fn set_query(&mut self, c: &ModelConfig, hd: usize, q_abs: &[f32], q_pe: &[f32]) {
        let q = &mut self.q[hd * c.cache_row()..(hd + 1) * c.cache_row()];
        q[..c.kv_lora].copy_from_slice(q_abs);
        q[c.kv_lora..].copy_from_slice(q_pe);
    }
}

/// Softmax attention of every head's query ([`Attend::set_query`]) at `pos` over cache rows `0..=pos`;
/// leaves the attended latents in `att.o_lat`.
///
/// The rows are cut into spans ([`span_len`]) that run in parallel; a span reads its rows once, in blocks
/// of [`block_rows`] (the rows one decoded part of a quantized cache holds, whatever the storage, so both
/// storages give the same bits). For each block: the scores of every head (`kq_scale ·
/// (dot_f32_fused(q_abs, c_t) + dot_f32_fused(q_pe, k_pe_t))`, [`gemm_nt_split_fused`]); if the block
/// raises a head's running maximum `m`, that head's sum and partial are first multiplied by `exp(m_old −
/// m_new)`; then `p_t = exp(score − m)`, the sum `l += p_t` in row order and the partial `Σ p_t·c_t`
/// ([`weighted_rows_add_fused`]) while the block is still in cache. The spans merge in span order:
/// `o = Σ_s (exp(m_s − M) / L)·partial_s` with `M = max_s m_s` and `L = Σ_s exp(m_s − M)·l_s`.
///
/// The order of operations is a function of the row count alone (spans, blocks, rows within a block), so
/// the bits never depend on the thread count or on the instruction set (the fused multiply-adds are
/// exact-rounded on every CPU). Every path that attends (decode, a prefill chunk, a drafted verify) runs
/// this function, so a cached prefix and a fresh one give the same bits.
pub(super) fn attend_heads(c: &ModelConfig, cache: Latents<'_>, pos: usize, att: &mut Attend) {
    let (heads, lora, row) = (c.n_head, c.kv_lora, c.cache_row());
    let rows = pos + 1;
    let span = span_len(rows);
    let spans = rows.div_ceil(span);
    let block = block_rows(row);
    let kq_scale = c.kq_scale_at(pos);
    let q = &att.q;
    let partials = &mut att.partials[..spans * heads * lora];
    let maxima = &mut att.maxima[..spans * heads];
    let sums = &mut att.sums[..spans * heads];
    partials
        .par_chunks_mut(heads * lora)
        .zip(maxima.par_chunks_mut(heads))
        .zip(sums.par_chunks_mut(heads))
        .zip(att.scores.par_chunks_mut(heads * block))
        .enumerate()
        .for_each(|(si, (((part, max), sum), scores))| {
            let t0 = si * span;
            let len = span.min(rows - t0);
            part.fill(0.0);
            max.fill(f32::NEG_INFINITY);
            sum.fill(0.0);
            for_rows(cache, t0, len, |_, part_rows, n| {
                for (b, rows_b) in part_rows[..n * row].chunks(block * row).enumerate() {
                    let nb = rows_b.len() / row;
                    debug_assert!(b == 0 || nb <= block);
                    let sc = &mut scores[..heads * nb];
                    gemm_nt_split_fused((q, row, heads), (rows_b, row, nb), (lora, row), sc, nb);
                    for (h, p) in sc.chunks_exact_mut(nb).enumerate() {
                        let mut top = f32::NEG_INFINITY;
                        for s in p.iter_mut() {
                            *s *= kq_scale;
                            top = top.max(*s);
                        }
                        let acc = &mut part[h * lora..(h + 1) * lora];
                        if top > max[h] {
                            if max[h] > f32::NEG_INFINITY {
                                let r = (max[h] - top).exp();
                                acc.iter_mut().for_each(|a| *a *= r);
                                sum[h] *= r;
                            }
                            max[h] = top;
                        }
                        for s in p.iter_mut() {
                            *s = (*s - max[h]).exp();
                            sum[h] += *s;
                        }
                        weighted_rows_add_fused(p, rows_b, row, acc);
                    }
                }
            });
        });
    let (maxima, sums, partials) = (&*maxima, &*sums, &*partials);
    for (h, o) in att.o_lat.chunks_exact_mut(lora).enumerate() {
        let top = (0..spans).fold(f32::NEG_INFINITY, |m, s| m.max(maxima[s * heads + h]));
        let total: f32 = (0..spans)
            .map(|s| (maxima[s * heads + h] - top).exp() * sums[s * heads + h])
            .sum();
        o.fill(0.0);
        for s in 0..spans {
            let w = (maxima[s * heads + h] - top).exp() / total;
            let acc = &partials[(s * heads + h) * lora..][..lora];
            o.iter_mut().zip(acc).for_each(|(o, a)| *o += w * a);
        }
    }
}
