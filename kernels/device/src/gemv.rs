//! Quantized gemv kernels, `y = W·x` with q8_1 activations: per weight type a plain, a grouped
//! and a two-matrix kernel, and for the lm_head types a gemv fused with the greedy argmax, all
//! instances of [`gemv_rows_then`]; and the f32 gemv of the MoE router.
//!
//! Thread mapping (`ingot_abi::launch::gemv`): `lanes = gemv_lanes_per_row(units, T::LANES)`
//! lanes per row, `32 / lanes` rows per warp and pass, `gemv_passes` passes, `GEMV_BLOCK_WARPS`
//! warps per block; a block's rows are consecutive. Each block first stages the activation
//! blocks its rows read in shared memory (`vecdot::stage_act`) and its rows read them there.
//! Before that, it prefetches its rows' weights into L2 and waits for its predecessor grid
//! ([`prefetch_then_wait`]: on sm_90 the weight stream then overlaps the predecessor).
//! The per-type math and each lane's share of a unit are in [`crate::vecdot`].

use crate::intrinsics::ld_v4_f32_relaxed_if;
use crate::intrinsics::{bid, global, ld_v4_f32, st_f32, sub_sum, tid, warp_sum};
use crate::last_block::{last_block_done, reset};
use crate::norm_q8::{quantize_store, quantize_store_shared};
use crate::prefetch::prefetch_then_wait;
use crate::vecdot::{
    self, gemv_unit, row_bytes, row_dot_lane, stage_act, stage_base, SharedAct, WeightType,
    Q8_BYTES,
};
use core::arch::{asm, global_asm, nvptx};
use core::mem::size_of;
use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::{
    gemv_lanes_per_row, gemv_pair_passes, gemv_pair_rows_per_warp, gemv_passes, gemv_rows_per_warp,
    GEMV_BLOCK_WARPS, GEMV_WARPS, WARP_SIZE,
};
use ingot_abi::step::StepState;

/// Threads of a quantized gemv block.
pub(crate) const THREADS: u32 = GEMV_BLOCK_WARPS * WARP_SIZE;

/// Lines each thread prefetches per weight span ([`prefetch_then_wait`]): 2 · 256 threads ·
/// 128 B = 64 KiB per block, which covers every block's rows at the V2-Lite shapes (at most 24
/// rows of 1,680 B, the Q6_K lm_head: 40 KiB).
pub(crate) const GEMV_PREFETCH_LINES: u32 = 2;

/// Prefetches rows `first .. end` of the matrix at `w` (rows of `row_bytes`), then waits for the
/// predecessor grid: the `before` of the one-matrix gemvs.
#[inline(always)]
pub(crate) unsafe fn prefetch_rows(w: u64, row_bytes: u64, first: u32, end: u32) {
    prefetch_then_wait::<GEMV_PREFETCH_LINES, 1>(
        [(w + first as u64 * row_bytes, w + end as u64 * row_bytes)],
        tid(),
        THREADS,
    );
}

/// How a launch's rows read the activation: row `r` reads `ncols/32` q8_1 blocks from block
/// `(r / rows_per_group) · stride` of `x` on (`rows_per_group ≥ 1`).
#[derive(Clone, Copy)]
pub(crate) struct Groups {
    rows_per_group: u32,
    stride: u32,
}

/// Every row reads the same activation (constant, so the divisions fold away).
const ONE_GROUP: Groups = Groups {
    rows_per_group: u32::MAX,
    stride: 0,
};

/// Stages the activation blocks that rows `first ..= last` read (`x` a global address) and returns
/// the group of `first`: row `r` then reads the staged blocks from `(r / rows_per_group − that
/// group) · stride` on ([`staged_row`]). The host checked that the span fits the stage
/// (`ingot_abi::launch::gemv_stage_blocks`). Every thread of the block must call it.
/// `COHERENT`: another block of this launch wrote `x` ([`stage_act`]).
#[inline(always)]
unsafe fn stage_rows<const COHERENT: bool>(
    x: u64,
    g: Groups,
    ncols: u32,
    first: u32,
    last: u32,
) -> u32 {
    let (g0, g1) = (first / g.rows_per_group, last / g.rows_per_group);
    let nblocks = (g1 - g0) * g.stride + ncols / QK8_1 as u32;
    stage_act::<COHERENT>(x + (g0 * g.stride) as u64 * Q8_BYTES, nblocks, THREADS);
    g0
}

