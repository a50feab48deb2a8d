//! Checked launches of a prefill chunk's MoE glue (`ingot_abi::launch` family `moe_prefill`):
//! the expert-sorted pair list, the SwiGLU between the expert-grouped products, and the
//! weighted combine into the residual stream.

use super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::backend::Accelerator;
use crate::Result;
use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::moe::{
    ExpertSelection, GATE_UP_MERGED, GATE_UP_SEPARATE, MAX_EXPERTS_USED, ROUTER_MAX_EXPERTS,
};
use ingot_abi::launch::{
    KernelDesc, MoeCombineArgs, MoePairsArgs, MoeSwigluArgs, MOE_COMBINE, MOE_PAIRS,
    MOE_SWIGLU_Q8_1,
};
use std::mem::size_of;

/// `ntok`, `n_used` and `n_expert` in range for `d`: `ntok ≥ 1`, `1 ≤ n_used ≤
/// MAX_EXPERTS_USED`, `1 ≤ n_expert ≤ ROUTER_MAX_EXPERTS` (when given), `ntok·n_used`
/// within `u32`. Returns `(ntok, n_used, n_pairs)` as `u32`.
fn check_routing_shape(
    d: &KernelDesc,
    ntok: usize,
    n_used: usize,
    n_expert: Option<usize>,
) -> Result<(u32, u32, u32)> {
    if ntok == 0 {
        return Err(shape(d, "ntok = 0: no token".into()));
    }
    if n_used == 0 || n_used > MAX_EXPERTS_USED {
        return Err(shape(
            d,
            format!("n_used = {n_used} is not in 1..={MAX_EXPERTS_USED}"),
        ));
    }
    if let Some(n_expert) = n_expert {
        let max = ROUTER_MAX_EXPERTS as usize;
        if n_expert == 0 || n_expert > max {
            return Err(shape(
                d,
                format!("n_expert = {n_expert} is not in 1..={max}"),
            ));
        }
    }
    let n_pairs = ntok
        .checked_mul(n_used)
        .ok_or_else(|| shape(d, format!("{ntok} tokens × {n_used} choices overflow")))?;
    Ok((
        to_u32(d, "ntok", ntok)?,
        to_u32(d, "n_used", n_used)?,
        to_u32(d, "n_pairs", n_pairs)?,
    ))
}

/// The pair list of a chunk (`ingot_abi::launch::MOE_PAIRS`) from `sel` (`ntok`
/// [`ExpertSelection`]s, `n_used` choices each, ids below `n_expert`; an id past it counts as
/// expert `n_expert − 1`): `expert_start` (`n_expert + 1` words), and `pair_token`, `pair_of`,
/// `pair_self` (`ntok·n_used` words each), sorted by expert, stable in (token, slot) order.
/// One block.
pub fn moe_pairs<B: Accelerator>(
    b: &mut B,
    sel: &B::Buf,
    (expert_start, pair_token, pair_of, pair_self): (&B::Buf, &B::Buf, &B::Buf, &B::Buf),
    ntok: usize,
    n_used: usize,
    n_expert: usize,
) -> Result<()> {
    let d = &MOE_PAIRS;
    let (ntok32, n_used32, _) = check_routing_shape(d, ntok, n_used, Some(n_expert))?;
    let n_pairs = ntok * n_used;
    need(
        b,
        d,
        "sel",
        sel,
        bytes(ntok, size_of::<ExpertSelection>(), 1),
    )?;
    need(
        b,
        d,
        "expert_start",
        expert_start,
        bytes(n_expert + 1, 4, 1),
    )?;
    need(b, d, "pair_token", pair_token, bytes(n_pairs, 4, 1))?;
    need(b, d, "pair_of", pair_of, bytes(n_pairs, 4, 1))?;
    need(b, d, "pair_self", pair_self, bytes(n_pairs, 4, 1))?;
    launch(
        b,
        d,
        1,
        MoePairsArgs {
            sel,
            expert_start,
            pair_token,
            pair_of,
            pair_self,
            ntok: ntok32,
            n_used: n_used32,
            n_expert: to_u32(d, "n_expert", n_expert)?,
        },
    )
}

/// Where [`moe_swiglu_q8_1`] finds the gate and up values.
#[derive(Clone, Copy, Debug)]
pub enum GateUp<'a, Buf> {
    /// `gate` and `up`: `n_pairs × ff` floats each, pair-major.
    Separate { gate: &'a Buf, up: &'a Buf },
    /// `n_pairs × 2·ff` floats: each pair's `ff` gate values, then its `ff` up values.
    Merged(&'a Buf),
}

