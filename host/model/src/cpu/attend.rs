//! The softmax attention of every head over the latent cache at one position, or at a run of a
//! prefill chunk's positions, each cache row read once per pass for all heads and tokens (the cache
//! is the one operand that grows with the context).

use rayon::prelude::*;

use super::latent::Latents;
use crate::config::ModelConfig;
use crate::math::{gemm_nt_split_fused, weighted_rows_add_fused, weighted_rows_add_fused_multi};

/// Cache rows per span of [`attend_heads`]: at least [`SPAN_MIN`], and few enough spans that their
/// partials stay at most [`MAX_SPANS`]. A function of the row count alone, so the values never
/// depend on how many threads run the spans.
fn span_len(rows: usize) -> usize {
    rows.div_ceil(MAX_SPANS).max(SPAN_MIN)
}

const SPAN_MIN: usize = 128;
const MAX_SPANS: usize = 64;

/// f32 values of cache rows a span decodes at a time from a cache not stored as f32 (on the stack:
/// 32 KiB, 14 rows of DeepSeek-V2's 576), read by every head while they are in L1.
const DECODED: usize = 8192;

/// Cache rows per block of [`attend_heads`]: the rows of one decoded part ([`DECODED`] values), at
/// least one.
fn block_rows(width: usize) -> usize {
    (DECODED / width).max(1)
}

/// Calls `f(first, rows, n)` over rows `t0..t0 + len` of `cache` in order, `rows` their f32 values
/// (stride: the row width) from row `t0 + first` on: one call borrowing the rows of an f32 cache,
/// parts of up to [`DECODED`] values decoded on the stack otherwise.
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

/// What [`attend_tokens`] reads and writes: every head's query in the latent space for each of up
/// to `tokens` tokens, the attended latents, and the per-span work buffers.
pub(super) struct Attend {
    /// Most tokens one call attends for.
    tokens: usize,
    /// `tokens × n_head` rows of `[q_abs | q_pe]` (a cache row's width), token-major: each head's
    /// absorbed query `W_UK[h]ᵀ·q_nope` and its roped `q_pe`, the vector a cache row `[c | k_pe]`
    /// is scored against.
    q: Vec<f32>,
    /// `tokens × n_head × kv_lora`: each head's attended latent `Σ_t softmax_t · c_t`.
    pub o_lat: Vec<f32>,
    /// Per span, the current block's scores (`rows` per query row), then their `exp(score − max)`.
    scores: Vec<f32>,
    /// Span-major: per query row (token, head), the span's running maximum score.
    maxima: Vec<f32>,
    /// Span-major: per query row, the span's sum of `exp(score − max)`.
    sums: Vec<f32>,
    /// Span-major: per query row, the span's `Σ exp(score_t − max)·c_t` (`kv_lora`).
    partials: Vec<f32>,
}

impl Attend {
    /// Buffers for one token (the decode step).
    pub fn new(c: &ModelConfig) -> Self {
        Self::for_tokens(c, 1)
    }

    /// Buffers for up to `tokens` tokens at a time.
    pub fn for_tokens(c: &ModelConfig, tokens: usize) -> Self {
        let (m, lora) = (tokens * c.n_head, c.kv_lora);
        Attend {
            tokens,
            q: vec![0.0; m * c.cache_row()],
            o_lat: vec![0.0; m * lora],
            scores: vec![0.0; MAX_SPANS * m * block_rows(c.cache_row())],
            maxima: vec![0.0; MAX_SPANS * m],
            sums: vec![0.0; MAX_SPANS * m],
            partials: vec![0.0; MAX_SPANS * m * lora],
        }
    }

    /// Head `hd`'s query (of the first token): its absorbed `q_abs` (`kv_lora`) and roped `q_pe`
    /// (`d_rope`).
    pub fn set_query(&mut self, c: &ModelConfig, hd: usize, q_abs: &[f32], q_pe: &[f32]) {
        self.set_token_query(c, 0, hd, q_abs, q_pe)
    }

