//! The fast CPU decoder. Weights stay quantized as zero-copy views into the GGUF memory map; each
//! matrix-vector product quantizes its input once to the activation format that llama.cpp's CPU
//! backend pairs with the weight type (q8_K for k-quants and IQ4_XS, q8_0 for
//! Q4_0/Q5_0/Q8_0/IQ4_NL, q8_1 for Q4_1/Q5_1, f32 for float weights), and output rows run in
//! parallel on rayon's pool, products of the same stage batched into one parallel pass. Dot
//! products run on AVX2 kernels where the CPU has them (bit-identical to the portable ones). All
//! buffers are allocated at load; decoding a token does not allocate. The latent cache is f32 (`[c
//! | k_pe]` per position), like the oracle's; with [`CacheType::Q8_0`] its rows hold q8_0's values.

mod attend;
#[cfg(test)]
mod attend_tests;
mod attention;
mod awake;
mod batch;
#[cfg(test)]
mod benches;
mod decompressed;
mod ffn;
mod latent;
mod matmul;
mod mtp;
mod prefill;
#[cfg(test)]
mod tests;
mod weights;

pub use decompressed::{
    MlaForm, DECOMPRESS_AT_ANY_DEPTH, DECOMPRESS_DEPTH_PER_TOKEN, DECOMPRESS_FROM,
};
use ingot_gguf::GgufFile;
pub use ingot_quant::cpu_dot::Isa;
pub use prefill::DEFAULT_UBATCH;

use crate::cache_type::CacheType;
use crate::config::ModelConfig;
use crate::decoder::{cache_len, check_step, Decoder};
use crate::error::{ModelError, Result};
use crate::math::{rmsnorm, rmsnorm_in_place};
use crate::routing::{Router, RouterParams};
use attend::Attend;
use attention::{HeadScratch, LatentCache};
use batch::Product;
use matmul::Activation;
use weights::{CpuWeights, DenseFfn};

/// Quantized-weight CPU decoder borrowing its weights from an open [`GgufFile`].
pub struct CpuBackend<'f> {
    config: ModelConfig,
    weights: CpuWeights<'f>,
    max_ctx: usize,
    /// Per layer, `max_ctx` rows of `[c (kv_lora) | k_pe (d_rope)]`.
    cache: Vec<LatentCache>,
    filled: usize,
    router: Router,
    scratch: Scratch<'f>,
    logits: Vec<f32>,
    /// The last step's routing: per MoE decoding layer, `n_expert_used` `(expert, weight)` in
    /// routing order.
    routing: Vec<(u32, f32)>,
    /// The last step's router margin per MoE decoding layer ([`Router::margin`], router-logit
    /// units).
    route_margins: Vec<f32>,
    /// The attention form of prefill chunks.
    mla_form: MlaForm,
    /// The last decode's final hidden state (after `output_norm`).
    hidden: Vec<f32>,
    /// The NextN/MTP drafter, or why the model has none.
    mtp: std::result::Result<mtp::CpuMtp<'f>, ModelError>,
}

/// Every per-token buffer, sized at load for the largest use.
struct Scratch<'f> {
    x: Vec<f32>,
    h: Vec<f32>,
    /// Activations of `n_embd`-wide inputs (normed residual).
    act_embd: Activation,
    /// `[q or q_lora | c | k_pe]`: the first projections of attention.
    proj: Vec<f32>,
    q: Vec<f32>,
    act_q_lora: Activation,
    cos_sin: Vec<(f32, f32)>,
    heads: Vec<HeadScratch>,
    attend: Attend,
    heads_out: Vec<f32>,
    act_heads: Activation,
    delta: Vec<f32>,
    /// The FFNs of the current layer (chosen experts, then shared), and the products of one batch.
    ffns: Vec<DenseFfn<'f>>,
    products: Vec<Product<'f>>,
    /// `[gate_0 | up_0 | gate_1 | up_1 | …]` of the current layer's FFNs.
    gate_up: Vec<f32>,
    /// One SwiGLU output per FFN, the inputs of the down projections.
    act_ff: Vec<Activation>,
    /// `[down_0 | down_1 | …]`, `n_embd` each.
    down: Vec<f32>,
    moe_acc: Vec<f32>,
    router_logits: Vec<f32>,
    chosen: Vec<(usize, f32)>,
}

