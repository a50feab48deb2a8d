//! Small numeric kernels shared by the oracle and the CPU backend.

/// `out = x · w / sqrt(mean(x²) + eps)`, the sum of squares accumulated in f64 (as ggml's CPU
/// rms_norm does).
pub fn rmsnorm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    debug_assert!(x.len() == w.len() && x.len() == out.len());
    let sum: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let scale = 1.0 / (sum / x.len() as f64 + eps as f64).sqrt();
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = (v as f64 * scale * g as f64) as f32;
    }
}

/// In-place [`rmsnorm`].
pub fn rmsnorm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let sum: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let scale = 1.0 / (sum / x.len() as f64 + eps as f64).sqrt();
    for (v, &g) in x.iter_mut().zip(w) {
        *v = (*v as f64 * scale * g as f64) as f32;
    }
}

/// Numerically stable softmax over f64 scores, in place.
pub fn softmax_f64(s: &mut [f64]) {
    let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    for v in s.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in s.iter_mut() {
        *v /= sum;
    }
}

/// `z / (1 + e^-z)`.
pub fn silu(z: f32) -> f32 {
    z / (1.0 + (-z).exp())
}

/// `gate[i] = silu(gate[i]) · up[i]`, the SwiGLU combination of the FFN.
pub fn swiglu_in_place(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = silu(*g) * u;
    }
}

/// Dot product accumulated in f64.
pub fn dot_f64(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
}

/// Dot product in f32 with eight independent accumulators (lets the compiler vectorise), summed in
/// order at the end. The same operations on every instruction set (on AVX2 as 256-bit vectors), so
/// the result does not depend on it.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked on the line above).
        return unsafe { dot_f32_avx2(a, b) };
    }
    dot_f32_body(a, b)
}

/// [`dot_f32_body`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_f32_avx2(a: &[f32], b: &[f32]) -> f32 {
    dot_f32_body(a, b)
}

#[inline(always)]
fn dot_f32_body(a: &[f32], b: &[f32]) -> f32 {
    dot_body::<false>(a, b)
}

/// [`dot_f32`] with every product added by a fused multiply-add (`acc = fma(x, y, acc)`, one
/// rounding): the same eight lanes and the same order, so the result does not depend on the
/// instruction set either (without FMA hardware, `f32::mul_add` computes the same fused value in
/// software, slowly).
pub fn dot_f32_fused(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: the CPU has AVX2 and FMA (checked on the line above).
        return unsafe { dot_fused_fma(a, b) };
    }
    dot_body::<true>(a, b)
}

/// Whether this CPU runs the fused kernels in hardware (AVX2 and FMA).
#[cfg(target_arch = "x86_64")]
fn has_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dot_fused_fma(a: &[f32], b: &[f32]) -> f32 {
    dot_body::<true>(a, b)
}

/// `acc + x·y`, rounded once when `FUSED`, twice (product, then sum) otherwise.
#[inline(always)]
fn madd<const FUSED: bool>(acc: f32, x: f32, y: f32) -> f32 {
    if FUSED {
        x.mul_add(y, acc)
    } else {
        acc + x * y
    }
}