    /// Head `hd`'s query of token `i` (`i < tokens`).
    pub fn set_token_query(
        &mut self,
        c: &ModelConfig,
        i: usize,
        hd: usize,
        q_abs: &[f32],
        q_pe: &[f32],
    ) {
        let row = c.cache_row();
        let q = &mut self.q[(i * c.n_head + hd) * row..][..row];
        q[..c.kv_lora].copy_from_slice(q_abs);
        q[c.kv_lora..].copy_from_slice(q_pe);
    }
}

/// Softmax attention of every head's query ([`Attend::set_query`]) at `pos` over cache rows
/// `0..=pos`; leaves the attended latents in `att.o_lat`: [`attend_tokens`] for one token.
pub(super) fn attend_heads(c: &ModelConfig, cache: Latents<'_>, pos: usize, att: &mut Attend) {
    attend_tokens(c, cache, pos, 1, att)
}

/// The tokens at `pos0..pos0 + n` of a chunk, cut into runs of at most `most` tokens that one
/// [`attend_tokens`] call can take (equal [`span_len`]), as index ranges from 0.
pub(super) fn token_groups(pos0: usize, n: usize, most: usize) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut first = 0;
    while first < n {
        let span = span_len(pos0 + first + 1);
        let mut end = first + 1;
        while end < n && end - first < most.max(1) && span_len(pos0 + end + 1) == span {
            end += 1;
        }
        groups.push(first..end);
        first = end;
    }
    groups
}