/// [`stage_rows`] for the grouped gemv of `attn_k_b` whose activation is the q8_1 of each head's
/// `q_nope`, quantized here from the f32 query `q` (head `h`'s `q_nope` at float `h·q_stride`,
/// `d_nope = 32·g.stride` floats; groups of `g.rows_per_group` rows, one per head) instead of
/// read from a buffer: `quantize_q8_1`'s bits (`quantize_store_shared`), the blocks the rope
/// tail would write. `q` was written by other blocks of the launch (published to this one), so
/// it is read with coherent loads. Every thread of the block must call it.
#[inline(always)]
pub(crate) unsafe fn stage_q_nope(q: u64, q_stride: u32, g: Groups, first: u32, last: u32) -> u32 {
    const LANES: u32 = QK8_1 as u32 / 4;
    let (g0, g1) = (first / g.rows_per_group, last / g.rows_per_group);
    let chunks = ((g1 - g0) * g.stride + g.stride) * LANES;
    let stage = stage_base();
    let t = tid();
    // Whole warps take every round: the quantization's shuffles span a block's 8 lanes. A lane
    // past the last chunk quantizes zeros into a stage block no row reads (the rounds cover
    // at most `GEMV_STAGE_BLOCKS` blocks: the host checked the staged span, a multiple of 32
    // blocks above it is still inside the stage).
    let mut c = t;
    while c < chunks.next_multiple_of(THREADS) {
        let (b, l) = (c / LANES, c % LANES);
        let head = g0 + b / g.stride;
        let at = q + ((head * q_stride + (b % g.stride) * QK8_1 as u32 + 4 * l) as u64) * 4;
        let v = ld_v4_f32_relaxed_if(c < chunks, at);
        quantize_store_shared(v, stage, c);
        c += THREADS;
    }
    nvptx::_syncthreads();
    g0
}

/// Row `r`'s activation in the stage filled by [`stage_rows`] (`g0` its result).
#[inline(always)]
fn staged_row(g: Groups, g0: u32, r: u32) -> SharedAct {
    SharedAct(stage_base() + (r / g.rows_per_group - g0) * g.stride * Q8_BYTES as u32)
}

/// Computes `nrows` row dot products of `ncols` weights of type `T` against `x` read as `g`
/// says: `row(r)` gives row `r`'s weight address and output address. `ncols` a multiple of
/// `T::QK`, or for the 32-element types of 32 (a trailing unpaired block, see `row_dot_lane`).
#[inline(always)]
unsafe fn gemv_rows<T: WeightType>(
    ncols: u32,
    nrows: u32,
    x: u64,
    g: Groups,
    before: impl FnOnce(u32, u32),
    row: impl Fn(u32) -> (u64, u64),
) {
    let stage = |first, last| stage_rows::<false>(x, g, ncols, first, last);
    gemv_rows_then::<T, true, false>(bid(), ncols, nrows, g, before, stage, row, |_, _| {});
}

/// Rows `first ..= last` of block `block` of a gemv over `nrows` rows of `ncols` weights of `T`
/// (`PAIR`: the two-matrix kernels' rows, see [`gemv_rows_then`]).
#[inline(always)]
pub(crate) fn block_span<T: WeightType, const PAIR: bool>(
    block: u32,
    ncols: u32,
    nrows: u32,
) -> (u32, u32) {
    let nunits = ncols / T::QK;
    let rows = GEMV_BLOCK_WARPS
        * if PAIR {
            gemv_pair_rows_per_warp(nunits, gemv_unit::<T>())
        } else {
            gemv_rows_per_warp(nunits, gemv_unit::<T>())
        };
    let row0 = block * rows;
    (row0, (row0 + rows).min(nrows) - 1)
}

