//! Warp-wide lane functions for the forms rustc and the project's kernels emit most: 32/64-bit
//! integer binary operations, `mad`, f32 `.rn` add/mul/fma, `dp4a`, `lop3`, comparisons and `cvt`.
//! Each keeps a dedicated per-lane function for its common forms and falls back to the general
//! semantics in `alu.rs`/`numeric.rs`, which define the results; the unit tests below check the two
//! agree bit for bit.

use crate::alu;
use crate::ir::*;
use crate::lanes::{map1, map2, map3, Lanes, WARP};
use crate::numeric::{self, sext};

#[inline(always)]
pub(crate) fn f32_of(x: u64) -> f32 {
    f32::from_bits(x as u32)
}

#[inline(always)]
pub(crate) fn f32_bits(x: f32) -> u64 {
    u64::from(x.to_bits())
}

/// Integer binary operations; `alu::int_bin` defines them, the common 32/64-bit forms are inlined
/// here.
pub(crate) fn int_bin(op: IntBinOp, ty: Ty, exec: u32, a: &Lanes, b: &Lanes) -> Lanes {
    let m = ty.mask();
    let bits = ty.bits();
    let signed = ty.is_signed();
    if !matches!(bits, 32 | 64) {
        return map2(exec, a, b, |x, y| alu::int_bin(op, ty, x, y));
    }
    match op {
        IntBinOp::Add => map2(exec, a, b, |x, y| x.wrapping_add(y) & m),
        IntBinOp::Sub => map2(exec, a, b, |x, y| x.wrapping_sub(y) & m),
        // The low `bits` bits of a product depend only on the low `bits` bits of its factors.
        IntBinOp::MulLo => map2(exec, a, b, |x, y| x.wrapping_mul(y) & m),
        IntBinOp::And => map2(exec, a, b, |x, y| x & y & m),
        IntBinOp::Or => map2(exec, a, b, |x, y| (x | y) & m),
        IntBinOp::Xor => map2(exec, a, b, |x, y| (x ^ y) & m),
        // Shift amounts are the low 32 bits of `b`; amounts of the width or more clamp.
        IntBinOp::Shl => map2(exec, a, b, |x, y| {
            let s = y & 0xffff_ffff;
            if s >= u64::from(bits) {
                0
            } else {
                (x << s) & m
            }
        }),
        IntBinOp::Shr if !signed => map2(exec, a, b, |x, y| {
            let s = y & 0xffff_ffff;
            if s >= u64::from(bits) {
                0
            } else {
                (x & m) >> s
            }
        }),
        IntBinOp::Shr => map2(exec, a, b, |x, y| {
            let s = (y & 0xffff_ffff).min(u64::from(bits) - 1);
            (sext(x, bits) >> s) as u64 & m
        }),
        IntBinOp::MulWide if ty == Ty::S32 => map2(exec, a, b, |x, y| {
            (sext(x, 32).wrapping_mul(sext(y, 32))) as u64
        }),
        IntBinOp::MulWide if ty == Ty::U32 => {
            map2(exec, a, b, |x, y| (x & 0xffff_ffff) * (y & 0xffff_ffff))
        }
        _ => map2(exec, a, b, |x, y| alu::int_bin(op, ty, x, y)),
    }
}

/// `mad`; `alu::mad` defines it, `.lo` and 32-bit `.wide` are inlined here.
pub(crate) fn mad(mode: MadMode, ty: Ty, exec: u32, a: &Lanes, b: &Lanes, c: &Lanes) -> Lanes {
    let m = ty.mask();
    match (mode, ty) {
        (MadMode::Lo, _) if matches!(ty.bits(), 32 | 64) => map3(exec, a, b, c, |x, y, z| {
            x.wrapping_mul(y).wrapping_add(z) & m
        }),
        (MadMode::Wide, Ty::U32) => map3(exec, a, b, c, |x, y, z| {
            ((x & 0xffff_ffff) * (y & 0xffff_ffff)).wrapping_add(z)
        }),
        (MadMode::Wide, Ty::S32) => map3(exec, a, b, c, |x, y, z| {
            (sext(x, 32).wrapping_mul(sext(y, 32)) as u64).wrapping_add(z)
        }),
        _ => map3(exec, a, b, c, |x, y, z| alu::mad(mode, ty, x, y, z)),
    }
}

