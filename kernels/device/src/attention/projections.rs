//! `gemv2_rope_*`: the attention's two projections of the normed token (`attn_q`, `attn_kv_a_mqa`;
//! the two-matrix gemv of `crate::gemv`) with `rope_kv` as a last-block-done tail: the block that
//! finishes its rows last ([`last_block_done`]) rotates the query rope parts, writes every head's
//! `q_nope` as q8_1 and the latent cache row, exactly as `rope_kv_q8_1` does with the gemv's
//! `GEMV_BLOCK_WARPS` warps (as many threads as `rope_kv_q8_1`'s block, so the same reduction
//! order and the same bits), then resets the done counter. One launch instead of two.
//!
//! The tail reads `q` and `kv`, which every block of the launch wrote, with `.relaxed.gpu` loads
//! after the acquire in [`last_block_done`].
//!
//! `gemv2_norm_*`: a low-rank query's two projections (`attn_q_a`, `attn_kv_a_mqa`) with
//! `rmsnorm_q8_1` of the first (`attn_q_a_norm`, the input of `attn_q_b`) as the tail, on the
//! gemv's block of `RMSNORM_Q8_1_THREADS` threads: the same Σx² order, the same bits.

use crate::attention::rope_kv::{rope_kv_impl, step_pos, Dims};
use crate::gemv::gemv2;
use crate::intrinsics::global;
use crate::last_block::{last_block_done, reset};
use crate::norm_q8::rmsnorm_block;
use crate::vecdot;
use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::launch::{GEMV_BLOCK_WARPS, WARP_SIZE};
use ingot_abi::step::StepState;

macro_rules! gemv2_rope_kernels {
    (types { $($v:ident $tag:ident $block:ident $($col:literal)* [$($f16:literal),*];)* } $($rest:tt)*) => {$(
        const _: () = {
        /// See the module docs and `ingot_abi::weight_types::GemvType::pair_rope`.
        #[export_name = ingot_abi::kernel_name!(pair_rope, $tag)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn kernel(
            w0: *const ingot_abi::blocks::$block,
            w1: *const ingot_abi::blocks::$block,
            x: *const BlockQ8_1,
            q: *mut f32,
            kv: *mut f32,
            ncols: u32,
            nrows0: u32,
            nrows1: u32,
            kv_norm: *const f32,
            rope_freq: *const f64,
            state: *const StepState,
            q_pe: *mut f32,
            q_nope_q8: *mut BlockQ8_1,
            cache: *mut u16,
            count: *mut u32,
            n_head: u32,
            d_nope: u32,
            kv_lora: u32,
            n_rope: u32,
            ctx: u32,
            eps: f32,
            mscale: f32,
            cache_type: u32,
        ) {
            let (q, kv) = (global(q), global(kv));
            // No early exit: every warp reaches the done counter's barriers.
            gemv2::<vecdot::$v, false>(
                (global(w0), global(w1)),
                global(x),
                (q, kv),
                ncols,
                nrows0,
                nrows1,
            );
            let count = global(count);
            if !last_block_done(count, GEMV_BLOCK_WARPS) {
                return;
            }
            rope_kv_impl::<true, { GEMV_BLOCK_WARPS * WARP_SIZE }, true>(
                q,
                kv,
                global(kv_norm),
                global(rope_freq),
                step_pos(state),
                global(q_pe),
                global(q_nope_q8),
                global(cache),
                Dims {
                    n_head,
                    d_nope,
                    kv_lora,
                    n_rope,
                    ctx,
                    cache_type,
                },
                eps,
                mscale,
            );
            reset(count);
        }
        };
    )*};
}

ingot_abi::weight_types!(gemv2_rope_kernels);

macro_rules! gemv2_norm_kernels {
    (types { $($v:ident $tag:ident $block:ident $($col:literal)* [$($f16:literal),*];)* } $($rest:tt)*) => {$(
        const _: () = {
        /// See `ingot_abi::launch::projections`'s `gemv2_norm` contract: the two-matrix gemv,
        /// then `rmsnorm_q8_1` of `y0` by the block that finishes last.
        #[export_name = ingot_abi::kernel_name!(pair_norm, $tag)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn kernel(
            w0: *const ingot_abi::blocks::$block,
            w1: *const ingot_abi::blocks::$block,
            x: *const BlockQ8_1,
            y0: *mut f32,
            y1: *mut f32,
            ncols: u32,
            nrows0: u32,
            nrows1: u32,
            norm_w: *const f32,
            y0_q8: *mut BlockQ8_1,
            count: *mut u32,
            eps: f32,
        ) {
            let y0 = global(y0);
            // No early exit: every warp reaches the done counter's barriers.
            gemv2::<vecdot::$v, false>(
                (global(w0), global(w1)),
                global(x),
                (y0, global(y1)),
                ncols,
                nrows0,
                nrows1,
            );
            let count = global(count);
            if !last_block_done(count, GEMV_BLOCK_WARPS) {
                return;
            }
            rmsnorm_block::<{ GEMV_BLOCK_WARPS * WARP_SIZE }, false, true>(
                y0,
                global(norm_w),
                global(y0_q8),
                0,
                nrows0,
                eps,
            );
            reset(count);
        }
        };
    )*};
}

ingot_abi::weight_types!(gemv2_norm_kernels);
