//! The code-book search shared by ggml's IQ3_XXS, IQ3_S, IQ2_S and IQ1_M reference quantizers
//! (`iq3xs_init_impl`, `iq2xs_init_impl`, `quantize_row_iq{3_xxs,3_s,2_s,1_m}_impl` with no
//! importance matrix).
//!
//! A code book's points are tuples of `dims` levels `l ∈ 0..levels` (ggml writes each as the odd
//! number `2l + 1`, the scale multiplies that). A sub-block of magnitudes is fitted by trying a
//! range of inverse scales: each group of `dims` values rounds to a level tuple; a tuple that is
//! not a point is replaced by the best of its precomputed neighbours (the grid points at the
//! `nwant` smallest integer distances). The tuple set with the best `(Σwxq)²/Σwq²` wins.
//!
//! As in [`crate::search`], every operation is transcribed in f32 and in ggml's order, because the
//! goal is byte-identical output: a different order changes which candidate wins on near-ties.

use crate::round::{f32_to_f16, nearest_int};
use ingot_abi::iq_grids::{IQ1S_GRID, IQ2S_GRID, IQ3S_GRID, IQ3XXS_GRID};
use std::sync::LazyLock;

/// The 256-point IQ3_XXS book: magnitudes 4, 12, …, 52, 62 are levels 0..8 (`kgrid_256`).
pub(crate) static IQ3XXS: LazyLock<Codebook> = LazyLock::new(|| {
    Codebook::new(
        &[4, 12, 20, 28, 36, 44, 52, 62],
        4,
        3,
        2,
        &grid4(&IQ3XXS_GRID),
    )
});

/// The 512-point IQ3_S book: magnitudes 1, 3, …, 15 are levels 0..8 (`kgrid_512`).
pub(crate) static IQ3S: LazyLock<Codebook> =
    LazyLock::new(|| Codebook::new(&[1, 3, 5, 7, 9, 11, 13, 15], 4, 3, 3, &grid4(&IQ3S_GRID)));

/// The 1024-point IQ2_S book: magnitudes 8, 25, 43 are levels 0..3 (`kgrid_2bit_1024`).
pub(crate) static IQ2S: LazyLock<Codebook> = LazyLock::new(|| {
    let points: Vec<[u8; 8]> = IQ2S_GRID.iter().map(|p| p.to_le_bytes()).collect();
    Codebook::new(&[8, 25, 43], 8, 2, 1, &points)
});

/// The 2048-point ternary book of IQ1_M: values −1, 0, 1 are levels 0..3 (`kgrid_1bit_2048`).
pub(crate) static IQ1S: LazyLock<Codebook> = LazyLock::new(|| {
    let points: Vec<[u8; 8]> = IQ1S_GRID.iter().map(|p| p.to_le_bytes()).collect();
    Codebook::new(&[0xff, 0x00, 0x01], 8, 2, 3, &points)
});

fn grid4(grid: &[u32]) -> Vec<[u8; 8]> {
    grid.iter()
        .map(|p| {
            let b = p.to_le_bytes();
            [b[0], b[1], b[2], b[3], 0, 0, 0, 0]
        })
        .collect()
}

/// Where a level tuple lies: on the grid, or off it with a list of candidate points.
#[derive(Clone, Copy)]
enum Slot {
    Point(u16),
    /// `neighbours[start..start + len]`, in ggml's order: by integer distance, then index.
    Near {
        start: u32,
        len: u16,
    },
}

/// A code book prepared for quantization.
pub(crate) struct Codebook {
    /// Values per point: 4 (IQ3) or 8 (IQ2).
    dims: usize,
    /// Bits per level in a packed tuple key (`Σ l_i << bits·i`).
    bits: u32,
    /// Number of levels per coordinate (ggml `kMaxQ`).
    levels: i32,
    /// `2l + 1` per coordinate of each point.
    odd: Vec<[i8; 8]>,
    /// Packed key → slot, for every key whose levels are all `< levels`.
    map: Vec<Slot>,
    neighbours: Vec<u16>,
}

