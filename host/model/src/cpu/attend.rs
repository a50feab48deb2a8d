//! The softmax attention of every head over the latent cache at one position, each cache row read once
//! per pass for all heads (the cache is the one operand that grows with the context).

use rayon::prelude::*;

use crate::config::ModelConfig;
use crate::math::{gemm_nt, weighted_rows};

/// Cache rows per span of [`attend_heads`]: at least [`SPAN_MIN`], and few enough spans that their
/// partials stay at most [`MAX_SPANS`]. A function of the row count alone, so the values never depend on
/// how many threads run the spans.
fn span_len(rows: usize) -> usize {
    rows.div_ceil(MAX_SPANS).max(SPAN_MIN)
}

const SPAN_MIN: usize = 128;
const MAX_SPANS: usize = 64;

/// What [`attend_heads`] reads and writes: every head's query in the latent space, the attended latents,
/// and the per-span work buffers.
pub(super) struct Attend {
    /// `n_head` rows of `[q_abs | q_pe]` (a cache row's width): each head's absorbed query
    /// `W_UK[h]ᵀ·q_nope` and its roped `q_pe`, the vector a cache row `[c | k_pe]` is scored against.
    q: Vec<f32>,
    /// `n_head × kv_lora`: each head's attended latent `Σ_t softmax_t · c_t`.
    pub o_lat: Vec<f32>,
    /// Span-major: span `s` holds `n_head × len(s)` scores, then their `exp(score − max)`.
    scores: Vec<f32>,
    /// Span-major: `n_head` maxima per span, then per head the maximum over all spans.
    maxima: Vec<f32>,
    /// Span-major: per head, the span's `Σ p·c_t` (`kv_lora`) then `Σ p`.
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
            partials: vec![0.0; MAX_SPANS * heads * (lora + 1)],
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
/// heads in two passes: the scores (an f32 product of the queries and the rows, [`gemm_nt`]) and their
/// per-span maxima; then, with the maximum over all spans, `p = exp(score − max)`, `Σ p` and `Σ p·c_t`
/// ([`weighted_rows`]). The spans' partials are added in span order and divided by the sum.
pub(super) fn attend_heads(c: &ModelConfig, cache: &[f32], pos: usize, att: &mut Attend) {
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
            gemm_nt(q, row, heads, &cache[t0 * row..], row, len, row, sc, len);
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
    let partials = &mut att.partials[..spans * heads * (lora + 1)];
    partials
        .par_chunks_mut(heads * (lora + 1))
        .zip(scores.par_chunks_mut(heads * span))
        .enumerate()
        .for_each(|(si, (part, sc))| {
            let (t0, len) = (si * span, sc.len() / heads);
            for (h, (acc, p)) in part
                .chunks_exact_mut(lora + 1)
                .zip(sc.chunks_exact_mut(len))
                .enumerate()
            {
                let mut sum = 0.0f32;
                for x in p.iter_mut() {
                    *x = (*x - max[h]).exp();
                    sum += *x;
                }
                weighted_rows(p, &cache[t0 * row..], row, &mut acc[..lora]);
                acc[lora] = sum;
            }
        });
    for (h, o) in att.o_lat.chunks_exact_mut(lora).enumerate() {
        o.fill(0.0);
        let mut sum = 0.0f32;
        for part in partials.chunks_exact(heads * (lora + 1)) {
            let acc = &part[h * (lora + 1)..(h + 1) * (lora + 1)];
            o.iter_mut().zip(&acc[..lora]).for_each(|(o, a)| *o += a);
            sum += acc[lora];
        }
        o.iter_mut().for_each(|o| *o /= sum);
    }
}