/// The thread mapping of block `block` of a gemv over `nrows` rows of `ncols` weights of `T`
/// (`PAIR`: the two-matrix kernels' passes), [`gemv_rows_then`]'s: `lanes` lanes per row,
/// `per_pass = 32 / lanes` rows per warp and pass, `passes` passes, the block's first and last
/// row. The multi-column kernels map their threads by it.
pub(crate) struct RowMap {
    pub lanes: u32,
    pub per_pass: u32,
    pub passes: u32,
    pub row0: u32,
    pub last: u32,
}

#[inline(always)]
pub(crate) fn row_map<T: WeightType, const PAIR: bool>(
    block: u32,
    ncols: u32,
    nrows: u32,
) -> RowMap {
    let nunits = ncols / T::QK;
    let lanes = gemv_lanes_per_row(nunits, T::LANES);
    let per_pass = WARP_SIZE / lanes;
    let passes = if PAIR {
        gemv_pair_passes(nunits, gemv_unit::<T>())
    } else {
        gemv_passes(nunits, gemv_unit::<T>())
    };
    let row0 = block * (GEMV_BLOCK_WARPS * per_pass * passes);
    let last = (row0 + GEMV_BLOCK_WARPS * per_pass * passes).min(nrows) - 1;
    RowMap {
        lanes,
        per_pass,
        passes,
        row0,
        last,
    }
}

/// [`gemv_rows`] as block `block`, then `then(r, y_r)` on the lane that stored row `r`.
/// `before(first, last)` runs first, with the block's first and last row: it must end in the
/// grid-dependency wait ([`prefetch_then_wait`]) and make no global access of its own, unless
/// the caller waited already. `stage(first, last)` then stages the activation blocks of those
/// rows and returns the group of `first` ([`stage_rows`]). Block `b` computes rows
/// `b·R .. b·R + R` (`R = gemv_block_rows`, with `PAIR` the two-matrix kernels' rows of
/// `gemv_pair_passes`): pass `p` of warp `w` takes the `32 / lanes` rows
/// from `b·R + (p·GEMV_BLOCK_WARPS + w)·32/lanes` on. With `EXIT`, a warp whose rows of a pass
/// all lie past the end stops there; without it, it computes the last row and stores nothing,
/// for kernels that meet at a barrier afterwards (a last-block-done tail): an early exit into a
/// barrier made ptxas allocate far more registers for the whole kernel (48 -> 79 for the Q4_K
/// pair gemv with the rope tail, 80 -> 140 for Q3_K, sm_86). No warp leaves before the staging
/// barrier.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_rows_then<T: WeightType, const EXIT: bool, const PAIR: bool>(
    block: u32,
    ncols: u32,
    nrows: u32,
    g: Groups,
    before: impl FnOnce(u32, u32),
    stage: impl FnOnce(u32, u32) -> u32,
    row: impl Fn(u32) -> (u64, u64),
    then: impl Fn(u32, f32),
) {
    // `row_map`'s arithmetic, written out: computed through it, ptxas allocated 1-8 more
    // registers in five `gemv2_*` kernels and 6 more SASS instructions in a hot loop (tried).
    let nunits = ncols / T::QK;
    let lanes = gemv_lanes_per_row(nunits, T::LANES);
    let per_pass = WARP_SIZE / lanes;
    let passes = if PAIR {
        gemv_pair_passes(nunits, gemv_unit::<T>())
    } else {
        gemv_passes(nunits, gemv_unit::<T>())
    };
    let row0 = block * (GEMV_BLOCK_WARPS * per_pass * passes);
    let last = (row0 + GEMV_BLOCK_WARPS * per_pass * passes).min(nrows) - 1;
    before(row0, last);
    let g0 = stage(row0, last);
    let t = tid();
    let lane = t % WARP_SIZE;
    let sub = lane % lanes;
    let mut first = row0 + (t / WARP_SIZE) * per_pass;
    let mut p = 0;
    while p < passes {
        // Whole warps stop together, so the shuffles below always see a full warp.
        if EXIT && first >= nrows {
            break;
        }
        // A row past the end (last warp of a short-row launch, or every row of a warp past the
        // end without `EXIT`) recomputes the last row so its lanes still take part in the
        // shuffles; it stores nothing.
        let want = first + lane / lanes;
        let r = if want < nrows { want } else { nrows - 1 };
        let (wrow, yr) = row(r);
        let xr = staged_row(g, g0, r);
        let total = sub_sum(
            row_dot_lane::<T, SharedAct>(wrow, xr, ncols, sub, lanes),
            lanes,
        );
        if want < nrows && sub == 0 {
            st_f32(yr, total);
            then(want, total);
        }
        first += GEMV_BLOCK_WARPS * per_pass;
        p += 1;
    }
}