#[inline(always)]
fn dot_body<const FUSED: bool>(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = dot_tail::<FUSED>(ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] = madd::<FUSED>(acc[k], x[k], y[k]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// The elements past the last whole group of eight: unfused, the products summed from 0 (as
/// `Iterator::sum` does); fused, each added to the running sum by one multiply-add.
#[inline(always)]
fn dot_tail<const FUSED: bool>(a: &[f32], b: &[f32]) -> f32 {
    if FUSED {
        a.iter().zip(b).fold(0.0, |s, (&x, &y)| x.mul_add(y, s))
    } else {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }
}

/// `out[j] = fma(p[nt−1], r_{nt−1}[j], …fma(p[0], r_0[j], out[j]))` for `j < out.len()`, `r_t` the
/// row at `rows[t·stride..]`: the rows weighted by `p` and added to `out`, one fused multiply-add
/// (one rounding) per row, in row order. Rows taken in consecutive parts, each part added this way,
/// give the one call's bits. The columns are taken 64 at a time so their sums stay in registers
/// while the rows stream by; blocking changes no element's order of operations, so the result
/// depends on neither it nor the instruction set ([`dot_f32_fused`]).
pub fn weighted_rows_add_fused(p: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    assert!(p.is_empty() || rows.len() >= (p.len() - 1) * stride + out.len());
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: the CPU has AVX2 and FMA (checked on the line above).
        return unsafe { weighted_rows_fma(p, rows, stride, out) };
    }
    weighted_rows_body::<true>(p, rows, stride, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn weighted_rows_fma(p: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    weighted_rows_body::<true>(p, rows, stride, out)
}

/// [`weighted_rows_add_fused`] for `m` weight vectors over the same `nt` rows: for `i < m`,
/// `out[i·out_stride..][..width]` ends as `weighted_rows_add_fused(&p[i·p_stride..][..nt], rows,
/// stride, ..)` leaves it, bit for bit (each element the same fused multiply-adds in row order). On
/// AVX2, tiles of `MULTI_P` weight vectors × 16 columns load each row's values once for all the
/// tile's vectors.
pub fn weighted_rows_add_fused_multi(
    (p, p_stride, m): (&[f32], usize, usize),
    nt: usize,
    (rows, stride): (&[f32], usize),
    (out, out_stride, width): (&mut [f32], usize, usize),
) {
    assert!(
        m == 0 || (p.len() >= (m - 1) * p_stride + nt && out.len() >= (m - 1) * out_stride + width)
    );
    assert!(nt == 0 || rows.len() >= (nt - 1) * stride + width);
    #[cfg(target_arch = "x86_64")]
    let done = if has_fma() {
        // SAFETY: the CPU has AVX2 and FMA (checked on the line above).
        unsafe {
            weighted_multi_fma(
                (p, p_stride, m),
                nt,
                (rows, stride),
                (out, out_stride, width),
            )
        }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for i in done..m {
        let o = &mut out[i * out_stride..][..width];
        weighted_rows_add_fused(&p[i * p_stride..][..nt], rows, stride, o);
    }
}

/// Weight vectors per tile of [`weighted_rows_add_fused_multi`]: 8 accumulator vectors (4 × 16
/// columns), 2 row vectors and a broadcast weight fit the 16 AVX2 registers.
const MULTI_P: usize = 4;

/// The whole tiles of [`weighted_rows_add_fused_multi`] (every column of the first `m / MULTI_P ·
/// MULTI_P` weight vectors); returns how many weight vectors it finished.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn weighted_multi_fma(
    (p, p_stride, m): (&[f32], usize, usize),
    nt: usize,
    (rows, stride): (&[f32], usize),
    (out, out_stride, width): (&mut [f32], usize, usize),
) -> usize {
    use std::arch::x86_64::{
        _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    };
    let tiles = m / MULTI_P * MULTI_P;
    let cols = width / 16 * 16;
    for i0 in (0..tiles).step_by(MULTI_P) {
        for j0 in (0..cols).step_by(16) {
            // SAFETY (every load and store below): `out` holds `width ≥ j0 + 16` values from each
            // of the tile's row starts, `rows` holds `width` from each `t·stride`, `p` holds `nt`
            // from each `i·p_stride` (asserted by the caller).
            let mut acc = [[_mm256_setzero_ps(); 2]; MULTI_P];
            for (i, a) in acc.iter_mut().enumerate() {
                let o = out[(i0 + i) * out_stride + j0..][..16].as_ptr();
                *a = unsafe { [_mm256_loadu_ps(o), _mm256_loadu_ps(o.add(8))] };
            }
            for t in 0..nt {
                let r = rows[t * stride + j0..][..16].as_ptr();
                let (r0, r1) = unsafe { (_mm256_loadu_ps(r), _mm256_loadu_ps(r.add(8))) };
                for (i, a) in acc.iter_mut().enumerate() {
                    let w = _mm256_set1_ps(p[(i0 + i) * p_stride + t]);
                    a[0] = _mm256_fmadd_ps(w, r0, a[0]);
                    a[1] = _mm256_fmadd_ps(w, r1, a[1]);
                }
            }
            for (i, a) in acc.iter().enumerate() {
                let o = out[(i0 + i) * out_stride + j0..][..16].as_mut_ptr();
                unsafe {
                    _mm256_storeu_ps(o, a[0]);
                    _mm256_storeu_ps(o.add(8), a[1]);
                }
            }
        }
        for i in i0..i0 + MULTI_P {
            let o = &mut out[i * out_stride..][..width];
            let pi = &p[i * p_stride..][..nt];
            for (j, o) in o.iter_mut().enumerate().skip(cols) {
                *o = pi
                    .iter()
                    .enumerate()
                    .fold(*o, |a, (t, &pt)| pt.mul_add(rows[t * stride + j], a));
            }
        }
    }
    tiles
}

/// Columns per register block of [`weighted_rows_add_fused`]: 8 AVX2 vectors of sums.
const WEIGHTED_BLOCK: usize = 64;

#[inline(always)]
fn weighted_rows_body<const FUSED: bool>(p: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    let width = out.len();
    let blocked = width / WEIGHTED_BLOCK * WEIGHTED_BLOCK;
    for j0 in (0..blocked).step_by(WEIGHTED_BLOCK) {
        let mut acc = [0.0f32; WEIGHTED_BLOCK];
        acc.copy_from_slice(&out[j0..j0 + WEIGHTED_BLOCK]);
        for (t, &pt) in p.iter().enumerate() {
            let r = &rows[t * stride + j0..][..WEIGHTED_BLOCK];
            for (a, &v) in acc.iter_mut().zip(r) {
                *a = madd::<FUSED>(*a, pt, v);
            }
        }
        out[j0..j0 + WEIGHTED_BLOCK].copy_from_slice(&acc);
    }
    for (j, o) in out.iter_mut().enumerate().skip(blocked) {
        *o = p
            .iter()
            .enumerate()
            .fold(*o, |a, (t, &pt)| madd::<FUSED>(a, pt, rows[t * stride + j]));
    }
}

/// `out[i·out_stride + j] = dot_f32(a_i, b_j)` bit for bit, where `a_i = a[i·a_stride..][..k]` for
/// `i < m` and `b_j = b[j·b_stride..][..k]` for `j < n`: the f32 product `A·Bᵀ` of row-major
/// matrices with strides. On AVX2, tiles of 4 × 2 rows keep each operand vector in a register for
/// several dot products; every product still sums its eight lanes in [`dot_f32`]'s order, so the
/// result does not depend on the tiling or on the instruction set it runs on (Rust never fuses the
/// multiply and add).
pub fn gemm_nt(
    a: &[f32],
    a_stride: usize,
    m: usize,
    b: &[f32],
    b_stride: usize,
    n: usize,
    k: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    gemm_nt_split(a, a_stride, m, b, b_stride, n, (k, k), out, out_stride)
}

/// [`gemm_nt`] with each product taken in two parts: `out[i·out_stride + j] = dot_f32(a_i[..split],
/// b_j[..split]) + dot_f32(a_i[split..k], b_j[split..k])` bit for bit, `(split, k)` the
/// second-to-last argument; with `split == k`, [`gemm_nt`] (no second part, nothing added). The
/// attention's score of a latent cache row `[c | k_pe]` is this sum of its two dot products.
pub fn gemm_nt_split(
    a: &[f32],
    a_stride: usize,
    m: usize,
    b: &[f32],
    b_stride: usize,
    n: usize,
    split: (usize, usize),
    out: &mut [f32],
    out_stride: usize,
) {
    gemm_nt_split_as::<false>((a, a_stride, m), (b, b_stride, n), split, out, out_stride)
}

/// [`gemm_nt_split`] with every product a [`dot_f32_fused`]: `out[i·out_stride + j] =
/// dot_f32_fused(a_i[..split], b_j[..split]) + dot_f32_fused(a_i[split..k], b_j[split..k])` bit for
/// bit, on any instruction set.
pub fn gemm_nt_split_fused(
    (a, a_stride, m): (&[f32], usize, usize),
    (b, b_stride, n): (&[f32], usize, usize),
    split: (usize, usize),
    out: &mut [f32],
    out_stride: usize,
) {
    gemm_nt_split_as::<true>((a, a_stride, m), (b, b_stride, n), split, out, out_stride)
}

fn gemm_nt_split_as<const FUSED: bool>(
    (a, a_stride, m): (&[f32], usize, usize),
    (b, b_stride, n): (&[f32], usize, usize),
    (split, k): (usize, usize),
    out: &mut [f32],
    out_stride: usize,
) {
    assert!(split <= k);
    let row_a = |i: usize| &a[i * a_stride..][..k];
    let row_b = |j: usize| &b[j * b_stride..][..k];
    #[cfg(target_arch = "x86_64")]
    let done = match FUSED {
        // SAFETY: the CPU has AVX2 and FMA (checked in the guard).
        true if has_fma() => unsafe { gemm_nt_fma(&row_a, &row_b, (m, n), split, out, out_stride) },
        // SAFETY: the CPU has AVX2 (checked in the guard).
        false if std::arch::is_x86_feature_detected!("avx2") => unsafe {
            gemm_nt_avx2(&row_a, &row_b, (m, n), split, out, out_stride)
        },
        _ => 0,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    // Rows the tiles did not cover, or every row without the tiles' instruction set.
    for i in done..m {
        for j in 0..n {
            out[i * out_stride + j] = dot_split::<FUSED>(row_a(i), row_b(j), split);
        }
    }
}

/// `dot(a[..split], b[..split]) + dot(a[split..], b[split..])`, or `dot(a, b)` when `split` is the
/// length; `dot` is [`dot_f32_fused`] when `FUSED`, [`dot_f32`] otherwise.
fn dot_split<const FUSED: bool>(a: &[f32], b: &[f32], split: usize) -> f32 {
    let dot = if FUSED { dot_f32_fused } else { dot_f32 };
    let first = dot(&a[..split], &b[..split]);
    if split == a.len() {
        first
    } else {
        first + dot(&a[split..], &b[split..])
    }
}

/// Rows of `a` per AVX2 tile of [`gemm_nt`] (and of `b`: 8 accumulator vectors plus 6 operand
/// vectors fit the 16 AVX2 registers).
#[cfg(target_arch = "x86_64")]
const TILE_A: usize = 4;
#[cfg(target_arch = "x86_64")]
const TILE_B: usize = 2;

/// The rows of [`gemm_nt_split`] that fill whole `TILE_A`-row tiles, on AVX2 ([`dot_tile`] for
/// each full `TILE_A × TILE_B` block, [`dot_split`] for the columns past the last one); returns how
/// many rows it wrote.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn gemm_nt_avx2<'r>(
    row_a: &impl Fn(usize) -> &'r [f32],
    row_b: &impl Fn(usize) -> &'r [f32],
    mn: (usize, usize),
    split: usize,
    out: &mut [f32],
    out_stride: usize,
) -> usize {
    gemm_tiles::<false>(row_a, row_b, mn, split, out, out_stride)
}

/// [`gemm_nt_avx2`] with fused multiply-adds ([`gemm_nt_split_fused`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn gemm_nt_fma<'r>(
    row_a: &impl Fn(usize) -> &'r [f32],
    row_b: &impl Fn(usize) -> &'r [f32],
    mn: (usize, usize),
    split: usize,
    out: &mut [f32],
    out_stride: usize,
) -> usize {
    gemm_tiles::<true>(row_a, row_b, mn, split, out, out_stride)
}

/// The body of [`gemm_nt_avx2`] and [`gemm_nt_fma`]: inlined into each, so it compiles with its
/// caller's instruction set.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn gemm_tiles<'r, const FUSED: bool>(
    row_a: &impl Fn(usize) -> &'r [f32],
    row_b: &impl Fn(usize) -> &'r [f32],
    (m, n): (usize, usize),
    split: usize,
    out: &mut [f32],
    out_stride: usize,
) -> usize {
    let (m_tiles, n_tiles) = (m / TILE_A * TILE_A, n / TILE_B * TILE_B);
    for i0 in (0..m_tiles).step_by(TILE_A) {
        for j0 in (0..n_tiles).step_by(TILE_B) {
            let a: [&[f32]; TILE_A] = std::array::from_fn(|i| row_a(i0 + i));
            let b: [&[f32]; TILE_B] = std::array::from_fn(|j| row_b(j0 + j));
            // SAFETY: the caller's instruction set has AVX2 (and FMA when `FUSED`).
            let mut t =
                unsafe { dot_tile::<FUSED>(a.map(|r| &r[..split]), b.map(|r| &r[..split])) };
            if split < a[0].len() {
                // SAFETY: as above.
                let rest =
                    unsafe { dot_tile::<FUSED>(a.map(|r| &r[split..]), b.map(|r| &r[split..])) };
                for (t, rest) in t.iter_mut().zip(&rest) {
                    t.iter_mut().zip(rest).for_each(|(t, r)| *t += r);
                }
            }
            for (i, t) in t.iter().enumerate() {
                out[(i0 + i) * out_stride + j0..][..TILE_B].copy_from_slice(t);
            }
        }
        for j in n_tiles..n {
            for i in i0..i0 + TILE_A {
                out[i * out_stride + j] = dot_split::<FUSED>(row_a(i), row_b(j), split);
            }
        }
    }
    m_tiles
}

/// `[dot(a_i, b_j)]` for 4 × 2 rows of equal length on AVX2 registers: 8 accumulators, each lane
/// `l` summing the products of elements `8c + l` in order, then the lanes summed in order and the
/// tail added, as [`dot_f32`] (or, `FUSED`, [`dot_f32_fused`]) does.
///
/// # Safety
/// The CPU must have AVX2, and FMA when `FUSED`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dot_tile<const FUSED: bool>(
    a: [&[f32]; TILE_A],
    b: [&[f32]; TILE_B],
) -> [[f32; TILE_B]; TILE_A] {
    use std::arch::x86_64::{
        __m256, _mm256_add_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps,
        _mm256_storeu_ps,
    };
    // Plain loops, no closures: a closure is a function of its own, without the caller's
    // instruction set, and would keep the intrinsics in it from being inlined.
    let k = a[0].len();
    let body = k / 8 * 8;
    assert!(a.iter().chain(&b).all(|r| r.len() == k));
    // SAFETY (every intrinsic below): the caller guarantees the instruction set.
    let zero = unsafe { _mm256_setzero_ps() };
    let mut acc: [[__m256; TILE_B]; TILE_A] = [[zero; TILE_B]; TILE_A];
    let (mut av, mut bv) = ([zero; TILE_A], [zero; TILE_B]);
    for c in (0..body).step_by(8) {
        for i in 0..TILE_A {
            // SAFETY: every row has `k ≥ c + 8` elements (asserted above).
            av[i] = unsafe { _mm256_loadu_ps(a[i].as_ptr().add(c)) };
        }
        for j in 0..TILE_B {
            // SAFETY: as above.
            bv[j] = unsafe { _mm256_loadu_ps(b[j].as_ptr().add(c)) };
        }
        for i in 0..TILE_A {
            for j in 0..TILE_B {
                acc[i][j] = if FUSED {
                    unsafe { _mm256_fmadd_ps(av[i], bv[j], acc[i][j]) }
                } else {
                    unsafe { _mm256_add_ps(acc[i][j], _mm256_mul_ps(av[i], bv[j])) }
                };
            }
        }
    }
    let mut out = [[0.0f32; TILE_B]; TILE_A];
    for i in 0..TILE_A {
        for j in 0..TILE_B {
            let mut lanes = [0.0f32; 8];
            // SAFETY: `lanes` holds 8 floats.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc[i][j]) };
            out[i][j] = lanes.iter().sum::<f32>() + dot_tail::<FUSED>(&a[i][body..], &b[j][body..]);
        }
    }
    out
}