impl Codebook {
    /// Builds the book from the dequantization grid: `points[p][i]` (`i < dims`) is the magnitude
    /// of coordinate `i`, one of `magnitudes`, whose position is the level; a key packs `bits`
    /// per level; an off-grid tuple's neighbours are the points at its `nwant` smallest distinct
    /// distances (ggml's `nwant`: IQ3_XXS 2, IQ3_S 3, IQ2_S 1, IQ1 3).
    fn new(magnitudes: &[u8], dims: usize, bits: u32, nwant: usize, points: &[[u8; 8]]) -> Self {
        let levels = magnitudes.len() as i32;
        let odd: Vec<[i8; 8]> = points
            .iter()
            .map(|p| {
                let mut o = [0i8; 8];
                for i in 0..dims {
                    let l = magnitudes
                        .iter()
                        .position(|&m| m == p[i])
                        .expect("every grid magnitude is one of the book's levels");
                    o[i] = 2 * l as i8 + 1;
                }
                o
            })
            .collect();
        let mut map = vec![Slot::Near { start: 0, len: 0 }; 1 << (bits as usize * dims)];
        for (p, o) in odd.iter().enumerate() {
            let key = (0..dims).fold(0usize, |k, i| {
                k | (((o[i] - 1) / 2) as usize) << (bits as usize * i)
            });
            map[key] = Slot::Point(p as u16);
        }
        let mut neighbours = Vec::new();
        let mut dist: Vec<(i32, u16)> = Vec::with_capacity(odd.len());
        for (key, slot) in map.iter_mut().enumerate() {
            let pos: Vec<i32> = (0..dims)
                .map(|i| ((key >> (bits as usize * i)) & ((1 << bits) - 1)) as i32)
                .collect();
            if matches!(slot, Slot::Point(_)) || pos.iter().any(|&l| l >= levels) {
                continue;
            }
            dist.clear();
            dist.extend(odd.iter().enumerate().map(|(j, o)| {
                let d2 = (0..dims)
                    .map(|i| (i32::from(o[i]) - (2 * pos[i] + 1)).pow(2))
                    .sum();
                (d2, j as u16)
            }));
            dist.sort_unstable();
            // Every point at the `nwant` smallest distinct distances (ggml's qsort, then a scan
            // that stops at the first distance beyond the wanted count).
            let start = neighbours.len();
            let mut have = 1;
            let mut d2 = dist[0].0;
            for &(d, j) in &dist {
                if d > d2 {
                    if have == nwant {
                        break;
                    }
                    d2 = d;
                    have += 1;
                }
                neighbours.push(j);
            }
            *slot = Slot::Near {
                start: start as u32,
                len: (neighbours.len() - start) as u16,
            };
        }
        Self {
            dims,
            bits,
            levels,
            odd,
            map,
            neighbours,
        }
    }

    /// Rounds one group of magnitudes `x` at inverse scale `id` to a level tuple; off the grid,
    /// takes the neighbour closest to `x` at `scale` in the `w`-weighted norm. Writes the levels
    /// to `l` and returns `(point, whether the rounded tuple was on the grid)`.
    fn round(&self, x: &[f32], w: &[f32], id: f32, scale: f32, l: &mut [i8]) -> (u16, bool) {
        for i in 0..self.dims {
            l[i] = nearest_int(0.5 * (id * x[i] - 1.0)).clamp(0, self.levels - 1) as i8;
        }
        self.snap(x, w, scale, |l| f32::from(2 * l + 1), l)
    }

