//! Checked launches of the mixture-of-experts kernels (`ingot_abi::launch` family `moe`); the
//! router's own launches are in `route`.

use super::gemv::GemvType;
use super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::backend::Accelerator;
use crate::Result;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::moe::*;
use ingot_abi::launch::{DownArgs, GateUpArgs, GateUpRouterArgs, Kernel, KernelDesc, RouterPart};
use std::mem::size_of;

mod ffn_chain;
mod route;

pub use ffn_chain::{moe_ffn, moe_ffn_rope_kb, NextProjections};
use route::check_router;
pub use route::{
    moe_route, moe_route_rows, moe_router_f32, moe_router_logits_rows, Gating, RouteParams,
};

/// Shape of one FFN pass of the gate/up and down kernels. A MoE layer has `n_used` routed
/// experts of width `ff` out of `n_expert` stacked ones, plus shared experts of total width
/// `ff_sh` (0: none); a dense FFN is `n_used = 0` with `ff_sh` its width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FfnShape {
    /// Model width: length of the gate/up rows and of the down output (`n_embd`).
    pub n_embd: usize,
    /// Experts stacked in the routed tensors (`expert_count`).
    pub n_expert: usize,
    /// Routed experts per token (`expert_used_count`), at most [`MAX_EXPERTS_USED`].
    pub n_used: usize,
    /// Width of one routed expert (`expert_feed_forward_length`).
    pub ff: usize,
    /// Width of the shared experts together (`expert_shared_count · ff`), or of a dense FFN.
    pub ff_sh: usize,
}

impl FfnShape {
    /// q8_1 blocks of the SwiGLU activations between the two kernels: `ff/32` per routed slot,
    /// then `ff_sh/32`.
    pub fn act_blocks(&self) -> Option<usize> {
        self.n_used
            .checked_mul(self.ff)?
            .checked_add(self.ff_sh)
            .map(|n| n / QK8_1)
    }

    /// Bytes of the SwiGLU activation buffer.
    pub fn act_bytes(&self) -> Option<usize> {
        self.act_blocks()?.checked_mul(size_of::<BlockQ8_1>())
    }

    /// Checks what both kernels need; `routed`/`shared` are the row multiples of the weight
    /// types along the dimension each kernel reduces over.
    fn check(&self, d: &KernelDesc) -> Result<()> {
        if self.n_embd == 0 {
            return Err(shape(d, "n_embd = 0".into()));
        }
        if self.n_used > MAX_EXPERTS_USED {
            return Err(shape(
                d,
                format!("n_used = {} exceeds {MAX_EXPERTS_USED}", self.n_used),
            ));
        }
        if self.n_used > 0 && (self.n_expert == 0 || self.ff == 0) {
            return Err(shape(
                d,
                format!(
                    "routed experts need n_expert ≥ 1 and ff ≥ 1 (n_expert = {}, ff = {})",
                    self.n_expert, self.ff
                ),
            ));
        }
        if self.n_used == 0 && self.ff_sh == 0 {
            return Err(shape(d, "no routed and no shared experts".into()));
        }
        for (what, v) in [("ff", self.ff), ("ff_sh", self.ff_sh)] {
            if !v.is_multiple_of(QK8_1) {
                return Err(shape(
                    d,
                    format!("{what} = {v} is not a multiple of {QK8_1}"),
                ));
            }
        }
        to_u32(d, "n_expert", self.n_expert)?;
        to_u32(d, "n_embd", self.n_embd)?;
        let rows = self
            .n_used
            .checked_mul(self.ff)
            .and_then(|r| r.checked_add(self.ff_sh));
        to_u32(d, "n_used·ff + ff_sh", rows.unwrap_or(usize::MAX))?;
        Ok(())
    }

    /// Launch scalars `(n_embd, ff, n_used, ff_sh, n_expert)` after [`Self::check`].
    fn scalars(&self) -> [u32; 5] {
        // check() proved every value fits in u32.
        [
            self.n_embd as u32,
            self.ff as u32,
            self.n_used as u32,
            self.ff_sh as u32,
            self.n_expert.max(1) as u32,
        ]
    }
}

pub(crate) fn row_multiple(d: &KernelDesc, what: &str, ty: GemvType, len: usize) -> Result<()> {
    let m = ty.row_multiple();
    if !len.is_multiple_of(m) {
        return Err(shape(
            d,
            format!("{what} = {len} is not a multiple of {m} for {ty:?} rows"),
        ));
    }
    Ok(())
}

