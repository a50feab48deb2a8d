//! The fast CPU decoder. Weights stay quantized as zero-copy views into the GGUF memory map; each matrix-vector
//! product quantizes its input once to the activation format that llama.cpp's CPU backend pairs with the weight
//! type (q8_K for k-quants and IQ4_XS, q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, q8_1 for Q4_1/Q5_1, f32 for float weights),
//! and output rows run in parallel on rayon's pool. All buffers are allocated at load; decoding a token does not
//! allocate. The latent cache is f32 (`[c | k_pe]` per position), like the oracle's.

mod matmul;
mod weights;

use ingot_gguf::GgufFile;
use rayon::prelude::*;

use crate::config::ModelConfig;
use crate::decoder::{cache_len, check_step, Decoder};
use crate::error::Result;
use crate::math::{dot_f32, rmsnorm, rmsnorm_in_place, swiglu_in_place};
use crate::rope::apply_rope;
use crate::routing::{Router, RouterParams};
use matmul::Activation;
use weights::{CpuWeights, DenseFfn, Ffn, KeyUp, Layer, QueryProj};

/// Quantized-weight CPU decoder borrowing its weights from an open [`GgufFile`].
pub struct CpuBackend<'f> {
    config: ModelConfig,
    weights: CpuWeights<'f>,
    max_ctx: usize,
    /// Per layer, `max_ctx` rows of `[c (kv_lora) | k_pe (d_rope)]`, f32.
    cache: Vec<Vec<f32>>,
    filled: usize,
    router: Router,
    scratch: Scratch,
    logits: Vec<f32>,
}

/// Buffers of one head's attention, so heads can run in parallel without sharing.
struct HeadScratch {
    q_nope: Activation,
    q_abs: Vec<f32>,
    scores: Vec<f32>,
    o_lat: Activation,
    out: Vec<f32>,
    /// One dequantized `attn_kv_b` row (legacy layout only).
    kv_b_row: Vec<f32>,
}

/// Every per-token buffer, sized at load for the largest use.
struct Scratch {
    x: Vec<f32>,
    h: Vec<f32>,
    /// Activations of `n_embd`-wide inputs (normed residual).
    act_embd: Activation,
    q: Vec<f32>,
    q_lora: Vec<f32>,
    act_q_lora: Activation,
    kv: Vec<f32>,
    cos_sin: Vec<(f32, f32)>,
    heads: Vec<HeadScratch>,
    heads_out: Vec<f32>,
    act_heads: Activation,
    delta: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    act_ff: Activation,
    ffn_out: Vec<f32>,
    moe_acc: Vec<f32>,
    router_logits: Vec<f32>,
    chosen: Vec<(usize, f32)>,
}

impl Scratch {
    fn new(c: &ModelConfig, max_ctx: usize) -> Self {
        let ff = c.ff_dense.max(c.ff_shared()).max(c.ff_expert);
        let head = || HeadScratch {
            q_nope: Activation::new(c.d_nope),
            q_abs: vec![0.0; c.kv_lora],
            scores: vec![0.0; max_ctx],
            o_lat: Activation::new(c.kv_lora),
            out: vec![0.0; c.d_v],
            kv_b_row: vec![0.0; c.kv_lora],
        };
        Scratch {
            x: vec![0.0; c.n_embd],
            h: vec![0.0; c.n_embd],
            act_embd: Activation::new(c.n_embd),
            q: vec![0.0; c.n_head * c.d_qk()],
            q_lora: vec![0.0; c.q_lora.unwrap_or(0)],
            act_q_lora: Activation::new(c.q_lora.unwrap_or(0)),
            kv: vec![0.0; c.cache_row()],
            cos_sin: vec![(0.0, 0.0); c.d_rope / 2],
            heads: (0..c.n_head).map(|_| head()).collect(),
            heads_out: vec![0.0; c.n_head * c.d_v],
            act_heads: Activation::new(c.n_head * c.d_v),
            delta: vec![0.0; c.n_embd],
            gate: vec![0.0; ff],
            up: vec![0.0; ff],
            act_ff: Activation::new(ff),
            ffn_out: vec![0.0; c.n_embd],
            moe_acc: vec![0.0; c.n_embd],
            router_logits: vec![0.0; c.n_expert],
            chosen: vec![(0, 0.0); c.n_expert_used],
        }
    }
}

