//! Where a dot product reads its q8_1 activations ([`ActSource`]): global memory as the blocks
//! lie in the buffer ([`GlobalAct`], `ld.global.nc`), or a block's shared-memory stage
//! ([`SharedAct`]), which a gemv block fills once ([`stage_act`]; the MoE down kernel's every
//! slot, [`stage_act_wide`]) so that its rows stop reading the activation from global memory
//! once per row (per warp).
//!
//! The stage keeps the blocks as they lie in global memory (36 bytes each) and lanes read it
//! with 4-byte loads: lanes reading the same word of consecutive blocks are 9 words apart, so 32
//! of them hit 32 different banks (9 is odd); 16-byte loads would need a padded layout and, in
//! ptxas's allocation, 8-24 more registers per thread for the pair types.

use super::{Q8_BYTES, Q8_QS_OFF};
use crate::intrinsics::{
    f16_to_f32, ld_u32, ld_u32_if, ld_u32_relaxed, ld_u32_relaxed_if, ld_v4_f32_relaxed_if,
    ld_v4_if, ld_words, lds_u16_staged, lds_u32_staged, lds_words4_staged, sts_u32, sts_u32_if,
    sts_v4_if, tid,
};
use core::arch::{asm, global_asm, nvptx};
use ingot_abi::launch::{GEMV_STAGE_BLOCKS, MOE_DOWN_STAGE_BYTES};

/// Bytes of the activation stage: a gemv's [`GEMV_STAGE_BLOCKS`] blocks, or the MoE down
/// kernel's stage (`crate::moe_down`, which stages there too), whichever is larger. One array
/// for both, so a chained launch whose blocks run a gemv or a down kernel
/// (`moe_ffn_rope_kb_*`) holds one stage, not two.
pub const STAGE_BYTES: u32 = {
    let gemv = GEMV_STAGE_BLOCKS * Q8_BYTES as u32;
    if gemv > MOE_DOWN_STAGE_BYTES {
        gemv
    } else {
        MOE_DOWN_STAGE_BYTES
    }
};

global_asm!(
    ".shared .align 16 .b8 gemv_act_stage[{bytes}];",
    bytes = const STAGE_BYTES,
);

/// Shared address of staged block 0.
#[inline(always)]
pub fn stage_base() -> u32 {
    let a: u32;
    unsafe {
        asm!("mov.u32 {a}, gemv_act_stage;", a = out(reg32) a, options(pure, nomem, nostack));
    }
    a
}

/// The q8_1 activation blocks of one unit or row, from block 0 of the source on.
pub trait ActSource: Copy {
    /// The source from block `blocks` on.
    fn skip(self, blocks: u64) -> Self;
    /// The `ds` word of block `b` (`d` in the low half, `s` in the high half, binary16 bits).
    unsafe fn ds(self, b: u64) -> u32;
    /// Quant ints `i .. i + N` of block `b` (`i + N ≤ 8`).
    unsafe fn qs<const N: usize>(self, b: u64, i: u64) -> [u32; N];
    /// `qs::<4>(b, i)`, for a source that can read the four from one base address.
    #[inline(always)]
    unsafe fn qs4(self, b: u64, i: u64) -> [u32; 4] {
        self.qs::<4>(b, i)
    }
    /// Block `b`'s scale `d` (the low half of [`Self::ds`]) widened to f32.
    #[inline(always)]
    unsafe fn d(self, b: u64) -> f32 {
        f16_to_f32(self.ds(b))
    }
}

/// Blocks in global memory from address `.0` on (4-byte aligned), read with `ld.global.nc`.
/// Indices are `u64` so the addresses are the plain 64-bit sums the compiler can fold.
#[derive(Clone, Copy)]
pub struct GlobalAct(pub u64);

impl ActSource for GlobalAct {
    #[inline(always)]
    fn skip(self, blocks: u64) -> Self {
        GlobalAct(self.0 + blocks * Q8_BYTES)
    }
    #[inline(always)]
    unsafe fn ds(self, b: u64) -> u32 {
        ld_u32(self.0 + b * Q8_BYTES)
    }
    #[inline(always)]
    unsafe fn qs<const N: usize>(self, b: u64, i: u64) -> [u32; N] {
        ld_words::<N>(self.0 + b * Q8_BYTES + (Q8_QS_OFF + 4 * i))
    }
}

/// Staged blocks from shared address `.0` on (inside the stage, so the 32-bit sums below
/// cannot wrap).
#[derive(Clone, Copy)]
pub struct SharedAct(pub u32);

