//! How far a quantized-activation backend may be from the f32/f64 oracle.
//!
//! The GPU kernels quantize every gemv input to q8_1 (blocks of 32 values scaled by their
//! largest magnitude to 127 levels: a rounding error of at most `amax/254` per value), keep the
//! latent cache in f16, and sum in f32 in a different order. The oracle keeps f32 activations
//! and f64 sums. The resulting distance was measured on the tiny synthetic models (3 layers,
//! logit standard deviation σ ≈ 1, 10 positions) against a reference for what activation
//! quantization alone costs, the project's CPU backend (q8_0/q8_K activations like llama.cpp):
//!
//! | vs oracle | max abs logit difference | residual relative error per layer |
//! |---|---|---|
//! | CPU backend (llama.cpp-style quantization) | 0.09 – 0.17 | — |
//! | this plan in ptx-sim | 0.12 – 0.29 | 0.02 – 0.09 |
//!
//! The plan quantizes three more vectors per layer than llama.cpp's matmuls do (q_nope, the
//! latent attention output, the head outputs), which accounts for the larger spread. The bands
//! below are about 1.7× the largest measured values; a real defect (a wrong offset, a missing
//! term, a stale buffer) moves the residual by order 1, far outside them. A top-1 disagreement
//! whose oracle margin (top-1 minus top-2) is below the logit band is a near-tie: within the
//! backend's precision either token is correct.
//!
//! Routing has near-ties too: where the oracle's last chosen expert beats the next by less than
//! the backend's error in the selection scores, the backend may pick the other, and that layer's
//! residual moves by a whole expert's share (~0.2 relative on tiny V3). Margins are in router-logit
//! units (`ingot_model::routing::Router::margin`: logit gaps under softmax, score gaps over the
//! sigmoid's steepest slope otherwise). On golden tiny-v3 a router logit moves by up to ~0.06, so
//! [`Band::route_margin`] is 0.08 (a sigmoid score gap of 0.02). A step whose first out-of-band
//! layer is a MoE layer with a reference margin below it is a routing near-tie, not a failure;
//! [`MAX_EXCUSED_FRACTION`] caps the steps a run may excuse so.

/// The tolerances of a gate run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Band {
    /// Largest allowed `max |Δlogit|`, as a multiple of the oracle logits' standard deviation.
    pub logit_sigmas: f32,
    /// Floor of the logit band in absolute units (for nearly flat logits).
    pub logit_floor: f32,
    /// Largest allowed `‖x_backend − x_oracle‖ / ‖x_oracle‖` of a layer's residual stream.
    pub hidden_rel: f32,
    /// Routing margins (router-logit units, `ingot_model::routing::Router::margin`) below
    /// which a MoE layer's expert choice is a near-tie.
    pub route_margin: f32,
}

/// The largest share of a run's steps that routing near-ties may excuse: a router or a cache
/// that is wrong moves routing at many steps, and excusing them one by one would pass it.
pub const MAX_EXCUSED_FRACTION: f64 = 0.25;

/// Whether `excused` of `steps` stays within [`MAX_EXCUSED_FRACTION`].
pub fn excuses_within_cap(excused: usize, steps: usize) -> bool {
    excused as f64 <= MAX_EXCUSED_FRACTION * steps as f64
}

impl Default for Band {
    fn default() -> Self {
        Band {
            logit_sigmas: 0.5,
            logit_floor: 0.5,
            hidden_rel: 0.15,
            route_margin: 0.08,
        }
    }
}

impl Band {
    /// The absolute logit band for oracle logits `logits`.
    pub fn logit_band(&self, logits: &[f32]) -> f32 {
        let n = logits.len().max(1) as f64;
        let mean = logits.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = logits
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        (self.logit_sigmas as f64 * var.sqrt()).max(self.logit_floor as f64) as f32
    }
}
