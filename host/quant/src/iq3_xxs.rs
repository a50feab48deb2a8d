//! IQ3_XXS: 256 weights in 8 sub-blocks of 32 on the 256-point `IQ3XXS_GRID` (4 values per
//! point), 7 stored sign bits per 8 weights and a 4-bit scale per sub-block:
//! `y = d·(0.5 + s)·0.5·grid·sign` (ggml `dequantize_row_iq3_xxs`).
//!
//! [`quantize`] is ggml's `quantize_row_iq3_xxs_ref` (no importance matrix), byte for byte.

use crate::codebook::{ggml_max, split_signs, super_block_scale, ScaleSearch, IQ3XXS};
use crate::iq2_xxs::signed_group;
use crate::round::f16_to_f32;
use bytemuck::Zeroable;
use ingot_abi::blocks::{BlockIq3Xxs, QK_K};
use ingot_abi::iq_grids::{IQ3XXS_GRID, KSIGNS_IQ2XS};

/// The signed levels `grid·sign` (|level| ≤ 62) of every weight, in order, and the 4-bit scale
/// of each sub-block of 32.
pub fn unpack(b: &BlockIq3Xxs, q: &mut [i8; QK_K]) -> [u8; QK_K / 32] {
    let mut scales = [0u8; QK_K / 32];
    for (ib, s) in scales.iter_mut().enumerate() {
        let at = QK_K / 4 + 4 * ib;
        let w = u32::from_le_bytes([b.qs[at], b.qs[at + 1], b.qs[at + 2], b.qs[at + 3]]);
        *s = (w >> 28) as u8;
        for l in 0..4 {
            let k = 8 * ib + 2 * l;
            let g1 = IQ3XXS_GRID[usize::from(b.qs[k])].to_le_bytes();
            let g2 = IQ3XXS_GRID[usize::from(b.qs[k + 1])].to_le_bytes();
            let grid = [g1[0], g1[1], g1[2], g1[3], g2[0], g2[1], g2[2], g2[3]];
            let sign = KSIGNS_IQ2XS[((w >> (7 * l)) & 127) as usize];
            signed_group(&grid, sign, &mut q[32 * ib + 8 * l..32 * ib + 8 * l + 8]);
        }
    }
    scales
}

/// Dequantize one super-block (`db·level`, equal to ggml's `db·grid·(±1)`).
pub fn dequantize(b: &BlockIq3Xxs, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    let mut q = [0i8; QK_K];
    let scales = unpack(b, &mut q);
    for (ib, &s) in scales.iter().enumerate() {
        let db = d * (0.5 + f32::from(s)) * 0.5;
        for k in 32 * ib..32 * ib + 32 {
            y[k] = db * f32::from(q[k]);
        }
    }
}

/// ggml `GROUP_MAX_EPS_IQ3_XXS`: a sub-block whose largest |x| is below this gets scale 0.
const GROUP_MAX_EPS: f32 = 1e-8;

/// Quantize one super-block as ggml's `quantize_row_iq3_xxs_impl(256, …, quant_weights =
/// NULL)`: weights `x²`; each group of 8 must carry an even number of negative signs (the
/// stored 7 bits imply the 8th), so an odd group flips the sign of its least-weighted value.
pub fn quantize(x: &[f32; QK_K]) -> BlockIq3Xxs {
    let search = ScaleSearch {
        steps: 15,
        step: 0.2,
        refine_all: false,
        start_on_grid: true,
    };
    let mut b = BlockIq3Xxs::zeroed();
    let mut words = [0u32; QK_K / 32];
    let mut scales = [0.0f32; QK_K / 32];
    let mut max_scale = 0.0f32;
    for (ib, xb) in x.chunks_exact(32).enumerate() {
        let mut weight = [0.0f32; 32];
        let mut xval = [0.0f32; 32];
        for i in 0..32 {
            weight[i] = xb[i] * xb[i];
        }
        let mut bits = [0u8; 4];
        split_signs(xb, &mut xval, &mut bits);
        let mut signs = [0u32; 4];
        for (k, sign) in signs.iter_mut().enumerate() {
            let mut s = u32::from(bits[k]);
            if s.count_ones() % 2 == 1 {
                let mut imin = 8 * k;
                let mut min = weight[imin] * xb[imin] * xb[imin];
                for i in 8 * k + 1..8 * k + 8 {
                    let ax = weight[i] * xb[i] * xb[i];
                    if ax < min {
                        min = ax;
                        imin = i;
                    }
                }
                xval[imin] = -xval[imin];
                s ^= 1 << (imin - 8 * k);
            }
            *sign = s & 127;
        }
        let max = ggml_max(xval);
        if max < GROUP_MAX_EPS {
            continue;
        }
        let fit = search.fit(&IQ3XXS, &xval, &weight, max);
        let mut scale = fit.scale;
        if scale < 0.0 {
            scale = -scale;
            signs = signs.map(|s| !s & 127);
        }
        for k in 0..8 {
            b.qs[8 * ib + k] = fit.points[k] as u8;
        }
        words[ib] = signs[0] | signs[1] << 7 | signs[2] << 14 | signs[3] << 21;
        scales[ib] = scale;
        max_scale = ggml_max([max_scale, scale]);
    }
    let Some((d, codes)) = super_block_scale(&scales, max_scale, 1.0125) else {
        return BlockIq3Xxs::zeroed();
    };
    b.d = d;
    for (ib, w) in words.iter().enumerate() {
        let w = w | u32::from(codes[ib]) << 28;
        b.qs[QK_K / 4 + 4 * ib..QK_K / 4 + 4 * ib + 4].copy_from_slice(&w.to_le_bytes());
    }
    b
}
