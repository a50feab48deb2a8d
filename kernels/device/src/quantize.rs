//! `quantize_q8_1`: f32 activations to q8_1 blocks, bit-identical to ggml-cuda's
//! `quantize_q8_1` (`d = amax/127`, `q = roundf(x/d)`, `ds = half2(d, Σx)`).
//!
//! Thread mapping: thread `g` (global index) loads floats `4g..4g+4` with one 16-byte load; the
//! 8 lanes `8b..8b+8` of a warp-aligned group cover q8_1 block `b` (32 floats). Reductions run
//! over those 8 lanes with butterfly shuffles.

use crate::intrinsics::{bid, f32_to_f16, global, ld_v4_f32, st_u32, tid};
use crate::norm_q8::{abs_max, block_amax_sum, quants};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{QUANTIZE_Q8_1_PER_THREAD as PER_THREAD, QUANTIZE_Q8_1_THREADS};

const LANES_PER_BLOCK: u32 = QK8_1 as u32 / PER_THREAD;
const _: () = assert!(LANES_PER_BLOCK == 8 && QUANTIZE_Q8_1_THREADS % 32 == 0);

/// `x`: `n` floats; `y`: `n/32` blocks; `n` a multiple of 32. Threads past `n/4` still take
/// part in the shuffles (a whole 8-lane group is either in range or not, since `n % 32 == 0`)
/// and store nothing.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn quantize_q8_1(x: *const f32, y: *mut BlockQ8_1, n: u32) {
    let g = bid() * QUANTIZE_Q8_1_THREADS + tid();
    let first = g as u64 * PER_THREAD as u64;
    let in_range = first < n as u64;
    let v = if in_range {
        ld_v4_f32(global(x) + first * 4)
    } else {
        [0.0; 4]
    };

    // Element i of the block lives in lane i/4, component i%4. ggml sums with a butterfly over
    // element indices xor 16, 8, 4, 2, 1; xor 16/8/4 are lane xor 4/2/1 per component, and
    // xor 2/1 are the in-thread pairs (0,2),(1,3) then the two halves. Same order, same bits.
    let (amax, sum) = block_amax_sum(abs_max(v), v, LANES_PER_BLOCK / 2);
    let d = amax / 127.0;
    let packed = quants(v, d);

    if in_range {
        let block = g as u64 / LANES_PER_BLOCK as u64;
        let lane_in_block = g % LANES_PER_BLOCK;
        let base = global(y) + block * size_of::<BlockQ8_1>() as u64;
        let qs = base + offset_of!(BlockQ8_1, qs) as u64 + (lane_in_block * PER_THREAD) as u64;
        st_u32(qs, packed);
        if lane_in_block == 0 {
            const _: () = assert!(offset_of!(BlockQ8_1, s) == offset_of!(BlockQ8_1, d) + 2);
            st_u32(
                base + offset_of!(BlockQ8_1, d) as u64,
                f32_to_f16(d) | (f32_to_f16(sum) << 16),
            );
        }
    }
}
