//! The attention's projections of the normed token: the products of the query (full-rank, or
//! low-rank with its norm) and of `attn_kv_a_mqa`, with the rope and `attn_k_b` chained onto the
//! last launch where the registry has the kernels (`ingot_abi::launch::projections`).

use ingot_abi::launch::{
    Gemv2Args, Gemv2NormArgs, Gemv2NormRopeKbArgs, Gemv2RopeArgs, Gemv2RopeKbArgs,
    MoeFfnRopeKbArgs, RmsnormArgs, CHAIN_CTL_WORDS, DOWN_NORM_NONE, RMSNORM_Q8_1,
};
use ingot_gguf::GgmlType;

use super::builder::{buf, u32a, Builder};
use super::kernels as k;
use super::nodes::{gemv_into, gemv_weight, is_f32};
use crate::error::PlanError;
use crate::node::BufRef;

/// `q` and `kv = W_kv_a·x`. A full-rank query is `q = W_q·x`; a low-rank one (V3, Kimi-K2,
/// GLM-4.7: `attention.q_lora_rank`) is `q = W_q_b·q8_1(rmsnorm(W_q_a·x)·q_a_norm)`, the
/// oracle's order. The first product (`W_q` or `W_q_a`) shares `x` with `W_kv_a`: one `gemv2_*`
/// launch when both weights share a type and width, otherwise two plain gemvs.
pub(super) fn projections(
    b: &mut Builder<'_>,
    il: usize,
    x_q8: crate::BufId,
    (q, kv): (crate::BufId, crate::BufId),
    rope_tail: Option<(Rope, crate::BufId, Kb)>,
) -> Result<Tail, PlanError> {
    let c = b.c;
    let name = |s: &str| format!("blk.{il}.{s}");
    let label = |s: &str| format!("blk.{il} {s}");
    let Some(q_lora) = c.q_lora else {
        return pair(b, il, "attn_q", x_q8, (q, kv), rope_tail);
    };
    if !q_lora.is_multiple_of(32) {
        return Err(PlanError::UnsupportedModel(format!(
            "q_lora_rank = {q_lora} is not a multiple of 32 (q8_1 blocks of attn_q_b's input)"
        )));
    }
    let q_a = b.f32_act("act.q_a", q_lora)?;
    let (q_a_norm, _) = b.weight(&name("attn_q_a_norm.weight"), "rmsnorm", &is_f32)?;
    let q_a_q8 = b.q8_act("act.q_a_q8", q_lora)?;
    // attn_q_a's norm rides on its launch as the tail (`gemv2_norm_*`); the rope needs
    // attn_q_b's output, so it rides on attn_q_b's launch; with attn_k_b, all three are one
    // chained launch where the registry has it.
    let norm = pair_norm(b, il, x_q8, (q_a, kv), (q_a_norm, q_a_q8))?;
    if let (Some(n), Some((r, count, kb))) = (norm, rope_tail) {
        if norm_rope_kb_node(b, il, n, (q_a_q8, q, kv), (r, count, kb))? {
            return Ok(Tail::RopeKb);
        }
    }
    if let Some(n) = norm {
        let label = format!("blk.{il} attn_q_a+attn_kv_a_mqa+attn_q_a_norm");
        b.node(k::gemv2_norm(n.ty), label, Some(il), n.items, n.args)?;
    } else {
        pair(b, il, "attn_q_a", x_q8, (q_a, kv), None)?;
        let args = RmsnormArgs {
            x: buf(q_a),
            w: buf(q_a_norm),
            y: buf(q_a_q8),
            n: u32a(q_lora),
            eps: c.rms_eps,
        };
        b.node(
            k::fixed(&RMSNORM_Q8_1),
            label("attn_q_a_norm"),
            Some(il),
            1,
            args,
        )?;
    }
    let Some((r, count, kb)) = rope_tail else {
        gemv_into(
            b,
            &name("attn_q_b.weight"),
            q_a_q8,
            q,
            label("attn_q_b"),
            il,
        )?;
        return Ok(Tail::None);
    };
    // attn_q_b with the rope as its last block's tail: the `gemv2_rope_*` kernel with no
    // second matrix (`nrows1 = 0`, `w0` in `w1`'s slot; `kv` is attn_kv_a_mqa's, written above).
    let (w, info, ncols, nrows) = gemv_weight(b, &name("attn_q_b.weight"), "gemv")?;
    let bufs = (buf(w), buf(w), buf(q_a_q8), buf(q), buf(kv));
    let args = r.gemv2_args(bufs, (u32a(ncols), u32a(nrows), 0), buf(count));
    rope_node(
        b,
        (il, label("attn_q_b+rope_kv")),
        info.ty,
        (ncols, nrows),
        args,
        kb,
    )
}