/// Bytes of `rows` rows of `cols` weights of type `ty`.
pub(crate) fn weight_bytes(
    ty: GemvType,
    experts: usize,
    rows: usize,
    cols: usize,
) -> Option<usize> {
    bytes(experts, rows, cols / ty.block_elems())?.checked_mul(ty.block_bytes())
}

impl FfnShape {
    /// Bytes of one routed expert's gate (or up) slab of type `ty`: `ff` rows of `n_embd`
    /// weights (twice that for a merged gate/up slab).
    pub fn gate_up_slab(&self, ty: GemvType) -> Option<usize> {
        weight_bytes(ty, 1, self.ff, self.n_embd)
    }

    /// Bytes of one routed expert's down slab of type `ty`: `n_embd` rows of `ff` weights.
    pub fn down_slab(&self, ty: GemvType) -> Option<usize> {
        weight_bytes(ty, 1, self.n_embd, self.ff)
    }

    /// Bytes of an expert table: one device address per expert.
    fn table_bytes(&self) -> Option<usize> {
        self.n_expert.checked_mul(EXPERT_TABLE_ENTRY_BYTES as usize)
    }
}

/// The identity expert table over `stacked`, `n_expert` slabs of `slab` bytes in expert order
/// (`ingot_abi::launch::moe`'s expert tables: entry `e` is the device address of slab `e`), as
/// a new buffer: what [`moe_gate_up`] and [`moe_down`] take for experts that all live in one
/// stacked tensor. Experts elsewhere (VRAM slots, host-mapped memory) take a table the caller
/// writes.
pub fn expert_table<B: Accelerator>(
    b: &mut B,
    stacked: &B::Buf,
    n_expert: usize,
    slab: usize,
) -> Result<B::Buf> {
    let need = n_expert.checked_mul(slab);
    if need.is_none_or(|n| b.buf_len(stacked) < n) {
        return Err(crate::KernelError::BufferTooSmall {
            kernel: "expert_table",
            param: "stacked",
            have: b.buf_len(stacked),
            need: need.unwrap_or(usize::MAX),
        });
    }
    let base = b.address(stacked);
    let entries: Vec<u8> = (0..n_expert as u64)
        .flat_map(|e| stacked_expert(base, slab as u64, e).to_le_bytes())
        .collect();
    let table = b.alloc(entries.len().max(8))?;
    b.upload(&table, &entries)?;
    Ok(table)
}

/// The buffers of [`moe_gate_up`]. The routed ones are `None` exactly when `n_used = 0`, the
/// shared ones exactly when `ff_sh = 0`. The routed weights are expert tables ([`expert_table`]):
/// the launcher checks their length, not the slabs their entries name.
pub struct GateUpBufs<'a, T> {
    /// `n_embd/32` q8_1 blocks: the normalized FFN input, quantized once.
    pub x: &'a T,
    /// The router's [`ExpertSelection`].
    pub sel: Option<&'a T>,
    /// The expert tables of the `[ff][n_embd]` gate and up slabs ([`FfnShape::gate_up_slab`]);
    /// with `merged`, `gate` is the table of `[2·ff][n_embd]` merged slabs (`ffn_gate_up_exps`)
    /// and `up` is `None`.
    pub gate: Option<&'a T>,
    pub up: Option<&'a T>,
    pub merged: bool,
    /// `[ff_sh][n_embd]` shared-expert (or dense) gate and up weights.
    pub gate_sh: Option<&'a T>,
    pub up_sh: Option<&'a T>,
    /// Output: [`FfnShape::act_blocks`] q8_1 blocks.
    pub act: &'a T,
}

/// Whether exactly the parts the shape uses are present.
fn parts<'a, T>(
    d: &KernelDesc,
    what: &str,
    used: bool,
    bufs: &[Option<&'a T>],
) -> Result<Option<Vec<&'a T>>> {
    match (
        used,
        bufs.iter().all(Option::is_some),
        bufs.iter().all(Option::is_none),
    ) {
        (true, true, _) => Ok(Some(bufs.iter().flatten().copied().collect())),
        (false, _, true) => Ok(None),
        (true, _, _) => Err(shape(d, format!("the {what} buffers are missing"))),
        (false, _, _) => Err(shape(
            d,
            format!("{what} buffers given for a shape without them"),
        )),
    }
}

