//! Rotary position embedding as llama.cpp applies it to deepseek2: NORM mode (adjacent pairs),
//! YaRN frequency blending between the correction dims (docs/decode-math.md#rope), and the
//! attention-score scale that YaRN implies (docs/decode-math.md#logit-scale).
//!
//! Every number here is derived from the GGUF hyper-parameters; nothing is specific to one model
//! size.

/// `rope.scaling.type`: how positions beyond the original context are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeScalingType {
    /// No frequency scaling (`freq_scale` is forced to 1).
    None,
    /// Positions are multiplied by `freq_scale` (llama.cpp's default type when the key is absent).
    Linear,
    /// YaRN: per-pair blend of interpolated and extrapolated frequencies, plus an attention
    /// temperature.
    Yarn,
}

/// The hyper-parameters that define rotary embedding and the attention scale.
#[derive(Debug, Clone, PartialEq)]
pub struct RopeParams {
    /// Rotated dimensions per head (`rope.dimension_count`); even.
    pub n_rot: usize,
    /// `rope.freq_base` (theta).
    pub freq_base: f32,
    pub scaling: RopeScalingType,
    /// `1 / rope.scaling.factor` (1 when the factor is absent or 0).
    pub freq_scale: f32,
    /// `rope.scaling.original_context_length` (defaults to the training context); only enters the
    /// correction dims.
    pub n_ctx_orig: usize,
    /// YaRN ramp bounds in rotations; llama.cpp never reads them for deepseek2 and uses its
    /// defaults 32 and 1.
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// `rope.scaling.attn_factor` (default 1): multiplies the rotary magnitude and the attention
    /// temperature.
    pub attn_factor: f32,
    /// `rope.scaling.yarn_log_multiplier` exactly as stored (= 0.1 · HF `mscale_all_dim`; 0 when
    /// absent).
    pub yarn_log_mul: f32,
}

impl RopeParams {
    /// `ext_factor` of ggml's rope: 1 for YaRN, 0 otherwise (llama.cpp's `cparams.yarn_ext_factor`
    /// rule).
    pub fn ext_factor(&self) -> f32 {
        match self.scaling {
            RopeScalingType::Yarn => 1.0,
            RopeScalingType::None | RopeScalingType::Linear => 0.0,
        }
    }