impl Scratch<'_> {
    fn new(c: &ModelConfig) -> Self {
        let n_ffns = ffn::max_ffns(c);
        Scratch {
            x: vec![0.0; c.n_embd],
            h: vec![0.0; c.n_embd],
            act_embd: Activation::new(c.n_embd),
            proj: vec![0.0; attention::proj_width(c)],
            q: vec![0.0; c.n_head * c.d_qk()],
            act_q_lora: Activation::new(c.q_lora.unwrap_or(0)),
            cos_sin: vec![(0.0, 0.0); c.d_rope / 2],
            heads: (0..c.n_head).map(|_| HeadScratch::new(c)).collect(),
            attend: Attend::new(c),
            heads_out: vec![0.0; c.n_head * c.d_v],
            act_heads: Activation::new(c.n_head * c.d_v),
            delta: vec![0.0; c.n_embd],
            ffns: Vec::with_capacity(n_ffns),
            products: Vec::with_capacity(2 * n_ffns),
            gate_up: vec![0.0; ffn::gate_up_len(c)],
            act_ff: (0..n_ffns)
                .map(|_| Activation::new(ffn::max_ff(c)))
                .collect(),
            down: vec![0.0; n_ffns * c.n_embd],
            moe_acc: vec![0.0; c.n_embd],
            router_logits: vec![0.0; c.n_expert],
            chosen: vec![(0, 0.0); c.n_expert_used],
        }
    }
}

impl<'f> CpuBackend<'f> {
    /// Validates the file, maps every weight (checking that its type has a CPU dot product) and
    /// allocates the cache for `max_ctx` positions plus all scratch buffers. Dot products use the
    /// fastest instruction set of this CPU.
    pub fn load(file: &'f GgufFile, max_ctx: usize) -> Result<Self> {
        Self::load_with_isa(file, max_ctx, Isa::detect())
    }