/// `act[p] = q8_1(silu(gate[p]) ⊙ up[p])` for `n_pairs` pair rows of `ff` values
/// (`ingot_abi::launch::MOE_SWIGLU_Q8_1`): `act` receives `n_pairs × ff/32` q8_1 blocks.
/// `ff` must be a positive multiple of 32, `n_pairs` positive.
pub fn moe_swiglu_q8_1<B: Accelerator>(
    b: &mut B,
    gate_up: GateUp<'_, B::Buf>,
    act: &B::Buf,
    n_pairs: usize,
    ff: usize,
) -> Result<()> {
    let d = &MOE_SWIGLU_Q8_1;
    if ff == 0 || !ff.is_multiple_of(QK8_1) || n_pairs == 0 {
        return Err(shape(
            d,
            format!(
                "ff = {ff} must be a positive multiple of {QK8_1}, n_pairs = {n_pairs} positive"
            ),
        ));
    }
    let n = n_pairs
        .checked_mul(ff)
        .ok_or_else(|| shape(d, format!("{n_pairs} pairs × {ff} overflow")))?;
    let items = to_u32(d, "n_pairs·ff", n)?;
    let (gate, up, layout) = match gate_up {
        GateUp::Separate { gate, up } => {
            need(b, d, "gate", gate, bytes(n, 4, 1))?;
            need(b, d, "up", up, bytes(n, 4, 1))?;
            (gate, up, GATE_UP_SEPARATE)
        }
        GateUp::Merged(gu) => {
            need(b, d, "gate", gu, bytes(n, 2, 4))?;
            // `up` is not read with GATE_UP_MERGED; the merged buffer fills its slot.
            (gu, gu, GATE_UP_MERGED)
        }
    };
    need(b, d, "act", act, q8_1_bytes(n_pairs, ff))?;
    launch(
        b,
        d,
        items,
        MoeSwigluArgs {
            gate,
            up,
            act,
            n_pairs: to_u32(d, "n_pairs", n_pairs)?,
            ff: to_u32(d, "ff", ff)?,
            layout,
        },
    )
}

/// The buffers of [`moe_combine`]: `(sel, pair_of, down, shared, resid, y)`.
pub type CombineBufs<'a, B> = (
    &'a <B as Accelerator>::Buf,
    &'a <B as Accelerator>::Buf,
    &'a <B as Accelerator>::Buf,
    &'a <B as Accelerator>::Buf,
    &'a <B as Accelerator>::Buf,
    &'a <B as Accelerator>::Buf,
);

/// `y[t] = resid[t] + ((Σ_s sel[t].weights[s]·down[pair_of[t·n_used + s]]) + shared[t])` for
/// `ntok` tokens of `n_embd` floats, the slot sum in slot order
/// (`ingot_abi::launch::MOE_COMBINE`). `sel`: `ntok` selections; `pair_of`: `ntok·n_used`
/// words from [`moe_pairs`]; `down`: `ntok·n_used × n_embd` floats in sorted-pair order;
/// `shared`, `resid`, `y`: `ntok × n_embd` floats (`y` may be `resid`). `n_embd` must be a
/// positive multiple of 4.
pub fn moe_combine<B: Accelerator>(
    b: &mut B,
    (sel, pair_of, down, shared, resid, y): CombineBufs<'_, B>,
    n_embd: usize,
    ntok: usize,
    n_used: usize,
) -> Result<()> {
    let d = &MOE_COMBINE;
    let (ntok32, n_used32, _) = check_routing_shape(d, ntok, n_used, None)?;
    if n_embd == 0 || !n_embd.is_multiple_of(4) {
        return Err(shape(
            d,
            format!("n_embd = {n_embd} is not a positive multiple of 4"),
        ));
    }
    let n = ntok
        .checked_mul(n_embd)
        .ok_or_else(|| shape(d, format!("{ntok} tokens × {n_embd} overflow")))?;
    let items = to_u32(d, "ntok·n_embd", n)?;
    let n_pairs = ntok * n_used;
    need(
        b,
        d,
        "sel",
        sel,
        bytes(ntok, size_of::<ExpertSelection>(), 1),
    )?;
    need(b, d, "pair_of", pair_of, bytes(n_pairs, 4, 1))?;
    need(b, d, "down", down, bytes(n_pairs, n_embd, 4))?;
    need(b, d, "shared", shared, bytes(n, 4, 1))?;
    need(b, d, "resid", resid, bytes(n, 4, 1))?;
    need(b, d, "y", y, bytes(n, 4, 1))?;
    launch(
        b,
        d,
        items,
        MoeCombineArgs {
            sel,
            pair_of,
            down,
            shared,
            resid,
            y,
            n_embd: to_u32(d, "n_embd", n_embd)?,
            ntok: ntok32,
            n_used: n_used32,
        },
    )
}
