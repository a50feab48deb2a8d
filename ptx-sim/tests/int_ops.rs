//! Integer instructions against their PTX ISA definitions, evaluated independently here.
mod common;
use common::*;

fn check(body: &str, seed: u32, f: impl Fn(u32, u32, u32) -> u32) {
    let (a, b, c) = (words(seed), words(seed + 1), words(seed + 2));
    let got = lanes3(body, &a, &b, &c);
    for i in 0..32 {
        assert_eq!(
            got[i],
            f(a[i], b[i], c[i]),
            "`{body}` lane {i}: a={:#x} b={:#x} c={:#x}",
            a[i],
            b[i],
            c[i]
        );
    }
}

#[test]
fn add_sub_mul() {
    check("add.s32 %r10, %r2, %r3;", 1, |a, b, _| a.wrapping_add(b));
    check("sub.u32 %r10, %r2, %r3;", 2, |a, b, _| a.wrapping_sub(b));
    check("mul.lo.s32 %r10, %r2, %r3;", 3, |a, b, _| a.wrapping_mul(b));
    check("mul.hi.u32 %r10, %r2, %r3;", 4, |a, b, _| {
        ((a as u64 * b as u64) >> 32) as u32
    });
    check("mul.hi.s32 %r10, %r2, %r3;", 5, |a, b, _| {
        ((a as i32 as i64 * b as i32 as i64) >> 32) as u32
    });
    check("add.sat.s32 %r10, %r2, %r3;", 6, |a, b, _| {
        (a as i32).saturating_add(b as i32) as u32
    });
    check("mad.lo.s32 %r10, %r2, %r3, %r4;", 7, |a, b, c| {
        a.wrapping_mul(b).wrapping_add(c)
    });
    check("mad.hi.u32 %r10, %r2, %r3, %r4;", 8, |a, b, c| {
        (((a as u64 * b as u64) >> 32) as u32).wrapping_add(c)
    });
    // mul.wide.s32 gives the 64-bit product; keep its high half.
    check(
        "mul.wide.s32 %rd8, %r2, %r3;\n mov.b64 {%r11, %r10}, %rd8;",
        9,
        |a, b, _| ((a as i32 as i64 * b as i32 as i64) >> 32) as u32,
    );
    check(
        "mad.wide.u32 %rd8, %r2, %r3, 7;\n cvt.u32.u64 %r10, %rd8;",
        10,
        |a, b, _| (a as u64 * b as u64 + 7) as u32,
    );
}

#[test]
fn div_rem_min_max_abs_neg() {
    // Divisors forced odd (never zero) to test the defined cases.
    check(
        "or.b32 %r5, %r3, 1;\n div.u32 %r10, %r2, %r5;",
        11,
        |a, b, _| a / (b | 1),
    );
    check(
        "or.b32 %r5, %r3, 1;\n rem.u32 %r10, %r2, %r5;",
        12,
        |a, b, _| a % (b | 1),
    );
    check(
        "or.b32 %r5, %r3, 1;\n div.s32 %r10, %r2, %r5;",
        13,
        |a, b, _| (a as i32).wrapping_div((b | 1) as i32) as u32,
    );
    check(
        "or.b32 %r5, %r3, 1;\n rem.s32 %r10, %r2, %r5;",
        14,
        |a, b, _| (a as i32).wrapping_rem((b | 1) as i32) as u32,
    );
    check("min.s32 %r10, %r2, %r3;", 15, |a, b, _| {
        (a as i32).min(b as i32) as u32
    });
    check("max.u32 %r10, %r2, %r3;", 16, |a, b, _| a.max(b));
    check("abs.s32 %r10, %r2;", 17, |a, _, _| {
        (a as i32).wrapping_abs() as u32
    });
    check("neg.s32 %r10, %r2;", 18, |a, _, _| {
        (a as i32).wrapping_neg() as u32
    });
}