    /// [`CpuBackend::load`] with the dot products on `isa` (results are bit-identical on every
    /// instruction set; this exists to measure them). Refused if this CPU lacks `isa`.
    pub fn load_with_isa(file: &'f GgufFile, max_ctx: usize, isa: Isa) -> Result<Self> {
        if !isa.is_available() {
            return Err(ModelError::Unsupported(format!(
                "{isa:?} dot products: this CPU lacks the instruction set"
            )));
        }
        let config = ModelConfig::from_gguf(file.header())?;
        let cache_len = cache_len(&config, max_ctx)?;
        let weights = CpuWeights::map(file, &config, isa)?;
        let mtp = match crate::mtp::drafter_block(file, &config) {
            Ok(il) => Ok(mtp::CpuMtp::map(file, &config, il, isa, cache_len)?),
            Err(why) => Err(why),
        };
        // Every weight page mapped now rather than on the first token that reads it.
        file.populate();
        Ok(CpuBackend {
            hidden: vec![0.0; config.n_embd],
            mtp,
            cache: (0..config.n_layer)
                .map(|_| LatentCache::new(CacheType::default(), max_ctx, config.cache_row()))
                .collect(),
            router: Router::new(RouterParams::from_config(&config)),
            scratch: Scratch::new(&config),
            logits: vec![0.0; config.vocab],
            routing: vec![(0, 0.0); config.n_moe_layers() * config.n_expert_used],
            route_margins: vec![f32::INFINITY; config.n_moe_layers()],
            weights,
            max_ctx,
            filled: 0,
            mla_form: MlaForm::default(),
            config,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn reset(&mut self) {
        self.filled = 0;
        if let Ok(m) = &mut self.mtp {
            m.filled = 0;
        }
    }

    /// The last decode step's router margin per MoE layer, in the order of
    /// [`Decoder::routing`]'s layers ([`Router::margin`]: how far that layer's choice was from
    /// another, in router-logit units).
    pub fn route_margins(&self) -> &[f32] {
        &self.route_margins
    }

    /// Stores the rows written from now on as `ty` holds them (default [`CacheType::F16`]: f32 rows
    /// on the CPU), and forgets every cached position (rows of two formats are never mixed).
    pub fn set_cache_type(&mut self, ty: CacheType) {
        let (len, width) = (self.max_ctx, self.config.cache_row());
        for layer in &mut self.cache {
            let skew = layer.write_skew;
            *layer = LatentCache::new(ty, len, width);
            layer.write_skew = skew;
        }
        if let Ok(m) = &mut self.mtp {
            m.cache = LatentCache::new(ty, len, width);
        }
        self.reset();
    }

    /// Fault injection for mutation tests (`gates/tests/cache_gate.rs`): a cache narrower than f16
    /// (q8_0) writes each row `steps` positions late, so a step reads a row not yet written. Never
    /// set outside tests; 0 (the default) is the correct writer.
    #[doc(hidden)]
    pub fn inject_cache_write_skew(&mut self, steps: usize) {
        for layer in &mut self.cache {
            layer.write_skew = steps;
        }
    }

    /// How prefill chunks compute attention (default [`MlaForm::Auto`]); the decode step is always
    /// absorbed.
    pub fn set_mla_form(&mut self, form: MlaForm) {
        self.mla_form = form;
    }

    /// Decodes `token` at `pos` (at most the number of cached positions; smaller rewinds) and
    /// returns its logits.
    pub fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32]> {
        check_step(&self.config, self.max_ctx, self.filled, token, pos)?;
        awake::run(|| self.decode_checked(token, pos))?;
        Ok(&self.logits)
    }

    /// [`CpuBackend::decode`] after its checks, on rayon's pool ([`awake::run`]).
    fn decode_checked(&mut self, token: u32, pos: usize) -> Result<()> {
        let c = &self.config;
        let s = &mut self.scratch;
        self.weights
            .token_embd
            .dequantize_row(token as usize, &mut s.x)?;
        c.rope.fill_cos_sin(pos, &mut s.cos_sin);
        for (il, layer) in self.weights.layers.iter().enumerate() {
            layer_step(c, layer, &mut self.cache[il], pos, &mut self.router, s)?;
            if c.is_moe_layer(il) {
                let k = c.n_expert_used;
                let slot = (il - c.n_dense_lead) * k;
                for (r, &(e, w)) in self.routing[slot..slot + k].iter_mut().zip(&s.chosen) {
                    *r = (e as u32, w);
                }
                self.route_margins[il - c.n_dense_lead] = self.router.margin();
            }
        }
        rmsnorm_in_place(&mut s.x, &self.weights.output_norm, c.rms_eps);
        s.act_embd.load(&s.x);
        batch::matvec(&self.weights.output, &mut s.act_embd, &mut self.logits)?;
        self.hidden.copy_from_slice(&s.x);
        self.filled = pos + 1;
        Ok(())
    }

    /// Feeds `tokens` at `start_pos..` and returns the logits of every position.
    pub fn prefill(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<Vec<f32>>> {
        Decoder::prefill(self, tokens, start_pos)
    }
}

/// One decoder layer on the residual `s.x` at `pos` (attention then FFN, each added to it), writing
/// the layer's cache row; the routing is left in `s.chosen` and `router`.
fn layer_step<'f>(
    c: &ModelConfig,
    layer: &weights::Layer<'f>,
    cache: &mut LatentCache,
    pos: usize,
    router: &mut Router,
    s: &mut Scratch<'f>,
) -> Result<()> {
    attention::attention(c, layer, cache, pos, s)?;
    ffn::add(&mut s.x, &s.delta);
    rmsnorm(&s.x, &layer.ffn_norm, c.rms_eps, &mut s.h);
    s.act_embd.load(&s.h);
    ffn::ffn(c, &layer.ffn, router, s)
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

    fn prefill_last(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>> {
        self.prefill_chunked(tokens, start_pos, prefill::DEFAULT_UBATCH)
    }

    fn routing(&self) -> Option<&[(u32, f32)]> {
        Some(&self.routing)
    }

    fn hidden(&self) -> Option<&[f32]> {
        Some(&self.hidden)
    }

    fn forward_rows(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        rows: crate::decoder::Rows,
    ) -> Result<crate::decoder::Forward> {
        self.forward_chunked(tokens, start_pos, rows)
    }

    fn mtp_ready(&self) -> Result<()> {
        self.mtp.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    fn mtp_step(&mut self, hidden: &[f32], token: u32, pos: usize) -> Result<()> {
        self.mtp_step_impl(hidden, token, pos)
    }

    fn mtp_logits(&mut self) -> Result<&[f32]> {
        self.mtp_logits_impl()
    }

    fn mtp_hidden(&self) -> Option<&[f32]> {
        self.mtp.as_ref().ok().map(|m| m.hidden.as_slice())
    }
}