    /// The point of the level tuple `l` if it is one; otherwise the neighbour whose values
    /// `scale·value(level)` are closest to `x` in the `w`-weighted squared norm (the first on
    /// ties), whose levels replace `l`. Returns `(point, whether l was on the grid)`.
    pub(crate) fn snap(
        &self,
        x: &[f32],
        w: &[f32],
        scale: f32,
        value: impl Fn(i8) -> f32,
        l: &mut [i8],
    ) -> (u16, bool) {
        let key = (0..self.dims).fold(0usize, |k, i| {
            k | (l[i] as usize) << (self.bits as usize * i)
        });
        match self.map[key] {
            Slot::Point(p) => (p, true),
            Slot::Near { start, len } => {
                let list = &self.neighbours[start as usize..][..usize::from(len)];
                // ggml asserts a point beat FLT_MAX; a NaN or infinite input beats none, and the
                // nearest tuple (the list's first) stands in instead of an abort.
                let mut best = list[0];
                let mut best_d2 = f32::MAX;
                for &p in list {
                    let o = &self.odd[usize::from(p)];
                    let mut d2 = 0.0f32;
                    for i in 0..self.dims {
                        let diff = scale * value((o[i] - 1) / 2) - x[i];
                        d2 += w[i] * diff * diff;
                    }
                    if d2 < best_d2 {
                        best_d2 = d2;
                        best = p;
                    }
                }
                l[..self.dims].copy_from_slice(&self.levels_of(best)[..self.dims]);
                (best, false)
            }
        }
    }

    /// The levels of point `p`.
    pub(crate) fn levels_of(&self, p: u16) -> [i8; 8] {
        self.odd[usize::from(p)].map(|o| (o - 1) / 2)
    }
}

/// The fitted scale of one sub-block and the point of each of its groups.
pub(crate) struct Fit {
    pub scale: f32,
    pub points: [u16; 8],
}

/// The inverse-scale sweep and refinement of one quantizer.
pub(crate) struct ScaleSearch {
    /// Candidate inverse scales `(2·kMaxQ − 1 + is·step) / max` for `is ∈ −steps..=steps`.
    pub steps: i32,
    pub step: f32,
    /// Refinement at the winning scale re-rounds every group (IQ3_S) or only the groups whose
    /// rounding fell off the grid (IQ3_XXS, IQ2_S).
    pub refine_all: bool,
    /// What a group counts as before any candidate wins (true except IQ3_S; it only matters
    /// when none does).
    pub start_on_grid: bool,
}

impl ScaleSearch {
    /// Fits the magnitudes `xval` (one sub-block, `max` its largest) with weights `weight`.
    pub(crate) fn fit(&self, book: &Codebook, xval: &[f32], weight: &[f32], max: f32) -> Fit {
        let n = xval.len();
        let dims = book.dims;
        let groups = n / dims;
        let mut waux = [0.0f32; 32];
        for i in 0..n {
            waux[i] = weight[i].sqrt();
        }
        let top = (2 * book.levels - 1) as f32;
        let mut l = [0i8; 32];
        let mut laux = [0i8; 32];
        let mut points = [0u16; 8];
        let mut points_aux = [0u16; 8];
        let mut on_grid = [self.start_on_grid; 8];
        let mut on_grid_aux = [true; 8];
        let mut best = 0.0f32;
        let mut scale = max / top;
        for is in -self.steps..=self.steps {
            let id = (top + is as f32 * self.step) / max;
            let this_scale = 1.0 / id;
            for k in 0..groups {
                let g = dims * k..dims * (k + 1);
                let (p, on) = book.round(
                    &xval[g.clone()],
                    &waux[g.clone()],
                    id,
                    this_scale,
                    &mut laux[g],
                );
                points_aux[k] = p;
                on_grid_aux[k] = on;
            }
            let (sumqx, sumq2) = moments(xval, weight, &laux[..n]);
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                scale = sumqx / sumq2;
                best = scale * sumqx;
                l = laux;
                points = points_aux;
                on_grid = on_grid_aux;
            }
        }
        if on_grid[..groups].iter().any(|&on| !on) && scale > 0.0 {
            let id = 1.0 / scale;
            for k in 0..groups {
                if on_grid[k] && !self.refine_all {
                    continue;
                }
                let g = dims * k..dims * (k + 1);
                points[k] = book
                    .round(&xval[g.clone()], &waux[g.clone()], id, scale, &mut l[g])
                    .0;
            }
            let (sumqx, sumq2) = moments(xval, weight, &l[..n]);
            if sumq2 > 0.0 {
                scale = sumqx / sumq2;
            }
        }
        Fit { scale, points }
    }
}

