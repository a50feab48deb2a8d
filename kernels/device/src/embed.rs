//! `embed_<type>`: the f32 embedding row of the step's token (`StepState.token`), dequantized
//! from `token_embd` of any type a GGUF mix gives it, bit-identical to
//! `ingot_quant::dequantize_row` (the row is used unscaled:
//! docs/decode-math.md#embedding-and-output-head).
//!
//! Thread mapping: element `e` of the row is decoded by thread `e % EMBED_THREADS` of block
//! `e / (EMBED_THREADS·EMBED_PER_THREAD)`, iteration `(e / EMBED_THREADS) % EMBED_PER_THREAD`,
//! so each store instruction writes consecutive floats. Each element is decoded on its own from
//! its block (scales re-read per element, served by L1): the row is a few KB once per token, so
//! this trades bandwidth nobody needs for one simple decoder per type.
//!
//! With a norm tail (`ingot_abi::launch::embed`) the block that finishes last normalizes the row
//! for the first layer: `rmsnorm_q8_1`'s code and order ([`rmsnorm_block`]), so its bits.
//!
//! Products that ggml rounds separately (`d·sc·q − dmin·m`, `q·d + m`) use explicitly rounded
//! PTX instructions, which ptxas never contracts into an FMA, to stay bit-identical to the CPU.

use crate::intrinsics::{bid, f16_to_f32, global, ld_u32, st_f32, tid};
use crate::last_block::{last_block_done, reset};
use crate::moe_down::NormTail;
use crate::norm_q8::rmsnorm_block;
use core::arch::asm;
use core::mem::offset_of;
use ingot_abi::blocks::{
    get_scale_min_k4, q3k_scale, BlockIq4Nl, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ5_0,
    BlockQ5_1, BlockQ6K, BlockQ8_0, BlockQ8_1, KVALUES_IQ4NL,
};
use ingot_abi::launch::{DOWN_NORM_NONE, EMBED_PER_THREAD, EMBED_THREADS, WARP_SIZE};
use ingot_abi::step::StepState;

/// `a·b` rounded to nearest, never fused with a following add.
#[inline(always)]
fn mul_rn(a: f32, b: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("mul.rn.f32 {d}, {a}, {b};", d = out(reg32) d, a = in(reg32) a, b = in(reg32) b,
             options(pure, nomem, nostack));
    }
    d
}

/// `a + b` rounded to nearest, never fused with a preceding multiply.
#[inline(always)]
fn add_rn(a: f32, b: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("add.rn.f32 {d}, {a}, {b};", d = out(reg32) d, a = in(reg32) a, b = in(reg32) b,
             options(pure, nomem, nostack));
    }
    d
}

/// One row type: `QK` elements per block, and element `i` of a block.
trait RowType {
    type Block;
    const QK: usize;
    /// Element `i ∈ 0..QK` of `b`, as `ingot_quant`'s `dequantize` computes it.
    fn value(b: &Self::Block, i: usize) -> f32;
}

struct F32;
impl RowType for F32 {
    type Block = f32;
    const QK: usize = 1;
    #[inline(always)]
    fn value(b: &f32, _: usize) -> f32 {
        *b
    }
}

struct F16;
impl RowType for F16 {
    type Block = u16;
    const QK: usize = 1;
    #[inline(always)]
    fn value(b: &u16, _: usize) -> f32 {
        f16_to_f32(u32::from(*b))
    }
}

struct Bf16;
impl RowType for Bf16 {
    type Block = u16;
    const QK: usize = 1;
    #[inline(always)]
    fn value(b: &u16, _: usize) -> f32 {
        f32::from_bits(u32::from(*b) << 16)
    }
}

/// Nibble of element `i` of a 32-element block with the Q4_0 layout (`qs[i%16]`, low nibble
/// for `i < 16`).
#[inline(always)]
fn nibble(qs: &[u8; 16], i: usize) -> u32 {
    u32::from(qs[i % 16] >> (4 * (i / 16))) & 0xF
}

/// Bit 4 of element `i` of Q5_0/Q5_1: bit `i` of `qh` read little-endian.
#[inline(always)]
fn fifth_bit(qh: &[u8; 4], i: usize) -> u32 {
    (u32::from(qh[i / 8]) >> (i % 8)) & 1
}

