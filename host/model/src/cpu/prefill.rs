//! Chunked prefill of the CPU backend: the prompt runs through each layer as a chunk of tokens, so
//! every weight matrix is read once per chunk instead of once per token ([`batch::matmul`]), and
//! routed experts run once per chunk on the tokens that chose them.
//!
//! Attention takes the absorbed or the decompressed form ([`MlaForm`], by chunk length).
//!
//! Invariant: with the absorbed form the results are the stepwise path's bit for bit: every value
//! is the same dot product, norm, rope and attention ([`attention::token_heads`]) on the same
//! inputs, and each token's expert outputs are summed in its routing order, then the shared
//! experts, as [`super::ffn`] does. Only the order in which tokens are processed differs, and
//! tokens interact only through the cache, whose rows are all written before any token of the chunk
//! attends. So a chunked prefill leaves the same cache and the same last logits as feeding the
//! tokens one by one (`tests.rs` checks both exactly). The decompressed form differs from it in
//! rounding only.

use rayon::prelude::*;

use super::attention::{self, LatentCache};
use super::batch;
use super::decompressed::{self, MlaForm};
use super::ffn::add;
use super::matmul::Activation;
use super::weights::{DenseFfn, Ffn, Layer, MoeFfn, QueryProj};
use super::CpuBackend;
use crate::config::ModelConfig;
use crate::decoder::{check_span, Forward, Rows};
use crate::error::Result;
use crate::math::{rmsnorm, rmsnorm_in_place, swiglu_in_place};

/// Most tokens per chunk (llama.cpp's default `-ub`): bounds the chunk's buffers (about 60 KiB per
/// token at V2-Lite's dimensions) while amortizing each weight read over many tokens.
pub const DEFAULT_UBATCH: usize = 512;

/// The activations of one chunk, token-major.
struct Chunk {
    n: usize,
    /// Residual stream, `n × n_embd`.
    x: Vec<f32>,
    /// Normed residual, `n × n_embd`, and its activations (one per token).
    h: Vec<f32>,
    act: Vec<Activation>,
    cos_sin: Vec<Vec<(f32, f32)>>,
}

impl<'f> CpuBackend<'f> {
    /// Feeds `tokens` at `start_pos..` in chunks of up to `ubatch` tokens and returns the last
    /// position's logits; the cache ends as after feeding them one by one with
    /// [`CpuBackend::decode`].
    pub fn prefill_chunked(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        ubatch: usize,
    ) -> Result<Vec<f32>> {
        self.check_chunk(tokens, start_pos)?;
        super::awake::run(|| self.prefill_checked(tokens, start_pos, ubatch.max(1)))
    }

    /// [`CpuBackend::prefill_chunked`] after its checks, on rayon's pool ([`super::awake::run`]).
    fn prefill_checked(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        ubatch: usize,
    ) -> Result<Vec<f32>> {
        let mut logits = Vec::new();
        for (i, chunk) in tokens.chunks(ubatch).enumerate() {
            let pos = start_pos + i * ubatch;
            let last = (i + 1) * ubatch >= tokens.len();
            let want = if last { Want::LAST } else { Want::NONE };
            let out = self.chunk(chunk, pos, self.mla_form, want)?;
            if last {
                logits = out.logits;
            }
        }
        Ok(logits)
    }

    /// [`crate::Decoder::forward_rows`]: [`Rows::All`] runs one chunk in the absorbed form (the
    /// decode step's values bit for bit); [`Rows::Last`] chunks as
    /// [`CpuBackend::prefill_chunked`] does.
    pub(super) fn forward_chunked(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        rows: Rows,
    ) -> Result<Forward> {
        self.check_chunk(tokens, start_pos)?;
        // On one of rayon's workers, the others awake: a chunk makes dozens of small parallel
        // calls, and each one made from outside the pool waits on a cross-thread handoff (measured:
        // most of a 2-token verify step of the trained model).
        super::awake::run(|| self.forward_checked(tokens, start_pos, rows))
    }

    fn forward_checked(&mut self, tokens: &[u32], start_pos: usize, rows: Rows) -> Result<Forward> {
        if rows == Rows::Argmax {
            let all = self.forward_checked(tokens, start_pos, Rows::All)?;
            return Ok(all.into_argmax(self.config.vocab));
        }
        let (form, ubatch, want) = match rows {
            Rows::All | Rows::Argmax => (MlaForm::Absorbed, tokens.len(), Want::ALL),
            Rows::Last => (self.mla_form, DEFAULT_UBATCH, Want::HIDDEN),
        };
        let mut out = Forward {
            n: tokens.len(),
            hidden: Vec::with_capacity(tokens.len() * self.config.n_embd),
            logits: Vec::new(),
            argmax: Vec::new(),
        };
        for (i, chunk) in tokens.chunks(ubatch).enumerate() {
            let last = (i + 1) * ubatch >= tokens.len();
            let want = if last && rows == Rows::Last {
                Want {
                    hidden: true,
                    logits: Some(LogitRows::Last),
                }
            } else {
                want
            };
            let part = self.chunk(chunk, start_pos + i * ubatch, form, want)?;
            out.hidden.extend_from_slice(&part.hidden);
            out.logits.extend_from_slice(&part.logits);
        }
        Ok(out)
    }

