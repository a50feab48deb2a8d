//! Scalar conversions whose exact rounding the reference quantizers depend on.

use half::{bf16, f16};

/// ggml's `nearest_int`: adds 1.5·2²³ so the FPU rounds to an integer (round-half-to-even),
/// then reads the mantissa. Exact for |f| ≤ 2²²−1, which every caller guarantees by clamping
/// the scale first; outside that range (or for NaN) the result is meaningless but no panic.
#[inline(always)]
pub(crate) fn nearest_int(f: f32) -> i32 {
    let val = f + 12_582_912.0;
    (val.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

/// IEEE binary16 bits → f32 (exact).
#[inline(always)]
pub fn f16_to_f32(bits: u16) -> f32 {
    f16::from_bits(bits).to_f32()
}

/// f32 → IEEE binary16 bits, round-to-nearest-even (ggml `GGML_FP32_TO_FP16`, F16C `_cvtss_sh`).
#[inline(always)]
pub fn f32_to_f16(x: f32) -> u16 {
    f16::from_f32(x).to_bits()
}

/// bfloat16 bits → f32 (exact: the bits are the top half of an f32).
#[inline(always)]
pub fn bf16_to_f32(bits: u16) -> f32 {
    bf16::from_bits(bits).to_f32()
}

/// f32 → bfloat16 bits exactly as `ggml_compute_fp32_to_bf16`: NaN becomes a quiet
/// NaN keeping the sign and top payload bits (`(u >> 16) | 64`); everything else rounds to
/// nearest-even on the upper 16 bits (infinities stay infinite, subnormals are kept).
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> u16 {
    let u = x.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    (u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        // The 12582912 trick inherits the FPU's ties-to-even; roundf would give 3, -3, 1.
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(-7.4), -7);
        assert_eq!(nearest_int(4_194_303.0), 4_194_303);
    }

    #[test]
    fn bf16_rounding_matches_ggml() {
        // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even → 1.0 (0x3f80).
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        // 0x3f818000 is halfway with odd low bit → rounds up to 0x3f82.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        // Just above halfway rounds up.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        // Signalling NaN 0x7f800001 becomes quiet: top bits 0x7f80 | 0x40.
        assert_eq!(f32_to_bf16(f32::from_bits(0x7f80_0001)), 0x7fc0);
        assert_eq!(f32_to_bf16(f32::from_bits(0xff80_0001)), 0xffc0);
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7f80);
        // The largest finite f32 rounds up into infinity, as RNE on the top half must.
        assert_eq!(f32_to_bf16(f32::MAX), 0x7f80);
        // Subnormals are rounded, not flushed.
        assert_eq!(f32_to_bf16(f32::from_bits(0x0000_8000)), 0x0000);
        assert_eq!(f32_to_bf16(f32::from_bits(0x0001_8000)), 0x0002);
    }

    #[test]
    fn f16_rounding_is_nearest_even() {
        // 1 + 2^-11 is halfway between 1.0 and the next half (1 + 2^-10): ties to even → 1.0.
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02);
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
    }
}
