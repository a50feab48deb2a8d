//! A VRAM budget: how many of each MoE layer's routed experts fit in VRAM next to everything else
//! the plan allocates. The rest stay in host-mapped memory behind the slot tables.

use ingot_gguf::Gguf;
use ingot_graph::{build_plan, PlanOptions};
use ingot_model::trace::TraceHeader;
use ingot_model::ModelConfig;

use crate::EngineError;

/// `bytes` in GiB, or in MiB below one GiB.
fn size(bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (MIB * 1024.0))
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB)
    }
}

/// Expert slots per MoE layer for a plan of `ctx` positions in `vram_bytes`: `None` when the whole
/// plan fits, else the most slots that fit (at least the experts a token uses, at most all of
/// them).
pub fn expert_slots(
    header: &Gguf,
    ctx: usize,
    vram_bytes: u64,
) -> Result<Option<usize>, EngineError> {
    let config = ModelConfig::from_gguf(header).map_err(|source| EngineError::Model {
        kind: crate::BackendKind::Sim,
        source,
    })?;
    let plan = build_plan(header, PlanOptions::for_ctx(ctx)).map_err(|e| EngineError::Graph {
        kind: crate::BackendKind::Sim,
        source: e.into(),
    })?;
    let all = plan.summary().device_bytes();
    if all <= vram_bytes {
        return Ok(None);
    }
    // One expert's routed slabs (gate, up, down) per MoE layer.
    let per_layer = TraceHeader::new(header, &config).expert_bytes;
    let one_slot: u64 = per_layer.iter().sum();
    let experts = one_slot * config.n_expert as u64;
    // Beside the slots: every other byte of the plan, plus the slot tables (8 bytes per expert
    // and routed tensor) and each layer's own selection.
    let tables = per_layer.len() as u64 * (3 * 8 * config.n_expert as u64 + 128);
    let fixed = all - experts + tables;
    let need_min = fixed + one_slot * config.n_expert_used as u64;
    if vram_bytes < need_min {
        return Err(EngineError::Budget(format!(
            "a VRAM budget of {} is too small: the weights outside the routed experts, the KV cache \
             of {ctx} positions and the activations need {}, plus {} for the {} experts each token \
             uses in every MoE layer ({} in all); raise the budget or shorten the context",
            size(vram_bytes),
            size(fixed),
            size(one_slot * config.n_expert_used as u64),
            config.n_expert_used,
            size(need_min),
        )));
    }
    let slots = ((vram_bytes - fixed) / one_slot).min(config.n_expert as u64) as usize;
    Ok(Some(slots))
}
