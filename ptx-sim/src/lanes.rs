//! Lane vectors: one 64-bit register container per lane of a warp, and the loops that apply a
//! per-lane function to them.
//!
//! Instructions execute a warp at a time: operands are fetched as whole lane vectors, the
//! operation's function is chosen once per warp instruction (outside the lane loop), and the result
//! is written back under the execution mask. With a full mask the loops run over all 32 lanes
//! without per-lane tests, which the compiler unrolls and vectorises; with a partial mask they
//! visit only the set lanes, so an expensive per-lane function (f16 rounding, transcendental) costs
//! nothing on idle lanes.

/// Lanes per warp.
pub(crate) const WARP: usize = 32;
/// Execution mask with every lane set.
pub(crate) const FULL: u32 = u32::MAX;

/// One value per lane.
pub(crate) type Lanes = [u64; WARP];

/// Iterates the set bits of a lane mask, lowest first.
#[inline]
pub(crate) fn lanes(mut m: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(l)
        }
    })
}

/// `f` of each lane of `exec`; lanes outside `exec` are 0.
#[inline(always)]
pub(crate) fn map1(exec: u32, a: &Lanes, f: impl Fn(u64) -> u64) -> Lanes {
    let mut o = [0u64; WARP];
    if exec == FULL {
        for l in 0..WARP {
            o[l] = f(a[l]);
        }
    } else {
        for l in lanes(exec) {
            o[l] = f(a[l]);
        }
    }
    o
}

/// `f` of each lane of `exec`; lanes outside `exec` are 0.
#[inline(always)]
pub(crate) fn map2(exec: u32, a: &Lanes, b: &Lanes, f: impl Fn(u64, u64) -> u64) -> Lanes {
    let mut o = [0u64; WARP];
    if exec == FULL {
        for l in 0..WARP {
            o[l] = f(a[l], b[l]);
        }
    } else {
        for l in lanes(exec) {
            o[l] = f(a[l], b[l]);
        }
    }
    o
}

/// `f` of each lane of `exec`; lanes outside `exec` are 0.
#[inline(always)]
pub(crate) fn map3(
    exec: u32,
    a: &Lanes,
    b: &Lanes,
    c: &Lanes,
    f: impl Fn(u64, u64, u64) -> u64,
) -> Lanes {
    let mut o = [0u64; WARP];
    if exec == FULL {
        for l in 0..WARP {
            o[l] = f(a[l], b[l], c[l]);
        }
    } else {
        for l in lanes(exec) {
            o[l] = f(a[l], b[l], c[l]);
        }
    }
    o
}

/// Stores the lanes of `exec` from `v` into `row`, leaving the other lanes as they were.
#[inline(always)]
pub(crate) fn merge(row: &mut Lanes, v: &Lanes, exec: u32) {
    if exec == FULL {
        // Two 128-byte halves: small enough for the compiler to copy inline rather than call
        // memcpy.
        let (lo, hi) = row.split_at_mut(WARP / 2);
        lo.copy_from_slice(&v[..WARP / 2]);
        hi.copy_from_slice(&v[WARP / 2..]);
    } else {
        for l in lanes(exec) {
            row[l] = v[l];
        }
    }
}