#[test]
fn logic_and_shifts() {
    check("and.b32 %r10, %r2, %r3;", 19, |a, b, _| a & b);
    check("or.b32 %r10, %r2, %r3;", 20, |a, b, _| a | b);
    check("xor.b32 %r10, %r2, %r3;", 21, |a, b, _| a ^ b);
    check("not.b32 %r10, %r2;", 22, |a, _, _| !a);
    check("cnot.b32 %r10, %r2;", 23, |a, _, _| (a == 0) as u32);
    // PTX clamps shift amounts above the width: shl/shr.u give 0, shr.s gives the sign fill.
    check(
        "and.b32 %r5, %r3, 63;\n shl.b32 %r10, %r2, %r5;",
        24,
        |a, b, _| {
            let s = b & 63;
            if s >= 32 {
                0
            } else {
                a << s
            }
        },
    );
    check(
        "and.b32 %r5, %r3, 63;\n shr.u32 %r10, %r2, %r5;",
        25,
        |a, b, _| {
            let s = b & 63;
            if s >= 32 {
                0
            } else {
                a >> s
            }
        },
    );
    check(
        "and.b32 %r5, %r3, 63;\n shr.s32 %r10, %r2, %r5;",
        26,
        |a, b, _| ((a as i32) >> (b & 63).min(31)) as u32,
    );
    check("popc.b32 %r10, %r2;", 27, |a, _, _| a.count_ones());
    check("clz.b32 %r10, %r2;", 28, |a, _, _| a.leading_zeros());
    check("brev.b32 %r10, %r2;", 29, |a, _, _| a.reverse_bits());
    check("shf.l.wrap.b32 %r10, %r2, %r3, %r4;", 30, |a, b, c| {
        let n = c & 31;
        ((((b as u64) << 32 | a as u64) << n) >> 32) as u32
    });
}

/// `bfe` from the ISA pseudocode (docs/ptx-isa.md#bfe), bit by bit.
fn bfe_ref(a: u32, pos: u32, len: u32, signed: bool) -> u32 {
    let (pos, len) = (pos & 0xff, len & 0xff);
    let sbit = if !signed || len == 0 {
        0
    } else {
        (a >> (pos + len - 1).min(31)) & 1
    };
    (0..32).fold(0, |d, i| {
        let bit = if i < len && pos + i <= 31 {
            (a >> (pos + i)) & 1
        } else {
            sbit
        };
        d | (bit << i)
    })
}

#[test]
fn bfe_bfi() {
    check(
        "and.b32 %r5, %r3, 39;\n and.b32 %r6, %r4, 39;\n bfe.u32 %r10, %r2, %r5, %r6;",
        31,
        |a, b, c| bfe_ref(a, b & 39, c & 39, false),
    );
    check(
        "and.b32 %r5, %r3, 39;\n and.b32 %r6, %r4, 39;\n bfe.s32 %r10, %r2, %r5, %r6;",
        32,
        |a, b, c| bfe_ref(a, b & 39, c & 39, true),
    );
    // bfi: insert the low len bits of a into b at pos (pos, len < 32 here so the field fits or is
    // cut at 31).
    check("and.b32 %r5, %r4, 31;\n shr.u32 %r6, %r4, 8;\n and.b32 %r6, %r6, 15;\n bfi.b32 %r10, %r2, %r3, %r5, %r6;", 33, |a, b, c| {
        let (pos, len) = (c & 31, (c >> 8) & 15);
        let mut d = b;
        for i in 0..len {
            if pos + i < 32 {
                d = (d & !(1 << (pos + i))) | (((a >> i) & 1) << (pos + i));
            }
        }
        d
    });
}