    /// Every position checked before the cache is touched: a refused prompt changes nothing.
    fn check_chunk(&self, tokens: &[u32], start_pos: usize) -> Result<()> {
        if tokens.is_empty() {
            return Err(crate::error::ModelError::EmptyPrompt);
        }
        check_span(&self.config, self.max_ctx, self.filled, tokens, start_pos)
    }

    /// One chunk at `start..start + tokens.len()`, attention in `form`; returns what `want` asks
    /// for.
    fn chunk(
        &mut self,
        tokens: &[u32],
        start: usize,
        form: MlaForm,
        want: Want,
    ) -> Result<ChunkOut> {
        let c = &self.config;
        let n = tokens.len();
        let mut out = ChunkOut {
            hidden: Vec::new(),
            logits: Vec::new(),
        };
        if n == 0 {
            return Ok(out);
        }
        let d = c.n_embd;
        let mut ch = Chunk {
            n,
            x: vec![0.0; n * d],
            h: vec![0.0; n * d],
            act: (0..n).map(|_| Activation::new(d)).collect(),
            cos_sin: (0..n)
                .map(|i| {
                    let mut cs = vec![(0.0, 0.0); c.d_rope / 2];
                    c.rope.fill_cos_sin(start + i, &mut cs);
                    cs
                })
                .collect(),
        };
        for (x, &t) in ch.x.chunks_exact_mut(d).zip(tokens) {
            self.weights.token_embd.dequantize_row(t as usize, x)?;
        }
        for (il, layer) in self.weights.layers.iter().enumerate() {
            attention_chunk(c, layer, &mut self.cache[il], start, form, &mut ch)?;
            normed(&mut ch, &layer.ffn_norm, c.rms_eps);
            match &layer.ffn {
                Ffn::Dense(f) => dense_chunk(c, f, &mut ch)?,
                Ffn::Moe(m) => moe_chunk(c, m, &mut self.router, &mut ch)?,
            }
        }
        self.filled = start + n;
        // The final norm and lm_head of the rows asked for, as the decode step computes them.
        let first = match want.logits {
            Some(LogitRows::All) => 0,
            Some(LogitRows::Last) if !want.hidden => n - 1,
            _ if want.hidden => 0,
            _ => return Ok(out),
        };
        let mut acts: Vec<Activation> = ch.x[first * d..]
            .chunks_exact_mut(d)
            .map(|x| {
                rmsnorm_in_place(x, &self.weights.output_norm, c.rms_eps);
                let mut act = Activation::new(d);
                act.load(x);
                act
            })
            .collect();
        if want.hidden {
            out.hidden = ch.x;
        }
        match want.logits {
            None => {}
            Some(LogitRows::All) => {
                let all: Vec<usize> = (0..acts.len()).collect();
                out.logits = vec![0.0; acts.len() * c.vocab];
                batch::matmul(&self.weights.output, &mut acts, &all, &mut out.logits)?;
            }
            Some(LogitRows::Last) => {
                out.logits = vec![0.0; c.vocab];
                let last = acts.last_mut().expect("a chunk has a token");
                batch::matvec(&self.weights.output, last, &mut out.logits)?;
            }
        }
        Ok(out)
    }
}

/// Which logits a chunk computes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LogitRows {
    All,
    Last,
}

/// What a chunk returns: every position's final hidden state, and logits of some positions.
#[derive(Clone, Copy)]
struct Want {
    hidden: bool,
    logits: Option<LogitRows>,
}

impl Want {
    const NONE: Want = Want {
        hidden: false,
        logits: None,
    };
    /// The last position's logits.
    const LAST: Want = Want {
        hidden: false,
        logits: Some(LogitRows::Last),
    };
    const HIDDEN: Want = Want {
        hidden: true,
        logits: None,
    };
    const ALL: Want = Want {
        hidden: true,
        logits: Some(LogitRows::All),
    };
}

struct ChunkOut {
    /// `n × n_embd` when asked, else empty.
    hidden: Vec<f32>,
    logits: Vec<f32>,
}

