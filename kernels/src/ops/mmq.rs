//! Checked launches of the prefill matrix-matrix products (`ingot_abi::launch` family `mmq`):
//! quantized weights times the q8_1 activations of many tokens, f32 out, token-major.

use super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::backend::Accelerator;
use crate::KernelError;
use crate::Result;
use ingot_abi::launch::{mmq_items, mmq_moe_items, Kernel, KernelDesc, MmqArgs, MmqMoeArgs};
use ingot_abi::weight_types::GemvType;

/// The dense product of weights `ty` ([`GemvType::mmq`]); a type without one is a
/// [`KernelError::Shape`] error naming the family.
fn dense(ty: GemvType) -> Result<&'static Kernel<MmqArgs>> {
    ty.mmq().ok_or_else(|| no_kernel("mmq", ty))
}

/// The expert-grouped product of weights `ty` ([`GemvType::mmq_moe`]), as [`dense`].
fn grouped(ty: GemvType) -> Result<&'static Kernel<MmqMoeArgs>> {
    ty.mmq_moe().ok_or_else(|| no_kernel("mmq_moe", ty))
}

fn no_kernel(kernel: &'static str, ty: GemvType) -> KernelError {
    KernelError::Shape {
        kernel,
        reason: format!("no {kernel} kernel for {ty:?} weights (GemvType::MMQ lists the types)"),
    }
}

/// Checks `ncols` for weights of type `ty`: a positive multiple of the type's block
/// ([`GemvType::block_elems`]: the k-quant tile steps a whole super-block), and a row's bytes
/// within `u32` (the kernels address a row's steps in 32 bits).
fn check_ncols(d: &KernelDesc, ty: GemvType, ncols: usize) -> Result<()> {
    let multiple = ty.block_elems();
    if ncols == 0 || !ncols.is_multiple_of(multiple) {
        return Err(shape(
            d,
            format!("ncols = {ncols} is not a positive multiple of {multiple}"),
        ));
    }
    let row = (ncols / ty.block_elems()).checked_mul(ty.block_bytes());
    if row.is_none_or(|r| u32::try_from(r).is_err()) {
        return Err(shape(d, format!("ncols = {ncols}: a row exceeds 4 GiB")));
    }
    Ok(())
}

/// `y[t·nrows + r] = Σ_k W[r][k]·x_t[k]` for `t < ntok` ([`GemvType::mmq`]): `W` is `nrows`
/// rows of `ncols` weights of type `ty`, `x` is `ntok` rows of `ncols/32` q8_1 blocks (CUDA
/// variant, `s = Σx`), `y` is `ntok × nrows` floats (token-major). `ncols` must be a positive
/// multiple of the type's block (256 for the k-quants, 32 for the 32-weight types:
/// Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1, Q8_0), `nrows`
/// and `ntok` positive. Checks the shape and every buffer, then launches one block per tile.
pub fn mmq<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    nrows: usize,
    ncols: usize,
    ntok: usize,
) -> Result<()> {
    let d = dense(ty)?;
    check_ncols(d, ty, ncols)?;
    if nrows == 0 || ntok == 0 {
        return Err(shape(
            d,
            format!("nrows = {nrows}, ntok = {ntok}: both must be positive"),
        ));
    }
    let ncols32 = to_u32(d, "ncols", ncols)?;
    let nrows32 = to_u32(d, "nrows", nrows)?;
    let ntok32 = to_u32(d, "ntok", ntok)?;
    let items = mmq_items(nrows32, ntok32)
        .ok_or_else(|| shape(d, format!("{nrows} rows × {ntok} tokens: too many tiles")))?;
    let block = (ty.block_elems(), ty.block_bytes());
    need(b, d, "w", w, bytes(nrows, ncols / block.0, block.1))?;
    need(b, d, "x", x, q8_1_bytes(ntok, ncols))?;
    need(b, d, "y", y, bytes(ntok, nrows, 4))?;
    launch(
        b,
        d,
        items,
        MmqArgs {
            w,
            x,
            y,
            ncols: ncols32,
            nrows: nrows32,
            ntok: ntok32,
        },
    )
}

/// The buffers of an expert-grouped launch: `(w, x, pair_token, expert_start, pair_row, y)`.
pub type MoeBufs<'a, B> = (
    &'a <B as Accelerator>::Buf,
    &'a <B as Accelerator>::Buf,
    &'a <B as Accelerator>::Buf,
    &'a <B as Accelerator>::Buf,
    &'a <B as Accelerator>::Buf,
    &'a <B as Accelerator>::Buf,
);