/// Float binary operations; `alu::fbin` defines them, f32 `.rn` add/sub/mul are inlined here.
pub(crate) fn fbin(
    op: FBinOp,
    ty: Ty,
    rnd: Rnd,
    ftz: bool,
    sat: bool,
    exec: u32,
    a: &Lanes,
    b: &Lanes,
) -> Lanes {
    let slow = |x, y| alu::fbin(op, ty, rnd, ftz, sat, x, y);
    if ty == Ty::F32 && rnd == Rnd::Rn && !ftz && !sat {
        // A NaN result takes the general path, which defines its payload.
        let fast = |r: f32, x, y| if r.is_nan() { slow(x, y) } else { f32_bits(r) };
        match op {
            FBinOp::Add => return map2(exec, a, b, |x, y| fast(f32_of(x) + f32_of(y), x, y)),
            FBinOp::Sub => return map2(exec, a, b, |x, y| fast(f32_of(x) - f32_of(y), x, y)),
            FBinOp::Mul => return map2(exec, a, b, |x, y| fast(f32_of(x) * f32_of(y), x, y)),
            _ => {}
        }
    }
    map2(exec, a, b, slow)
}

/// `fma`; `alu::fma` defines it, f32 `.rn` is inlined here.
pub(crate) fn fma(
    ty: Ty,
    rnd: Rnd,
    ftz: bool,
    sat: bool,
    exec: u32,
    a: &Lanes,
    b: &Lanes,
    c: &Lanes,
) -> Lanes {
    let slow = |x, y, z| alu::fma(ty, rnd, ftz, sat, x, y, z);
    if ty == Ty::F32 && rnd == Rnd::Rn && !ftz && !sat {
        // A NaN result takes the general path, which defines its payload.
        return map3(exec, a, b, c, |x, y, z| {
            let r = f32_of(x).mul_add(f32_of(y), f32_of(z));
            if r.is_nan() {
                slow(x, y, z)
            } else {
                f32_bits(r)
            }
        });
    }
    map3(exec, a, b, c, slow)
}

/// `dp4a` with the signedness of `a` and `b` fixed at compile time: `c` plus four byte products,
/// wrapping at 32 bits (the same value as `warp_ops::dot`, whose sum in i64 truncates to the same
/// low 32 bits).
#[inline(always)]
pub(crate) fn dp4a<const SA: bool, const SB: bool>(a: u64, b: u64, c: u64) -> u64 {
    let ext = |v: u64, signed: bool| -> i32 {
        if signed {
            i32::from(v as u8 as i8)
        } else {
            i32::from(v as u8)
        }
    };
    let mut acc = c as u32 as i32;
    for i in 0..4 {
        acc = acc.wrapping_add(ext(a >> (8 * i), SA) * ext(b >> (8 * i), SB));
    }
    u64::from(acc as u32)
}

/// `lop3.b32`: bit `i` of the result is bit `(a_i << 2) | (b_i << 1) | c_i` of `lut`, computed as
/// the union of the minterms the table selects.
#[inline(always)]
pub(crate) fn lop3(lut: u8, a: u64, b: u64, c: u64) -> u64 {
    let mut v = 0u64;
    for idx in 0..8 {
        if (lut >> idx) & 1 != 0 {
            let ta = if idx & 4 != 0 { a } else { !a };
            let tb = if idx & 2 != 0 { b } else { !b };
            let tc = if idx & 1 != 0 { c } else { !c };
            v |= ta & tb & tc;
        }
    }
    v & 0xffff_ffff
}