/// `act = q8_1(silu(gate·x) ⊙ up·x)` for the routed experts the selection names and the
/// shared experts, gate and up weights of type `ty` (docs/decode-math.md#moe-ffn). `n_embd` must
/// be a multiple of [`GemvType::row_multiple`], `ff` and `ff_sh` multiples of 32.
pub fn moe_gate_up<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    s: &FfnShape,
    bufs: &GateUpBufs<'_, B::Buf>,
) -> Result<()> {
    moe_gate_up_mixed(b, ty, ty, s, bufs)
}

/// [`moe_gate_up`] with routed gate/up weights of type `routed` and shared ones of type
/// `shared`: a pair of the registry (`GemvType::gate_up_mixed`; a type with itself always is).
/// `n_embd` must be a multiple of both types' row multiples.
pub fn moe_gate_up_mixed<B: Accelerator>(
    b: &mut B,
    routed: GemvType,
    shared: GemvType,
    s: &FfnShape,
    bufs: &GateUpBufs<'_, B::Buf>,
) -> Result<()> {
    gate_up(b, routed, shared, s, bufs, None)
}

/// The router of a fused launch ([`moe_router_gate_up`]): what [`moe_router_f32`] takes.
pub struct FusedRouterBufs<'a, T> {
    /// `n_expert × n_embd` f32 router rows.
    pub w: &'a T,
    /// `n_embd` f32: the normalized FFN input.
    pub x: &'a T,
    /// `n_expert` f32 of scratch for the logits.
    pub logits: &'a T,
    /// `n_expert` f32 selection bias, if the routing has one.
    pub bias: Option<&'a T>,
    /// [`ROUTE_CTL_WORDS`] `u32` words, 0 before the launch (and after it).
    pub ctl: &'a T,
}

/// [`moe_router_f32`] and [`moe_gate_up_mixed`] in one launch (`moe_gate_up_router_*`): the
/// router's blocks route into `bufs.sel`, and the routed blocks wait for that routing.
/// `s.n_used` and `s.n_expert` must be `p`'s, at most `GATE_UP_ROUTER_MAX_EXPERTS`,
/// `s.n_used ≥ 1`, `s.n_embd` a multiple of 4. The output is the bits of the two launches.
pub fn moe_router_gate_up<B: Accelerator>(
    b: &mut B,
    (routed, shared): (GemvType, GemvType),
    s: &FfnShape,
    bufs: &GateUpBufs<'_, B::Buf>,
    router: &FusedRouterBufs<'_, B::Buf>,
    p: &RouteParams,
) -> Result<()> {
    gate_up(b, routed, shared, s, bufs, Some((router, p)))
}

fn gate_up<B: Accelerator>(
    b: &mut B,
    routed: GemvType,
    shared: GemvType,
    s: &FfnShape,
    bufs: &GateUpBufs<'_, B::Buf>,
    router: Option<(&FusedRouterBufs<'_, B::Buf>, &RouteParams)>,
) -> Result<()> {
    match gate_up_args(b, (routed, shared), s, bufs, router)? {
        GateUpLaunch::Plain(k, items, args) => launch(b, k, items, args),
        GateUpLaunch::Router(k, items, args) => launch(b, k, items, args),
    }
}

/// A checked gate/up launch: its kernel, item count and arguments.
pub(crate) enum GateUpLaunch<'a, T> {
    Plain(&'static Kernel<GateUpArgs>, u32, GateUpArgs<&'a T>),
    Router(
        &'static Kernel<GateUpRouterArgs>,
        u32,
        GateUpRouterArgs<&'a T>,
    ),
}