/// `w`: `nrows` rows of `ncols/T::QK` units; `x`: q8_1 blocks; `y`: `nrows` floats. Row `r`
/// reads `ncols/32` activation blocks from block `(r / rows_per_group)·x_group_stride` on.
/// `rows_per_group ≥ 1`.
#[inline(always)]
unsafe fn gemv<T: WeightType>(
    w: u64,
    x: u64,
    y: u64,
    ncols: u32,
    nrows: u32,
    rows_per_group: u32,
    x_group_stride: u32,
) {
    let row_bytes = row_bytes::<T>(ncols);
    let g = Groups {
        rows_per_group,
        stride: x_group_stride,
    };
    gemv_rows::<T>(
        ncols,
        nrows,
        x,
        g,
        |first, last| prefetch_rows(w, row_bytes, first, last + 1),
        |r| (w + r as u64 * row_bytes, y + r as u64 * 4),
    );
}

/// `attn_k_b`'s grouped gemv (`n_head·kv_lora` rows of `d_nope` weights of `T` at `w`, into `y`)
/// as block `block` of a chained launch, its activation quantized from the f32 query `q` of
/// heads `q_stride` floats apart ([`stage_q_nope`]); the block prefetched its rows and waited
/// already.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemv_q_nope<T: WeightType>(
    block: u32,
    w: u64,
    (q, q_stride): (u64, u32),
    y: u64,
    d_nope: u32,
    nrows: u32,
    kv_lora: u32,
) {
    let row_bytes = row_bytes::<T>(d_nope);
    let g = Groups {
        rows_per_group: kv_lora,
        stride: d_nope / QK8_1 as u32,
    };
    gemv_rows_then::<T, true, false>(
        block,
        d_nope,
        nrows,
        g,
        |_, _| {},
        |first, last| stage_q_nope(q, q_stride, g, first, last),
        |r| (w + r as u64 * row_bytes, y + r as u64 * 4),
        |_, _| {},
    );
}

/// Two matrices of the same type and width against one activation vector in one launch
/// (`attn_q` and `attn_kv_a_mqa`): rows `0..nrows0` of the launch are `w0`'s into `y0`, the
/// next `nrows1` are `w1`'s into `y1`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemv2<T: WeightType, const EXIT: bool>(
    w: (u64, u64),
    x: u64,
    y: (u64, u64),
    ncols: u32,
    nrows0: u32,
    nrows1: u32,
) {
    gemv2_at::<T, EXIT, true, false>(bid(), w, x, y, ncols, nrows0, nrows1);
}

/// The weight spans of rows `first ..= last` of a [`gemv2`] launch: those below `nrows0` in
/// `w0`, the rest in `w1` (either part may be empty: its span then has end <= start).
#[inline(always)]
pub(crate) fn gemv2_spans<T: WeightType>(
    (w0, w1): (u64, u64),
    ncols: u32,
    nrows0: u32,
    (first, last): (u32, u32),
) -> [(u64, u64); 2] {
    let row_bytes = row_bytes::<T>(ncols);
    let end = last + 1;
    [
        (
            w0 + first as u64 * row_bytes,
            w0 + end.min(nrows0) as u64 * row_bytes,
        ),
        (
            w1 + first.saturating_sub(nrows0) as u64 * row_bytes,
            w1 + end.saturating_sub(nrows0) as u64 * row_bytes,
        ),
    ]
}

/// [`gemv2`]'s block `block`; with `PREFETCH` it prefetches its rows and waits for its
/// predecessor grid first, without it the caller did (a chained launch). `COHERENT`: another
/// block of this launch wrote `x` ([`stage_act`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemv2_at<
    T: WeightType,
    const EXIT: bool,
    const PREFETCH: bool,
    const COHERENT: bool,