/// Index of the largest value; the lowest index wins ties and NaN never wins
/// ([`crate::argmax`], the greedy sampler's rule, as an index).
pub fn argmax(v: &[f32]) -> usize {
    crate::decoder::argmax(v) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmsnorm_unit_rms() {
        let x = [3.0, -4.0];
        let mut out = [0.0; 2];
        rmsnorm(&x, &[1.0, 2.0], 0.0, &mut out);
        // rms = sqrt((9 + 16) / 2) = 3.5355339
        let rms = (12.5f64).sqrt();
        assert!((out[0] as f64 - 3.0 / rms).abs() < 1e-6);
        assert!((out[1] as f64 - 2.0 * -4.0 / rms).abs() < 1e-6);
    }

    #[test]
    fn softmax_sums_to_one_and_survives_large_scores() {
        let mut s = [1000.0, 1000.0 + 2f64.ln()];
        softmax_f64(&mut s);
        assert!((s[0] - 1.0 / 3.0).abs() < 1e-12 && (s[1] - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn argmax_prefers_lowest_index() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 0.5, 0.5]), 1);
    }

    /// Two operand buffers of `len_a` and `len_b` values of both signs, with periods 101 and 97
    /// (coprime to every stride the tests use, so no two rows are alike).
    fn operands(len_a: usize, len_b: usize) -> (Vec<f32>, Vec<f32>) {
        let a = (0..len_a)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let b = (0..len_b)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 11.0)
            .collect();
        (a, b)
    }

    #[test]
    fn gemm_nt_equals_dot_f32_bit_for_bit() {
        // Shapes with tile remainders on both sides and a k that is not a multiple of 8; strides
        // wider than k so a read past a row's k would take another row's values.
        let (m, n, k, sa, sb, so) = (7, 5, 21, 24, 23, 9);
        let (a, b) = operands(m * sa, n * sb);
        let mut out = vec![f32::NAN; m * so];
        gemm_nt(&a, sa, m, &b, sb, n, k, &mut out, so);
        for i in 0..m {
            for j in 0..n {
                let want = dot_f32(&a[i * sa..][..k], &b[j * sb..][..k]);
                assert_eq!(out[i * so + j].to_bits(), want.to_bits(), "({i}, {j})");
            }
            assert!(
                out[i * so + n..(i + 1) * so].iter().all(|v| v.is_nan()),
                "row {i}: wrote past n"
            );
        }
    }

    #[test]
    fn gemm_nt_split_equals_the_sum_of_two_dot_f32_bit_for_bit() {
        // The attention's shape (a split at 512 of 576: both parts multiples of 8) and one with a
        // tail in each part; tile remainders on both sides.
        for (m, n, split, k) in [(6, 5, 512, 576), (5, 3, 13, 21)] {
            let (sa, sb, so) = (k + 3, k + 1, n + 2);
            let (a, b) = operands(m * sa, n * sb);
            let mut out = vec![f32::NAN; m * so];
            gemm_nt_split(&a, sa, m, &b, sb, n, (split, k), &mut out, so);
            for i in 0..m {
                for j in 0..n {
                    let (x, y) = (&a[i * sa..][..k], &b[j * sb..][..k]);
                    let want =
                        dot_f32(&x[..split], &y[..split]) + dot_f32(&x[split..], &y[split..]);
                    assert_eq!(out[i * so + j].to_bits(), want.to_bits(), "({i}, {j})");
                }
                assert!(
                    out[i * so + n..(i + 1) * so].iter().all(|v| v.is_nan()),
                    "row {i}: wrote past n"
                );
            }
        }
    }

    /// The fused forms: the tiles and the vector code give the portable definition's bits (lane `l`
    /// of a dot is `fma` over elements `8c + l` in order, then the lanes summed, then the tail; a
    /// weighted column is `fma` over the rows in order), and they differ from the unfused forms on
    /// these inputs (so a path that fell back to `a + x·y` would be seen).
    #[test]
    fn fused_forms_are_their_portable_definition_bit_for_bit() {
        let lane_dot = |x: &[f32], y: &[f32]| {
            let body = x.len() / 8 * 8;
            let lanes: Vec<f32> = (0..8)
                .map(|l| {
                    (l..body)
                        .step_by(8)
                        .fold(0.0f32, |acc, e| x[e].mul_add(y[e], acc))
                })
                .collect();
            let tail = (body..x.len()).fold(0.0f32, |acc, e| x[e].mul_add(y[e], acc));
            lanes.iter().sum::<f32>() + tail
        };
        let mut unfused_differs = false;
        for (m, n, split, k) in [(6, 5, 512, 576), (5, 3, 13, 21)] {
            let (sa, sb, so) = (k + 3, k + 1, n + 2);
            let (a, b) = operands(m * sa, n * sb);
            let mut out = vec![f32::NAN; m * so];
            gemm_nt_split_fused((&a, sa, m), (&b, sb, n), (split, k), &mut out, so);
            for i in 0..m {
                for j in 0..n {
                    let (x, y) = (&a[i * sa..][..k], &b[j * sb..][..k]);
                    let want =
                        lane_dot(&x[..split], &y[..split]) + lane_dot(&x[split..], &y[split..]);
                    assert_eq!(out[i * so + j].to_bits(), want.to_bits(), "({i}, {j})");
                    assert_eq!(dot_f32_fused(x, y).to_bits(), lane_dot(x, y).to_bits());
                    unfused_differs |= dot_f32(x, y).to_bits() != dot_f32_fused(x, y).to_bits();
                }
                assert!(out[i * so + n..(i + 1) * so].iter().all(|v| v.is_nan()));
            }
        }
        for (rows, width, stride) in [(1, 3, 5), (9, 64, 70), (33, 130, 131)] {
            let p: Vec<f32> = (0..rows)
                .map(|t| ((t * 29 % 31) as f32 + 1.0) / 31.0)
                .collect();
            let m: Vec<f32> = (0..rows * stride)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) / 11.0)
                .collect();
            let start: Vec<f32> = (0..width).map(|j| (j % 7) as f32 * 0.37 - 1.0).collect();
            let mut out = start.clone();
            out.push(f32::NAN);
            weighted_rows_add_fused(&p, &m, stride, &mut out[..width]);
            assert!(out[width].is_nan(), "wrote past the width");
            for j in 0..width {
                let want = (0..rows).fold(start[j], |a, t| p[t].mul_add(m[t * stride + j], a));
                assert_eq!(
                    out[j].to_bits(),
                    want.to_bits(),
                    "width {width}, column {j}"
                );
                let plain = (0..rows).fold(start[j], |a, t| a + p[t] * m[t * stride + j]);
                unfused_differs |= plain.to_bits() != want.to_bits();
            }
        }
        assert!(
            unfused_differs,
            "the fused and unfused forms agreed everywhere: the test cannot tell them apart"
        );
    }

    /// Many weight vectors over the same rows: each output row the bits of its own
    /// `weighted_rows_add_fused`, continuing from non-zero sums, for counts of vectors inside and
    /// past whole tiles, widths with and without a tail past the 16-column tiles, strides wider
    /// than the width.
    #[test]
    fn weighted_rows_multi_is_each_vectors_own_sum_bit_for_bit() {
        let val = |i: usize, k: usize| ((i * k % 97) as f32 - 48.0) / 7.0;
        for (m, nt, width, stride) in [
            (1, 3, 16, 20),
            (4, 14, 512, 576),
            (9, 5, 37, 40),
            (16, 1, 64, 64),
        ] {
            let (p_stride, out_stride) = (nt + 3, width + 5);
            let p: Vec<f32> = (0..m * p_stride).map(|i| val(i, 29) / 5.0).collect();
            let rows: Vec<f32> = (0..nt * stride).map(|i| val(i, 53)).collect();
            let start: Vec<f32> = (0..m * out_stride).map(|i| val(i, 31)).collect();
            let mut got = start.clone();
            weighted_rows_add_fused_multi(
                (&p, p_stride, m),
                nt,
                (&rows, stride),
                (&mut got, out_stride, width),
            );
            let mut want = start.clone();
            for i in 0..m {
                let o = &mut want[i * out_stride..][..width];
                weighted_rows_add_fused(&p[i * p_stride..][..nt], &rows, stride, o);
            }
            let b = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(b(&got) == b(&want), "m {m}, nt {nt}, width {width}");
        }
    }

    #[test]
    fn dot_f32_matches_f64() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.25 - 3.0).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.125).collect();
        // Inputs are exact binary fractions with small magnitude: f32 partial sums round by < 1e-5
        // in total.
        assert!((dot_f32(&a, &b) as f64 - dot_f64(&a, &b)).abs() < 1e-4);
    }
}