#[test]
fn prmt_generic_and_modes() {
    let pick = |a: u32, b: u32, sel: u32| -> u32 {
        let bytes = ((b as u64) << 32 | a as u64).to_le_bytes();
        (0..4).fold(0, |d, k| {
            let ctl = (sel >> (4 * k)) & 0xf;
            let mut v = bytes[(ctl & 7) as usize] as u32;
            if ctl & 8 != 0 {
                v = if v & 0x80 != 0 { 0xff } else { 0 };
            }
            d | (v << (8 * k))
        })
    };
    check("prmt.b32 %r10, %r2, %r3, %r4;", 34, |a, b, c| {
        pick(a, b, c & 0xffff)
    });
    check("prmt.b32 %r10, %r2, %r3, 0x5140;", 35, |a, b, _| {
        pick(a, b, 0x5140)
    });
    // Mode tables from docs/ptx-isa.md#prmt (d.b3 d.b2 d.b1 d.b0 source bytes for selector 0..3).
    let table = |rows: [[u32; 4]; 4]| {
        move |a: u32, b: u32, c: u32| {
            let r = rows[(c & 3) as usize];
            let bytes = ((b as u64) << 32 | a as u64).to_le_bytes();
            (0..4).fold(0, |d, k| d | ((bytes[r[3 - k] as usize] as u32) << (8 * k)))
        }
    };
    check(
        "prmt.b32.f4e %r10, %r2, %r3, %r4;",
        36,
        table([[3, 2, 1, 0], [4, 3, 2, 1], [5, 4, 3, 2], [6, 5, 4, 3]]),
    );
    check(
        "prmt.b32.b4e %r10, %r2, %r3, %r4;",
        37,
        table([[5, 6, 7, 0], [6, 7, 0, 1], [7, 0, 1, 2], [0, 1, 2, 3]]),
    );
    check(
        "prmt.b32.rc8 %r10, %r2, %r3, %r4;",
        38,
        table([[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]]),
    );
    check(
        "prmt.b32.ecl %r10, %r2, %r3, %r4;",
        39,
        table([[3, 2, 1, 0], [3, 2, 1, 1], [3, 2, 2, 2], [3, 3, 3, 3]]),
    );
    check(
        "prmt.b32.ecr %r10, %r2, %r3, %r4;",
        40,
        table([[0, 0, 0, 0], [1, 1, 1, 0], [2, 2, 1, 0], [3, 2, 1, 0]]),
    );
    check(
        "prmt.b32.rc16 %r10, %r2, %r3, %r4;",
        41,
        table([[1, 0, 1, 0], [3, 2, 3, 2], [1, 0, 1, 0], [3, 2, 3, 2]]),
    );
}

#[test]
fn dp4a_dp2a() {
    let bytes = |x: u32, s: bool| -> [i64; 4] {
        x.to_le_bytes()
            .map(|b| if s { b as i8 as i64 } else { b as i64 })
    };
    for (sa, sb, ta, tb) in [
        (true, true, "s32", "s32"),
        (false, false, "u32", "u32"),
        (true, false, "s32", "u32"),
        (false, true, "u32", "s32"),
    ] {
        check(
            &format!("dp4a.{ta}.{tb} %r10, %r2, %r3, %r4;"),
            42,
            move |a, b, c| {
                let (x, y) = (bytes(a, sa), bytes(b, sb));
                (c as i32 as i64 + (0..4).map(|i| x[i] * y[i]).sum::<i64>()) as u32
            },
        );
    }
    check("dp2a.lo.s32.s32 %r10, %r2, %r3, %r4;", 43, |a, b, c| {
        let h = [a as u16 as i16 as i64, (a >> 16) as u16 as i16 as i64];
        let y = bytes(b, true);
        (c as i32 as i64 + h[0] * y[0] + h[1] * y[1]) as u32
    });
    check("dp2a.hi.u32.u32 %r10, %r2, %r3, %r4;", 44, |a, b, c| {
        let h = [a as u16 as i64, (a >> 16) as i64];
        let y = bytes(b, false);
        (c as i64 + h[0] * y[2] + h[1] * y[3]) as u32
    });
}

