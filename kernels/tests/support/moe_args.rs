//! Argument lists of the MoE kernels for raw ptx-sim launches (traffic and slot-table tests), in
//! the order of `ingot_abi::launch::moe`'s parameter tables.

use ingot_kernels::ops::moe::FfnShape;
use ptx_sim::{Arg, DevicePtr};

/// The weights of a gate/up launch: the routed experts' tables (identity or slot tables) and
/// the shared tensors.
pub struct GateUpWeights {
    pub gate: DevicePtr,
    pub up: DevicePtr,
    pub gate_sh: DevicePtr,
    pub up_sh: DevicePtr,
}

/// `moe_gate_up_*(x, sel, gate, up, gate_sh, up_sh, act, ncols, ff, n_used, ff_sh, n_expert,
/// layout)`.
pub fn gate_up(
    x: DevicePtr,
    sel: DevicePtr,
    w: &GateUpWeights,
    act: DevicePtr,
    s: &FfnShape,
    layout: u32,
) -> Vec<Arg> {
    vec![
        Arg::Ptr(x),
        Arg::Ptr(sel),
        Arg::Ptr(w.gate),
        Arg::Ptr(w.up),
        Arg::Ptr(w.gate_sh),
        Arg::Ptr(w.up_sh),
        Arg::Ptr(act),
        Arg::U32(s.n_embd as u32),
        Arg::U32(s.ff as u32),
        Arg::U32(s.n_used as u32),
        Arg::U32(s.ff_sh as u32),
        Arg::U32(s.n_expert as u32),
        Arg::U32(layout),
    ]
}

/// `moe_down_*(act, sel, down, down_sh, resid, y, nrows, ff, n_used, ff_sh, n_expert, ...)` without
/// the norm tail (its buffers are never read; `act` stands in for them).
pub fn down(
    act: DevicePtr,
    sel: DevicePtr,
    (down, down_sh): (DevicePtr, DevicePtr),
    (resid, y): (DevicePtr, DevicePtr),
    s: &FfnShape,
) -> Vec<Arg> {
    vec![
        Arg::Ptr(act),
        Arg::Ptr(sel),
        Arg::Ptr(down),
        Arg::Ptr(down_sh),
        Arg::Ptr(resid),
        Arg::Ptr(y),
        Arg::U32(s.n_embd as u32),
        Arg::U32(s.ff as u32),
        Arg::U32(s.n_used as u32),
        Arg::U32(s.ff_sh as u32),
        Arg::U32(s.n_expert as u32),
        Arg::Ptr(act),
        Arg::Ptr(act),
        Arg::Ptr(act),
        Arg::Ptr(act),
        Arg::U32(ingot_abi::launch::DOWN_NORM_NONE),
        Arg::F32(0.0),
    ]
}