>(
    block: u32,
    (w0, w1): (u64, u64),
    x: u64,
    (y0, y1): (u64, u64),
    ncols: u32,
    nrows0: u32,
    nrows1: u32,
) {
    let row_bytes = row_bytes::<T>(ncols);
    gemv_rows_then::<T, EXIT, true>(
        block,
        ncols,
        nrows0 + nrows1,
        ONE_GROUP,
        |first, last| {
            if PREFETCH {
                prefetch_then_wait::<GEMV_PREFETCH_LINES, 2>(
                    gemv2_spans::<T>((w0, w1), ncols, nrows0, (first, last)),
                    tid(),
                    THREADS,
                )
            }
        },
        |first, last| stage_rows::<COHERENT>(x, ONE_GROUP, ncols, first, last),
        |r| {
            let (w, y, i) = if r < nrows0 {
                (w0, y0, r)
            } else {
                (w1, y1, r - nrows0)
            };
            (w + i as u64 * row_bytes, y + i as u64 * 4)
        },
        |_, _| {},
    );
}

/// The lm_head gemv fused with the greedy choice: as the plain gemv (logits still go to `y`),
/// and each row's key (`argmax::key`: larger logit, then lower index) is folded into `*acc`
/// with a 64-bit atomic maximum. `*acc` must be 0 before the launch; the block that finishes
/// last (`count`, a done counter) turns it into the next token, advances the step state and
/// sets `*acc` and the counter back to 0 (`argmax::finish`), so a replayed graph needs no
/// separate launch or reset. Warps past the last row compute it and store nothing (no early
/// exit before the tail's barriers, see [`gemv_rows_then`]).
#[inline(always)]
unsafe fn gemv_argmax<T: WeightType>(
    (w, x, y): (u64, u64, u64),
    (ncols, nrows): (u32, u32),
    (acc, state, count): (u64, *mut StepState, u64),
) {
    let row_bytes = row_bytes::<T>(ncols);
    gemv_rows_then::<T, false, false>(
        bid(),
        ncols,
        nrows,
        ONE_GROUP,
        |first, last| prefetch_rows(w, row_bytes, first, last + 1),
        |first, last| stage_rows::<false>(x, ONE_GROUP, ncols, first, last),
        |r| (w + r as u64 * row_bytes, y + r as u64 * 4),
        |r, v| red_max_u64(acc, crate::argmax::key(v, r)),
    );
    if last_block_done(count, GEMV_BLOCK_WARPS) {
        crate::argmax::finish(acc, state);
        reset(count);
    }
}

/// `*a = max(*a, v)` on global memory (`atom.global.max.u64`; the old value is unused, so
/// ptxas emits a reduction, no round trip).
#[inline(always)]
pub(crate) unsafe fn red_max_u64(a: u64, v: u64) {
    let _old: u64;
    asm!("atom.global.max.u64 {o}, [{a}], {v};", o = out(reg64) _old, a = in(reg64) a,
         v = in(reg64) v, options(nostack));
}

macro_rules! gemv_argmax_kernels {
    (types { $($t:tt)* } mixed_down { $($m:tt)* } mixed_gate_up { $($g:tt)* }
     argmax { $($v:ident $tag:ident $block:ident;)* } $($rest:tt)*) => {$(
        const _: () = {
            /// Fused lm_head gemv + argmax; see [`gemv_argmax`] and `ingot_abi::launch::head`.
            #[export_name = ingot_abi::kernel_name!(argmax, $tag)]
            pub unsafe extern "ptx-kernel" fn kernel(
                w: *const ingot_abi::blocks::$block,
                x: *const BlockQ8_1,
                y: *mut f32,
                ncols: u32,
                nrows: u32,
                acc: *mut u64,
                state: *mut StepState,
                count: *mut u32,
            ) {
                gemv_argmax::<vecdot::$v>(
                    (global(w), global(x), global(y)),
                    (ncols, nrows),
                    (global(acc), state, global(count)),
                );
            }
        };
    )*};
}

ingot_abi::weight_types!(gemv_argmax_kernels);

