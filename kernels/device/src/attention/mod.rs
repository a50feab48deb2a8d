//! MLA attention of one decode token: `rope_kv` (query/key rotation, latent norm, cache row
//! write; also the tail of the `gemv2_rope_*` projections), `flash_latent` (split-K attention
//! over the latent cache, all heads per block, with the attention temperature's
//! per-position logit scale) and `attn_merge` (log-sum-exp merge of the
//! segments); `cache_q8` holds the q8_0 cache rows' writer and tile loader. Buffer layouts: the docs of `ingot_abi::launch::{ROPE_KV, FLASH_LATENT,
//! ATTN_MERGE}` and their module.

mod cache_q8;
mod flash_latent;
mod flash_latent_mma;
mod merge;
mod merge_v_b;
mod projections;
pub(crate) mod rope_kv;
mod temperature;