/// The expert-grouped product of prefill's routed experts ([`GemvType::mmq_moe`]):
/// `y[pair_row[p]·rows + r] = Σ_k W_e[r][k]·x_{pair_token[p]}[k]` for every pair `p` in
/// `expert_start[e] .. expert_start[e+1]`. `w` stacks `n_expert` matrices of `rows` rows of
/// `ncols` weights of type `ty`; `x` is `ntok` rows of `ncols/32` q8_1 blocks; `pair_token` holds
/// `n_pairs` token indices sorted by expert, `expert_start` `n_expert + 1` offsets into them,
/// `pair_row` each pair's output row (the identity list `pair_self` for pair-major outputs)
/// (device buffers: the routing is produced on the device, so their contents are not read
/// here; [`check_routing`] checks a host copy, and the kernel clamps offsets to `n_pairs`,
/// reads zeros for tokens `≥ ntok` and stores rows `≥ n_pairs` to row `n_pairs − 1`, so bad
/// contents give wrong numbers, never a stray access); `y` is `n_pairs × rows` floats.
/// `ncols` must be a positive multiple of the type's block (256 or 32); `rows`, `ntok`,
/// `n_pairs` and `n_expert` positive.
/// Checks the shape and every buffer size, then launches [`mmq_moe_items`] blocks.
pub fn mmq_moe<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    (w, x, pair_token, expert_start, pair_row, y): MoeBufs<'_, B>,
    rows: usize,
    ncols: usize,
    ntok: usize,
    n_pairs: usize,
    n_expert: usize,
) -> Result<()> {
    let d = grouped(ty)?;
    check_ncols(d, ty, ncols)?;
    let block = (ty.block_elems(), ty.block_bytes());
    if rows == 0 || ntok == 0 || n_pairs == 0 || n_expert == 0 {
        return Err(shape(
            d,
            format!(
                "rows = {rows}, ntok = {ntok}, n_pairs = {n_pairs}, n_expert = {n_expert}: all \
                 must be positive"
            ),
        ));
    }
    let ncols32 = to_u32(d, "ncols", ncols)?;
    let rows32 = to_u32(d, "rows", rows)?;
    let ntok32 = to_u32(d, "ntok", ntok)?;
    let n_pairs32 = to_u32(d, "n_pairs", n_pairs)?;
    let n_expert32 = to_u32(d, "n_expert", n_expert)?;
    let items = mmq_moe_items(rows32, n_pairs32, n_expert32).ok_or_else(|| {
        shape(
            d,
            format!("{rows} rows × {n_pairs} pairs of {n_expert} experts: too many tiles"),
        )
    })?;
    let w_rows = n_expert.checked_mul(rows);
    need(
        b,
        d,
        "w",
        w,
        w_rows.and_then(|r| bytes(r, ncols / block.0, block.1)),
    )?;
    need(b, d, "x", x, q8_1_bytes(ntok, ncols))?;
    need(b, d, "pair_token", pair_token, bytes(n_pairs, 1, 4))?;
    need(
        b,
        d,
        "expert_start",
        expert_start,
        bytes(n_expert + 1, 1, 4),
    )?;
    need(b, d, "pair_row", pair_row, bytes(n_pairs, 1, 4))?;
    need(b, d, "y", y, bytes(n_pairs, rows, 4))?;
    launch(
        b,
        d,
        items,
        MmqMoeArgs {
            w,
            x,
            pair_token,
            expert_start,
            pair_row,
            y,
            ncols: ncols32,
            rows: rows32,
            ntok: ntok32,
            n_pairs: n_pairs32,
            n_expert: n_expert32,
        },
    )
}

/// Checks a host copy of an expert-grouped routing for [`mmq_moe`] of type `ty` (the errors name
/// its kernel): `expert_start` has
/// `n_expert + 1` entries, starts at 0, never decreases and ends at `pair_token.len()`, and
/// every token index is below `ntok`. The error names the first offending entry.
pub fn check_routing(
    ty: GemvType,
    pair_token: &[u32],
    expert_start: &[u32],
    ntok: usize,
) -> Result<()> {
    let d = grouped(ty)?;
    let n_pairs = pair_token.len();
    match (expert_start.first(), expert_start.last()) {
        (Some(0), Some(&last)) if last as usize == n_pairs && expert_start.len() >= 2 => {}
        _ => {
            return Err(shape(
                d,
                format!(
                    "expert_start must run from 0 to n_pairs = {n_pairs} over n_expert + 1 ≥ 2 \
                     entries, got {} entries from {:?} to {:?}",
                    expert_start.len(),
                    expert_start.first(),
                    expert_start.last()
                ),
            ))
        }
    }
    if let Some(e) = expert_start.windows(2).position(|s| s[1] < s[0]) {
        return Err(shape(
            d,
            format!(
                "expert_start decreases at expert {e}: {} then {}",
                expert_start[e],
                expert_start[e + 1]
            ),
        ));
    }
    if let Some(p) = pair_token.iter().position(|&t| t as usize >= ntok) {
        return Err(shape(
            d,
            format!("pair {p} names token {} of {ntok}", pair_token[p]),
        ));
    }
    Ok(())
}
