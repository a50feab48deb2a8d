//! How the latent cache stores a row `[c | k_pe]` (`--cache-type`, as llama.cpp's `-ctk`): the
//! format itself is [`CacheType`], defined once in `ingot_abi` beside the row layout the kernels
//! read; this module holds what the host adds, parsing a name and the CPU backends' rounding.
//!
//! [`CacheType::F16`] is full precision: f16 rows on the GPU, f32 rows on the CPU backends.
//! [`CacheType::Q8_0`] is ggml's q8_0 per 32 values of a row (`d = amax/127` stored as f16,
//! `q = roundf(x·(1/d))`): about half the bytes of an f16 row. The GPU plan and the cpu backend
//! store the blocks (`cpu/latent.rs`) and compute on their values `q·d` (exact in f32); the oracle
//! keeps full precision.

pub use ingot_abi::launch::CacheType;
use ingot_quant::blocks::{BlockQ8_0, QK8_0};
use ingot_quant::q8_0;

/// The format named `name`, or a message listing the names there are.
pub fn parse(name: &str) -> Result<CacheType, String> {
    CacheType::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = CacheType::ALL.iter().map(|t| t.name()).collect();
        format!(
            "unknown cache type `{name}` (expected one of: {})",
            names.join(", ")
        )
    })
}

/// Rounds a cache row to the values `ty` holds (in place; F16 leaves it as it is, the CPU keeping
/// f32). A last group shorter than 32 values is quantized as if padded with zeros.
pub fn round_row(ty: CacheType, row: &mut [f32]) {
    if ty == CacheType::F16 {
        return;
    }
    for chunk in row.chunks_mut(QK8_0) {
        let mut block = [0.0f32; QK8_0];
        q8_0::dequantize(&q8_0_group(chunk), &mut block);
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
}

/// ggml's q8_0 block of one group of at most 32 values of a cache row, a short last group padded
/// with zeros: the one quantization every cache-row writer uses.
pub fn q8_0_group(part: &[f32]) -> BlockQ8_0 {
    let mut x = [0.0f32; QK8_0];
    x[..part.len()].copy_from_slice(part);
    q8_0::quantize(&x)
}

/// `values` (one row) in the bytes of format `ty` ([`CacheType::row_bytes`]), as the rope kernels
/// write a row: f16 values, or each 32-value group quantized by ggml's q8_0 (a last short group
/// padded with zeros), the quants, then the f16 scales, then zeros. For tests and benches that
/// build a cache without running the kernels. `values.len()` must fit the abi's `u32` widths.
pub fn encode_row(ty: CacheType, values: &[f32]) -> Vec<u8> {
    let width = u32::try_from(values.len()).expect("cache row width fits u32");
    let mut out = vec![0u8; ty.row_bytes(width) as usize];
    match ty {
        CacheType::F16 => {
            for (o, &v) in out.chunks_exact_mut(2).zip(values) {
                o.copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
            }
        }
        CacheType::Q8_0 => {
            let blocks = CacheType::q8_0_blocks(width) as usize;
            for (b, q) in values.chunks(QK8_0).map(q8_0_group).enumerate() {
                for (o, &v) in out[b * QK8_0..][..QK8_0].iter_mut().zip(&q.qs) {
                    *o = v as u8;
                }
                out[blocks * QK8_0 + 2 * b..][..2].copy_from_slice(&q.d.to_le_bytes());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_an_error() {
        for t in CacheType::ALL {
            assert_eq!(parse(t.name()), Ok(t));
            assert_eq!(t.to_string(), t.name());
        }
        let e = parse("q4_0").unwrap_err();
        assert!(e.contains("`q4_0`") && e.contains("f16, q8_0"), "{e}");
    }

    #[test]
    fn q8_0_rows_hold_the_dequantized_blocks() {
        // 576 = 18 blocks (V2-Lite's kv_lora + rope), then a 40-value row with a short last group.
        for n in [576usize, 40] {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013 + 0.001)
                .collect();
            let mut r = x.clone();
            round_row(CacheType::Q8_0, &mut r);
            for (b, (xs, rs)) in x.chunks(QK8_0).zip(r.chunks(QK8_0)).enumerate() {
                let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                for (&a, &q) in xs.iter().zip(rs) {
                    // Half a quant step, plus the f16 rounding of d (2^-11 relative, 127 steps).
                    let bound = amax / 127.0 * (0.5 + 127.0 * 2f32.powi(-11)) * 1.0001;
                    assert!(
                        (a - q).abs() <= bound,
                        "block {b}: {a} -> {q}, bound {bound}"
                    );
                }
                assert!(rs.iter().any(|&v| v != 0.0), "block {b} lost every value");
            }
            let mut same = x.clone();
            round_row(CacheType::F16, &mut same);
            assert_eq!(same, x);
        }
    }

    #[test]
    fn encoded_q8_0_rows_decode_to_the_rounded_values() {
        // 88 values: two whole groups and a short third one (padding quants must be 0).
        let x: Vec<f32> = (0..88)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.021)
            .collect();
        let bytes = encode_row(CacheType::Q8_0, &x);
        assert_eq!(bytes.len(), CacheType::Q8_0.row_bytes(88) as usize);
        let mut want = x.clone();
        round_row(CacheType::Q8_0, &mut want);
        let blocks = 3;
        for (j, &w) in want.iter().enumerate() {
            let s = blocks * QK8_0 + 2 * (j / QK8_0);
            let d = half::f16::from_le_bytes([bytes[s], bytes[s + 1]]).to_f32();
            assert_eq!(bytes[j] as i8 as f32 * d, w, "value {j}");
        }
        assert!(bytes[88..96].iter().all(|&q| q == 0), "padding quants");
        assert!(bytes[blocks * 34..].iter().all(|&z| z == 0), "row padding");
        let f = encode_row(CacheType::F16, &x);
        assert_eq!(f.len(), 176);
        assert_eq!(
            half::f16::from_le_bytes([f[2], f[3]]),
            half::f16::from_f32(x[1])
        );
    }
}