struct Q4_0;
impl RowType for Q4_0 {
    type Block = BlockQ4_0;
    const QK: usize = 32;
    #[inline(always)]
    fn value(b: &BlockQ4_0, i: usize) -> f32 {
        (nibble(&b.qs, i) as i32 - 8) as f32 * f16_to_f32(u32::from(b.d))
    }
}

struct Q5_0;
impl RowType for Q5_0 {
    type Block = BlockQ5_0;
    const QK: usize = 32;
    #[inline(always)]
    fn value(b: &BlockQ5_0, i: usize) -> f32 {
        let q = nibble(&b.qs, i) | (fifth_bit(&b.qh, i) << 4);
        (q as i32 - 16) as f32 * f16_to_f32(u32::from(b.d))
    }
}

struct Q5_1;
impl RowType for Q5_1 {
    type Block = BlockQ5_1;
    const QK: usize = 32;
    #[inline(always)]
    fn value(b: &BlockQ5_1, i: usize) -> f32 {
        let q = nibble(&b.qs, i) | (fifth_bit(&b.qh, i) << 4);
        add_rn(
            mul_rn(q as f32, f16_to_f32(u32::from(b.d))),
            f16_to_f32(u32::from(b.m)),
        )
    }
}

struct Q8_0;
impl RowType for Q8_0 {
    type Block = BlockQ8_0;
    const QK: usize = 32;
    #[inline(always)]
    fn value(b: &BlockQ8_0, i: usize) -> f32 {
        b.qs[i] as f32 * f16_to_f32(u32::from(b.d))
    }
}

/// `KVALUES_IQ4NL` bytes 0..8 and 8..16 as little-endian u64s: a lookup by shift and select
/// stays in registers (a table indexed at run time would be a module-scope constant array).
const IQ4NL_HALVES: [u64; 2] = {
    let mut h = [0u64; 2];
    let mut i = 0;
    while i < 16 {
        h[i / 8] |= (KVALUES_IQ4NL[i] as u8 as u64) << (8 * (i % 8));
        i += 1;
    }
    h
};

struct Iq4Nl;
impl RowType for Iq4Nl {
    type Block = BlockIq4Nl;
    const QK: usize = 32;
    #[inline(always)]
    fn value(b: &BlockIq4Nl, i: usize) -> f32 {
        let q = nibble(&b.qs, i);
        let half = if q < 8 {
            IQ4NL_HALVES[0]
        } else {
            IQ4NL_HALVES[1]
        };
        // Sign-extend byte `q % 8` through an i32 shift pair.
        let kv = (((half >> (8 * (q % 8))) as u32) << 24) as i32 >> 24;
        f16_to_f32(u32::from(b.d)) * kv as f32
    }
}

struct Q3K;
impl RowType for Q3K {
    type Block = BlockQ3K;
    const QK: usize = 256;
    #[inline(always)]
    fn value(b: &BlockQ3K, e: usize) -> f32 {
        let (n, s, l) = (e / 128, (e % 128) / 32, e % 32);
        let low = (b.qs[32 * n + l] >> (2 * s)) & 3;
        let high = (b.hmask[l] >> (e / 32)) & 1;
        let q = low as i32 - if high != 0 { 0 } else { 4 };
        let dl = f16_to_f32(u32::from(b.d)) * q3k_scale(&b.scales, e / 16) as f32;
        dl * q as f32
    }
}

/// `d·sc·q − dmin·m` of Q4_K/Q5_K sub-block `j` for level `q`, each product rounded on its own.
#[inline(always)]
fn k_value(d: u16, dmin: u16, scales: &[u8; 12], j: usize, q: u32) -> f32 {
    let (sc, m) = get_scale_min_k4(j, scales);
    let dl = mul_rn(f16_to_f32(u32::from(d)), sc as f32);
    let ml = mul_rn(f16_to_f32(u32::from(dmin)), m as f32);
    add_rn(mul_rn(dl, q as f32), -ml)
}

