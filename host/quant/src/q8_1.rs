//! Q8_1 activations as the CUDA `quantize_q8_1` kernel writes them (`s = Σx`, where ggml's CPU
//! variant stores `d·Σq`: docs/quant-formats.md#q8_1).
//!
//! Per 32-element block: `amax` and `sum = Σx` come from warp butterfly reductions,
//! `d = amax/127`, `q = amax == 0 ? 0 : roundf(x/d)` (true division, ties away from zero), and
//! `ds = half2(d, sum)`. The quants use the f32 `d`; only the stored `d` is rounded to f16.
//! `x/d` is the IEEE-rounded division (what Rust's `/` compiles to in PTX, `div.rn.f32`); a
//! CUDA build with `-use_fast_math` divides approximately and can move a quant across a .5 tie.

use crate::chunks::arrays;
use crate::round::{f16_to_f32, f32_to_f16};
use ingot_abi::blocks::{BlockQ8_1, QK8_1};

/// `warp_reduce_sum` over 32 lanes: `x += shfl_xor(x, off)` for off = 16, 8, 4, 2, 1. Every lane
/// ends with the same value because f32 addition is commutative, so this returns lane 0's.
fn warp_butterfly_sum(x: &[f32; QK8_1]) -> f32 {
    let mut v = *x;
    let mut off = QK8_1 / 2;
    while off > 0 {
        let prev = v;
        for (l, vl) in v.iter_mut().enumerate() {
            *vl = prev[l] + prev[l ^ off];
        }
        off /= 2;
    }
    v[0]
}

/// Quantize one 32-element block the CUDA way.
pub fn quantize_block(x: &[f32; QK8_1]) -> BlockQ8_1 {
    // max is exact and order-independent, so a fold equals the warp max-reduce.
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let sum = warp_butterfly_sum(x);
    let d = amax / 127.0;
    let mut qs = [0i8; QK8_1];
    if amax != 0.0 {
        for (q, &v) in qs.iter_mut().zip(x) {
            *q = (v / d).round() as i8;
        }
    }
    BlockQ8_1 {
        d: f32_to_f16(d),
        s: f32_to_f16(sum),
        qs,
    }
}

/// Quantize an activation row to Q8_1 the CUDA way. A tail that is not a whole block is
/// padded with zeros (the kernel pads rows to `MATRIX_ROW_PADDING` = 512 the same way; only
/// the blocks a weight row touches are returned here).
pub fn quantize_q8_1(x: &[f32]) -> Vec<BlockQ8_1> {
    let mut out = Vec::with_capacity(x.len().div_ceil(QK8_1));
    out.extend(arrays::<f32, QK8_1>(x).map(quantize_block));
    let rest = &x[x.len() - x.len() % QK8_1..];
    if !rest.is_empty() {
        let mut padded = [0.0f32; QK8_1];
        padded[..rest.len()].copy_from_slice(rest);
        out.push(quantize_block(&padded));
    }
    out
}

/// Dequantize one block: `y = d·q` (`s` is auxiliary and not part of the values).
pub fn dequantize(b: &BlockQ8_1, y: &mut [f32; QK8_1]) {
    let d = f16_to_f32(b.d);
    for (yj, &q) in y.iter_mut().zip(&b.qs) {
        *yj = q as f32 * d;
    }
}
