//! IQ2_S: 256 weights in 32 groups of 8 on the 1024-point `IQ2S_GRID` (8 low index bits in
//! `qs`, 2 high ones in `qh`), 8 explicit sign bits per group, and 4-bit scales per 16 weights:
//! `y = d·(0.5 + s)·0.25·grid·sign` (ggml `dequantize_row_iq2_s`).
//!
//! [`quantize`] is ggml's `quantize_row_iq2_s_ref` (no importance matrix), byte for byte.
//! (`llama-quantize` itself refuses IQ2_S without an importance matrix; ggml's function
//! does not.)

use crate::codebook::{ggml_max, split_signs, super_block_scale, ScaleSearch, IQ2S};
use crate::iq2_xs::scale_halves;
use crate::iq2_xxs::signed_group;
use crate::round::f16_to_f32;
use bytemuck::Zeroable;
use ingot_abi::blocks::{BlockIq2S, QK_K};
use ingot_abi::iq_grids::IQ2S_GRID;

/// The signed levels `grid·sign` (|level| ≤ 43) of every weight, in order. Scales as IQ2_XS.
pub fn unpack(b: &BlockIq2S, q: &mut [i8; QK_K]) {
    for g in 0..QK_K / 8 {
        let (ib, l) = (g / 4, g % 4);
        let high = (usize::from(b.qh[ib]) >> (2 * l)) & 3;
        let grid = IQ2S_GRID[usize::from(b.qs[g]) | (high << 8)].to_le_bytes();
        signed_group(&grid, b.qs[QK_K / 8 + g], &mut q[8 * g..8 * g + 8]);
    }
}

/// Dequantize one super-block (`db·level`, equal to ggml's `db·grid·(±1)`).
pub fn dequantize(b: &BlockIq2S, y: &mut [f32; QK_K]) {
    let mut q = [0i8; QK_K];
    unpack(b, &mut q);
    scale_halves(f16_to_f32(b.d), &b.scales, &q, y);
}

/// ggml `GROUP_MAX_EPS_IQ2_S`: a group of 16 whose largest |x| is below this gets scale 0.
const GROUP_MAX_EPS: f32 = 1e-8;

/// Quantize one super-block as ggml's `quantize_row_iq2_s_impl(…, quant_weights = NULL)`:
/// weights `σ²/4 + x²` with `σ² = 2·Σx²/256`, scales per 16 weights, explicit signs.
pub fn quantize(x: &[f32; QK_K]) -> BlockIq2S {
    let search = ScaleSearch {
        steps: 9,
        step: 0.1,
        refine_all: false,
        start_on_grid: true,
    };
    let mut b = BlockIq2S::zeroed();
    let mut sumx2 = 0.0f32;
    for &v in x {
        sumx2 += v * v;
    }
    let sigma2 = 2.0 * sumx2 / QK_K as f32;
    let mut scales = [0.0f32; QK_K / 16];
    let mut max_scale = 0.0f32;
    for (ib, xb) in x.chunks_exact(16).enumerate() {
        let mut weight = [0.0f32; 16];
        let mut xval = [0.0f32; 16];
        let mut signs = [0u8; 2];
        for i in 0..16 {
            weight[i] = 0.25 * sigma2 + xb[i] * xb[i];
        }
        split_signs(xb, &mut xval, &mut signs);
        let max = ggml_max(xval);
        if max < GROUP_MAX_EPS {
            continue;
        }
        let fit = search.fit(&IQ2S, &xval, &weight, max);
        let mut scale = fit.scale;
        if scale < 0.0 {
            scale = -scale;
            signs = signs.map(|s| !s);
        }
        for (k, (&p, &s)) in fit.points.iter().zip(&signs).enumerate() {
            let g = 2 * ib + k;
            b.qs[g] = p as u8;
            b.qh[g / 4] |= ((p >> 8) as u8) << (2 * (g % 4));
            b.qs[QK_K / 8 + g] = s;
        }
        scales[ib] = scale;
        max_scale = ggml_max([max_scale, scale]);
    }
    if let Some((d, codes)) = super_block_scale(&scales, max_scale, 0.9875) {
        b.d = d;
        for (pair, s) in b.scales.iter_mut().enumerate() {
            *s = codes[2 * pair] | codes[2 * pair + 1] << 4;
        }
    }
    b
}