/// `attn_k_b` as the projections' chained launch takes it: its weight, type and output.
#[derive(Clone, Copy)]
pub(super) struct Kb {
    pub(super) w: crate::BufId,
    pub(super) ty: GgmlType,
    pub(super) q_abs: crate::BufId,
}

/// What the projections' last launch runs beyond the products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tail {
    /// Nothing: the caller plans the rope and `attn_k_b`.
    None,
    /// The rope (`gemv2_rope_*`): the caller plans `attn_k_b`.
    Rope,
    /// The rope, then `attn_k_b` in the same chained launch (`gemv2_rope_kb_*`).
    RopeKb,
}

/// The `gemv2_rope_*` launch `args` of pair type `ty` over `nrows` rows of `ncols`, chained with
/// `attn_k_b` (`kb`) into one `gemv2_rope_kb_*` launch where the registry has that pair.
fn rope_node(
    b: &mut Builder<'_>,
    (il, label): (usize, String),
    ty: GgmlType,
    (ncols, nrows): (usize, usize),
    args: Gemv2RopeArgs<BufRef>,
    kb: Kb,
) -> Result<Tail, PlanError> {
    let c = b.c;
    let kb_shape = (c.d_nope, c.n_head * c.kv_lora);
    if let Some((launch, items)) = k::gemv2_rope_kb((ty, kb.ty), (ncols, nrows), kb_shape) {
        let label = format!("{label}+attn_k_b");
        if after_ffn(b, (ty, kb), args, (&label, items))? {
            return Ok(Tail::RopeKb);
        }
        let chain_ctl = b.act("act.chain_ctl", u64::from(CHAIN_CTL_WORDS) * 4)?;
        let args = Gemv2RopeKbArgs::new(args, (buf(kb.w), buf(kb.q_abs)), buf(chain_ctl));
        b.node(launch, label, Some(il), items, args)?;
        return Ok(Tail::RopeKb);
    }
    let items = k::gemv_pair_items(ty, ncols, nrows);
    b.node(k::gemv2_rope(ty), label, Some(il), items, args)?;
    Ok(Tail::Rope)
}

/// The chained projections (`args`, `items` blocks) joined to the chained MoE FFN that is the
/// plan's last node (`moe_ffn_rope_kb_*`, `ingot_abi::launch::ffn_rope_kb`) where
/// [`super::PlanOptions::chain_layers`] allows, the registry has the row and the FFN's norm tail
/// writes their activation; whether they were. The joined node is the FFN's layer's: the
/// residual stream holds that layer's output after it, as after the FFN alone. Its control
/// words: the FFN's, the projections' own (`act.kb_ctl`: the two parts run in one launch, so
/// not the shared `act.chain_ctl`) and the norm signal's.
fn after_ffn(
    b: &mut Builder<'_>,
    (ty, kb): (GgmlType, Kb),
    args: Gemv2RopeArgs<BufRef>,
    (label, items): (&str, usize),
) -> Result<bool, PlanError> {
    let Some(f) = b
        .last_ffn
        .filter(|f| b.opts.chain_layers && f.node + 1 == b.nodes.len())
    else {
        return Ok(false);
    };
    let Some(launch) = k::moe_ffn_rope_kb(f.types, (ty, kb.ty)) else {
        return Ok(false);
    };
    if f.args.norm == DOWN_NORM_NONE || f.args.norm_q8 != args.x {
        return Ok(false);
    }
    let words = u64::from(CHAIN_CTL_WORDS) * 4;
    let kb_ctl = b.act("act.kb_ctl", words)?;
    let norm_ctl = b.act("act.norm_ctl", words)?;
    let rope = Gemv2RopeKbArgs::new(args, (buf(kb.w), buf(kb.q_abs)), buf(kb_ctl));
    let ffn = b.nodes.pop().expect("the FFN node is the last");
    b.last_ffn = None;
    b.node(
        launch,
        format!("{}+{label}", ffn.label),
        ffn.layer,
        ffn.items as usize + items,
        MoeFfnRopeKbArgs::new(f.args, rope, buf(norm_ctl)),
    )?;
    Ok(true)
}

