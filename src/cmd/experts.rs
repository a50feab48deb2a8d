//! The expert-cache options `run`, `bench` and `serve` share (`--vram-budget`), and the policy
//! names `replay` takes too.

use anyhow::{bail, Result};
use ingot_engine::{Policy, VramBudget};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum PolicyArg {
    Lru,
    Lfu,
    Ema,
    /// Belady's MIN: needs the future, so `ingot replay` only.
    Belady,
}

impl PolicyArg {
    pub fn policy(self, ema_decay: f64) -> Policy {
        match self {
            PolicyArg::Lru => Policy::Lru,
            PolicyArg::Lfu => Policy::Lfu,
            PolicyArg::Ema => Policy::Ema(ema_decay),
            PolicyArg::Belady => Policy::Belady,
        }
    }
}

#[derive(clap::Args, Clone)]
pub struct ExpertArgs {
    /// GiB of VRAM the GPU plan may use: routed experts that do not fit stay in host memory, read
    /// over the host link on a miss and cached in VRAM slots per MoE layer (--backend sim or cuda).
    #[arg(long, value_name = "GB")]
    pub vram_budget: Option<f64>,
    /// How the VRAM slots are refilled after each token (with --vram-budget).
    #[arg(long, value_enum, default_value_t = PolicyArg::Lru, requires = "vram_budget")]
    pub expert_policy: PolicyArg,
    /// Decay per token of the ema policy.
    #[arg(long, default_value_t = 0.9, requires = "vram_budget")]
    pub ema_decay: f64,
    /// Cache-aware routing: added to the selection score of experts in VRAM (0: off, the model's
    /// own routing; `ingot gate` measures what it costs).
    #[arg(long, default_value_t = 0.0, requires = "vram_budget")]
    pub expert_bonus: f32,
}

impl ExpertArgs {
    pub fn budget(&self) -> Result<Option<VramBudget>> {
        let Some(gb) = self.vram_budget else {
            return Ok(None);
        };
        if !(gb.is_finite() && gb > 0.0) {
            bail!("--vram-budget {gb} must be a positive number of GiB");
        }
        if !(self.ema_decay > 0.0 && self.ema_decay < 1.0) {
            bail!("--ema-decay {} is not in (0, 1)", self.ema_decay);
        }
        if matches!(self.expert_policy, PolicyArg::Belady) {
            bail!("--expert-policy belady needs the future of the routing: it is for `ingot replay`; use lru, lfu or ema");
        }
        if !(self.expert_bonus.is_finite() && self.expert_bonus >= 0.0) {
            bail!("--expert-bonus {} must be 0 or positive", self.expert_bonus);
        }
        Ok(Some(VramBudget {
            bytes: (gb * (1u64 << 30) as f64) as u64,
            policy: self.expert_policy.policy(self.ema_decay),
            route_bonus: self.expert_bonus,
        }))
    }
}