/// The checks of [`moe_gate_up_mixed`] (without `router`) or [`moe_router_gate_up`].
pub(crate) fn gate_up_args<'a, B: Accelerator>(
    b: &B,
    (routed, shared): (GemvType, GemvType),
    s: &FfnShape,
    bufs: &GateUpBufs<'a, B::Buf>,
    router: Option<(&FusedRouterBufs<'a, B::Buf>, &RouteParams)>,
) -> Result<GateUpLaunch<'a, B::Buf>> {
    // A part the shape does not use does not choose the kernel.
    let (ty, shared_ty) = match (s.n_used, s.ff_sh) {
        (0, _) => (shared, shared),
        (_, 0) => (routed, routed),
        _ => (routed, shared),
    };
    let missing = || {
        shape(
            ty.gate_up(),
            format!("no moe_gate_up kernel for routed {ty:?} with shared {shared_ty:?} weights"),
        )
    };
    let plain = GemvType::gate_up_mixed(ty, shared_ty).ok_or_else(missing)?;
    let fused = match router {
        Some(_) => Some(GemvType::gate_up_router_mixed(ty, shared_ty).ok_or_else(missing)?),
        None => None,
    };
    // A fused launch's errors name the fused kernel.
    let d = fused.map_or(&plain.desc, |k| &k.desc);
    s.check(d)?;
    row_multiple(d, "n_embd", ty, s.n_embd)?;
    row_multiple(d, "n_embd", shared_ty, s.n_embd)?;
    let routed = if bufs.merged {
        if bufs.up.is_some() {
            return Err(shape(
                d,
                "an up buffer given with merged gate/up experts".into(),
            ));
        }
        parts(d, "routed", s.n_used > 0, &[bufs.sel, bufs.gate, bufs.gate])?
    } else {
        parts(d, "routed", s.n_used > 0, &[bufs.sel, bufs.gate, bufs.up])?
    };
    let shared = parts(d, "shared", s.ff_sh > 0, &[bufs.gate_sh, bufs.up_sh])?;
    need(b, d, "x", bufs.x, q8_1_bytes(1, s.n_embd))?;
    need(b, d, "act", bufs.act, s.act_bytes())?;
    if let Some(r) = &routed {
        need(b, d, "sel", r[0], Some(size_of::<ExpertSelection>()))?;
        need(b, d, "gate", r[1], s.table_bytes())?;
        need(b, d, "up", r[2], s.table_bytes())?;
    }
    if let Some(sh) = &shared {
        let w = weight_bytes(shared_ty, 1, s.ff_sh, s.n_embd);
        need(b, d, "gate_sh", sh[0], w)?;
        need(b, d, "up_sh", sh[1], w)?;
    }
    // A missing part is never read (no block maps to it); any buffer fills its slot.
    let (sel, gate, up) = routed
        .as_ref()
        .map_or((bufs.x, bufs.x, bufs.x), |r| (r[0], r[1], r[2]));
    let (gate_sh, up_sh) = shared
        .as_ref()
        .map_or((bufs.x, bufs.x), |sh| (sh[0], sh[1]));
    let [n_embd, ff, n_used, ff_sh, n_expert] = s.scalars();
    let layout = if bufs.merged {
        GATE_UP_MERGED
    } else {
        GATE_UP_SEPARATE
    };
    let args = GateUpArgs {
        x: bufs.x,
        sel,
        gate,
        up,
        gate_sh,
        up_sh,
        act: bufs.act,
        ncols: n_embd,
        ff,
        n_used,
        ff_sh,
        n_expert,
        layout,
    };
    let overflow = || shape(d, "the launch's item count overflows u32".into());
    let (Some((r, p)), Some(fused)) = (router, fused) else {
        let items = gate_up_items(n_used, ff, ff_sh).ok_or_else(overflow)?;
        return Ok(GateUpLaunch::Plain(plain, items, args));
    };
    if p.n_used != s.n_used || p.n_expert != s.n_expert || s.n_used == 0 {
        return Err(shape(
            d,
            format!(
                "the router chooses {} of {} experts, the shape has {} of {}",
                p.n_used, p.n_expert, s.n_used, s.n_expert
            ),
        ));
    }
    if p.n_expert > GATE_UP_ROUTER_MAX_EXPERTS as usize {
        return Err(shape(
            d,
            format!(
                "{} experts: the fused router routes at most {GATE_UP_ROUTER_MAX_EXPERTS} \
                 (launch moe_router_f32 first)",
                p.n_expert
            ),
        ));
    }
    let rbufs = (r.w, r.x, r.logits);
    let (flags, n_group, n_group_used) =
        check_router(b, d, ["rw", "rx"], rbufs, r.bias, s.n_embd, p)?;
    need(b, d, "route_ctl", r.ctl, Some(ROUTE_CTL_WORDS as usize * 4))?;
    let items = gate_up_router_items(n_used, ff, ff_sh, n_expert).ok_or_else(overflow)?;
    let router = RouterPart {
        rw: r.w,
        rx: r.x,
        logits: r.logits,
        // Without ROUTE_BIAS the kernel never reads `bias`; the logits fill the slot.
        bias: r.bias.unwrap_or(r.logits),
        route_ctl: r.ctl,
        n_group,
        n_group_used,
        route_flags: flags,
        scale: p.scale,
    };
    let args = GateUpRouterArgs::new(args, router);
    Ok(GateUpLaunch::Router(fused, items, args))
}