// The 32 f32 rows of the block's output group, handed from the computing warps to warp 0.
global_asm!(".shared .align 16 .b8 gemv_q8_1_out_rows[128];");

#[inline(always)]
unsafe fn out_rows_addr() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, gemv_q8_1_out_rows;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// The grouped gemv with a q8_1 epilogue: block `b` computes rows `32b .. 32b + 32` exactly as
/// [`gemv`] does (same lanes per row, same reduction order, so the same f32 bits), parks them
/// in shared memory, and warp 0 quantizes them into q8_1 block `b` of `y` as `quantize_q8_1`
/// would (`norm_q8::quantize_store`). `nrows` a multiple of 32; grid `nrows / 32` blocks.
///
/// The block stages the activation of its 32 rows' groups, then its warps take the rows in
/// passes of `GEMV_BLOCK_WARPS · rows_per_warp`; a warp whose rows of a pass all lie past the
/// block's 32 skips it (rows per warp divide 32, so a warp is wholly in or out and its shuffles
/// stay full-warp).
#[inline(always)]
unsafe fn gemv_q8_1_out<T: WeightType>(
    w: u64,
    x: u64,
    y: u64,
    ncols: u32,
    rows_per_group: u32,
    x_group_stride: u32,
) {
    const ROWS: u32 = QK8_1 as u32;
    let lanes = gemv_lanes_per_row(ncols / T::QK, T::LANES);
    let rows_per_warp = WARP_SIZE / lanes;
    let per_pass = GEMV_BLOCK_WARPS * rows_per_warp;
    let row0 = bid() * ROWS;
    let g = Groups {
        rows_per_group,
        stride: x_group_stride,
    };
    let rbytes = row_bytes::<T>(ncols);
    prefetch_rows(w, rbytes, row0, row0 + ROWS);
    let g0 = stage_rows::<false>(x, g, ncols, row0, row0 + ROWS - 1);
    let t = tid();
    let lane = t % WARP_SIZE;
    let warp = t / WARP_SIZE;
    let sub = lane % lanes;
    let rows = out_rows_addr();
    let mut first = warp * rows_per_warp;
    while first < ROWS {
        let k = first + lane / lanes;
        let r = row0 + k;
        let total = sub_sum(
            row_dot_lane::<T, SharedAct>(
                w + r as u64 * rbytes,
                staged_row(g, g0, r),
                ncols,
                sub,
                lanes,
            ),
            lanes,
        );
        if sub == 0 {
            asm!("st.shared.f32 [{a}], {v};", a = in(reg32) rows + 4 * k, v = in(reg32) total,
                 options(nostack));
        }
        first += per_pass;
    }
    nvptx::_syncthreads();
    if warp == 0 {
        // Lanes 0..8 hold rows 4·lane .. 4·lane + 4, the layout `quantize_store` expects; the
        // other lanes join its shuffles with zeros and store nothing.
        let own = lane < ROWS / 4;
        let mut v = [0.0f32; 4];
        if own {
            let mut i = 0;
            while i < 4 {
                asm!("ld.shared.f32 {v}, [{a}];", v = out(reg32) v[i],
                     a = in(reg32) rows + 16 * lane + 4 * i as u32, options(readonly, nostack));
                i += 1;
            }
        }
        quantize_store(
            v,
            y + bid() as u64 * size_of::<BlockQ8_1>() as u64,
            lane,
            own,
        );
    }
}