/// `(Σ w·x·q, Σ w·q²)` with `q = 2l + 1`, in ggml's order.
fn moments(xval: &[f32], weight: &[f32], l: &[i8]) -> (f32, f32) {
    let mut sumqx = 0.0f32;
    let mut sumq2 = 0.0f32;
    for i in 0..l.len() {
        let w = weight[i];
        let q = f32::from(2 * l[i] + 1);
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// Splits a sub-block into magnitudes `xval` and sign bits (bit `i % 8` of `signs[i / 8]` set
/// where `x[i]` was negated), by ggml's test: `>= 0` keeps the value (−0.0 included); anything
/// else (NaN included) is negated and signed.
pub(crate) fn split_signs(x: &[f32], xval: &mut [f32], signs: &mut [u8]) {
    for (i, &v) in x.iter().enumerate() {
        if v >= 0.0 {
            xval[i] = v;
        } else {
            xval[i] = -v;
            signs[i / 8] |= 1 << (i % 8);
        }
    }
}

/// ggml's `MAX(a, b)` fold from the first value (`a > b ? a : b`, so a NaN running maximum
/// gives way to the next value), the order its quantizers take maxima in; 0 for no values.
pub(crate) fn ggml_max(values: impl IntoIterator<Item = f32>) -> f32 {
    let mut values = values.into_iter();
    let first = values.next().unwrap_or(0.0);
    values.fold(first, |m, v| if m > v { m } else { v })
}

/// The super-block scale of the IQ2_S/IQ3 quantizers: `d = max_scale/31`, stored as the f16 of
/// `d·fudge` (ggml's per-type fudge factor), and each sub-block scale's 4-bit code
/// `nearest_int((scale/d − 1)/2)` clamped to `0..=15`. `None` when every scale is 0 (the block
/// keeps `d = 0`).
pub(crate) fn super_block_scale<const N: usize>(
    scales: &[f32; N],
    max_scale: f32,
    fudge: f32,
) -> Option<(u16, [u8; N])> {
    if max_scale == 0.0 {
        return None;
    }
    let d = max_scale / 31.0;
    let id = 1.0 / d;
    let codes = scales.map(|s| nearest_int(0.5 * (id * s - 1.0)).clamp(0, 15) as u8);
    Some((f32_to_f16(d * fudge), codes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_off_grid_tuple_has_neighbours_and_points_round_trip() {
        for (book, points) in [
            (&*IQ3XXS, 256),
            (&*IQ3S, 512),
            (&*IQ2S, 1024),
            (&*IQ1S, 2048),
        ] {
            assert_eq!(book.odd.len(), points);
            let on = book
                .map
                .iter()
                .filter(|s| matches!(s, Slot::Point(_)))
                .count();
            assert_eq!(on, points, "each point has its own key");
            // Rounding a point's own magnitudes at unit scale lands on that point.
            for (p, o) in book.odd.iter().enumerate() {
                let x: Vec<f32> = o[..book.dims].iter().map(|&v| f32::from(v)).collect();
                let w = vec![1.0f32; book.dims];
                let mut l = [0i8; 8];
                let (got, on) = book.round(&x, &w, 1.0, 1.0, &mut l[..book.dims]);
                assert!(on && usize::from(got) == p);
            }
        }
    }

    #[test]
    fn off_grid_tuples_take_a_nearest_point() {
        for book in [&*IQ3XXS, &*IQ3S, &*IQ2S, &*IQ1S] {
            let reachable = (book.levels as usize).pow(book.dims as u32);
            let near = book
                .map
                .iter()
                .filter(|s| matches!(s, Slot::Near { len, .. } if *len > 0))
                .count();
            assert_eq!(
                near + book.odd.len(),
                reachable,
                "every reachable tuple is covered"
            );
        }
    }
}
