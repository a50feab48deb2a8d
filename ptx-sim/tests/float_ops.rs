//! Float arithmetic, comparisons and `cvt` rounding modes against IEEE definitions evaluated here.
mod common;
use common::*;
use half::{bf16, f16};

fn floats(seed: u32) -> [u32; 32] {
    let special = [
        0.0f32,
        -0.0,
        1.0,
        -1.5,
        f32::INFINITY,
        f32::NAN,
        1e-40,
        3.4e38,
    ];
    let w = words(seed);
    std::array::from_fn(|i| {
        if i < special.len() {
            special[i]
        } else {
            (w[i] % 2_000_000) as f32 / 997.0 - 1000.0
        }
        .to_bits()
    })
}

fn check(body: &str, f: impl Fn(f32, f32, f32) -> u32) {
    let (a, b, c) = (floats(1), floats(2), floats(3));
    let got = lanes3(body, &a, &b, &c);
    for i in 0..32 {
        let (x, y, z) = (
            f32::from_bits(a[i]),
            f32::from_bits(b[i]),
            f32::from_bits(c[i]),
        );
        let want = f(x, y, z);
        let same =
            got[i] == want || (f32::from_bits(got[i]).is_nan() && f32::from_bits(want).is_nan());
        assert!(
            same,
            "`{body}` lane {i}: {x} {y} {z}: got {:#x} want {want:#x}",
            got[i]
        );
    }
}

#[test]
fn f32_arithmetic_is_ieee() {
    check("add.rn.f32 %r10, %r2, %r3;", |x, y, _| (x + y).to_bits());
    check("sub.rn.f32 %r10, %r2, %r3;", |x, y, _| (x - y).to_bits());
    check("mul.rn.f32 %r10, %r2, %r3;", |x, y, _| (x * y).to_bits());
    check("div.rn.f32 %r10, %r2, %r3;", |x, y, _| (x / y).to_bits());
    check("fma.rn.f32 %r10, %r2, %r3, %r4;", |x, y, z| {
        x.mul_add(y, z).to_bits()
    });
    check("sqrt.rn.f32 %r10, %r2;", |x, _, _| x.sqrt().to_bits());
    check("neg.f32 %r10, %r2;", |x, _, _| (-x).to_bits());
    check("abs.f32 %r10, %r2;", |x, _, _| x.abs().to_bits());
    // min/max return the non-NaN operand.
    check("min.f32 %r10, %r2, %r3;", |x, y, _| {
        if x.is_nan() {
            y
        } else if y.is_nan() || x < y {
            x
        } else {
            y
        }
        .to_bits()
    });
    // ftz flushes the subnormal input 1e-40 to zero.
    check("add.rn.ftz.f32 %r10, %r2, 0f00000000;", |x, _, _| {
        if x.is_subnormal() { 0.0f32 } else { x + 0.0 }.to_bits()
    });
    // Unordered comparisons are true when either operand is NaN; ordered ones false.
    check(
        "setp.ltu.f32 %p1, %r2, %r3;\n selp.b32 %r10, 1, 0, %p1;",
        |x, y, _| (x.is_nan() || y.is_nan() || x < y) as u32,
    );
    check(
        "setp.lt.f32 %p1, %r2, %r3;\n selp.b32 %r10, 1, 0, %p1;",
        |x, y, _| (x < y) as u32,
    );
    check(
        "setp.nan.f32 %p1, %r2, %r3;\n selp.b32 %r10, 1, 0, %p1;",
        |x, y, _| (x.is_nan() || y.is_nan()) as u32,
    );
    check(
        "setp.neu.f32 %p1, %r2, %r3;\n selp.b32 %r10, 1, 0, %p1;",
        |x, y, _| (x.is_nan() || y.is_nan() || x != y) as u32,
    );
}