impl<'f> CpuBackend<'f> {
    /// Validates the file, maps every weight (checking that its type has a CPU dot product) and allocates the
    /// cache for `max_ctx` positions plus all scratch buffers.
    pub fn load(file: &'f GgufFile, max_ctx: usize) -> Result<Self> {
        let config = ModelConfig::from_gguf(file.header())?;
        let cache_len = cache_len(&config, max_ctx)?;
        let weights = CpuWeights::map(file, &config)?;
        Ok(CpuBackend {
            cache: vec![vec![0.0; cache_len]; config.n_layer],
            router: Router::new(RouterParams::from_config(&config)),
            scratch: Scratch::new(&config, max_ctx),
            logits: vec![0.0; config.vocab],
            weights,
            max_ctx,
            filled: 0,
            config,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn reset(&mut self) {
        self.filled = 0;
    }

    /// Decodes `token` at `pos` (at most the number of cached positions; smaller rewinds) and returns its logits.
    pub fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32]> {
        check_step(&self.config, self.max_ctx, self.filled, token, pos)?;
        let c = &self.config;
        let s = &mut self.scratch;
        self.weights
            .token_embd
            .dequantize_row(token as usize, &mut s.x)?;
        c.rope.fill_cos_sin(pos, &mut s.cos_sin);
        for (il, layer) in self.weights.layers.iter().enumerate() {
            attention(c, layer, &mut self.cache[il], pos, s)?;
            add(&mut s.x, &s.delta);
            rmsnorm(&s.x, &layer.ffn_norm, c.rms_eps, &mut s.h);
            s.act_embd.load(&s.h);
            match &layer.ffn {
                Ffn::Dense(f) => {
                    dense_ffn(f, s)?;
                    add(&mut s.x, &s.ffn_out);
                }
                Ffn::Moe(m) => {
                    m.router.matvec(&mut s.act_embd, &mut s.router_logits)?;
                    self.router
                        .route(&s.router_logits, m.bias.as_deref(), &mut s.chosen);
                    s.moe_acc.fill(0.0);
                    for i in 0..s.chosen.len() {
                        let (e, w) = s.chosen[i];
                        let expert = DenseFfn {
                            gate: m.gate_exps.slab(e, c.n_expert),
                            up: m.up_exps.slab(e, c.n_expert),
                            down: m.down_exps.slab(e, c.n_expert),
                        };
                        dense_ffn(&expert, s)?;
                        s.moe_acc
                            .iter_mut()
                            .zip(&s.ffn_out)
                            .for_each(|(a, v)| *a += w * v);
                    }
                    if let Some(shared) = &m.shared {
                        dense_ffn(shared, s)?;
                        add(&mut s.moe_acc, &s.ffn_out);
                    }
                    add(&mut s.x, &s.moe_acc);
                }
            }
        }
        rmsnorm_in_place(&mut s.x, &self.weights.output_norm, c.rms_eps);
        s.act_embd.load(&s.x);
        self.weights
            .output
            .matvec(&mut s.act_embd, &mut self.logits)?;
        self.filled = pos + 1;
        Ok(&self.logits)
    }

    /// Feeds `tokens` at `start_pos..` and returns the logits of every position.
    pub fn prefill(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<Vec<f32>>> {
        Decoder::prefill(self, tokens, start_pos)
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

/// Absorbed MLA attention (spec §5.1) for the token whose residual is `s.x`; leaves `W_o·o` in `s.delta`.
fn attention(
    c: &ModelConfig,
    layer: &Layer<'_>,
    cache: &mut [f32],
    pos: usize,
    s: &mut Scratch,
) -> Result<()> {
    let (lora, nope, row) = (c.kv_lora, c.d_nope, c.cache_row());
    rmsnorm(&s.x, &layer.attn_norm, c.rms_eps, &mut s.h);
    s.act_embd.load(&s.h);
    match &layer.q {
        QueryProj::Direct(w) => w.matvec(&mut s.act_embd, &mut s.q)?,
        QueryProj::LowRank { a, a_norm, b } => {
            a.matvec(&mut s.act_embd, &mut s.q_lora)?;
            rmsnorm_in_place(&mut s.q_lora, a_norm, c.rms_eps);
            s.act_q_lora.load(&s.q_lora);
            b.matvec(&mut s.act_q_lora, &mut s.q)?;
        }
    }
    layer.kv_a.matvec(&mut s.act_embd, &mut s.kv)?;
    rmsnorm_in_place(&mut s.kv[..lora], &layer.kv_a_norm, c.rms_eps);
    apply_rope(&mut s.kv[lora..], &s.cos_sin);
    cache[pos * row..(pos + 1) * row].copy_from_slice(&s.kv);
    for q_head in s.q.chunks_exact_mut(c.d_qk()) {
        apply_rope(&mut q_head[nope..], &s.cos_sin);
    }

    let cache: &[f32] = cache;
    let q = &s.q;
    s.heads
        .par_iter_mut()
        .enumerate()
        .try_for_each(|(hd, hs)| -> Result<()> {
            let q_head = &q[hd * c.d_qk()..(hd + 1) * c.d_qk()];
            let (q_nope, q_pe) = q_head.split_at(nope);
            match &layer.k_up {
                KeyUp::PerHead(k_b) => {
                    hs.q_nope.load(q_nope);
                    k_b[hd].matvec_serial(&mut hs.q_nope, &mut hs.q_abs)?;
                }
                KeyUp::Legacy(kv_b) => {
                    // q_abs = Σ_d q_nope[d] · kv_b[h·(d_nope+d_v) + d]: the transposed product, row by row.
                    hs.q_abs.fill(0.0);
                    let first = hd * (nope + c.d_v);
                    for (d, &qd) in q_nope.iter().enumerate() {
                        kv_b.dequantize_row(first + d, &mut hs.kv_b_row)?;
                        hs.q_abs
                            .iter_mut()
                            .zip(&hs.kv_b_row)
                            .for_each(|(a, w)| *a += qd * w);
                    }
                }
            }
            let scores = &mut hs.scores[..=pos];
            let mut max = f32::NEG_INFINITY;
            for (t, sc) in scores.iter_mut().enumerate() {
                let k = &cache[t * row..(t + 1) * row];
                *sc = c.kq_scale * (dot_f32(&hs.q_abs, &k[..lora]) + dot_f32(q_pe, &k[lora..]));
                max = max.max(*sc);
            }
            let mut sum = 0.0f32;
            for sc in scores.iter_mut() {
                *sc = (*sc - max).exp();
                sum += *sc;
            }
            let o_lat = hs.o_lat.f32_mut();
            o_lat.fill(0.0);
            for (t, &p) in scores.iter().enumerate() {
                let weight = p / sum;
                o_lat
                    .iter_mut()
                    .zip(&cache[t * row..t * row + lora])
                    .for_each(|(o, v)| *o += weight * v);
            }
            hs.o_lat.mark_loaded();
            layer.v_b[hd].matvec_serial(&mut hs.o_lat, &mut hs.out)
        })?;
    for (hd, hs) in s.heads.iter().enumerate() {
        s.heads_out[hd * c.d_v..(hd + 1) * c.d_v].copy_from_slice(&hs.out);
    }
    s.act_heads.load(&s.heads_out);
    layer.out.matvec(&mut s.act_heads, &mut s.delta)
}

/// `ffn_out = W_down·(silu(W_gate·h) ⊙ W_up·h)` with `h` already loaded in `act_embd`.
fn dense_ffn(f: &DenseFfn<'_>, s: &mut Scratch) -> Result<()> {
    let ff = f.gate.rows();
    f.gate.matvec(&mut s.act_embd, &mut s.gate[..ff])?;
    f.up.matvec(&mut s.act_embd, &mut s.up[..ff])?;
    swiglu_in_place(&mut s.gate[..ff], &s.up[..ff]);
    s.act_ff.load(&s.gate[..ff]);
    f.down.matvec(&mut s.act_ff, &mut s.ffn_out)
}

impl Decoder for CpuBackend<'_> {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32]> {
        CpuBackend::decode(self, token, pos)
    }

    fn reset(&mut self) {
        CpuBackend::reset(self)
    }
}
