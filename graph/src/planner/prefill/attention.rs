//! Absorbed MLA attention of one layer for a chunk of `T` tokens
//! (docs/decode-math.md#mla-attention, the decode plan's math per token): norm, the two projections
//! as `mmq`, rope and cache rows, the per-head `attn_k_b` and `attn_v_b` as expert-grouped products
//! with the heads as experts, the causal attention, `attn_output` and the residual add.

use ingot_abi::launch::{
    flash_prefill_items, CacheType, FLASH_LATENT_PREFILL, FLASH_LATENT_PREFILL_Q8_0, QUANTIZE_Q8_1,
    ROPE_KV_Q8_1_ROWS,
};
use ingot_abi::launch::{
    FlashPrefillArgs, QuantizeQ8_1Args, RmsnormArgs, RopeKvRowsArgs, RMSNORM_Q8_1,
};

use super::super::attention::{
    absorbed_weight, check_shapes, rope_table, temperature_args, temperature_table, Absorbed,
};
use super::ffn::Routed;
use super::{add_rows, check_mmq_cols, mmq, mmq_type, mmq_weight, norm_rows, ChunkActs};
use crate::buffer::BufId;
use crate::error::PlanError;
use crate::planner::builder::{buf, u32a, Builder};
use crate::planner::nodes::is_f32;

/// Appends layer `il`'s attention over the chunk; `x` holds `x + attn(x)` afterwards.
pub(crate) fn layer(b: &mut Builder<'_>, acts: &ChunkActs, il: usize) -> Result<(), PlanError> {
    let c = b.c;
    check_shapes(b)?;
    let name = |s: &str| format!("blk.{il}.{s}");
    let label = |s: &str| (format!("blk.{il} {s}"), il);
    let t = acts.t;
    let (attn_norm, _) = b.weight(&name("attn_norm.weight"), "rmsnorm", &is_f32)?;
    norm_rows(b, acts, attn_norm, false, label("attn_norm"))?;

    // q and kv = [c | k_pe] per token, token-major (the rope kernel's row layout).
    let q = b.f32_act("pf.q", t * c.n_head * c.d_qk())?;
    let kv = b.f32_act("pf.kv", t * c.cache_row())?;
    match c.q_lora {
        None => {
            let (w, ty, ncols, nrows) = mmq_weight(b, &name("attn_q.weight"), "prefill mmq")?;
            mmq(b, (w, ty), acts.h_q8, q, (ncols, nrows, t), label("attn_q"))?;
        }
        Some(q_lora) => {
            let (w, ty, ncols, nrows) = mmq_weight(b, &name("attn_q_a.weight"), "prefill mmq")?;
            let q_a = b.f32_act("pf.q_a", t * q_lora)?;
            mmq(
                b,
                (w, ty),
                acts.h_q8,
                q_a,
                (ncols, nrows, t),
                label("attn_q_a"),
            )?;
            let (q_a_norm, _) = b.weight(&name("attn_q_a_norm.weight"), "rmsnorm", &is_f32)?;
            let q_a_q8 = b.q8_act("pf.q_a_q8", t * q_lora)?;
            let (lbl, _) = label("attn_q_a_norm");
            b.node(
                super::k::fixed(&RMSNORM_Q8_1),
                lbl,
                Some(il),
                t,
                RmsnormArgs {
                    x: buf(q_a),
                    w: buf(q_a_norm),
                    y: buf(q_a_q8),
                    n: u32a(q_lora),
                    eps: c.rms_eps,
                },
            )?;
            let (w, ty, ncols, nrows) = mmq_weight(b, &name("attn_q_b.weight"), "prefill mmq")?;
            mmq(b, (w, ty), q_a_q8, q, (ncols, nrows, t), label("attn_q_b"))?;
        }
    }
    let (w, ty, ncols, nrows) = mmq_weight(b, &name("attn_kv_a_mqa.weight"), "prefill mmq")?;
    mmq(
        b,
        (w, ty),
        acts.h_q8,
        kv,
        (ncols, nrows, t),
        label("attn_kv_a_mqa"),
    )?;

    let (kv_norm, _) = b.weight(&name("attn_kv_a_norm.weight"), "rmsnorm", &is_f32)?;
    let rope_freq = rope_table(b);
    let q_pe = b.f32_act("pf.q_pe", t * c.n_head * c.d_rope)?;
    let q_nope_q8 = b.q8_act("pf.q_nope_q8", t * c.n_head * c.d_nope)?;
    let cache = b.kv_cache(il)?;
    let step = b.acts.step;
    let (lbl, _) = label("rope_kv");
    b.node(
        super::k::fixed(&ROPE_KV_Q8_1_ROWS),
        lbl,
        Some(il),
        t,
        RopeKvRowsArgs {
            q: buf(q),
            kv: buf(kv),
            kv_norm: buf(kv_norm),
            rope_freq: buf(rope_freq),
            state: buf(step),
            rows: buf(acts.rows),
            q_pe: buf(q_pe),
            q_nope_q8: buf(q_nope_q8),
            cache: buf(cache),
            n_head: u32a(c.n_head),
            d_nope: u32a(c.d_nope),
            kv_lora: u32a(c.kv_lora),
            n_rope: u32a(c.d_rope),
            ctx: u32a(b.opts.ctx),
            eps: c.rms_eps,
            mscale: c.rope.rope_mscale(),
            cache_type: b.opts.cache_type.code(),
            ntok: u32a(t),
        },
    )?;

    // q_abs[t][h] = W_UK[h]·q_nope[t][h]: heads as the experts of an expert-grouped product.
    let heads = head_pairs(b, t)?;
    let q_abs = b.f32_act("pf.q_abs", t * c.n_head * c.kv_lora)?;
    per_head(
        b,
        (il, Absorbed::K),
        heads,
        q_nope_q8,
        q_abs,
        (c.d_nope, c.kv_lora, t),
        label("attn_k_b"),
    )?;

    let o_lat = b.f32_act("pf.o_lat", t * c.n_head * c.kv_lora)?;
    let temperature = temperature_table(b);
    let flash = match b.opts.cache_type {
        CacheType::F16 => &FLASH_LATENT_PREFILL,
        CacheType::Q8_0 => &FLASH_LATENT_PREFILL_Q8_0,
    };
    let (lbl, _) = label("flash_latent_prefill");
    let (temp, temperature) = temperature_args(temperature, q_abs);
    b.node(
        super::k::fixed(flash),
        lbl,
        Some(il),
        flash_prefill_items(c.n_head as u32, t as u32) as usize,
        FlashPrefillArgs {
            q_abs: buf(q_abs),
            q_pe: buf(q_pe),
            cache: buf(cache),
            state: buf(step),
            o_lat: buf(o_lat),
            n_head: u32a(c.n_head),
            kv_lora: u32a(c.kv_lora),
            n_rope: u32a(c.d_rope),
            ctx: u32a(b.opts.ctx),
            ntok: u32a(t),
            kq_scale: c.kq_scale,
            temp,
            temperature,
        },
    )?;
    let n_lat = t * c.n_head * c.kv_lora;
    let o_lat_q8 = b.q8_act("pf.o_lat_q8", n_lat)?;
    quantize(b, o_lat, o_lat_q8, n_lat, label("quantize o_lat"))?;

    // o[t][h] = W_UV[h]·o_lat[t][h], token-major: attn_output's input rows.
    let n_o = c.n_head * c.d_v;
    let o = b.f32_act("pf.o", t * n_o)?;
    per_head(
        b,
        (il, Absorbed::V),
        heads,
        o_lat_q8,
        o,
        (c.kv_lora, c.d_v, t),
        label("attn_v_b"),
    )?;
    let o_q8 = b.q8_act("pf.o_q8", t * n_o)?;
    quantize(b, o, o_q8, t * n_o, label("quantize o"))?;
    let (w, ty, ncols, nrows) = mmq_weight(b, &name("attn_output.weight"), "prefill mmq")?;
    let out = b.f32_act("pf.out", t * c.n_embd)?;
    mmq(
        b,
        (w, ty),
        o_q8,
        out,
        (ncols, nrows, t),
        label("attn_output"),
    )?;
    add_rows(b, acts, out, label("attn residual"))
}

