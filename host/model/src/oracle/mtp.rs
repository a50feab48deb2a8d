//! The oracle's NextN/MTP drafter ([`crate::mtp`] states the math): the block's weights dequantized
//! to f32, its own f32 latent cache, and the decoder layer run by the same [`super::run_layer`] as
//! the main layers.

use ingot_gguf::GgufFile;

use super::weights::{load_layer, Layer, Matrix, Weights};
use crate::config::ModelConfig;
use crate::decoder::check_step;
use crate::dequant::tensor_f32;
use crate::error::{ModelError, Result};
use crate::math::rmsnorm;
use crate::mtp::{has, NextNNames};
use crate::routing::Router;

pub(super) struct Mtp {
    layer: Layer,
    /// `n_embd` rows of `2·n_embd`: `[embedding half | hidden half]`.
    eh_proj: Matrix,
    enorm: Vec<f32>,
    hnorm: Vec<f32>,
    shared_head_norm: Vec<f32>,
    /// `nextn.embed_tokens`, or `None` for the model's `token_embd`.
    embed: Option<Matrix>,
    /// `nextn.shared_head_head`, or `None` for the model's output matrix.
    head: Option<Matrix>,
    /// `max_ctx` rows of `[c | k_pe]`.
    cache: Vec<f32>,
    /// MTP positions held by the cache (`0..filled`).
    pub filled: usize,
    /// The last step's output after `shared_head_norm`.
    pub hidden: Vec<f32>,
    logits: Vec<f32>,
}

impl Mtp {
    pub fn load(file: &GgufFile, c: &ModelConfig, il: usize, cache_len: usize) -> Result<Self> {
        let names = NextNNames::new(il);
        let (d, v) = (c.n_embd, c.vocab);
        let optional = |name: &str| -> Result<Option<Matrix>> {
            if has(file, name) {
                Ok(Some(Matrix::from_vec(v, d, tensor_f32(file, name)?)))
            } else {
                Ok(None)
            }
        };
        Ok(Mtp {
            layer: load_layer(file, c, il)?,
            eh_proj: Matrix::from_vec(d, 2 * d, tensor_f32(file, &names.eh_proj)?),
            enorm: tensor_f32(file, &names.enorm)?,
            hnorm: tensor_f32(file, &names.hnorm)?,
            shared_head_norm: tensor_f32(file, &names.shared_head_norm)?,
            embed: optional(&names.embed_tokens)?,
            head: optional(&names.shared_head_head)?,
            cache: vec![0.0; cache_len],
            filled: 0,
            hidden: vec![0.0; d],
            logits: vec![0.0; v],
        })
    }

    /// One MTP position: see [`crate::Decoder::mtp_step`].
    pub fn step(
        &mut self,
        c: &ModelConfig,
        w: &Weights,
        router: &mut Router,
        max_ctx: usize,
        hidden: &[f32],
        token: u32,
        pos: usize,
    ) -> Result<()> {
        check_step(c, max_ctx, self.filled, token, pos)?;
        if hidden.len() != c.n_embd {
            return Err(ModelError::Unsupported(format!(
                "MTP hidden state of {} values, expected n_embd = {}",
                hidden.len(),
                c.n_embd
            )));
        }
        let d = c.n_embd;
        let embed = self.embed.as_ref().unwrap_or(&w.token_embd);
        let mut cat = vec![0.0; 2 * d];
        rmsnorm(
            embed.row(token as usize),
            &self.enorm,
            c.rms_eps,
            &mut cat[..d],
        );
        rmsnorm(hidden, &self.hnorm, c.rms_eps, &mut cat[d..]);
        let mut x = vec![0.0; d];
        self.eh_proj.matvec(&cat, &mut x);
        let mut cos_sin = vec![(0.0f32, 0.0f32); c.d_rope / 2];
        c.rope.fill_cos_sin(pos, &mut cos_sin);
        super::run_layer(
            c,
            &self.layer,
            router,
            &mut self.cache,
            pos,
            &mut x,
            &cos_sin,
        );
        rmsnorm(&x, &self.shared_head_norm, c.rms_eps, &mut self.hidden);
        self.filled = pos + 1;
        Ok(())
    }

    /// The head on the last step's normed output.
    pub fn logits(&mut self, w: &Weights) -> &[f32] {
        let head = self.head.as_ref().unwrap_or(&w.output);
        head.matvec(&self.hidden, &mut self.logits);
        &self.logits
    }
}
