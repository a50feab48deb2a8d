//! Q5_K: Q4_K plus a 5th bit per weight, `q ∈ 0..=31` (docs/quant-formats.md#q5_k).

use crate::q4_k;
use crate::round::f16_to_f32;
use crate::search::Qkx2;
use ingot_abi::blocks::{get_scale_min_k4, BlockQ5K, QK_K};

/// Unpack the 5-bit levels: nibbles as Q4_K; element `64p+l` adds 16 if bit `2p` of `qh[l]`
/// is set, element `64p+32+l` if bit `2p+1` is.
#[inline(always)]
pub(crate) fn unpack_levels(b: &BlockQ5K, q: &mut [u8; QK_K]) {
    q4_k::unpack_levels(&b.qs, q);
    for p in 0..4 {
        for l in 0..32 {
            q[64 * p + l] |= ((b.qh[l] >> (2 * p)) & 1) << 4;
            q[64 * p + 32 + l] |= ((b.qh[l] >> (2 * p + 1)) & 1) << 4;
        }
    }
}

/// Dequantize one super-block (`dequantize_row_q5_K`).
pub fn dequantize(b: &BlockQ5K, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    let min = f16_to_f32(b.dmin);
    let mut q = [0u8; QK_K];
    unpack_levels(b, &mut q);
    for j in 0..8 {
        let (sc, m) = get_scale_min_k4(j, &b.scales);
        let (dl, ml) = (d * sc as f32, min * m as f32);
        for l in 0..32 {
            y[32 * j + l] = dl * q[32 * j + l] as f32 - ml;
        }
    }
}

/// `quantize_row_q5_K_ref` (no importance matrix): as Q4_K with
/// `make_qkx2_quants(32, 31, w, −0.5, 0.1, 15, squared error)`.
pub fn quantize(x: &[f32; QK_K]) -> BlockQ5K {
    let search = Qkx2 {
        nmax: 31,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: false,
    };
    let (d, dmin, scales, levels) = q4_k::quantize_scaled(x, &search);
    let mut qs = [0u8; QK_K / 2];
    let mut qh = [0u8; QK_K / 8];
    for p in 0..4 {
        for l in 0..32 {
            let (l1, l2) = (levels[64 * p + l], levels[64 * p + 32 + l]);
            qh[l] |= ((l1 >> 4) << (2 * p)) | ((l2 >> 4) << (2 * p + 1));
            qs[32 * p + l] = (l1 & 0xF) | ((l2 & 0xF) << 4);
        }
    }
    BlockQ5K {
        d,
        dmin,
        scales,
        qh,
        qs,
    }
}
