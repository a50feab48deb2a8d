//! The softmax attention of every head over the latent cache at one position, each cache row read once
//! per pass for all heads (the cache is the one operand that grows with the context).

use rayon::prelude::*;

use super::latent::Latents;
use crate::config::ModelConfig;
use crate::math::{gemm_nt_split, weighted_rows_add};

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
    /// Span-major: span `s` holds `n_head × len(s)` scores, then their `exp(score − max)`, then those
    /// divided by the head's sum (the softmax).
    scores: Vec<f32>,
    /// Span-major: `n_head` maxima per span, then per head the maximum over all spans.
    maxima: Vec<f32>,
    /// Span-major: `n_head` sums of `exp(score − max)` per span, then per head the sum over all spans.
    sums: Vec<f32>,
    /// Span-major: per head, the span's `Σ softmax_t·c_t` (`kv_lora`).
    partials: Vec<f32>,
}

impl Attend {
    pub fn new(c: &ModelConfig, max_ctx: usize) -> Self {
        let (heads, lora) = (c.n_head, c.kv_lora);
        Attend {
            q: vec![0.0; heads * c.cache_row()],
            o_lat: vec![0.0; heads * lora],
            scores: vec![0.0; heads * max_ctx],
            maxima: vec![0.0; (MAX_SPANS + 1) * heads],
            sums: vec![0.0; (MAX_SPANS + 1) * heads],
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
/// The rows are cut into spans ([`span_len`]) that run in parallel, each reading its rows once for all
/// heads in two passes: the scores (an f32 product of the queries and the rows, [`gemm_nt_split`]) and
/// their per-span maxima; then, after `p = exp(score − max)` and its sum over all spans, the weights `p /
/// sum` and `Σ weight·c_t` ([`weighted_rows`]). The spans' partials are added in span order.
///
/// Each head's values follow the order of the one-head-at-a-time form (a row's score is `kq_scale ·
/// (dot_f32(q_abs, c_t) + dot_f32(q_pe, k_pe_t))`, the weights are normalized before they multiply the
/// rows, each sum runs from 0 in row order), so with a single span (up to [`SPAN_MIN`] rows) every
/// output is that form's bit for bit (`one_span_is_the_per_head_order_bit_for_bit` in `cpu/tests.rs`);
/// past it only the association of the spans' sums differs.
pub(super) fn attend_heads(c: &ModelConfig, cache: Latents<'_>, pos: usize, att: &mut Attend) {
    let (heads, lora, row) = (c.n_head, c.kv_lora, c.cache_row());
    let rows = pos + 1;
    let span = span_len(rows);
    let spans = rows.div_ceil(span);
    let kq_scale = c.kq_scale_at(pos);
    let q = &att.q;
    let scores = &mut att.scores[..heads * rows];
    let (span_max, max) = att.maxima[..(spans + 1) * heads].split_at_mut(spans * heads);
    scores
        .par_chunks_mut(heads * span)
        .zip(span_max.par_chunks_mut(heads))
        .enumerate()
        .for_each(|(si, (sc, mx))| {
            let (t0, len) = (si * span, sc.len() / heads);
            for_rows(cache, t0, len, |first, rows, n| {
                gemm_nt_split(
                    q,
                    row,
                    heads,
                    rows,
                    row,
                    n,
                    (lora, row),
                    &mut sc[first..],
                    len,
                );
            });
            for (m, sc) in mx.iter_mut().zip(sc.chunks_exact_mut(len)) {
                *m = f32::NEG_INFINITY;
                for s in sc {
                    *s *= kq_scale;
                    *m = m.max(*s);
                }
            }
        });
    max.fill(f32::NEG_INFINITY);
    for mx in span_max.chunks_exact(heads) {
        max.iter_mut().zip(mx).for_each(|(m, &x)| *m = m.max(x));
    }
    let max = &*max;
    let (span_sum, sum) = att.sums[..(spans + 1) * heads].split_at_mut(spans * heads);
    scores
        .par_chunks_mut(heads * span)
        .zip(span_sum.par_chunks_mut(heads))
        .for_each(|(sc, sums)| {
            let len = sc.len() / heads;
            for (h, (s, p)) in sums.iter_mut().zip(sc.chunks_exact_mut(len)).enumerate() {
                *s = 0.0;
                for x in p {
                    *x = (*x - max[h]).exp();
                    *s += *x;
                }
            }
        });
    sum.fill(0.0);
    for s in span_sum.chunks_exact(heads) {
        sum.iter_mut().zip(s).for_each(|(sum, &x)| *sum += x);
    }
    let sum = &*sum;
    let partials = &mut att.partials[..spans * heads * lora];
    partials
        .par_chunks_mut(heads * lora)
        .zip(scores.par_chunks_mut(heads * span))
        .enumerate()
        .for_each(|(si, (part, sc))| {
            let (t0, len) = (si * span, sc.len() / heads);
            for (h, p) in sc.chunks_exact_mut(len).enumerate() {
                p.iter_mut().for_each(|x| *x /= sum[h]);
            }
            part.fill(0.0);
            let sc = &*sc;
            for_rows(cache, t0, len, |first, rows, n| {
                for (acc, p) in part.chunks_exact_mut(lora).zip(sc.chunks_exact(len)) {
                    weighted_rows_add(&p[first..first + n], rows, row, acc);
                }
            });
        });
    for (h, o) in att.o_lat.chunks_exact_mut(lora).enumerate() {
        o.fill(0.0);
        for part in partials.chunks_exact(heads * lora) {
            let acc = &part[h * lora..(h + 1) * lora];
            o.iter_mut().zip(acc).for_each(|(o, a)| *o += a);
        }
    }
}