/// Softmax attention of `n` tokens at `pos0..pos0 + n` (their queries set with
/// [`Attend::set_token_query`]; all with the same [`span_len`], [`token_groups`]), token `i` over
/// cache rows `0..=pos0 + i`; leaves the attended latents in `att.o_lat` (token-major). Each
/// token's values are those this function gives it alone (`n = 1`), bit for bit: only which rows
/// are loaded together differs.
///
/// A token's rows are cut into spans ([`span_len`], of its row count) that run in parallel; a span
/// reads its rows once, in blocks of [`block_rows`] from the span's start (the rows one decoded
/// part of a quantized cache holds, whatever the storage, so both storages give the same bits), its
/// last block ending at the token's own row. For each block: the scores of every head (`kq_scale ·
/// (dot_f32_fused(q_abs, c_t) + dot_f32_fused(q_pe, k_pe_t))`, [`gemm_nt_split_fused`]); if the
/// block raises a head's running maximum `m`, that head's sum and partial are first multiplied by
/// `exp(m_old − m_new)`; then `p_t = exp(score − m)`, the sum `l += p_t` in row order and the
/// partial `Σ p_t·c_t` ([`weighted_rows_add_fused`]) while the block is still in cache. The spans
/// merge in span order: `o = Σ_s (exp(m_s − M) / L)·partial_s` with `M = max_s m_s` and `L = Σ_s
/// exp(m_s − M)·l_s`. Tokens of one call share the spans and blocks (equal span length), so each
/// block is read once for all of them and every head.
///
/// The order of operations is a function of each token's row count alone (spans, blocks, rows
/// within a block), so the bits never depend on the thread count, on how tokens are grouped, or on
/// the instruction set (the fused multiply-adds are exact-rounded on every CPU). Every path that
/// attends (decode, a prefill chunk, a drafted verify) runs this function, so a cached prefix and a
/// fresh one give the same bits.
pub(super) fn attend_tokens(
    c: &ModelConfig,
    cache: Latents<'_>,
    pos0: usize,
    n: usize,
    att: &mut Attend,
) {
    let (heads, lora, row) = (c.n_head, c.kv_lora, c.cache_row());
    let rows = pos0 + n;
    let span = span_len(pos0 + 1);
    assert!(n >= 1 && n <= att.tokens && span_len(rows) == span);
    let spans = rows.div_ceil(span);
    let block = block_rows(row);
    let m = n * heads;
    let q = &att.q[..m * row];
    let partials = &mut att.partials[..spans * m * lora];
    let maxima = &mut att.maxima[..spans * m];
    let sums = &mut att.sums[..spans * m];
    partials
        .par_chunks_mut(m * lora)
        .zip(maxima.par_chunks_mut(m))
        .zip(sums.par_chunks_mut(m))
        .zip(att.scores.par_chunks_mut(m * block))
        .enumerate()
        .for_each(|(si, (((part, max), sum), scores))| {
            let t0 = si * span;
            let len = span.min(rows - t0);
            // Token i sees rows `t0..t0 + live(i)` of the span: non-decreasing in i, `len` for the
            // last.
            let live = |i: usize| (pos0 + i + 1).saturating_sub(t0).min(len);
            part.fill(0.0);
            max.fill(f32::NEG_INFINITY);
            sum.fill(0.0);
            for_rows(cache, t0, len, |first, part_rows, nr| {
                for (b, rows_b) in part_rows[..nr * row].chunks(block * row).enumerate() {
                    let (b0, nb) = (first + b * block, rows_b.len() / row);
                    debug_assert!(b == 0 || nb <= block);
                    // Tokens from `lo` on see some rows of the block, from `full` on all of them.
                    let lo = (0..n).position(|i| live(i) > b0).unwrap_or(n);
                    let full = (lo..n)
                        .position(|i| live(i) >= b0 + nb)
                        .map_or(n, |k| lo + k);
                    let sc = &mut scores[..(n - lo) * heads * nb];
                    let q_lo = &q[lo * heads * row..];
                    gemm_nt_split_fused(
                        (q_lo, row, (n - lo) * heads),
                        (rows_b, row, nb),
                        (lora, row),
                        sc,
                        nb,
                    );
                    for i in lo..n {
                        let seen = (live(i) - b0).min(nb);
                        let kq_scale = c.kq_scale_at(pos0 + i);
                        for r in i * heads..(i + 1) * heads {
                            let p = &mut sc[(r - lo * heads) * nb..][..seen];
                            let acc = &mut part[r * lora..(r + 1) * lora];
                            let mut top = f32::NEG_INFINITY;
                            for s in p.iter_mut() {
                                *s *= kq_scale;
                                top = top.max(*s);
                            }
                            if top > max[r] {
                                if max[r] > f32::NEG_INFINITY {
                                    let f = (max[r] - top).exp();
                                    acc.iter_mut().for_each(|a| *a *= f);
                                    sum[r] *= f;
                                }
                                max[r] = top;
                            }
                            for s in p.iter_mut() {
                                *s = (*s - max[r]).exp();
                                sum[r] += *s;
                            }
                            if seen < nb {
                                weighted_rows_add_fused(p, rows_b, row, acc);
                            }
                        }
                    }
                    // The rows that see the whole block: one pass over its rows for all of them.
                    let (r0, r1) = (full * heads, n * heads);
                    weighted_rows_add_fused_multi(
                        (&sc[(r0 - lo * heads) * nb..], nb, r1 - r0),
                        nb,
                        (rows_b, row),
                        (&mut part[r0 * lora..], lora, lora),
                    );
                }
            });
        });
    let (maxima, sums, partials) = (&*maxima, &*sums, &*partials);
    for (r, o) in att.o_lat[..m * lora].chunks_exact_mut(lora).enumerate() {
        // This token's spans; the group's later spans hold none of its rows.
        let spans = (pos0 + r / heads + 1).div_ceil(span);
        let top = (0..spans).fold(f32::NEG_INFINITY, |t, s| t.max(maxima[s * m + r]));
        let total: f32 = (0..spans)
            .map(|s| (maxima[s * m + r] - top).exp() * sums[s * m + r])
            .sum();
        o.fill(0.0);
        for s in 0..spans {
            let w = (maxima[s * m + r] - top).exp() / total;
            let acc = &partials[(s * m + r) * lora..][..lora];
            o.iter_mut().zip(acc).for_each(|(o, a)| *o += w * a);
        }
    }
}