#[test]
fn setp_selp_and_predication() {
    for (cmp, f) in [
        (
            "lt.s32",
            Box::new(|a: u32, b: u32| (a as i32) < (b as i32)) as Box<dyn Fn(u32, u32) -> bool>,
        ),
        ("lt.u32", Box::new(|a: u32, b: u32| a < b)),
        (
            "ge.s32",
            Box::new(|a: u32, b: u32| (a as i32) >= (b as i32)),
        ),
        ("hi.u32", Box::new(|a: u32, b: u32| a > b)),
        ("ls.u32", Box::new(|a: u32, b: u32| a <= b)),
        ("ne.b32", Box::new(|a: u32, b: u32| a != b)),
    ] {
        check(
            &format!("setp.{cmp} %p1, %r2, %r3;\n selp.b32 %r10, 7, 9, %p1;"),
            45,
            |a, b, _| if f(a, b) { 7 } else { 9 },
        );
    }
    // Guarded instructions write only where the guard holds; @!p inverts it.
    check(
        "mov.u32 %r10, 5;\n setp.eq.s32 %p1, %r2, 0;\n @%p1 mov.u32 %r10, 6;",
        46,
        |a, _, _| if a == 0 { 6 } else { 5 },
    );
    check(
        "mov.u32 %r10, 5;\n setp.eq.s32 %p1, %r2, 0;\n @!%p1 mov.u32 %r10, 6;",
        47,
        |a, _, _| if a == 0 { 5 } else { 6 },
    );
    // setp with a combining predicate and two destinations: p = (a<b) & q0, q = !(a<b) & q0.
    check("setp.ne.s32 %p3, %r4, 0;\n setp.lt.and.u32 %p1|%p2, %r2, %r3, %p3;\n selp.b32 %r11, 1, 0, %p1;\n selp.b32 %r12, 2, 0, %p2;\n or.b32 %r10, %r11, %r12;", 48, |a, b, c| {
        let q0 = c != 0;
        ((a < b) && q0) as u32 | (((a >= b) && q0) as u32) << 1
    });
    // Packing and unpacking moves.
    check(
        "mov.b32 {%h1, %h2}, %r2;\n mov.b32 %r10, {%h2, %h1};",
        49,
        |a, _, _| a.rotate_left(16),
    );
}

/// PTX ISA, "Operand Size Exceeding Instruction-Type Size": a `cvt` whose destination register is
/// wider than its destination type sign-extends the result to the register size for signed types
/// and zero-extends it for unsigned ones.
#[test]
fn cvt_narrowing_extends_to_register_size() {
    // s64 -> s8 into a .b32 register (what rustc emits for `x as i8 as i32`).
    check(
        "cvt.s64.s32 %rd6, %r2;\n cvt.s8.s64 %r10, %rd6;",
        40,
        |a, _, _| a as i8 as i32 as u32,
    );
    check("cvt.s16.s32 %r10, %r2;", 41, |a, _, _| {
        a as i16 as i32 as u32
    });
    check("cvt.u8.u32 %r10, %r2;", 42, |a, _, _| a & 0xff);
    // Into a .b16 register: extended to 16 bits only.
    check(
        "cvt.s8.s32 %h1, %r2;\n cvt.u32.u16 %r10, %h1;",
        43,
        |a, _, _| u32::from(a as i8 as i16 as u16),
    );
    // Into a .b64 register: the upper word is all sign bits.
    check(
        "cvt.s8.s32 %rd6, %r2;\n shr.u64 %rd7, %rd6, 32;\n cvt.u32.u64 %r10, %rd7;",
        44,
        |a, _, _| if (a as i8) < 0 { u32::MAX } else { 0 },
    );
    // Float -> s8 (in range [-128, 127], so no saturation is involved).
    check(
        "and.b32 %r5, %r2, 255;\n sub.s32 %r5, %r5, 128;\n cvt.rn.f32.s32 %f1, %r5;\n cvt.rzi.s8.f32 %r10, %f1;",
        45,
        |a, _, _| ((a & 0xff) as i32 - 128) as u32,
    );
}