impl ActSource for SharedAct {
    #[inline(always)]
    fn skip(self, blocks: u64) -> Self {
        SharedAct(self.0 + blocks as u32 * Q8_BYTES as u32)
    }
    #[inline(always)]
    unsafe fn ds(self, b: u64) -> u32 {
        lds_u32_staged(self.0 + b as u32 * Q8_BYTES as u32)
    }
    #[inline(always)]
    unsafe fn qs<const N: usize>(self, b: u64, i: u64) -> [u32; N] {
        let a = self.0 + b as u32 * Q8_BYTES as u32 + Q8_QS_OFF as u32 + 4 * i as u32;
        let mut w = [0u32; N];
        let mut k = 0;
        while k < N {
            w[k] = lds_u32_staged(a + 4 * k as u32);
            k += 1;
        }
        w
    }
    #[inline(always)]
    unsafe fn qs4(self, b: u64, i: u64) -> [u32; 4] {
        lds_words4_staged(self.0 + b as u32 * Q8_BYTES as u32 + Q8_QS_OFF as u32 + 4 * i as u32)
    }
    #[inline(always)]
    unsafe fn d(self, b: u64) -> f32 {
        // `d` is the low half of the block's first word (little-endian).
        f16_to_f32(u32::from(lds_u16_staged(
            self.0 + b as u32 * Q8_BYTES as u32,
        )))
    }
}

/// Copies the `nblocks ≤ GEMV_STAGE_BLOCKS` q8_1 blocks at global address `x` (4-byte aligned)
/// into the stage and waits for the whole block: afterwards `SharedAct(stage_base() + 36·j)`
/// reads block `j`. Every thread of the block (`threads` of them) must call it. Thread `t`
/// copies words `t, t + threads, …`, so each warp reads 128 consecutive bytes per request.
/// `COHERENT`: `x` was written by another block of this launch (and published to this one), so
/// it is read with `.relaxed.gpu` loads instead of through the non-coherent read-only cache.
#[inline(always)]
pub unsafe fn stage_act<const COHERENT: bool>(x: u64, nblocks: u32, threads: u32) {
    let words = nblocks * (Q8_BYTES / 4) as u32;
    let stage = stage_base();
    let mut k = tid();
    while k < words {
        let at = x + 4 * k as u64;
        let v = if COHERENT {
            ld_u32_relaxed(at)
        } else {
            ld_u32(at)
        };
        sts_u32(stage + 4 * k, v);
        k += threads;
    }
    nvptx::_syncthreads();
}

/// 16-byte loads each thread has in flight per round of [`stage_act_wide`].
const WIDE_LOADS: u32 = 8;

/// Copies the `nblocks` q8_1 blocks at global address `x` into the shared stage at `stage` (both
/// 16-byte aligned, the stage room for `nblocks` blocks) and waits for the whole block: afterwards
/// `SharedAct(stage + 36·j)` reads block `j`. Every thread of the block (`threads` of them) must
/// call it. For stages of several KB (the MoE down kernel's every slot): each thread issues
/// [`WIDE_LOADS`] predicated 16-byte loads before its first store, so a round trip to memory
/// moves `threads · 128` bytes (16 KB for 128 threads) rather than 4 bytes per thread; the last
/// `36·nblocks mod 16` bytes are a word each for the first threads. `COHERENT`: `x` was written
/// by another block of this launch (and published to this one), so it is read with
/// `.relaxed.gpu` loads instead of through the non-coherent read-only cache.
#[inline(always)]
pub unsafe fn stage_act_wide<const COHERENT: bool>(stage: u32, x: u64, nblocks: u32, threads: u32) {
    let bytes = nblocks * Q8_BYTES as u32;
    let vecs = bytes / 16;
    let t = tid();
    let mut i = t;
    while i < vecs {
        let mut v = [[0u32; 4]; WIDE_LOADS as usize];
        let mut k = 0;
        while k < WIDE_LOADS {
            let j = i + k * threads;
            v[k as usize] = if COHERENT {
                ld_v4_f32_relaxed_if(j < vecs, x + 16 * j as u64).map(f32::to_bits)
            } else {
                ld_v4_if(j < vecs, x + 16 * j as u64)
            };
            k += 1;
        }
        let mut k = 0;
        while k < WIDE_LOADS {
            let j = i + k * threads;
            sts_v4_if(j < vecs, stage + 16 * j, v[k as usize]);
            k += 1;
        }
        i += WIDE_LOADS * threads;
    }
    let w = 4 * vecs + t;
    let tail = w < bytes / 4;
    let word = if COHERENT {
        ld_u32_relaxed_if(tail, x + 4 * w as u64)
    } else {
        ld_u32_if(tail, x + 4 * w as u64)
    };
    sts_u32_if(tail, stage + 4 * w, word);
    nvptx::_syncthreads();
}