/// The buffers of [`moe_down`]. The routed ones are `None` exactly when `n_used = 0`, the
/// shared one exactly when `ff_sh = 0`.
pub struct DownBufs<'a, T> {
    /// The SwiGLU activations [`moe_gate_up`] wrote.
    pub act: &'a T,
    /// The router's [`ExpertSelection`].
    pub sel: Option<&'a T>,
    /// The expert table of the `[n_embd][ff]` down slabs ([`expert_table`],
    /// [`FfnShape::down_slab`]; the launcher checks the table's length only).
    pub down: Option<&'a T>,
    /// `[n_embd][ff_sh]` shared-expert (or dense) down weights.
    pub down_sh: Option<&'a T>,
    /// `n_embd` floats: the residual stream before the FFN.
    pub resid: &'a T,
    /// `n_embd` floats: the residual stream after it (may be `resid` itself).
    pub y: &'a T,
    /// The norm of `y` the last block writes (the kernel's norm tail), or `None`.
    pub norm: Option<DownNorm<'a, T>>,
}

/// The norm tail of [`moe_down`]: `q8 = q8_1(rmsnorm(y)·w)` and `f32` the normalized floats,
/// written by the block that finishes last (`n_embd` a multiple of 32).
pub struct DownNorm<'a, T> {
    /// `n_embd` floats: the norm weights.
    pub w: &'a T,
    /// `n_embd/32` q8_1 blocks.
    pub q8: &'a T,
    /// `n_embd` floats.
    pub f32: &'a T,
    /// A 4-byte done counter holding 0 (the launch leaves it 0 again, so one zeroed counter
    /// serves launch after launch).
    pub count: &'a T,
    pub eps: f32,
}

/// Refuses a shape whose activations (every slot's and the shared experts') exceed the shared
/// stage each `moe_down_*` block copies them into ([`moe_down_stage_fits`]); after
/// [`FfnShape::check`].
fn down_stage_fits(d: &KernelDesc, s: &FfnShape) -> Result<()> {
    let [_, ff, n_used, ff_sh, _] = s.scalars();
    if moe_down_stage_fits(n_used, ff, ff_sh) {
        return Ok(());
    }
    Err(shape(
        d,
        format!(
            "the activations of {n_used} slots of {ff} and {ff_sh} shared are {} q8_1 blocks; \
             the moe_down stage holds {MOE_DOWN_STAGE_BLOCKS} ({MOE_DOWN_STAGE_BYTES} B of \
             shared memory per block)",
            moe_down_stage_blocks(n_used, ff, ff_sh)
        ),
    ))
}

/// The norm tail's arguments of kernel `d` over `n_embd` rows (`norm_w, norm_q8, norm_f32,
/// count, norm, eps`), checked; without a tail, `fill` stands in for the buffers it never reads.
pub(crate) fn down_norm_args<'a, B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    n_embd: usize,
    norm: Option<&DownNorm<'a, B::Buf>>,
    fill: &'a B::Buf,
) -> Result<NormArgs<'a, B::Buf>> {
    let Some(n) = norm else {
        return Ok((fill, fill, fill, fill, DOWN_NORM_NONE, 0.0));
    };
    if !n_embd.is_multiple_of(QK8_1) {
        return Err(shape(
            d,
            format!("norm tail over {n_embd} rows: not whole q8_1 blocks"),
        ));
    }
    if !(n.eps.is_finite() && n.eps >= 0.0) {
        return Err(shape(
            d,
            format!("eps = {} is not a finite non-negative number", n.eps),
        ));
    }
    need(b, d, "norm_w", n.w, bytes(n_embd, 4, 1))?;
    need(b, d, "norm_q8", n.q8, q8_1_bytes(1, n_embd))?;
    need(b, d, "norm_f32", n.f32, bytes(n_embd, 4, 1))?;
    need(b, d, "count", n.count, Some(4))?;
    Ok((n.w, n.q8, n.f32, n.count, DOWN_NORM_Q8_1_F32, n.eps))
}

