//! What the IQ1/IQ2/IQ3 dot products share: 2-byte aligned word loads, code-book reads and
//! the expansion of sign bits into byte masks.
//!
//! These types' blocks are 2-byte aligned (50 to 110 bytes, all `≡ 2 (mod 4)`), so a lane
//! reads its words as pairs of 2-byte loads, every one inside the block. The code books
//! (`ingot_abi::iq_grids`) are module-scope `.global` tables the PTX carries; a lookup is an
//! `ld.global.nc` of one entry, its index masked to the table's size.

use crate::intrinsics::{f16_to_f32, global, lane_id, ld_u16, ld_u32, ld_u64, shfl_idx};
use ingot_abi::iq_grids as abi;

// The code books, defined in this crate so that its PTX carries them (a static of another
// crate would be an unresolved `.extern` symbol there).
#[no_mangle]
pub static IQ2XXS_GRID: [u64; 256] = abi::IQ2XXS_GRID;
#[no_mangle]
pub static IQ2XS_GRID: [u64; 512] = abi::IQ2XS_GRID;
#[no_mangle]
pub static IQ2S_GRID: [u64; 1024] = abi::IQ2S_GRID;
#[no_mangle]
pub static IQ3XXS_GRID: [u32; 256] = abi::IQ3XXS_GRID;
#[no_mangle]
pub static IQ3S_GRID: [u32; 512] = abi::IQ3S_GRID;
#[no_mangle]
pub static IQ1S_GRID: [u64; 2048] = abi::IQ1S_GRID;

/// The f16 `d` that lane 0 of this lane's group of 8 loaded (the unit's super-block scale, read
/// once and shuffled); all 32 lanes must call it together.
#[inline(always)]
pub fn lane0_d(d: u32) -> f32 {
    f16_to_f32(shfl_idx(d, lane_id() & !7))
}

/// The little-endian word of the 4 bytes at the 2-byte aligned global address `a`.
#[inline(always)]
pub unsafe fn ld_u32_a2(a: u64) -> u32 {
    ld_u16(a) | (ld_u16(a + 2) << 16)
}

/// Entry `i & (N − 1)` of the 8-byte code book `grid` (`N` a power of two).
#[inline(always)]
pub fn grid8<const N: usize>(grid: &'static [u64; N], i: u32) -> u64 {
    let i = i as u64 & (N as u64 - 1);
    // SAFETY: the index is inside the table, which the module holds for the kernel's lifetime.
    unsafe { ld_u64(global(grid.as_ptr()) + 8 * i) }
}

/// Entry `i & (N − 1)` of the 4-byte code book `grid` (`N` a power of two).
#[inline(always)]
pub fn grid4<const N: usize>(grid: &'static [u32; N], i: u32) -> u32 {
    let i = i as u64 & (N as u64 - 1);
    // SAFETY: as `grid8`.
    unsafe { ld_u32(global(grid.as_ptr()) + 4 * i) }
}

/// The activation ints of 8-value group `k ∈ 0..4` of a lane's q8_1 block.
#[inline(always)]
pub fn group_act(u: &[u32; 8], k: usize) -> [u32; 2] {
    [u[2 * k], u[2 * k + 1]]
}

/// Byte `j` of the result is `0xFF` where bit `j` of `s` is set, else 0 (`j ∈ 0..4`): the
/// multiply moves bit `j` to bit `8j` (the partial products land on distinct bits, none on
/// another byte's bit 0) and `× 0xFF` widens each byte's bit 0 without carries.
#[inline(always)]
pub fn sign_mask4(s: u32) -> u32 {
    ((s & 0xF).wrapping_mul(0x0020_4081) & 0x0101_0101) * 0xFF
}

/// The bytes of `g` negated where `mask` (from [`sign_mask4`]) is `0xFF`: `(g ^ 0xFF) + 1`
/// per byte, which never carries because every code-book magnitude is in `1..128`
/// (`ingot_abi::iq_grids`' tests check the tables).
#[inline(always)]
pub fn apply_signs(g: u32, mask: u32) -> u32 {
    (g ^ mask) + (mask & 0x0101_0101)
}

/// The 8 signs of a group from its 7 stored bits: bit 7 makes the count of set bits even
/// (`ksigns_iq2xs`, computed instead of read).
#[inline(always)]
pub fn ksigns(s7: u32) -> u32 {
    let s7 = s7 & 0x7F;
    s7 | ((s7.count_ones() & 1) << 7)
}

/// `Σ dp4a` of the two words of an 8-value group (`g`, grid values with signs applied by
/// `signs`, bit `j` for value `j`) with the group's activation ints `u`.
#[inline(always)]
pub fn signed_group_dot(g: u64, signs: u32, u: [u32; 2], acc: i32) -> i32 {
    use crate::intrinsics::dp4a;
    let lo = apply_signs(g as u32, sign_mask4(signs));
    let hi = apply_signs((g >> 32) as u32, sign_mask4(signs >> 4));
    dp4a(hi, u[1], dp4a(lo, u[0], acc))
}