/// The constant pair list of the per-head products of a `t`-token chunk: `(pairs,
/// head_start)`. Pairs are sorted by head, pair `p = h·t + tok` is token `tok`'s head `h`; its
/// input row and its output row are both `tok·n_head + h` (the token-major rows the rope
/// writes and the attention reads), so one list serves as `pair_token` and `pair_row`.
/// `head_start[h] = h·t`.
fn head_pairs(b: &mut Builder<'_>, t: usize) -> Result<(BufId, BufId), PlanError> {
    let n_head = b.c.n_head;
    let pairs_name = format!("pf.const.head_pairs.{t}");
    let start_name = format!("pf.const.head_start.{t}");
    if let (Some(p), Some(s)) = (b.existing(&pairs_name), b.existing(&start_name)) {
        return Ok((p, s));
    }
    let too_many = || PlanError::Overflow(format!("head pairs of a {t}-token chunk"));
    let n_pairs = u32::try_from(n_head * t).map_err(|_| too_many())?;
    let mut pairs = Vec::with_capacity(4 * n_pairs as usize);
    for h in 0..n_head {
        for tok in 0..t {
            pairs.extend(((tok * n_head + h) as u32).to_le_bytes());
        }
    }
    let start: Vec<u8> = (0..=n_head)
        .flat_map(|h| ((h * t) as u32).to_le_bytes())
        .collect();
    Ok((
        b.constant(&pairs_name, pairs),
        b.constant(&start_name, start),
    ))
}

/// `y[tok·n_head + h] = W[h]·x[tok·n_head + h]` for every token and head, `W` the absorbed
/// `attn_k_b` or `attn_v_b` (`n_head` stacked matrices of `rows × ncols`), as one `mmq_moe`
/// launch over the constant head pairs.
fn per_head(
    b: &mut Builder<'_>,
    (il, which): (usize, Absorbed),
    (pairs, head_start): (BufId, BufId),
    x_q8: BufId,
    y: BufId,
    (ncols, rows, t): (usize, usize, usize),
    (label, _): (String, usize),
) -> Result<(), PlanError> {
    let n_head = b.c.n_head;
    let (w, ggml_ty) = absorbed_weight(b, il, which)?;
    let name = b.buffer_name(w);
    let ty = mmq_type(&name, ggml_ty, "prefill per-head mmq_moe")?;
    check_mmq_cols(&name, ty, ncols)?;
    let n_pairs = n_head * t;
    let heads = Routed {
        pair_token: pairs,
        expert_start: head_start,
        pair_row: pairs,
        n_pairs,
        n_expert: n_head,
    };
    heads.product(
        b,
        (w, ty, ncols, n_head * rows),
        x_q8,
        y,
        n_pairs,
        (label, il),
    )
}

/// `y = q8_1(x)` over `n` floats (whole blocks of 32 per row).
fn quantize(
    b: &mut Builder<'_>,
    x: BufId,
    y: BufId,
    n: usize,
    (label, il): (String, usize),
) -> Result<(), PlanError> {
    b.node(
        super::k::fixed(&QUANTIZE_Q8_1),
        label,
        Some(il),
        n,
        QuantizeQ8_1Args {
            x: buf(x),
            y: buf(y),
            n: u32a(n),
        },
    )
}
