//! IQ3_S: 256 weights on the 512-point `IQ3S_GRID` (4 odd values 1..=15 per point; 8 low index
//! bits in `qs`, the 9th in `qh`), one explicit sign bit per weight and a 4-bit scale per
//! sub-block of 32: `y = d·(1 + 2s)·grid·sign` (ggml `dequantize_row_iq3_s`).
//!
//! [`quantize`] is ggml's `quantize_row_iq3_s_ref` (no importance matrix), byte for byte.

use crate::codebook::{ggml_max, split_signs, super_block_scale, ScaleSearch, IQ3S};
use crate::round::f16_to_f32;
use bytemuck::Zeroable;
use ingot_abi::blocks::{BlockIq3S, QK_K};
use ingot_abi::iq_grids::IQ3S_GRID;

/// The signed levels `grid·sign` (|level| ≤ 15) of every weight, in order. Sub-block `ib`'s
/// scale is `b.scales[ib / 2] >> 4·(ib % 2) & 15`.
pub fn unpack(b: &BlockIq3S, q: &mut [i8; QK_K]) {
    for (k, &low) in b.qs.iter().enumerate() {
        let high = (usize::from(b.qh[k / 8]) >> (k % 8)) & 1;
        let grid = IQ3S_GRID[usize::from(low) | (high << 8)].to_le_bytes();
        for (j, &g) in grid.iter().enumerate() {
            let e = 4 * k + j;
            let g = g as i8;
            q[e] = if b.signs[e / 8] & (1 << (e % 8)) != 0 {
                -g
            } else {
                g
            };
        }
    }
}

/// The 4-bit scale of sub-block `ib ∈ 0..8`.
#[inline(always)]
pub fn scale(b: &BlockIq3S, ib: usize) -> u8 {
    (b.scales[(ib / 2) % (QK_K / 64)] >> (4 * (ib % 2))) & 0xF
}

/// Dequantize one super-block (`db·level`, equal to ggml's `db·grid·(±1)`).
pub fn dequantize(b: &BlockIq3S, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    let mut q = [0i8; QK_K];
    unpack(b, &mut q);
    for ib in 0..QK_K / 32 {
        let db = d * f32::from(1 + 2 * scale(b, ib));
        for k in 32 * ib..32 * ib + 32 {
            y[k] = db * f32::from(q[k]);
        }
    }
}

/// Quantize one super-block as ggml's `quantize_row_iq3_s_impl(32, …, quant_weights = NULL)`:
/// weights `x²`, explicit signs, all groups re-rounded at the winning scale.
///
/// ggml's quirk kept for byte identity: an all-zero sub-block does not advance the write
/// position of the `qs` and `signs` bytes (its `qh` bits and scale stay in place), so the
/// following sub-blocks' bytes land one slot early and the last slots stay zero.
pub fn quantize(x: &[f32; QK_K]) -> BlockIq3S {
    let search = ScaleSearch {
        steps: 9,
        step: 0.2,
        refine_all: true,
        start_on_grid: false,
    };
    let mut b = BlockIq3S::zeroed();
    let mut scales = [0.0f32; QK_K / 32];
    let mut max_scale = 0.0f32;
    let (mut qs_at, mut signs_at) = (0, 0);
    for (ib, xb) in x.chunks_exact(32).enumerate() {
        let mut weight = [0.0f32; 32];
        let mut xval = [0.0f32; 32];
        let mut signs = [0u8; 4];
        for i in 0..32 {
            weight[i] = xb[i] * xb[i];
        }
        split_signs(xb, &mut xval, &mut signs);
        let max = ggml_max(xval);
        if max == 0.0 {
            continue;
        }
        let fit = search.fit(&IQ3S, &xval, &weight, max);
        let mut scale = fit.scale;
        if scale < 0.0 {
            scale = -scale;
            signs = signs.map(|s| !s);
        }
        for (k, &p) in fit.points.iter().enumerate() {
            let g = 8 * ib + k;
            b.qs[qs_at + k] = p as u8;
            b.qh[g / 8] |= ((p >> 8) as u8) << (g % 8);
        }
        qs_at += 8;
        b.signs[signs_at..signs_at + 4].copy_from_slice(&signs);
        signs_at += 4;
        scales[ib] = scale;
        max_scale = ggml_max([max_scale, scale]);
    }
    if let Some((d, codes)) = super_block_scale(&scales, max_scale, 1.033) {
        b.d = d;
        for (pair, s) in b.scales.iter_mut().enumerate() {
            *s = codes[2 * pair] | codes[2 * pair + 1] << 4;
        }
    }
    b
}
