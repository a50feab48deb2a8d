//! Stand-in blocks for the grid types this crate cannot quantize: IQ2_XXS, IQ2_XS and IQ1_S,
//! whose ggml quantizers need an importance matrix (`ggml_quantize_requires_imatrix`); the other
//! grid types have reference quantizers here.
//!
//! A stand-in row is valid blocks of the type with pseudo-random grid points, signs and
//! sub-block scales, each block's `d` set so that its 256 weights have the RMS of the values it
//! stands for: a weight matrix of the right type, size and magnitude that means nothing. The
//! bytes are a deterministic function of the values (a hash of their bits seeds them), so a
//! synthetic model is the same file on every run. Synthetic models and benches use it; no
//! decoder path does.

use crate::dispatch::check_bytes;
use crate::{can_quantize, dequantize_row, f32_to_f16, quantize_row, QuantError, GRID_TYPES};
use ingot_abi::blocks::{iq1m_set_d, QK_K};
use ingot_gguf::GgmlType;

/// Whether [`stand_in_row`] takes `ty`: a grid type without a quantizer here.
pub fn can_stand_in(ty: GgmlType) -> bool {
    GRID_TYPES.contains(&ty) && !can_quantize(ty)
}

/// How synthetic files and benches encode weights: [`quantize_row`] where this crate has the
/// quantizer, stand-in blocks ([`stand_in_row`]) for the grid types it has not.
pub fn quantize_or_stand_in(ty: GgmlType, x: &[f32], out: &mut [u8]) -> Result<(), QuantError> {
    if can_stand_in(ty) {
        stand_in_row(ty, x, out)
    } else {
        quantize_row(ty, x, out)
    }
}

/// Stand-in blocks of grid type `ty` for the values `x` (a whole number of 256-blocks); see the
/// module docs.
pub fn stand_in_row(ty: GgmlType, x: &[f32], out: &mut [u8]) -> Result<(), QuantError> {
    if !can_stand_in(ty) {
        return Err(crate::dispatch::unsupported(ty, "stand-in blocks"));
    }
    check_bytes(ty, x.len(), out.len())?;
    let ts = ty.type_size() as usize;
    let mut w = [0f32; QK_K];
    for (xs, b) in x.chunks_exact(QK_K).zip(out.chunks_exact_mut(ts)) {
        let mut bits = Bits(
            xs.iter().fold(0x9e37_79b9_7f4a_7c15, |h, v| {
                (h ^ u64::from(v.to_bits())).wrapping_mul(0x100_0000_01b3)
            }) | 1,
        );
        for c in b.chunks_mut(8) {
            let v = bits.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
        set_d(ty, b, f32_to_f16(1.0));
        dequantize_row(ty, b, &mut w)?;
        let at_one = rms(&w);
        let want = rms(xs);
        let d = if at_one > 0.0 { want / at_one } else { 0.0 };
        set_d(ty, b, f32_to_f16(d));
    }
    Ok(())
}

fn rms(v: &[f32]) -> f32 {
    (v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32).sqrt()
}

/// Sets the f16 `d` of one grid-type block (IQ1_M keeps it in the top nibbles of its scales).
fn set_d(ty: GgmlType, block: &mut [u8], d: u16) {
    if ty == GgmlType::Iq1M {
        let at = block.len() - 8;
        let sc: &mut [u8; 8] = (&mut block[at..]).try_into().expect("8 scale bytes");
        iq1m_set_d(sc, d);
    } else {
        block[..2].copy_from_slice(&d.to_le_bytes());
    }
}

/// xorshift64* (reproducible bytes, not quality).
struct Bits(u64);

impl Bits {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stand_ins_have_the_values_rms_and_are_deterministic() {
        let x: Vec<f32> = (0..4 * QK_K)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1e-4)
            .collect();
        for ty in GRID_TYPES.into_iter().filter(|&t| can_stand_in(t)) {
            let n = 4 * ty.type_size() as usize;
            let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
            stand_in_row(ty, &x, &mut a).unwrap();
            stand_in_row(ty, &x, &mut b).unwrap();
            assert_eq!(a, b, "{ty:?}: deterministic");
            let mut y = vec![0f32; x.len()];
            dequantize_row(ty, &a, &mut y).unwrap();
            for (xs, ys) in x.chunks(QK_K).zip(y.chunks(QK_K)) {
                let (rx, ry) = (rms(xs), rms(ys));
                // f16 rounding of d: 2^-11 relative.
                assert!((ry / rx - 1.0).abs() < 1e-3, "{ty:?}: rms {ry} for {rx}");
            }
        }
        assert!(stand_in_row(GgmlType::Q4K, &x, &mut [0u8; 4 * 144]).is_err());
        assert!(stand_in_row(GgmlType::Iq3S, &x, &mut [0u8; 4 * 110]).is_err());
    }
}
