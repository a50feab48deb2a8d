//! [`RowDot::q8_k_x8`]: the product of rows packed at load ([`super::packed`]) with Q8_K
//! activations, dispatched to the AVX2 kernel (`avx2/packed_k.rs`) or computed by the scalar
//! formula. Apart from the layout so that the layout does not depend on its kernels.

use ingot_abi::blocks::BlockQ8K;
use ingot_gguf::GgmlType;

use super::packed::{levels, scales_mins, BlockQ4Kx8, ROWS_PER_GROUP};
use super::{k4_decoded, Isa, RowDot};
use crate::error::QuantError;

impl RowDot {
    /// `out[t·n + r] = row r · acts[t]` for the `n = out.len() / acts.len()` rows packed in
    /// `packed` by [`pack_q4k`](super::packed::pack_q4k) (`n / 8` groups of `acts[0].len()`
    /// super-blocks each): the bits of [`RowDot::q8_k_multi`] on the unpacked rows. For Q4_K dot
    /// products only.
    pub fn q8_k_x8(
        &self,
        packed: &[BlockQ4Kx8],
        acts: &[&[BlockQ8K]],
        out: &mut [f32],
    ) -> Result<(), QuantError> {
        let Some(first) = acts.first() else {
            return Ok(());
        };
        let (nb, n) = (first.len(), out.len() / acts.len());
        let fits = self.ty() == GgmlType::Q4K
            && nb > 0
            && n.is_multiple_of(ROWS_PER_GROUP)
            && n * acts.len() == out.len()
            && packed.len() == n / ROWS_PER_GROUP * nb
            && acts.iter().all(|a| a.len() == nb);
        if !fits {
            return Err(QuantError::ByteLength {
                ty: self.ty(),
                elements: out.len(),
                expected: n / ROWS_PER_GROUP * nb * size_of::<BlockQ4Kx8>(),
                actual: size_of_val(packed),
            });
        }
        #[cfg(target_arch = "x86_64")]
        if self.isa() != Isa::Scalar {
            // SAFETY: a RowDot on a SIMD instruction set exists only after `with_isa` saw AVX2
            // and F16C, all these kernels use; the lengths were checked above.
            unsafe { super::avx2::packed_k::q4k_x8(packed, acts, out) };
            return Ok(());
        }
        for (t, act) in acts.iter().enumerate() {
            for (g, group) in packed.chunks_exact(nb).enumerate() {
                for r in 0..ROWS_PER_GROUP {
                    let mut sum = 0.0f32;
                    for (x, y) in group.iter().zip(act.iter()) {
                        let (sc, m) = scales_mins(x, r);
                        sum += k4_decoded(&levels(x, r), sc, m, x.d[r], x.dmin[r], y);
                    }
                    out[t * n + g * ROWS_PER_GROUP + r] = sum;
                }
            }
        }
        Ok(())
    }
}
