//! The reference decoder: weights dequantized to f32 at load, f32 activations, f64 for every
//! reduction that decides accuracy (dot products, norm sums, softmax, attention accumulation). It
//! follows docs/decode-math.md literally: absorbed MLA attention over an f32 latent cache
//! `[c | k_pe]`, YaRN rope, MoE routing, shared experts.
//!
//! It is meant for small models and for checking faster backends; it is not fast.

mod mtp;
mod weights;

use ingot_gguf::GgufFile;

use crate::config::ModelConfig;
use crate::decoder::{check_step, Decoder};
use crate::error::Result;
use crate::math::{rmsnorm, rmsnorm_in_place, softmax_f64, swiglu_in_place};
use crate::rope::apply_rope;
use crate::routing::{Router, RouterParams};
use weights::{DenseFfn, Ffn, Layer, QueryProj, Weights};

/// Per-layer residual stream of one decoded token, for comparing backends layer by layer.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeTrace {
    /// The token's embedding (the residual stream entering layer 0).
    pub embedding: Vec<f32>,
    /// `layers[il]` = the residual stream after layer `il` (attention and FFN added).
    pub layers: Vec<Vec<f32>>,
    /// `route_margins[il]`: the routing margin of MoE layer `il`
    /// ([`crate::routing::Router::margin`]), `None` for dense layers; empty when the decoder does
    /// not report it.
    pub route_margins: Vec<Option<f32>>,
    pub logits: Vec<f32>,
}

/// The f32 reference decoder.
pub struct Oracle {
    config: ModelConfig,
    weights: Weights,
    max_ctx: usize,
    /// Per layer, `max_ctx` rows of `[c (kv_lora) | k_pe (d_rope)]`.
    cache: Vec<Vec<f32>>,
    /// Number of positions held by the cache (positions `0..filled`).
    filled: usize,
    router: Router,
    logits: Vec<f32>,
    /// The last decode's final hidden state (after `output_norm`).
    hidden: Vec<f32>,
    /// The NextN/MTP drafter, or why the model has none.
    mtp: std::result::Result<mtp::Mtp, crate::error::ModelError>,
}