/// `y = W_{first}·x` and `kv = W_kv_a·x` for the query's first product `first` (`attn_q` or
/// `attn_q_a`): one `gemv2_*` launch when both weights share a type and width, otherwise two
/// plain gemvs. With `rope_tail` (the rope's arguments and the tail's done counter, see
/// `ingot_abi::launch::Gemv2RopeArgs`) the one launch is `gemv2_rope_*`, whose last block runs
/// `rope_kv_q8_1`; returns whether it did (the caller plans the rope otherwise).
fn pair(
    b: &mut Builder<'_>,
    il: usize,
    first: &str,
    x_q8: crate::BufId,
    (y, kv): (crate::BufId, crate::BufId),
    rope_tail: Option<(Rope, crate::BufId, Kb)>,
) -> Result<Tail, PlanError> {
    let (q_name, kv_name) = (
        format!("blk.{il}.{first}.weight"),
        format!("blk.{il}.attn_kv_a_mqa.weight"),
    );
    let label = |s: &str| format!("blk.{il} {s}");
    let (wq, q_info, q_cols, q_rows) = gemv_weight(b, &q_name, "gemv")?;
    let (wkv, kv_info, kv_cols, kv_rows) = gemv_weight(b, &kv_name, "gemv")?;
    if q_info.ty == kv_info.ty && q_cols == kv_cols {
        let items = k::gemv_pair_items(q_info.ty, q_cols, q_rows + kv_rows);
        let (w0, w1, x, y0, y1) = (buf(wq), buf(wkv), buf(x_q8), buf(y), buf(kv));
        let (ncols, nrows0, nrows1) = (u32a(q_cols), u32a(q_rows), u32a(kv_rows));
        let Some((r, count, kb)) = rope_tail else {
            let args = Gemv2Args {
                w0,
                w1,
                x,
                y0,
                y1,
                ncols,
                nrows0,
                nrows1,
            };
            let label = label(&format!("{first}+attn_kv_a_mqa"));
            b.node(k::gemv2(q_info.ty), label, Some(il), items, args)?;
            return Ok(Tail::None);
        };
        let args = r.gemv2_args((w0, w1, x, y0, y1), (ncols, nrows0, nrows1), buf(count));
        let label = label(&format!("{first}+attn_kv_a_mqa+rope_kv"));
        return rope_node(
            b,
            (il, label),
            q_info.ty,
            (q_cols, q_rows + kv_rows),
            args,
            kb,
        );
    }
    gemv_into(b, &q_name, x_q8, y, label(first), il)?;
    gemv_into(b, &kv_name, x_q8, kv, label("attn_kv_a_mqa"), il)?;
    Ok(Tail::None)
}

/// A `gemv2_norm_*` launch (`attn_q_a` and `attn_kv_a_mqa`, its last block writing
/// `q8 = q8_1(rmsnorm(q_a)·norm_w)`, the input of `attn_q_b`) not yet planned: its arguments,
/// its weights' type and width and its items.
#[derive(Clone, Copy)]
struct PairNorm {
    args: Gemv2NormArgs<BufRef>,
    ty: GgmlType,
    ncols: usize,
    nrows: usize,
    items: usize,
}

/// The `gemv2_norm_*` launch of `attn_q_a` and `attn_kv_a_mqa` when both weights share a type
/// and width (`None`: the caller plans the gemvs and the norm).
fn pair_norm(
    b: &mut Builder<'_>,
    il: usize,
    x_q8: crate::BufId,
    (q_a, kv): (crate::BufId, crate::BufId),
    (norm_w, q8): (crate::BufId, crate::BufId),
) -> Result<Option<PairNorm>, PlanError> {
    let (wq, q_info, q_cols, q_rows) =
        gemv_weight(b, &format!("blk.{il}.attn_q_a.weight"), "gemv")?;
    let kv_name = format!("blk.{il}.attn_kv_a_mqa.weight");
    let (wkv, kv_info, kv_cols, kv_rows) = gemv_weight(b, &kv_name, "gemv")?;
    if q_info.ty != kv_info.ty || q_cols != kv_cols {
        return Ok(None);
    }
    // A done counter: 0 before every launch, and each launch leaves it 0 (see `KernelDesc`).
    let count = b.act("act.q_a_norm_count", 4)?;
    let args = Gemv2NormArgs {
        w0: buf(wq),
        w1: buf(wkv),
        x: buf(x_q8),
        y0: buf(q_a),
        y1: buf(kv),
        ncols: u32a(q_cols),
        nrows0: u32a(q_rows),
        nrows1: u32a(kv_rows),
        norm_w: buf(norm_w),
        y0_q8: buf(q8),
        count: buf(count),
        eps: b.c.rms_eps,
    };
    Ok(Some(PairNorm {
        args,
        ty: q_info.ty,
        ncols: q_cols,
        nrows: q_rows + kv_rows,
        items: k::gemv_pair_items(q_info.ty, q_cols, q_rows + kv_rows),
    }))
}