/// `setp`/`set` comparison as 0/1 per lane; `numeric::compare` defines it, integers are inlined
/// here by mapping each operand to a key whose unsigned order is the comparison's order.
pub(crate) fn compare(cmp: Cmp, ty: Ty, exec: u32, a: &Lanes, b: &Lanes) -> Lanes {
    if ty.is_float() {
        return map2(exec, a, b, |x, y| {
            u64::from(numeric::compare(cmp, ty, x, y))
        });
    }
    let (m, bits) = (ty.mask(), ty.bits());
    // `lo/ls/hi/hs` are unsigned whatever the type; the other ordered comparisons follow its
    // signedness.
    let signed = ty.is_signed() && !matches!(cmp, Cmp::Lo | Cmp::Ls | Cmp::Hi | Cmp::Hs);
    let key = move |x: u64| {
        if signed {
            (sext(x, bits) as u64) ^ (1 << 63)
        } else {
            x & m
        }
    };
    match cmp {
        Cmp::Eq | Cmp::Equ => map2(exec, a, b, |x, y| u64::from(key(x) == key(y))),
        Cmp::Ne | Cmp::Neu => map2(exec, a, b, |x, y| u64::from(key(x) != key(y))),
        Cmp::Lt | Cmp::Ltu | Cmp::Lo => map2(exec, a, b, |x, y| u64::from(key(x) < key(y))),
        Cmp::Le | Cmp::Leu | Cmp::Ls => map2(exec, a, b, |x, y| u64::from(key(x) <= key(y))),
        Cmp::Gt | Cmp::Gtu | Cmp::Hi => map2(exec, a, b, |x, y| u64::from(key(x) > key(y))),
        Cmp::Ge | Cmp::Geu | Cmp::Hs => map2(exec, a, b, |x, y| u64::from(key(x) >= key(y))),
        Cmp::Num => [1; WARP],
        Cmp::Nan => [0; WARP],
    }
}

