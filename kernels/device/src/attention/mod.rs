//! MLA attention of one decode token: `rope_kv` (query/key rotation, latent norm, cache row write;
//! also the tail of the `gemv2_rope_*` projections), `flash_latent` (split-K attention over the
//! latent cache, all heads per block, with the attention temperature's per-position logit scale)
//! and `attn_merge` (log-sum-exp merge of the segments); `cache_q8` holds the q8_0 cache rows'
//! writer and tile loader. Buffer layouts: the docs of `ingot_abi::launch::{ROPE_KV, FLASH_LATENT,
//! ATTN_MERGE}` and their module. For prefill, `flash_latent_prefill` is the causal attention of a
//! chunk of tokens (`ingot_abi::launch::FLASH_LATENT_PREFILL`); `flash_tile` holds what it shares
//! with `flash_latent_mma`.

/// The `#[no_mangle]` entry points of a flash kernel body `impl::<Q8>` (f16 cache, or q8_0 with
/// `Q8`), all with the parameters of `ingot_abi::launch::FLASH_LATENT`: each prefetches the
/// weights handed ahead, then runs the body.
macro_rules! flash_entry_points {
    ($body:ident; $($(#[$doc:meta])* $name:ident => $q8:literal;)*) => {$(
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            q_abs: *const f32,
            q_pe: *const f32,
            cache: *const u16,
            state: *const StepState,
            part_o: *mut u16,
            part_ml: *mut f32,
            n_head: u32,
            kv_lora: u32,
            n_rope: u32,
            ctx: u32,
            max_segments: u32,
            kq_scale: f32,
            temp: *const f32,
            temperature: u32,
            next_a: *const u8,
            next_a_bytes: u32,
            next_b: *const u8,
            next_b_bytes: u32,
        ) {
            // The next launches' weights first: they depend on nothing, and while a short
            // context's attention runs the DRAM has little else to do. Both flash kernels run
            // blocks of `FLASH_THREADS` (asserted below).
            $crate::prefetch::prefetch_ahead_then_wait(
                [(next_a, next_a_bytes), (next_b, next_b_bytes)],
                ingot_abi::launch::FLASH_THREADS,
            );
            $body::<$q8>(
                q_abs,
                q_pe,
                cache,
                state,
                (part_o, part_ml),
                [n_head, kv_lora, n_rope, ctx, max_segments],
                kq_scale,
                temp,
                temperature,
            );
        }
    )*};
}

// `flash_entry_points!` spreads the weights handed ahead over `FLASH_THREADS` threads a block.
const _: () = assert!(ingot_abi::launch::FLASH_THREADS == ingot_abi::launch::FLASH_MMA_THREADS);

mod cache_q8;
mod flash_latent;
mod flash_latent_mma;
mod flash_latent_prefill;
mod flash_tile;
mod merge;
mod merge_v_b;
mod merge_v_b_o;
mod merge_v_b_o_cols;
mod norm_rope_kb;
mod projections;
pub(crate) mod rope_kb;
pub(crate) mod rope_kv;
mod temperature;
