//! The logit scale of one decode step, with the attention temperature of
//! `ingot_abi::launch::FLASH_LATENT` (a per-position factor table).

use crate::intrinsics::ld_u32;
use ingot_abi::launch::TEMPERATURE_NONE;

/// `kq_scale`, times `temp[pos]` unless `temperature` is [`TEMPERATURE_NONE`]. `pos < ctx`,
/// the table's length (the caller has returned for any other position). One load per block,
/// outside every loop.
#[inline(always)]
pub(super) unsafe fn logit_scale(kq_scale: f32, temp: u64, temperature: u32, pos: u32) -> f32 {
    if temperature == TEMPERATURE_NONE {
        kq_scale
    } else {
        kq_scale * f32::from_bits(ld_u32(temp + pos as u64 * 4))
    }
}
