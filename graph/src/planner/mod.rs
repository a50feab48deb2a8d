//! Building the decode plan from a model configuration and the file's tensor table.
//!
//! One function per part of the step (embedding, attention, FFN, head) appends its nodes
//! (`head`, `attention`, `ffn`; `mtp` and `prefill` build the other plans from the same parts,
//! `verify` widens a decode plan to several positions).
//! What they share: `builder` (the `Builder`: buffer declarations, node creation, argument
//! constructors), `nodes` (the node helpers every part uses), `kernels` (kernel names and work
//! items). Kernel arguments follow the parameter lists in `ingot_abi::launch`; [`Plan::check`]
//! verifies them against the table before anything runs.

mod attention;
mod builder;
mod ffn;
mod head;
pub mod kernels;
pub mod mtp;
mod nodes;
pub mod prefill;
mod projections;
pub mod verify;

use ingot_gguf::Gguf;
use ingot_model::{CacheType, ModelConfig};

use crate::error::PlanError;
use crate::plan::Plan;
use builder::Builder;

/// Choices that are not in the file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanOptions {
    /// Positions the KV cache holds (`--ctx`).
    pub ctx: usize,
    /// Most blocks the flash launch takes: one per SM of the GPU the plan is for. The planner
    /// splits the context into `min(⌈ctx / 64⌉, flash_blocks / head groups)` segments (at least
    /// one; 64 rows = `FLASH_MIN_SEGMENT_TILES` tiles); any value ≥ 1 gives the same result up
    /// to f32 summation order.
    pub flash_blocks: u32,
    /// Routed experts beyond VRAM: each MoE layer keeps this many experts in VRAM
    /// slots and the rest in host-mapped memory, read through slot tables. `None`: all in VRAM.
    pub expert_cache: Option<ExpertCacheOptions>,
    /// How the latent cache stores its rows (`--cache-type`).
    pub cache_type: CacheType,
    /// A chained MoE FFN and the next layer's chained projections run as one launch
    /// (`moe_ffn_rope_kb_*`) where the registry has the row; `false` keeps them two (the same
    /// bits: the tests compare both plans).
    pub chain_layers: bool,
    /// Rows of the NextN/MTP block's lm_head the block's plan computes: drafts chosen among the
    /// first `n` token ids (`--draft-vocab`) need no more. `None`: the whole vocabulary.
    pub mtp_head_rows: Option<usize>,
}

/// Slots per MoE layer and the policy that fills them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpertCacheOptions {
    pub slots: usize,
    pub policy: ingot_model::expert_cache::Policy,
    /// Cache-aware routing: added to the selection score (not the weight) of every expert that
    /// holds a VRAM slot, so near-ties go to cached experts. 0: off, the model's own routing.
    pub route_bonus: f32,
}

/// Streaming multiprocessors of the GPU the default split is sized for (an RTX 3090).
pub const TARGET_SM_COUNT: u32 = 82;

impl PlanOptions {
    /// `ctx` positions with the split sized for [`TARGET_SM_COUNT`] SMs
    /// (see [`PlanOptions::for_device`]).
    pub fn for_ctx(ctx: usize) -> Self {
        Self::for_device(ctx, TARGET_SM_COUNT)
    }

    /// `ctx` positions with up to one flash block per SM of a GPU with `sm_count` SMs. One,
    /// because one is all an SM holds: 256 threads of 214 registers (`flash_latent_mma`, sm_86
    /// and sm_90, audit budgets) take most of an SM's 65536, so a second block per SM only ran
    /// as a second wave, and each segment costs a partial output (`n_head·kv_lora·4` B = 32 KB
    /// at V2-Lite shapes) written by the flash and read by the merge: at depth 32768 two per SM
    /// were 5.4 MB of the 43 MB a layer's attention moved. Several head groups share the blocks
    /// (see [`PlanOptions::flash_blocks`]).
    pub fn for_device(ctx: usize, sm_count: u32) -> Self {
        PlanOptions {
            ctx,
            flash_blocks: sm_count.clamp(1, 1024),
            expert_cache: None,
            cache_type: CacheType::F16,
            chain_layers: true,
            mtp_head_rows: None,
        }
    }

    /// Blocks per head group of the flash launch (its `max_segments`) for `n_head` heads:
    /// [`PlanOptions::flash_blocks`] shared by the head groups, so the launch stays within one
    /// block per SM (GLM-4.7-Flash's 2 groups, Kimi-K2's 4 and V3's 8 would otherwise run as
    /// that many waves and write that many more partial outputs). At least one. Not bounded by
    /// the context: while it holds fewer segments than blocks, the group's spare blocks share
    /// its heads ([`flash_block`](ingot_abi::launch::flash_block)), so a short or middling
    /// context still spreads its query, its rows' reads and its output over the SMs; blocks
    /// without work exit at once.
    pub fn flash_split(&self, n_head: usize) -> usize {
        use ingot_abi::launch::flash_head_groups;
        let groups = flash_head_groups(u32::try_from(n_head).unwrap_or(u32::MAX)).max(1);
        ((self.flash_blocks / groups) as usize).max(1)
    }
}

/// Builds the plan of one decode step for the model whose header is `gguf`.
pub fn build_plan(gguf: &Gguf, opts: PlanOptions) -> Result<Plan, PlanError> {
    let config = ModelConfig::from_gguf(gguf)?;
    build_plan_for(&config, gguf, opts)
}

/// [`build_plan`] with the configuration already parsed.
pub fn build_plan_for(
    config: &ModelConfig,
    gguf: &Gguf,
    opts: PlanOptions,
) -> Result<Plan, PlanError> {
    check_ctx(config, opts)?;
    let mut b = Builder::new(config, gguf, opts)?;
    head::embedding(&mut b)?;
    for il in 0..config.n_layer {
        attention::layer(&mut b, il)?;
        if config.is_moe_layer(il) {
            ffn::moe(&mut b, il)?;
        } else {
            ffn::dense(&mut b, il)?;
        }
    }
    head::output(&mut b)?;
    Ok(b.finish())
}

/// Rejects a context the cache cannot hold: 0, past the training context, or past `u32`.
fn check_ctx(config: &ModelConfig, opts: PlanOptions) -> Result<(), PlanError> {
    if opts.ctx == 0 || opts.ctx > config.n_ctx_train {
        return Err(PlanError::Context {
            ctx: opts.ctx,
            reason: format!("must be in 1..={}", config.n_ctx_train),
        });
    }
    if u32::try_from(opts.ctx).is_err() {
        return Err(PlanError::Context {
            ctx: opts.ctx,
            reason: "exceeds u32".into(),
        });
    }
    Ok(())
}