struct Q4K;
impl RowType for Q4K {
    type Block = BlockQ4K;
    const QK: usize = 256;
    #[inline(always)]
    fn value(b: &BlockQ4K, e: usize) -> f32 {
        let (j, l) = (e / 32, e % 32);
        let q = u32::from(b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        k_value(b.d, b.dmin, &b.scales, j, q)
    }
}

struct Q5K;
impl RowType for Q5K {
    type Block = BlockQ5K;
    const QK: usize = 256;
    #[inline(always)]
    fn value(b: &BlockQ5K, e: usize) -> f32 {
        let (j, l) = (e / 32, e % 32);
        let low = u32::from(b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        let high = u32::from(b.qh[l] >> j) & 1;
        k_value(b.d, b.dmin, &b.scales, j, low | (high << 4))
    }
}

struct Q6K;
impl RowType for Q6K {
    type Block = BlockQ6K;
    const QK: usize = 256;
    #[inline(always)]
    fn value(b: &BlockQ6K, e: usize) -> f32 {
        let (n, k, l) = (e / 128, (e % 128) / 32, e % 32);
        let low = (b.ql[64 * n + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
        let high = (b.qh[32 * n + l] >> (2 * k)) & 3;
        let q = (low | (high << 4)) as i32 - 32;
        f16_to_f32(u32::from(b.d)) * b.scales[e / 16] as f32 * q as f32
    }
}

/// `table`: `n_vocab` rows of `n/QK` blocks; `state`: the step state; `y`: `n` floats. A token
/// outside `0..n_vocab` reads nothing and writes a NaN row, so the step's output shows it.
#[inline(always)]
unsafe fn embed<T: RowType>(
    table: *const T::Block,
    state: *const StepState,
    y: *mut f32,
    n: u32,
    n_vocab: u32,
    tail: NormTail,
) {
    let token = ld_u32(global(state) + offset_of!(StepState, token) as u64);
    let valid = token < n_vocab;
    let row = table.add(if valid { token as usize } else { 0 } * (n as usize / T::QK));
    let yg = global(y);
    let first = bid() * EMBED_THREADS * EMBED_PER_THREAD + tid();
    let mut k = 0;
    while k < EMBED_PER_THREAD {
        let e = first + k * EMBED_THREADS;
        if e < n {
            let i = e as usize;
            let v = if valid {
                T::value(&*row.add(i / T::QK), i % T::QK)
            } else {
                f32::NAN
            };
            st_f32(yg + 4 * e as u64, v);
        }
        k += 1;
    }
    // Launch-uniform: without a tail no block waits for the others.
    if tail.mode == DOWN_NORM_NONE {
        return;
    }
    let count = global(tail.count as *const u32);
    if !last_block_done(count, EMBED_THREADS / WARP_SIZE) {
        return;
    }
    // `rmsnorm_q8_1`'s block and order (`EMBED_THREADS` is its block size), reading the row the
    // other blocks wrote with coherent loads.
    rmsnorm_block::<EMBED_THREADS, true, true>(
        yg,
        global(tail.w),
        global(tail.q8),
        global(tail.f32),
        n,
        tail.eps,
    );
    reset(count);
}

macro_rules! embed_kernel {
    ($name:ident, $ty:ty, $block:ty) => {
        /// See [`embed`] and `ingot_abi::launch::embed`.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            table: *const $block,
            state: *const StepState,
            y: *mut f32,
            n: u32,
            n_vocab: u32,
            norm_w: *const f32,
            norm_q8: *mut BlockQ8_1,
            norm_f32: *mut f32,
            count: *mut u32,
            norm: u32,
            eps: f32,
        ) {
            embed::<$ty>(
                table,
                state,
                y,
                n,
                n_vocab,
                NormTail::new(norm_w, norm_q8, norm_f32, count, norm, eps),
            );
        }
    };
}

embed_kernel!(embed_f32, F32, f32);
embed_kernel!(embed_f16, F16, u16);
embed_kernel!(embed_bf16, Bf16, u16);
embed_kernel!(embed_q4_0, Q4_0, BlockQ4_0);
embed_kernel!(embed_q5_0, Q5_0, BlockQ5_0);
embed_kernel!(embed_q5_1, Q5_1, BlockQ5_1);
embed_kernel!(embed_q8_0, Q8_0, BlockQ8_0);
embed_kernel!(embed_iq4_nl, Iq4Nl, BlockIq4Nl);
embed_kernel!(embed_q3k, Q3K, BlockQ3K);
embed_kernel!(embed_q4k, Q4K, BlockQ4K);
embed_kernel!(embed_q5k, Q5K, BlockQ5K);
embed_kernel!(embed_q6k, Q6K, BlockQ6K);