impl Oracle {
    /// Validates the file, dequantizes all weights and allocates an f32 latent cache of `max_ctx`
    /// positions.
    pub fn load(file: &GgufFile, max_ctx: usize) -> Result<Self> {
        let config = ModelConfig::from_gguf(file.header())?;
        let cache_len = crate::decoder::cache_len(&config, max_ctx)?;
        let weights = Weights::load(file, &config)?;
        let mtp = match crate::mtp::drafter_block(file, &config) {
            Ok(il) => Ok(mtp::Mtp::load(file, &config, il, cache_len)?),
            Err(why) => Err(why),
        };
        Ok(Oracle {
            hidden: vec![0.0; config.n_embd],
            mtp,
            cache: vec![vec![0.0; cache_len]; config.n_layer],
            router: Router::new(RouterParams::from_config(&config)),
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

    /// Forgets every cached position.
    pub fn reset(&mut self) {
        self.filled = 0;
        if let Ok(m) = &mut self.mtp {
            m.filled = 0;
        }
    }

    /// Decodes `token` at `pos` (at most the number of cached positions; smaller rewinds) and
    /// returns its logits.
    pub fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32]> {
        self.forward(token, pos, None)?;
        Ok(&self.logits)
    }

    /// Feeds `tokens` at `start_pos..` and returns the logits of every position.
    /// Position-by-position decoding is exactly a causal batch pass.
    pub fn prefill(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<Vec<f32>>> {
        tokens
            .iter()
            .enumerate()
            .map(|(i, &t)| self.decode(t, start_pos + i).map(<[f32]>::to_vec))
            .collect()
    }

    /// [`Oracle::decode`] that also returns the residual stream after every layer.
    pub fn decode_with_trace(&mut self, token: u32, pos: usize) -> Result<DecodeTrace> {
        let mut trace = DecodeTrace {
            embedding: Vec::new(),
            layers: Vec::with_capacity(self.config.n_layer),
            route_margins: Vec::with_capacity(self.config.n_layer),
            logits: Vec::new(),
        };
        self.forward(token, pos, Some(&mut trace))?;
        trace.logits = self.logits.clone();
        Ok(trace)
    }

    fn forward(
        &mut self,
        token: u32,
        pos: usize,
        mut trace: Option<&mut DecodeTrace>,
    ) -> Result<()> {
        check_step(&self.config, self.max_ctx, self.filled, token, pos)?;
        let c = &self.config;
        let mut x = self.weights.token_embd.row(token as usize).to_vec();
        if let Some(t) = trace.as_deref_mut() {
            t.embedding = x.clone();
        }
        let mut cos_sin = vec![(0.0f32, 0.0f32); c.d_rope / 2];
        c.rope.fill_cos_sin(pos, &mut cos_sin);
        for (il, layer) in self.weights.layers.iter().enumerate() {
            let margin = run_layer(
                c,
                layer,
                &mut self.router,
                &mut self.cache[il],
                pos,
                &mut x,
                &cos_sin,
            );
            if let Some(t) = trace.as_deref_mut() {
                t.layers.push(x.clone());
                t.route_margins.push(margin);
            }
        }
        rmsnorm_in_place(&mut x, &self.weights.output_norm, c.rms_eps);
        self.weights.output.matvec(&x, &mut self.logits);
        self.hidden = x;
        self.filled = pos + 1;
        Ok(())
    }
}

/// One decoder layer (attention then FFN, each added to the residual `x`) at `pos`, writing its
/// cache row. Returns the routing margin of a MoE layer ([`Router::margin`]), `None` for a dense
/// one.
pub(super) fn run_layer(
    c: &ModelConfig,
    layer: &Layer,
    router: &mut Router,
    cache: &mut [f32],
    pos: usize,
    x: &mut [f32],
    cos_sin: &[(f32, f32)],
) -> Option<f32> {
    let attn = attention(c, layer, cache, pos, x, cos_sin);
    add(x, &attn);
    let mut h = vec![0.0; c.n_embd];
    rmsnorm(x, &layer.ffn_norm, c.rms_eps, &mut h);
    let ffn = match &layer.ffn {
        Ffn::Dense(d) => dense_ffn(d, &h),
        Ffn::Moe(m) => {
            let mut logits = vec![0.0; c.n_expert];
            m.router.matvec(&h, &mut logits);
            let mut chosen = vec![(0, 0.0); c.n_expert_used];
            router.route(&logits, m.bias.as_deref(), &mut chosen);
            let mut sum = vec![0.0f64; c.n_embd];
            for &(e, w) in &chosen {
                for (s, v) in sum.iter_mut().zip(dense_ffn(&m.experts[e], &h)) {
                    *s += w as f64 * v as f64;
                }
            }
            if let Some(shared) = &m.shared {
                for (s, v) in sum.iter_mut().zip(dense_ffn(shared, &h)) {
                    *s += v as f64;
                }
            }
            sum.into_iter().map(|v| v as f32).collect()
        }
    };
    add(x, &ffn);
    match &layer.ffn {
        Ffn::Dense(_) => None,
        Ffn::Moe(_) => Some(router.margin()),
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

/// Absorbed MLA attention for one token (docs/decode-math.md#mla-attention); writes this
/// position's cache row and returns `W_o · o`.
fn attention(
    c: &ModelConfig,
    layer: &Layer,
    cache: &mut [f32],
    pos: usize,
    x: &[f32],
    cos_sin: &[(f32, f32)],
) -> Vec<f32> {
    let a = &layer.attn;
    let (lora, nope, rope, row) = (c.kv_lora, c.d_nope, c.d_rope, c.cache_row());
    let mut h = vec![0.0; c.n_embd];
    rmsnorm(x, &a.norm, c.rms_eps, &mut h);

    let mut q = vec![0.0; c.n_head * c.d_qk()];
    match &a.q {
        QueryProj::Direct(w) => w.matvec(&h, &mut q),
        QueryProj::LowRank { a: wa, a_norm, b } => {
            let mut ql = vec![0.0; wa.rows];
            wa.matvec(&h, &mut ql);
            rmsnorm_in_place(&mut ql, a_norm, c.rms_eps);
            b.matvec(&ql, &mut q);
        }
    }

    let cache_row = &mut cache[pos * row..(pos + 1) * row];
    a.kv_a.matvec(&h, cache_row);
    rmsnorm_in_place(&mut cache_row[..lora], &a.kv_a_norm, c.rms_eps);
    apply_rope(&mut cache_row[lora..], cos_sin);

    let kq_scale = c.kq_scale_at(pos) as f64;
    let mut heads_out = vec![0.0f32; c.n_head * c.d_v];
    let mut scores = vec![0.0f64; pos + 1];
    let mut q_abs = vec![0.0f32; lora];
    for (hd, q_head) in q.chunks_exact_mut(c.d_qk()).enumerate() {
        let (q_nope, q_pe) = q_head.split_at_mut(nope);
        apply_rope(q_pe, cos_sin);
        a.k_b[hd].matvec(q_nope, &mut q_abs);
        for (t, s) in scores.iter_mut().enumerate() {
            let k = &cache[t * row..(t + 1) * row];
            let dot = crate::math::dot_f64(&q_abs, &k[..lora])
                + crate::math::dot_f64(q_pe, &k[lora..lora + rope]);
            *s = kq_scale * dot;
        }
        softmax_f64(&mut scores);
        let mut o_lat = vec![0.0f64; lora];
        for (t, &p) in scores.iter().enumerate() {
            for (o, &v) in o_lat.iter_mut().zip(&cache[t * row..t * row + lora]) {
                *o += p * v as f64;
            }
        }
        let o_lat: Vec<f32> = o_lat.into_iter().map(|v| v as f32).collect();
        a.v_b[hd].matvec(&o_lat, &mut heads_out[hd * c.d_v..(hd + 1) * c.d_v]);
    }
    let mut out = vec![0.0; c.n_embd];
    a.out.matvec(&heads_out, &mut out);
    out
}

/// `W_down · (silu(W_gate·h) ⊙ W_up·h)`.
fn dense_ffn(f: &DenseFfn, h: &[f32]) -> Vec<f32> {
    let mut gate = vec![0.0; f.gate.rows];
    let mut up = vec![0.0; f.up.rows];
    f.gate.matvec(h, &mut gate);
    f.up.matvec(h, &mut up);
    swiglu_in_place(&mut gate, &up);
    let mut out = vec![0.0; f.down.rows];
    f.down.matvec(&gate, &mut out);
    out
}

impl Decoder for Oracle {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32]> {
        Oracle::decode(self, token, pos)
    }

    fn reset(&mut self) {
        Oracle::reset(self)
    }

    fn hidden(&self) -> Option<&[f32]> {
        Some(&self.hidden)
    }

    fn mtp_ready(&self) -> Result<()> {
        self.mtp.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    fn mtp_step(&mut self, hidden: &[f32], token: u32, pos: usize) -> Result<()> {
        let m = self.mtp.as_mut().map_err(|e| e.clone())?;
        m.step(
            &self.config,
            &self.weights,
            &mut self.router,
            self.max_ctx,
            hidden,
            token,
            pos,
        )
    }

    fn mtp_logits(&mut self) -> Result<&[f32]> {
        let m = self.mtp.as_mut().map_err(|e| e.clone())?;
        Ok(m.logits(&self.weights))
    }

    fn mtp_hidden(&self) -> Option<&[f32]> {
        self.mtp.as_ref().ok().map(|m| m.hidden.as_slice())
    }
}
