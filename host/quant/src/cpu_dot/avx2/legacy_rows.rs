//! Rows of 32-value blocks with one f16 scale (Q4_0, Q5_0, Q8_0, IQ4_NL) against one to `N` Q8_0
//! activations: four blocks at a time share one horizontal reduction and one vector of scale
//! products, each lane the scalar expression, each row's sum added in block order (the scalar row's
//! bits).

use super::*;

/// How a legacy block's scalar code orders its three factors (f32 products do not associate).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// `isum as f32 · d · d8` (Q4_0, Q5_0, Q8_0).
    SumFirst,
    /// `d · d8 · isum as f32` (IQ4_NL).
    ScalesFirst,
}

/// Four f16 scales as the low four f32 lanes (exact conversions; the upper lanes are 0).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn scales4(d: [u16; 4]) -> __m128 {
    _mm_cvtph_ps(_mm_setr_epi16(
        d[0] as i16,
        d[1] as i16,
        d[2] as i16,
        d[3] as i16,
        0,
        0,
        0,
        0,
    ))
}

/// The results of four blocks from their partial sums `isums` and scales `dx`, `dy`: each lane
/// the scalar expression in the factor order `order` on `Σ isums[k]` (one shared horizontal
/// reduction: exact i32 additions).
#[inline]
#[target_feature(enable = "avx2")]
fn scaled4(isums: [__m256i; 4], dx: __m128, dy: __m128, order: Order) -> [f32; 4] {
    let a = _mm256_hadd_epi32(isums[0], isums[1]);
    let b = _mm256_hadd_epi32(isums[2], isums[3]);
    // Lanes 0..4 hold the low-half sums of blocks 0..4, lanes 4..8 the high-half sums.
    let c = _mm256_hadd_epi32(a, b);
    let s = _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256::<1>(c));
    let isum = _mm_cvtepi32_ps(s);
    let r = match order {
        Order::SumFirst => _mm_mul_ps(_mm_mul_ps(isum, dx), dy),
        Order::ScalesFirst => _mm_mul_ps(_mm_mul_ps(dx, dy), isum),
    };
    bytemuck::cast(r)
}

/// One block's result from its partial sums, in the scalar factor order `order`.
#[inline]
#[target_feature(enable = "avx2")]
fn scaled1(isums: __m256i, dx: f32, dy: f32, order: Order) -> f32 {
    let isum = hsum_i32(isums) as f32;
    match order {
        Order::SumFirst => isum * dx * dy,
        Order::ScalesFirst => dx * dy * isum,
    }
}

/// A row of 32-element blocks with f16 scale `d` against `N` Q8_0 activations (each as many blocks
/// as `row`): per activation `Σ_i isum_i·d_i·d8_i` in the factor order `order`, added to 0.0 in
/// block order, which is the scalar row. Four blocks at a time share one horizontal reduction and
/// one vector of scale products (each lane the scalar expression, so the same bits); each running
/// sum stays sequential. Each group of four weight blocks is unpacked once (`unpack`, into the
/// form that `isums` dots with 32 activations) and its scales converted once for all `N`
/// activations, which take exactly the steps they would take alone: `N = 1` is the one-row
/// kernel, and every `N` gives its bits.
#[inline(always)]
fn legacy_row_multi<B, W: Copy, const N: usize>(
    row: &[B],
    acts: [&[BlockQ8_0]; N],
    order: Order,
    d: impl Fn(&B) -> u16,
    unpack: impl Fn(&B) -> W,
    isums: impl Fn(W, &[i8; 32]) -> __m256i,
) -> [f32; N] {
    let mut sums = [0.0f32; N];
    let groups = row.len() / 4;
    for g in 0..groups {
        let x = &row[4 * g..4 * g + 4];
        let w: [W; 4] = core::array::from_fn(|k| unpack(&x[k]));
        // SAFETY (all target-feature calls below): callers are
        // `#[target_feature(enable = "avx2,f16c")]`.
        let dx = unsafe { scales4(core::array::from_fn(|k| d(&x[k]))) };
        for (s, a) in sums.iter_mut().zip(acts) {
            let y = &a[4 * g..4 * g + 4];
            let r = unsafe {
                let dy = scales4(core::array::from_fn(|k| y[k].d));
                let i = core::array::from_fn(|k| isums(w[k], &y[k].qs));
                scaled4(i, dx, dy, order)
            };
            for v in r {
                *s += v;
            }
        }
    }
    for (i, x) in row.iter().enumerate().skip(4 * groups) {
        let w = unpack(x);
        let dx = unsafe { f16(d(x)) };
        for (s, a) in sums.iter_mut().zip(acts) {
            *s += unsafe { scaled1(isums(w, &a[i].qs), dx, f16(a[i].d), order) };
        }
    }
    sums
}

/// A Q4_0 row against Q8_0 activations (`act.len()` blocks).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn q4_0_row(row: &[BlockQ4_0], act: &[BlockQ8_0]) -> f32 {
    q4_0_row_multi(row, [act])[0]
}

/// A Q5_0 row against Q8_0 activations (`act.len()` blocks).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn q5_0_row(row: &[BlockQ5_0], act: &[BlockQ8_0]) -> f32 {
    q5_0_row_multi(row, [act])[0]
}

/// A Q8_0 row against Q8_0 activations (`act.len()` blocks).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn q8_0_row(row: &[BlockQ8_0], act: &[BlockQ8_0]) -> f32 {
    q8_0_row_multi(row, [act])[0]
}

/// A IQ4_NL row against Q8_0 activations (`act.len()` blocks).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn iq4_nl_row(row: &[BlockIq4Nl], act: &[BlockQ8_0]) -> f32 {
    iq4_nl_row_multi(row, [act])[0]
}

/// A Q4_0 row against `N` Q8_0 activations: [`q4_0_row`] for each, the nibbles unpacked once.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q4_0_row_multi<const N: usize>(row: &[BlockQ4_0], acts: [&[BlockQ8_0]; N]) -> [f32; N] {
    legacy_row_multi(
        row,
        acts,
        Order::SumFirst,
        |x| x.d,
        |x| nibbles32(&x.qs),
        |u, y| offset_isums(u, 8, y),
    )
}

/// A Q5_0 row against `N` Q8_0 activations: [`q5_0_row`] for each, the 5-bit levels unpacked once.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q5_0_row_multi<const N: usize>(row: &[BlockQ5_0], acts: [&[BlockQ8_0]; N]) -> [f32; N] {
    legacy_row_multi(
        row,
        acts,
        Order::SumFirst,
        |x| x.d,
        |x| q5_0_levels(x),
        |u, y| offset_isums(u, 16, y),
    )
}

/// A Q8_0 row against `N` Q8_0 activations: [`q8_0_row`] for each, the weights widened once.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn q8_0_row_multi<const N: usize>(
    row: &[BlockQ8_0],
    acts: [&[BlockQ8_0]; N],
) -> [f32; N] {
    legacy_row_multi(
        row,
        acts,
        Order::SumFirst,
        |x| x.d,
        |x| q8_0_levels(x),
        |w, y| wide_isums(w, y),
    )
}

/// An IQ4_NL row against `N` Q8_0 activations: [`iq4_nl_row`] for each, the code-book values
/// looked up and widened once.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn iq4_nl_row_multi<const N: usize>(
    row: &[BlockIq4Nl],
    acts: [&[BlockQ8_0]; N],
) -> [f32; N] {
    legacy_row_multi(
        row,
        acts,
        Order::ScalesFirst,
        |x| x.d,
        |x| iq4_nl_levels(x),
        |w, y| wide_isums(w, y),
    )
}