/// The norm tail's launch arguments: `(norm_w, norm_q8, norm_f32, count, norm, eps)`.
pub(crate) type NormArgs<'a, T> = (&'a T, &'a T, &'a T, &'a T, u32, f32);

/// `y = resid + Σ_k w_k·down_{e_k}·act_k + down_sh·act_sh` (docs/decode-math.md#moe-ffn), then
/// the norm tail when `bufs.norm` is given ([`DownNorm`]), routed down weights of type
/// `routed`, shared of type `shared`. `ff` must be a multiple of `routed`'s
/// [`GemvType::row_multiple`], `ff_sh` of `shared`'s. With `n_used = 0` only `shared`
/// matters, with `ff_sh = 0` only `routed`. The activations must fit the kernel's shared stage
/// ([`moe_down_stage_fits`]; every model of the family does).
pub fn moe_down<B: Accelerator>(
    b: &mut B,
    routed: GemvType,
    shared: GemvType,
    s: &FfnShape,
    bufs: &DownBufs<'_, B::Buf>,
) -> Result<()> {
    let (d, items, args) = down_args(b, (routed, shared), s, bufs)?;
    launch(b, d, items, args)
}

/// A checked down launch: its kernel, item count and arguments.
pub(crate) type DownLaunch<'a, T> = (&'static Kernel<DownArgs>, u32, DownArgs<&'a T>);

/// The checks of [`moe_down`]: its kernel, item count and arguments.
pub(crate) fn down_args<'a, B: Accelerator>(
    b: &B,
    (routed, shared): (GemvType, GemvType),
    s: &FfnShape,
    bufs: &DownBufs<'a, B::Buf>,
) -> Result<DownLaunch<'a, B::Buf>> {
    let (routed, shared) = match (s.n_used, s.ff_sh) {
        (0, _) => (shared, shared),
        (_, 0) => (routed, routed),
        _ => (routed, shared),
    };
    let Some(d) = GemvType::down(routed, shared) else {
        // Every registry type has a down kernel with itself; the error names that family.
        let family: &KernelDesc = match GemvType::down(routed, routed) {
            Some(k) => k,
            None => routed.gate_up(),
        };
        return Err(shape(
            family,
            format!("no moe_down kernel for routed {routed:?} with shared {shared:?} weights"),
        ));
    };
    s.check(d)?;
    if s.n_used > 0 {
        row_multiple(d, "ff", routed, s.ff)?;
    }
    row_multiple(d, "ff_sh", shared, s.ff_sh)?;
    down_stage_fits(d, s)?;
    let r = parts(d, "routed", s.n_used > 0, &[bufs.sel, bufs.down])?;
    let sh = parts(d, "shared", s.ff_sh > 0, &[bufs.down_sh])?;
    need(b, d, "act", bufs.act, s.act_bytes())?;
    need(b, d, "resid", bufs.resid, bytes(s.n_embd, 4, 1))?;
    need(b, d, "y", bufs.y, bytes(s.n_embd, 4, 1))?;
    if let Some(r) = &r {
        need(b, d, "sel", r[0], Some(size_of::<ExpertSelection>()))?;
        need(b, d, "down", r[1], s.table_bytes())?;
    }
    if let Some(sh) = &sh {
        need(
            b,
            d,
            "down_sh",
            sh[0],
            weight_bytes(shared, 1, s.n_embd, s.ff_sh),
        )?;
    }
    // A missing part is never read (zero units or zero slots); any buffer fills its slot.
    let (sel, down) = r.as_ref().map_or((bufs.act, bufs.act), |r| (r[0], r[1]));
    let down_sh = sh.as_ref().map_or(bufs.act, |sh| sh[0]);
    let (norm_w, norm_q8, norm_f32, count, mode, eps) =
        down_norm_args(b, d, s.n_embd, bufs.norm.as_ref(), bufs.act)?;
    let [n_embd, ff, n_used, ff_sh, n_expert] = s.scalars();
    Ok((
        d,
        n_embd,
        DownArgs {
            act: bufs.act,
            sel,
            down,
            down_sh,
            resid: bufs.resid,
            y: bufs.y,
            nrows: n_embd,
            ff,
            n_used,
            ff_sh,
            n_expert,
            norm_w,
            norm_q8,
            norm_f32,
            count,
            norm: mode,
            eps,
        },
    ))
}