#[test]
fn approximate_math_within_isa_bounds() {
    // Tolerances: the ISA's stated error bounds for the hardware (crate docs); the simulator is
    // exact, so checking against f64 math with those bounds keeps these tests valid on either.
    let (a, _, _) = (floats(4), 0, 0);
    type Case = (&'static str, fn(f64) -> f64, f64);
    let cases: [Case; 4] = [
        ("ex2.approx.f32", f64::exp2, 2f64.powf(-22.0)),
        ("rsqrt.approx.f32", |x| 1.0 / x.sqrt(), 2f64.powf(-22.0)),
        ("tanh.approx.f32", f64::tanh, 2f64.powf(-10.0)),
        ("rcp.approx.f32", |x| 1.0 / x, 2f64.powf(-22.0)),
    ];
    for (op, f, rel) in cases {
        let inputs: [u32; 32] = std::array::from_fn(|i| {
            let x = f32::from_bits(a[i]);
            (if x.is_finite() { x.abs() % 20.0 } else { 1.0 } + 0.25).to_bits()
        });
        let got = lanes3(&format!("{op} %r10, %r2;"), &inputs, &[0; 32], &[0; 32]);
        for i in 0..32 {
            let x = f64::from(f32::from_bits(inputs[i]));
            let want = f(x);
            let g = f64::from(f32::from_bits(got[i]));
            assert!(
                (g - want).abs() <= rel * want.abs(),
                "{op}({x}) = {g}, want {want}"
            );
        }
    }
}

#[test]
fn cvt_rounding_modes() {
    // f32 -> s32 with each integer rounding mode; out-of-range saturates, NaN -> 0.
    let sat = |v: f64| {
        if v.is_nan() {
            0
        } else {
            v.clamp(i32::MIN as f64, i32::MAX as f64) as i32 as u32
        }
    };
    check("cvt.rni.s32.f32 %r10, %r2;", |x, _, _| {
        sat(f64::from(x).round_ties_even())
    });
    check("cvt.rzi.s32.f32 %r10, %r2;", |x, _, _| {
        sat(f64::from(x).trunc())
    });
    check("cvt.rmi.s32.f32 %r10, %r2;", |x, _, _| {
        sat(f64::from(x).floor())
    });
    check("cvt.rpi.s32.f32 %r10, %r2;", |x, _, _| {
        sat(f64::from(x).ceil())
    });
    check("cvt.rzi.u32.f32 %r10, %r2;", |x, _, _| {
        if x.is_nan() || x <= 0.0 {
            0
        } else {
            f64::from(x).trunc().min(u32::MAX as f64) as u32
        }
    });
    // f32 -> f16: round to nearest even is half's conversion; directed modes pick the neighbour on
    // the required side of the exact value (checked by comparing the two candidates here).
    let dir = |x: f32, up: bool| -> u32 {
        let n = f16::from_f32(x);
        let nv = n.to_f32();
        if x.is_nan() || nv == x {
            return n.to_bits() as u32;
        }
        let wrong = if up { nv < x } else { nv > x };
        if !wrong {
            return n.to_bits() as u32;
        }
        let b = n.to_bits();
        let stepped = if (b & 0x7fff) == 0 {
            if up {
                1
            } else {
                0x8001
            }
        } else if up == (b & 0x8000 == 0) {
            b + 1
        } else {
            b - 1
        };
        stepped as u32
    };
    check(
        "cvt.rn.f16.f32 %h1, %r2;\n cvt.u32.u16 %r10, %h1;",
        |x, _, _| f16::from_f32(x).to_bits() as u32,
    );
    check(
        "cvt.rp.f16.f32 %h1, %r2;\n cvt.u32.u16 %r10, %h1;",
        move |x, _, _| dir(x, true),
    );
    check(
        "cvt.rm.f16.f32 %h1, %r2;\n cvt.u32.u16 %r10, %h1;",
        move |x, _, _| dir(x, false),
    );
    check(
        "cvt.rz.f16.f32 %h1, %r2;\n cvt.u32.u16 %r10, %h1;",
        move |x, _, _| dir(x, x < 0.0),
    );
    check(
        "cvt.rn.bf16.f32 %h1, %r2;\n cvt.u32.u16 %r10, %h1;",
        |x, _, _| bf16::from_f32(x).to_bits() as u32,
    );
    // f16 -> f32 is exact; packed f16x2 puts the first source in the upper half.
    check(
        "cvt.rn.f16.f32 %h1, %r2;\n cvt.f32.f16 %r10, %h1;",
        |x, _, _| f16::from_f32(x).to_f32().to_bits(),
    );
    check("cvt.rn.f16x2.f32 %r10, %r2, %r3;", |x, y, _| {
        (f16::from_f32(x).to_bits() as u32) << 16 | f16::from_f32(y).to_bits() as u32
    });
    // Integer conversions: s32 -> f32 with .rz truncates toward zero; u32 -> u8 with .sat clamps.
    check("cvt.rz.f32.s32 %r10, %r2;", |x, _, _| {
        let v = x.to_bits() as i32;
        let r = v as f32;
        let t = if (r as i64).abs() > (v as i64).abs() {
            f32::from_bits(r.to_bits() - 1)
        } else {
            r
        };
        t.to_bits()
    });
    check("cvt.sat.u8.u32 %r10, %r2;", |x, _, _| x.to_bits().min(255));
    check(
        "cvt.s64.s32 %rd8, %r2;\n shr.u64 %rd8, %rd8, 32;\n cvt.u32.u64 %r10, %rd8;",
        |x, _, _| {
            if (x.to_bits() as i32) < 0 {
                u32::MAX
            } else {
                0
            }
        },
    );
    // f32 -> f32 with .sat clamps to [0, 1] (NaN -> 0).
    check("cvt.sat.f32.f32 %r10, %r2;", |x, _, _| {
        if x.is_nan() {
            0.0f32
        } else {
            x.clamp(0.0, 1.0)
        }
        .to_bits()
    });
}

#[test]
fn f16x2_and_bf16_arithmetic() {
    // Packed f16 add rounds each half once; inputs are the f16 halves of the test words.
    let h = |w: u32, k: u32| f16::from_bits((w >> (16 * k)) as u16).to_f64();
    let (a, b) = (words(80), words(81));
    let got = lanes3("add.rn.f16x2 %r10, %r2, %r3;", &a, &b, &[0; 32]);
    for i in 0..32 {
        let want = (0..2).fold(0u32, |d, k| {
            d | (f16::from_f64(h(a[i], k) + h(b[i], k)).to_bits() as u32) << (16 * k)
        });
        let g = got[i];
        let nan = (0..2).any(|k| f16::from_bits((g >> (16 * k)) as u16).is_nan());
        assert!(g == want || nan, "lane {i}: {g:#x} vs {want:#x}");
    }
}
