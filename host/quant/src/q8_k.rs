//! Q8_K: the CPU activation format of the k-quant dot products (docs/quant-formats.md#q8_k).

use crate::chunks::arrays;
use crate::round::nearest_int;
use ingot_abi::blocks::{BlockQ8K, QK_K};

/// `quantize_row_q8_K_ref` for one super-block: `iscale = −127/max` with `max` the signed value
/// of largest |x|, `q = min(127, nearest_int(iscale·x))`, `d = 1/iscale`, `bsums` = Σq per 16.
pub fn quantize_block(x: &[f32; QK_K]) -> BlockQ8K {
    let mut b = BlockQ8K {
        d: 0.0,
        qs: [0; QK_K],
        bsums: [0; QK_K / 16],
    };
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax == 0.0 {
        return b;
    }
    let iscale = -127.0 / max;
    for (q, &v) in b.qs.iter_mut().zip(x) {
        // iscale·x ∈ [−127, 127], so the result fits i8 after the cap.
        *q = nearest_int(iscale * v).min(127) as i8;
    }
    for (s, group) in b.bsums.iter_mut().zip(arrays::<i8, 16>(&b.qs)) {
        *s = group.iter().map(|&q| i16::from(q)).sum();
    }
    b.d = 1.0 / iscale;
    b
}

/// Quantize an activation row to Q8_K; a tail that is not a whole super-block is padded with
/// zeros.
pub fn quantize_q8_k(x: &[f32]) -> Vec<BlockQ8K> {
    let mut out = Vec::with_capacity(x.len().div_ceil(QK_K));
    out.extend(arrays::<f32, QK_K>(x).map(quantize_block));
    let rest = &x[x.len() - x.len() % QK_K..];
    if !rest.is_empty() {
        let mut padded = [0.0f32; QK_K];
        padded[..rest.len()].copy_from_slice(rest);
        out.push(quantize_block(&padded));
    }
    out
}

/// Dequantize one super-block: `y = d·q`.
pub fn dequantize(b: &BlockQ8K, y: &mut [f32; QK_K]) {
    for (yi, &q) in y.iter_mut().zip(&b.qs) {
        *yi = b.d * q as f32;
    }
}