macro_rules! gemv_kernels {
    (types { $($v:ident $tag:ident $block:ident $($col:literal)* [$($f16:literal),*];)* } $($rest:tt)*) => {$(
        const _: () = {
            /// Plain gemv (one group); see [`gemv`] and `ingot_abi::launch` for the contract.
            #[export_name = ingot_abi::kernel_name!(plain, $tag)]
            pub unsafe extern "ptx-kernel" fn plain(
                w: *const ingot_abi::blocks::$block,
                x: *const BlockQ8_1,
                y: *mut f32,
                ncols: u32,
                nrows: u32,
            ) {
                gemv::<vecdot::$v>(global(w), global(x), global(y), ncols, nrows, u32::MAX, 0);
            }

            /// Grouped gemv; see [`gemv`] and `ingot_abi::launch` for the contract.
            #[export_name = ingot_abi::kernel_name!(grouped, $tag)]
            pub unsafe extern "ptx-kernel" fn grouped(
                w: *const ingot_abi::blocks::$block,
                x: *const BlockQ8_1,
                y: *mut f32,
                ncols: u32,
                nrows: u32,
                rows_per_group: u32,
                x_group_stride: u32,
            ) {
                gemv::<vecdot::$v>(
                    global(w),
                    global(x),
                    global(y),
                    ncols,
                    nrows,
                    rows_per_group,
                    x_group_stride,
                );
            }

            /// Grouped gemv writing q8_1; see [`gemv_q8_1_out`] and `ingot_abi::launch::gemv`.
            #[export_name = ingot_abi::kernel_name!(q8_1_out, $tag)]
            pub unsafe extern "ptx-kernel" fn q8_1_out(
                w: *const ingot_abi::blocks::$block,
                x: *const BlockQ8_1,
                y: *mut BlockQ8_1,
                ncols: u32,
                _nrows: u32,
                rows_per_group: u32,
                x_group_stride: u32,
            ) {
                gemv_q8_1_out::<vecdot::$v>(
                    global(w),
                    global(x),
                    global(y),
                    ncols,
                    rows_per_group,
                    x_group_stride,
                );
            }

            /// Two-matrix gemv; see [`gemv2`] and `ingot_abi::launch` for the contract.
            #[export_name = ingot_abi::kernel_name!(pair, $tag)]
            pub unsafe extern "ptx-kernel" fn pair(
                w0: *const ingot_abi::blocks::$block,
                w1: *const ingot_abi::blocks::$block,
                x: *const BlockQ8_1,
                y0: *mut f32,
                y1: *mut f32,
                ncols: u32,
                nrows0: u32,
                nrows1: u32,
            ) {
                gemv2::<vecdot::$v, true>(
                    (global(w0), global(w1)),
                    global(x),
                    (global(y0), global(y1)),
                    ncols,
                    nrows0,
                    nrows1,
                );
            }
        };
    )*};
}

ingot_abi::weight_types!(gemv_kernels);

/// `w`: `nrows × ncols` floats, `x`: `ncols` floats, `y`: `nrows` floats; `ncols` a multiple
/// of 4. One warp per row; lane `l` reads float4 chunks `l, l + 32, …` of the row and of `x`
/// (16-byte loads, a warp reads 512 contiguous bytes per step).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gemv_f32(
    w: *const f32,
    x: *const f32,
    y: *mut f32,
    ncols: u32,
    nrows: u32,
) {
    let t = tid();
    let lane = t % WARP_SIZE;
    let row = bid() * GEMV_WARPS + t / WARP_SIZE;
    if row >= nrows {
        return;
    }
    let total = f32_row_dot(global(w), global(x), ncols, row, lane);
    if lane == 0 {
        st_f32(global(y) + row as u64 * 4, total);
    }
}

/// `W[row]·x` for the f32 gemv thread mapping (one warp per row, float4 chunks `lane, lane +
/// 32, …`), summed over the warp: every lane gets the total. `w`, `x` global addresses.
#[inline(always)]
pub(crate) unsafe fn f32_row_dot(w: u64, x: u64, ncols: u32, row: u32, lane: u32) -> f32 {
    let chunks = ncols / 4;
    let wrow = w + row as u64 * ncols as u64 * 4;
    let mut acc = 0.0f32;
    let mut c = lane;
    while c < chunks {
        let a = ld_v4_f32(wrow + c as u64 * 16);
        let b = ld_v4_f32(x + c as u64 * 16);
        acc += dot4(a, b);
        c += WARP_SIZE;
    }
    warp_sum(acc)
}

/// `((a0·b0 + a1·b1) + a2·b2) + a3·b3` in f32, each step one `.rn` operation: the per-chunk
/// order of the f32 gemv and of the router logits of a chunk, which give the same bits.
#[inline(always)]
pub(crate) fn dot4(a: [f32; 4], b: [f32; 4]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
}