/// `h[t] = rmsnorm(x[t])`, loaded into each token's activation.
fn normed(ch: &mut Chunk, gain: &[f32], eps: f32) {
    let d = gain.len();
    ch.x.par_chunks_exact(d)
        .zip(ch.h.par_chunks_exact_mut(d))
        .zip(ch.act.par_iter_mut())
        .for_each(|((x, h), act)| {
            rmsnorm(x, gain, eps, h);
            act.load(h);
        });
}

fn attention_chunk(
    c: &ModelConfig,
    layer: &Layer<'_>,
    cache: &mut LatentCache,
    start: usize,
    form: MlaForm,
    ch: &mut Chunk,
) -> Result<()> {
    let n = ch.n;
    let all: Vec<usize> = (0..n).collect();
    normed(ch, &layer.attn_norm, c.rms_eps);
    let first = match &layer.q {
        QueryProj::Direct(w) => w,
        QueryProj::LowRank { a, .. } => a,
    };
    let (q_width, row) = (first.rows(), c.cache_row());
    let mut q_part = vec![0.0; n * q_width];
    let mut kv = vec![0.0; n * row];
    batch::matmul(first, &mut ch.act, &all, &mut q_part)?;
    batch::matmul(&layer.kv_a, &mut ch.act, &all, &mut kv)?;
    let q_len = c.n_head * c.d_qk();
    let mut q = match &layer.q {
        QueryProj::Direct(_) => q_part,
        QueryProj::LowRank { a_norm, b, .. } => {
            let mut acts: Vec<Activation> = q_part
                .chunks_exact_mut(q_width)
                .map(|qp| {
                    rmsnorm_in_place(qp, a_norm, c.rms_eps);
                    let mut a = Activation::new(q_width);
                    a.load(qp);
                    a
                })
                .collect();
            let mut q = vec![0.0; n * q_len];
            batch::matmul(b, &mut acts, &all, &mut q)?;
            q
        }
    };
    for (i, (kv, qt)) in kv
        .chunks_exact_mut(row)
        .zip(q.chunks_exact_mut(q_len))
        .enumerate()
    {
        attention::store_latent(c, layer, kv, &ch.cos_sin[i], cache, start + i);
        attention::rope_query(c, qt, &ch.cos_sin[i]);
    }

    // Every (token, head) pair attends to the cache rows up to its own position: rows of later
    // tokens of the chunk are written but never read by it, as in the stepwise path where they do
    // not exist yet.
    let cache = cache.latents();
    let (heads, dv) = (c.n_head, c.d_v);
    let mut heads_out = vec![0.0; n * heads * dv];
    if form.decompresses(n, start) {
        decompressed::heads_chunk(
            c,
            layer,
            &cache.to_f32(start + n),
            start,
            &q,
            &mut heads_out,
        )?;
    } else {
        attention::heads_chunk(c, layer, cache, start, &q, &mut heads_out)?;
    }
    let mut acts: Vec<Activation> = heads_out
        .chunks_exact(heads * dv)
        .map(|o| {
            let mut a = Activation::new(heads * dv);
            a.load(o);
            a
        })
        .collect();
    let mut delta = vec![0.0; n * c.n_embd];
    batch::matmul(&layer.out, &mut acts, &all, &mut delta)?;
    add(&mut ch.x, &delta);
    Ok(())
}

/// SwiGLU FFN `f` on the chunk's tokens `tokens` (normed activations in `act`); returns the down
/// outputs, token-major in the order of `tokens`.
fn swiglu_chunk(f: &DenseFfn<'_>, act: &mut [Activation], tokens: &[usize]) -> Result<Vec<f32>> {
    batch::prepare(&f.gate, act, tokens)?;
    batch::prepare(&f.up, act, tokens)?;
    let inputs: Vec<&Activation> = tokens.iter().map(|&t| &act[t]).collect();
    swiglu_prepared(f, &inputs, true)
}

/// [`swiglu_chunk`] on inputs already prepared for `f`'s gate and up; each product may split over
/// rayon's pool when `may_split` ([`batch::matmul_prepared`]).
fn swiglu_prepared(f: &DenseFfn<'_>, inputs: &[&Activation], may_split: bool) -> Result<Vec<f32>> {
    let (ff, d, n) = (f.gate.rows(), f.down.rows(), inputs.len());
    let mut gate = vec![0.0; n * ff];
    let mut up = vec![0.0; n * ff];
    batch::matmul_prepared(&f.gate, inputs, &mut gate, may_split)?;
    batch::matmul_prepared(&f.up, inputs, &mut up, may_split)?;
    let mut mids: Vec<Activation> = gate
        .chunks_exact_mut(ff)
        .zip(up.chunks_exact_mut(ff))
        .map(|(g, u)| {
            swiglu_in_place(g, u);
            let mut a = Activation::new(ff);
            a.load(g);
            a
        })
        .collect();
    let own: Vec<usize> = (0..n).collect();
    batch::prepare(&f.down, &mut mids, &own)?;
    let mids: Vec<&Activation> = mids.iter().collect();
    let mut down = vec![0.0; n * d];
    batch::matmul_prepared(&f.down, &mids, &mut down, may_split)?;
    Ok(down)
}