/// Scalar `cvt`; `alu::cvt` defines it. Integer<->integer without saturation, integer->f32
/// round-to-nearest and f16->f32 are inlined here.
pub(crate) fn cvt(
    dty: Ty,
    sty: Ty,
    rnd: Option<Rnd>,
    sat: bool,
    ftz: bool,
    exec: u32,
    a: &Lanes,
) -> Lanes {
    let (sbits, dm) = (sty.bits(), dty.mask());
    let int_src = !sty.is_float() && sbits <= 64;
    if int_src && !dty.is_float() && !sat {
        return if sty.is_signed() {
            map1(exec, a, |x| sext(x, sbits) as u64 & dm)
        } else {
            let sm = sty.mask();
            map1(exec, a, |x| x & sm & dm)
        };
    }
    let nearest = matches!(rnd, None | Some(Rnd::Rn));
    if int_src && dty == Ty::F32 && nearest && !sat {
        // Rust's integer -> f32 `as` conversion rounds to nearest, ties to even (IEEE), like
        // `cvt.rn`.
        return if sty.is_signed() {
            map1(exec, a, |x| f32_bits(sext(x, sbits) as f32))
        } else {
            let sm = sty.mask();
            map1(exec, a, |x| f32_bits((x & sm) as f32))
        };
    }
    if sty == Ty::F16 && dty == Ty::F32 && nearest && !sat {
        // Every f16 value is exact in f32 (and normal there, so `.ftz` changes nothing); NaNs take
        // the general path, which defines their payload.
        return map1(exec, a, |x| {
            let v = half::f16::from_bits(x as u16);
            if v.is_nan() {
                alu::cvt(dty, sty, rnd, sat, ftz, x)
            } else {
                f32_bits(v.to_f32())
            }
        });
    }
    map1(exec, a, |x| alu::cvt(dty, sty, rnd, sat, ftz, x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warp_ops;

    /// Operand values that exercise sign bits, width boundaries and shift clamping.
    fn samples() -> Vec<u64> {
        let mut v = vec![
            0,
            1,
            2,
            3,
            7,
            8,
            31,
            32,
            33,
            63,
            64,
            0x7f,
            0x80,
            0xff,
            0x7fff,
            0x8000,
            0xffff,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            0x1_0000_0000,
            0x7fff_ffff_ffff_ffff,
            0x8000_0000_0000_0000,
            u64::MAX,
            0x3f80_0000,
            0xbf80_0000,
            0x7f80_0000,
            0x7fc0_0000,
            0x0000_0001,
            0x3c00,
            0x7e00,
        ];
        let mut s = 0x1234_5678_9abc_def0u64;
        for _ in 0..40 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            v.push(s);
            v.push(s & 0xffff_ffff);
        }
        v
    }

    /// Runs `fast` over lane vectors built from every pair of samples, 32 pairs at a time, and
    /// checks each lane against `slow` under both a full and a partial execution mask.
    fn check2(
        what: &str,
        fast: impl Fn(u32, &Lanes, &Lanes) -> Lanes,
        slow: impl Fn(u64, u64) -> u64,
    ) {
        let s = samples();
        let pairs: Vec<(u64, u64)> = s
            .iter()
            .flat_map(|&x| s.iter().map(move |&y| (x, y)))
            .collect();
        for chunk in pairs.chunks(WARP) {
            let mut a = [0u64; WARP];
            let mut b = [0u64; WARP];
            for (l, &(x, y)) in chunk.iter().enumerate() {
                a[l] = x;
                b[l] = y;
            }
            for exec in [u32::MAX, 0x5555_5555] {
                let got = fast(exec, &a, &b);
                for l in crate::lanes::lanes(exec) {
                    assert_eq!(
                        got[l],
                        slow(a[l], b[l]),
                        "{what}: a={:#x} b={:#x}",
                        a[l],
                        b[l]
                    );
                }
            }
        }
    }

    const INT_TYPES: [Ty; 8] = [
        Ty::U32,
        Ty::S32,
        Ty::B32,
        Ty::U64,
        Ty::S64,
        Ty::B64,
        Ty::U16,
        Ty::S16,
    ];

    #[test]
    fn int_bin_matches_alu() {
        use IntBinOp::*;
        for op in [
            Add, AddSat, Sub, SubSat, MulLo, MulHi, MulWide, Div, Rem, Min, Max, And, Or, Xor, Shl,
            Shr,
        ] {
            for ty in INT_TYPES {
                if matches!(op, AddSat | SubSat) && ty != Ty::S32 {
                    continue;
                }
                check2(
                    &format!("{op:?} {ty:?}"),
                    |e, a, b| int_bin(op, ty, e, a, b),
                    |x, y| alu::int_bin(op, ty, x, y),
                );
            }
        }
    }

    #[test]
    fn mad_matches_alu() {
        for mode in [MadMode::Lo, MadMode::Hi, MadMode::Wide] {
            for ty in INT_TYPES {
                // `c` is taken from the same sample as `a` xor a constant, to vary all three
                // operands.
                check2(
                    &format!("mad {mode:?} {ty:?}"),
                    |e, a, b| {
                        let c = a.map(|v| v ^ 0x0123_4567_89ab_cdef);
                        mad(mode, ty, e, a, b, &c)
                    },
                    |x, y| alu::mad(mode, ty, x, y, x ^ 0x0123_4567_89ab_cdef),
                );
            }
        }
    }

    #[test]
    fn compare_matches_numeric() {
        use Cmp::*;
        for cmp in [
            Eq, Ne, Lt, Le, Gt, Ge, Lo, Ls, Hi, Hs, Equ, Neu, Ltu, Leu, Gtu, Geu, Num, Nan,
        ] {
            for ty in INT_TYPES.into_iter().chain([Ty::F32, Ty::F64, Ty::F16]) {
                check2(
                    &format!("setp {cmp:?} {ty:?}"),
                    |e, a, b| compare(cmp, ty, e, a, b),
                    |x, y| u64::from(numeric::compare(cmp, ty, x, y)),
                );
            }
        }
    }

    #[test]
    fn dp4a_and_lop3_match_reference() {
        for (sa, sb) in [(true, true), (false, false), (true, false), (false, true)] {
            let fast = match (sa, sb) {
                (true, true) => dp4a::<true, true>,
                (false, false) => dp4a::<false, false>,
                (true, false) => dp4a::<true, false>,
                (false, true) => dp4a::<false, true>,
            };
            check2(
                "dp4a",
                |e, a, b| map3(e, a, b, &a.map(|v| v.rotate_left(7)), fast),
                |x, y| {
                    let c = x.rotate_left(7) as u32;
                    u64::from(warp_ops::dot(sa, sb, None, x as u32, y as u32, c))
                },
            );
        }
        // Reference: the ISA's per-bit table lookup.
        let per_bit = |lut: u8, a: u64, b: u64, c: u64| {
            let (a, b, c) = (a as u32, b as u32, c as u32);
            let mut v = 0u32;
            for i in 0..32 {
                let idx = (((a >> i) & 1) << 2) | (((b >> i) & 1) << 1) | ((c >> i) & 1);
                v |= u32::from((lut >> idx) & 1) << i;
            }
            u64::from(v)
        };
        for lut in [0u8, 0xff, 0x96, 0xe8, 0xca, 0x80, 0xfe, 0x3c, 0x5a, 0x01] {
            check2(
                "lop3",
                |e, a, b| map3(e, a, b, &a.map(|v| !v), |x, y, z| lop3(lut, x, y, z)),
                |x, y| per_bit(lut, x, y, !x),
            );
        }
    }

    #[test]
    fn cvt_matches_alu() {
        let types = [
            Ty::U8,
            Ty::S8,
            Ty::U16,
            Ty::S16,
            Ty::U32,
            Ty::S32,
            Ty::U64,
            Ty::S64,
            Ty::F16,
            Ty::F32,
            Ty::F64,
        ];
        for dty in types {
            for sty in types {
                for (rnd, sat, ftz) in [
                    (None, false, false),
                    (Some(Rnd::Rn), false, false),
                    (Some(Rnd::Rn), false, true),
                    (Some(Rnd::Rz), false, false),
                    (Some(Rnd::Rzi), false, false),
                    (None, true, false),
                ] {
                    check2(
                        &format!("cvt {dty:?} {sty:?} {rnd:?} sat={sat} ftz={ftz}"),
                        |e, a, _| cvt(dty, sty, rnd, sat, ftz, e, a),
                        |x, _| alu::cvt(dty, sty, rnd, sat, ftz, x),
                    );
                }
            }
        }
    }

    #[test]
    fn float_fast_paths_match_alu() {
        use FBinOp::*;
        for op in [Add, Sub, Mul, Div, Min, Max] {
            for ty in [Ty::F32, Ty::F64, Ty::F16, Ty::F16x2] {
                for (rnd, ftz, sat) in [
                    (Rnd::Rn, false, false),
                    (Rnd::Rn, true, false),
                    (Rnd::Rz, false, true),
                ] {
                    check2(
                        &format!("{op:?} {ty:?} {rnd:?} ftz={ftz} sat={sat}"),
                        |e, a, b| fbin(op, ty, rnd, ftz, sat, e, a, b),
                        |x, y| alu::fbin(op, ty, rnd, ftz, sat, x, y),
                    );
                }
            }
        }
        for ty in [Ty::F32, Ty::F64, Ty::F16] {
            for (rnd, ftz, sat) in [(Rnd::Rn, false, false), (Rnd::Rm, true, true)] {
                check2(
                    &format!("fma {ty:?} {rnd:?}"),
                    |e, a, b| fma(ty, rnd, ftz, sat, e, a, b, &b.map(|v| v.rotate_right(3))),
                    |x, y| alu::fma(ty, rnd, ftz, sat, x, y, y.rotate_right(3)),
                );
            }
        }
    }
}