    /// YaRN correction dims `[low, high]` as pair indices (ggml `ggml_rope_yarn_corr_dims`,
    /// computed in f32 like ggml so that floor/ceil land on the same integers).
    pub fn corr_dims(&self) -> [f32; 2] {
        let n_dims = self.n_rot as f32;
        let corr_dim = |n_rotations: f32| {
            n_dims * (self.n_ctx_orig as f32 / (n_rotations * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * self.freq_base.ln())
        };
        let low = corr_dim(self.beta_fast).floor().max(0.0);
        let high = corr_dim(self.beta_slow).ceil().min(n_dims - 1.0);
        [low, high]
    }

    /// Magnitude that multiplies cos and sin. llama.cpp's deepseek2 graph passes `attn_factor / (1
    /// + 0.1·ln(1/s))` to ggml, which multiplies by `1 + 0.1·ln(1/s)` again when YaRN is active, so
    /// the net factor is `attn_factor`.
    pub fn rope_mscale(&self) -> f32 {
        self.attn_factor
    }

    /// YaRN attention temperature `attn_factor · (1 + yarn_log_mul · ln(1/freq_scale))` (1.2608038
    /// for V2-Lite).
    pub fn attn_mscale(&self) -> f32 {
        let ln_factor = (1.0f64 / self.freq_scale as f64).ln();
        (self.attn_factor as f64 * (1.0 + self.yarn_log_mul as f64 * ln_factor)) as f32
    }

    /// Scale of the attention logits: `mscale² / sqrt(d_qk)` with `d_qk = d_nope + d_rope` (the
    /// per-head query width of the un-absorbed attention, not the 576-wide absorbed row).
    pub fn kq_scale(&self, d_qk: usize) -> f32 {
        let m = self.attn_mscale() as f64;
        (m * m / (d_qk as f64).sqrt()) as f32
    }

    /// Rotation angle (radians) of pair `i` at position `pos`, in f64.
    pub fn theta(&self, pos: usize, i: usize) -> f64 {
        let extrap = pos as f64 * (self.freq_base as f64).powf(-2.0 * i as f64 / self.n_rot as f64);
        let interp = self.freq_scale as f64 * extrap;
        let ext = self.ext_factor() as f64;
        if ext == 0.0 {
            return interp;
        }
        let [low, high] = self.corr_dims();
        let ramp =
            1.0 - ((i as f64 - low as f64) / (high as f64 - low as f64).max(0.001)).clamp(0.0, 1.0);
        let mix = ramp * ext;
        interp * (1.0 - mix) + extrap * mix
    }

    /// Fills `out[i] = (mscale·cos θ_i, mscale·sin θ_i)` for the `n_rot / 2` pairs at `pos`.
    pub fn fill_cos_sin(&self, pos: usize, out: &mut [(f32, f32)]) {
        debug_assert_eq!(out.len(), self.n_rot / 2);
        let m = self.rope_mscale() as f64;
        for (i, slot) in out.iter_mut().enumerate() {
            let (s, c) = self.theta(pos, i).sin_cos();
            *slot = ((m * c) as f32, (m * s) as f32);
        }
    }
}

/// Rotates adjacent pairs `(x[2i], x[2i+1])` of `x` (length `2·cos_sin.len()`) by the precomputed
/// angles.
pub fn apply_rope(x: &mut [f32], cos_sin: &[(f32, f32)]) {
    debug_assert_eq!(x.len(), 2 * cos_sin.len());
    for (pair, &(c, s)) in x.chunks_exact_mut(2).zip(cos_sin) {
        let (a, b) = (pair[0], pair[1]);
        pair[0] = a * c - b * s;
        pair[1] = a * s + b * c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DeepSeek-V2-Lite's rope hyper-parameters, written out from its GGUF keys
    /// (docs/deepseek2-model.md#gguf-keys).
    fn v2_lite() -> RopeParams {
        RopeParams {
            n_rot: 64,
            freq_base: 10000.0,
            scaling: RopeScalingType::Yarn,
            freq_scale: 1.0 / 40.0,
            n_ctx_orig: 4096,
            beta_fast: 32.0,
            beta_slow: 1.0,
            attn_factor: 1.0,
            yarn_log_mul: 0.0707,
        }
    }

    #[test]
    fn v2_lite_constants_match_spec() {
        let p = v2_lite();
        // Quoted to 8 significant digits in docs/decode-math.md#logit-scale (and the corr dims
        // in docs/decode-math.md#rope); f32 rounding of the inputs moves them by < 1e-7.
        assert!(
            (p.attn_mscale() - 1.260_803_8).abs() < 2e-7,
            "{}",
            p.attn_mscale()
        );
        assert!(
            (p.kq_scale(192) - 0.114_721_39).abs() < 2e-8,
            "{}",
            p.kq_scale(192)
        );
        assert_eq!(p.corr_dims(), [10.0, 23.0]);
        assert_eq!(p.rope_mscale(), 1.0);
    }

    #[test]
    fn yarn_blends_between_corr_dims() {
        let p = v2_lite();
        let pos = 7;
        let extrap = |i: usize| pos as f64 * 10000f64.powf(-2.0 * i as f64 / 64.0);
        // Pairs at or below `low` are unscaled, pairs at or above `high` are divided by the factor.
        for i in 0..=10 {
            assert!((p.theta(pos, i) - extrap(i)).abs() < 1e-12);
        }
        let scale = p.freq_scale as f64;
        for i in 23..32 {
            assert!((p.theta(pos, i) - extrap(i) * scale).abs() < 1e-12);
        }
        // Pair 16 sits 6/13 of the way up the ramp: mix = 1 - 6/13.
        let mix = 1.0 - 6.0 / 13.0;
        let want = extrap(16) * scale * (1.0 - mix) + extrap(16) * mix;
        assert!((p.theta(pos, 16) - want).abs() < 1e-12);
    }

    #[test]
    fn no_scaling_means_plain_rope() {
        let p = RopeParams {
            scaling: RopeScalingType::None,
            freq_scale: 1.0,
            yarn_log_mul: 0.0,
            ..v2_lite()
        };
        assert_eq!(p.attn_mscale(), 1.0);
        assert!((p.kq_scale(192) - 1.0 / 192f32.sqrt()).abs() < 1e-8);
        assert!((p.theta(3, 5) - 3.0 * 10000f64.powf(-10.0 / 64.0)).abs() < 1e-12);
    }

    #[test]
    fn rotation_of_adjacent_pairs() {
        let mut x = [1.0, 0.0, 0.0, 2.0];
        let half_turn = std::f32::consts::FRAC_PI_2;
        let cs = [(half_turn.cos(), half_turn.sin()), (1.0, 0.0)];
        apply_rope(&mut x, &cs);
        // (1,0) rotated by 90 degrees is (0,1); the second pair has angle 0 and is unchanged.
        assert!(x[0].abs() < 1e-7 && (x[1] - 1.0).abs() < 1e-7);
        assert_eq!(&x[2..], &[0.0, 2.0]);
    }
}