fn dense_chunk(c: &ModelConfig, f: &DenseFfn<'_>, ch: &mut Chunk) -> Result<()> {
    let all: Vec<usize> = (0..ch.n).collect();
    let down = swiglu_chunk(f, &mut ch.act, &all)?;
    debug_assert_eq!(down.len(), ch.n * c.n_embd);
    add(&mut ch.x, &down);
    Ok(())
}

fn moe_chunk(
    c: &ModelConfig,
    m: &MoeFfn<'_>,
    router: &mut crate::routing::Router,
    ch: &mut Chunk,
) -> Result<()> {
    let (n, d, k) = (ch.n, c.n_embd, c.n_expert_used);
    let all: Vec<usize> = (0..n).collect();
    let mut logits = vec![0.0; n * c.n_expert];
    batch::matmul(&m.router, &mut ch.act, &all, &mut logits)?;
    let mut chosen = vec![(0usize, 0.0f32); n * k];
    for (l, ch_t) in logits
        .chunks_exact(c.n_expert)
        .zip(chosen.chunks_exact_mut(k))
    {
        router.route(l, m.bias.as_deref(), ch_t);
    }
    // Per expert, the (token, slot) pairs that chose it; each expert runs once on its tokens.
    let mut users: Vec<Vec<(usize, usize)>> = vec![Vec::new(); c.n_expert];
    for (j, &(e, _)) in chosen.iter().enumerate() {
        users[e].push((j / k, j % k));
    }
    // Routed experts run in parallel, each whole on one thread (its three products back to back, no
    // fork/join inside): a chunk's experts see a few tokens each, too little work to split their
    // rows. Every expert's gate and up read the same activations, quantized once here before the
    // fan-out.
    let (gate0, up0) = m.gate_up_exps.expert(0, c.n_expert);
    batch::prepare(&gate0, &mut ch.act, &all)?;
    batch::prepare(&up0, &mut ch.act, &all)?;
    let mut jobs: Vec<usize> = (0..c.n_expert).filter(|&e| !users[e].is_empty()).collect();
    // Largest first, so the last jobs to start are the short ones (longest-processing-time order).
    jobs.sort_by_key(|&e| std::cmp::Reverse(users[e].len()));
    let acts: &[Activation] = &ch.act;
    let run = |&e: &usize| -> Result<Vec<f32>> {
        let (gate, up) = m.gate_up_exps.expert(e, c.n_expert);
        let f = DenseFfn {
            gate,
            up,
            down: m.down_exps.slab(e, c.n_expert),
        };
        let inputs: Vec<&Activation> = users[e].iter().map(|&(t, _)| &acts[t]).collect();
        swiglu_prepared(&f, &inputs, false)
    };
    let downs: Vec<Vec<f32>> = if rayon::current_num_threads() > 1 {
        jobs.par_iter().map(run).collect::<Result<_>>()?
    } else {
        jobs.iter().map(run).collect::<Result<_>>()?
    };
    // `outs[(t·k + slot)·d..]`: expert output of token t's slot, summed below in routing order.
    let mut outs = vec![0.0; n * k * d];
    for (&e, down) in jobs.iter().zip(&downs) {
        for (&(t, slot), y) in users[e].iter().zip(down.chunks_exact(d)) {
            outs[(t * k + slot) * d..(t * k + slot + 1) * d].copy_from_slice(y);
        }
    }
    let shared = match &m.shared {
        Some(f) => Some(swiglu_chunk(f, &mut ch.act, &all)?),
        None => None,
    };
    // Per token (in parallel: tokens are independent here): Σ_slot w·expert output in routing
    // order, then the shared experts, then into the residual, as the stepwise path sums them.
    ch.x.par_chunks_mut(d)
        .zip(chosen.par_chunks(k))
        .zip(outs.par_chunks(k * d))
        .enumerate()
        .for_each(|(t, ((x, chosen), outs))| {
            let mut acc = vec![0.0f32; d];
            for (&(_, w), y) in chosen.iter().zip(outs.chunks_exact(d)) {
                acc.iter_mut().zip(y).for_each(|(a, v)| *a += w * v);
            }
            if let Some(s) = &shared {
                add(&mut acc, &s[t * d..(t + 1) * d]);
            }
            add(x, &acc);
        });
    Ok(())
}
