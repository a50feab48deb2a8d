//! The CPU backend's NextN/MTP drafter ([`crate::mtp`] states the math): the block's quantized
//! weights viewed in the memory map, its own latent cache in the backend's cache format, and the
//! decoder layer run by the same [`super::layer_step`] as the main layers, on the backend's scratch
//! buffers.

use ingot_gguf::GgufFile;
use ingot_quant::cpu_dot::Isa;

use super::attention::LatentCache;
use super::batch;
use super::matmul::{Activation, QMatrix};
use super::weights::{map_layer, Layer};
use super::CpuBackend;
use crate::cache_type::CacheType;
use crate::config::ModelConfig;
use crate::decoder::check_step;
use crate::dequant::tensor_f32;
use crate::error::{ModelError, Result};
use crate::math::{rmsnorm, rmsnorm_in_place};
use crate::mtp::{has, NextNNames};

pub(super) struct CpuMtp<'f> {
    layer: Layer<'f>,
    /// `n_embd` rows of `2·n_embd`: `[embedding half | hidden half]`.
    eh_proj: QMatrix<'f>,
    enorm: Vec<f32>,
    hnorm: Vec<f32>,
    shared_head_norm: Vec<f32>,
    /// `nextn.embed_tokens`, or `None` for the model's `token_embd`.
    embed: Option<QMatrix<'f>>,
    /// `nextn.shared_head_head`, or `None` for the model's output matrix.
    head: Option<QMatrix<'f>>,
    pub cache: LatentCache,
    /// MTP positions held by the cache (`0..filled`).
    pub filled: usize,
    /// The last step's output after `shared_head_norm`.
    pub hidden: Vec<f32>,
    /// `[enorm(embedding) | hnorm(hidden)]` and its activation.
    cat: Vec<f32>,
    act_cat: Activation,
    act_hidden: Activation,
    logits: Vec<f32>,
}

impl<'f> CpuMtp<'f> {
    pub fn map(
        file: &'f GgufFile,
        c: &ModelConfig,
        il: usize,
        isa: Isa,
        cache_len: usize,
    ) -> Result<Self> {
        let names = NextNNames::new(il);
        let d = c.n_embd;
        let optional = |name: &str| -> Result<Option<QMatrix<'f>>> {
            if has(file, name) {
                Ok(Some(QMatrix::from_tensor(file, name, isa)?))
            } else {
                Ok(None)
            }
        };
        Ok(CpuMtp {
            layer: map_layer(file, c, il, isa)?,
            eh_proj: QMatrix::from_tensor(file, &names.eh_proj, isa)?,
            enorm: tensor_f32(file, &names.enorm)?,
            hnorm: tensor_f32(file, &names.hnorm)?,
            shared_head_norm: tensor_f32(file, &names.shared_head_norm)?,
            embed: optional(&names.embed_tokens)?,
            head: optional(&names.shared_head_head)?,
            cache: LatentCache::new(
                CacheType::default(),
                cache_len / c.cache_row(),
                c.cache_row(),
            ),
            filled: 0,
            hidden: vec![0.0; d],
            cat: vec![0.0; 2 * d],
            act_cat: Activation::new(2 * d),
            act_hidden: Activation::new(d),
            logits: vec![0.0; c.vocab],
        })
    }
}

impl CpuBackend<'_> {
    /// [`crate::Decoder::mtp_step`].
    pub(super) fn mtp_step_impl(&mut self, hidden: &[f32], token: u32, pos: usize) -> Result<()> {
        let m = self.mtp.as_mut().map_err(|e| e.clone())?;
        let c = &self.config;
        check_step(c, self.max_ctx, m.filled, token, pos)?;
        let d = c.n_embd;
        if hidden.len() != d {
            return Err(ModelError::Unsupported(format!(
                "MTP hidden state of {} values, expected n_embd = {d}",
                hidden.len()
            )));
        }
        let s = &mut self.scratch;
        let embed = m.embed.as_ref().unwrap_or(&self.weights.token_embd);
        let (e_half, h_half) = m.cat.split_at_mut(d);
        embed.dequantize_row(token as usize, e_half)?;
        rmsnorm_in_place(e_half, &m.enorm, c.rms_eps);
        rmsnorm(hidden, &m.hnorm, c.rms_eps, h_half);
        m.act_cat.load(&m.cat);
        batch::matvec(&m.eh_proj, &mut m.act_cat, &mut s.x)?;
        c.rope.fill_cos_sin(pos, &mut s.cos_sin);
        super::layer_step(c, &m.layer, &mut m.cache, pos, &mut self.router, s)?;
        rmsnorm(&s.x, &m.shared_head_norm, c.rms_eps, &mut m.hidden);
        m.filled = pos + 1;
        Ok(())
    }

    /// [`crate::Decoder::mtp_logits`].
    pub(super) fn mtp_logits_impl(&mut self) -> Result<&[f32]> {
        let m = self.mtp.as_mut().map_err(|e| e.clone())?;
        let head = m.head.as_ref().unwrap_or(&self.weights.output);
        m.act_hidden.load(&m.hidden);
        batch::matvec(head, &mut m.act_hidden, &mut m.logits)?;
        Ok(&m.logits)
    }
}