/// `n` and `attn_q_b` (on `q_a_q8`, into `q`) with the rope and `attn_k_b` in one
/// `gemv2_norm_rope_kb_*` launch, where `attn_q_b` has `n`'s type and the registry has the
/// row; returns whether it planned it.
fn norm_rope_kb_node(
    b: &mut Builder<'_>,
    il: usize,
    n: PairNorm,
    (q_a_q8, q, kv): (crate::BufId, crate::BufId, crate::BufId),
    (r, count, kb): (Rope, crate::BufId, Kb),
) -> Result<bool, PlanError> {
    let c = b.c;
    let (w, info, ncols, nrows) = gemv_weight(b, &format!("blk.{il}.attn_q_b.weight"), "gemv")?;
    if info.ty != n.ty {
        return Ok(false);
    }
    let Some((launch, items)) = k::gemv2_norm_rope_kb(
        (n.ty, kb.ty),
        (n.ncols, n.nrows),
        (ncols, nrows),
        (c.d_nope, c.n_head * c.kv_lora),
    ) else {
        return Ok(false);
    };
    let bufs = (buf(w), buf(w), buf(q_a_q8), buf(q), buf(kv));
    let rope = r.gemv2_args(bufs, (u32a(ncols), u32a(nrows), 0), buf(count));
    // The chained kernel takes one eps for the norm and the rope's `kv_norm`.
    if rope.eps.to_bits() != n.args.eps.to_bits() {
        return Ok(false);
    }
    let words = u64::from(CHAIN_CTL_WORDS) * 4;
    let (chain_ctl, norm_ctl) = (
        b.act("act.chain_ctl", words)?,
        b.act("act.norm_ctl", words)?,
    );
    let rope = Gemv2RopeKbArgs::new(rope, (buf(kb.w), buf(kb.q_abs)), buf(chain_ctl));
    let args = Gemv2NormRopeKbArgs::new(n.args, rope, buf(norm_ctl));
    let label = format!("blk.{il} attn_q_a+attn_kv_a_mqa+attn_q_a_norm+attn_q_b+rope_kv+attn_k_b");
    b.node(launch, label, Some(il), items, args)?;
    Ok(true)
}

/// The rope's buffers and scalars (as `ingot_abi::launch::RopeKvQ8_1Args` names them), shared
/// by the `rope_kv_q8_1` node and the `gemv2_rope_*` tail.
#[derive(Clone, Copy)]
pub(super) struct Rope {
    pub(super) kv_norm: BufRef,
    pub(super) rope_freq: BufRef,
    pub(super) state: BufRef,
    pub(super) q_pe: BufRef,
    pub(super) q_nope_q8: BufRef,
    pub(super) cache: BufRef,
    pub(super) n_head: u32,
    pub(super) d_nope: u32,
    pub(super) kv_lora: u32,
    pub(super) n_rope: u32,
    pub(super) ctx: u32,
    pub(super) eps: f32,
    pub(super) mscale: f32,
    pub(super) cache_type: u32,
}

impl Rope {
    /// The arguments of a `gemv2_rope_*` launch: the two-matrix gemv's (`nrows1 = 0`: `w0`
    /// alone, the rope reading the `kv` an earlier launch wrote), then the rope's and the
    /// tail's done counter.
    pub(super) fn gemv2_args(
        &self,
        (w0, w1, x, q, kv): (BufRef, BufRef, BufRef, BufRef, BufRef),
        (ncols, nrows0, nrows1): (u32, u32, u32),
        count: BufRef,
    ) -> Gemv2RopeArgs<BufRef> {
        Gemv2RopeArgs {
            w0,
            w1,
            x,
            q,
            kv,
            ncols,
            nrows0,
            nrows1,
            kv_norm: self.kv_norm,
            rope_freq: self.rope_freq,
            state: self.state,
            q_pe: self.q_pe,
            q_nope_q8: self.q_nope_q8,
            cache: self.cache,
            count,
            n_head: self.n_head,
            d_nope: self.d_nope,
            kv_lora: self.kv_lora,
            n_rope: self.n_rope,
            ctx: self.ctx,
            eps: self.eps,
            mscale: self.mscale,
            cache_type: self.cache_type,
        }
    }
}
