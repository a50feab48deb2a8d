//! Warp-synchronous instructions against the ISA definitions restated in docs/ptx-isa.md.
mod common;
use common::*;
use half::{bf16, f16};

#[test]
fn shfl_modes_with_clamp_and_segments() {
    // Reference from the pseudocode of docs/ptx-isa.md#shuffles, evaluated here per lane.
    let shfl = |mode: &str, lane: u32, b: u32, c: u32| -> (u32, bool) {
        let (bval, clamp, seg) = (b & 0x1f, c & 0x1f, (c >> 8) & 0x1f);
        let max_lane = (lane & seg) | (clamp & !seg);
        let min_lane = lane & seg;
        let (j, p) = match mode {
            "up" => (
                lane as i32 - bval as i32,
                lane as i32 - bval as i32 >= max_lane as i32,
            ),
            "down" => ((lane + bval) as i32, lane + bval <= max_lane),
            "bfly" => ((lane ^ bval) as i32, (lane ^ bval) <= max_lane),
            _ => (
                (min_lane | (bval & !seg)) as i32,
                (min_lane | (bval & !seg)) <= max_lane,
            ),
        };
        (if p { j as u32 } else { lane }, p)
    };
    let vals: [u32; 32] = std::array::from_fn(|i| 1000 + i as u32 * 3);
    for mode in ["up", "down", "bfly", "idx"] {
        // Full warp (c = 0x1f, or 0 for up), and width-8 segments as CUDA encodes them.
        for (b, c) in [
            (1, 0x1f),
            (3, 0x1f),
            (5, 0),
            (2, (24 << 8) | 0x1f),
            (2, 24 << 8),
            (6, (24 << 8) | 0x1f),
        ] {
            let body = format!(
                "shfl.sync.{mode}.b32 %r10|%p1, %r2, {b}, {c}, 0xffffffff;\n selp.u32 %r11, 0x10000, 0, %p1;\n or.b32 %r10, %r10, %r11;"
            );
            let got = lanes3(&body, &vals, &[0; 32], &[0; 32]);
            for l in 0..32u32 {
                let (j, p) = shfl(mode, l, b, c);
                let want = vals[j as usize] | if p { 0x10000 } else { 0 };
                assert_eq!(got[l as usize], want, "{mode} b={b} c={c:#x} lane {l}");
            }
        }
    }
}

#[test]
fn vote_and_redux() {
    let a: [u32; 32] = std::array::from_fn(|i| ((i * 11) % 7) as u32);
    let ballot: u32 = (0..32).filter(|&i| a[i] > 2).fold(0, |m, i| m | (1 << i));
    let got = lanes3(
        "setp.gt.u32 %p1, %r2, 2;\n vote.sync.ballot.b32 %r10, %p1, 0xffffffff;",
        &a,
        &[0; 32],
        &[0; 32],
    );
    assert!(got.iter().all(|&g| g == ballot));
    let got = lanes3(
        "setp.gt.u32 %p1, %r2, 2;\n vote.sync.ballot.b32 %r10, !%p1, 0xffffffff;",
        &a,
        &[0; 32],
        &[0; 32],
    );
    assert!(got.iter().all(|&g| g == !ballot));
    for (mode, want) in [
        ("all", ballot == u32::MAX),
        ("any", ballot != 0),
        ("uni", ballot == 0 || ballot == u32::MAX),
    ] {
        let body = format!("setp.gt.u32 %p1, %r2, 2;\n vote.sync.{mode}.pred %p2, %p1, 0xffffffff;\n selp.u32 %r10, 1, 0, %p2;");
        let got = lanes3(&body, &a, &[0; 32], &[0; 32]);
        assert!(got.iter().all(|&g| g == want as u32), "vote.{mode}");
    }
    let all = lanes3("setp.lt.u32 %p1, %r2, 7;\n vote.sync.all.pred %p2, %p1, 0xffffffff;\n selp.u32 %r10, 1, 0, %p2;", &a, &[0; 32], &[0; 32]);
    assert!(all.iter().all(|&g| g == 1));
    let w = words(70);
    let s: Vec<i32> = w.iter().map(|&x| x as i32).collect();
    for (op, want) in [
        ("add.u32", w.iter().fold(0u32, |x, y| x.wrapping_add(*y))),
        ("min.u32", *w.iter().min().unwrap()),
        ("max.s32", *s.iter().max().unwrap() as u32),
        ("min.s32", *s.iter().min().unwrap() as u32),
        ("and.b32", w.iter().fold(u32::MAX, |x, y| x & y)),
        ("or.b32", w.iter().fold(0, |x, y| x | y)),
        ("xor.b32", w.iter().fold(0, |x, y| x ^ y)),
    ] {
        let got = lanes3(
            &format!("redux.sync.{op} %r10, %r2, 0xffffffff;"),
            &w,
            &[0; 32],
            &[0; 32],
        );
        assert!(
            got.iter().all(|&g| g == want),
            "redux.{op}: {got:?} want {want:#x}"
        );
    }
}

/// Runs one `mma.sync` with per-lane fragments `a` (4 words), `b` (2 words), `c` (4 words); returns
/// d.
fn run_mma(
    inst: &str,
    a: &[[u32; 4]; 32],
    b: &[[u32; 2]; 32],
    c: &[[u32; 4]; 32],
) -> [[u32; 4]; 32] {
    let body = format!(
        "
    mul.wide.u32 %rd6, %r1, 16;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.v4.u32 {{%r2, %r3, %r4, %r5}}, [%rd7];
    mul.wide.u32 %rd8, %r1, 8;
    add.s64 %rd9, %rd1, %rd8;
    ld.global.v2.u32 {{%r6, %r7}}, [%rd9+512];
    ld.global.v4.u32 {{%r11, %r12, %r13, %r14}}, [%rd7+768];
    {inst} {{%r20, %r21, %r22, %r23}}, {{%r2, %r3, %r4, %r5}}, {{%r6, %r7}}, {{%r11, %r12, %r13, %r14}};
    add.s64 %rd10, %rd2, %rd6;
    st.global.v4.u32 [%rd10], {{%r20, %r21, %r22, %r23}};"
    );
    let mut input = Vec::new();
    input.extend(a.iter().flatten());
    input.extend(b.iter().flatten());
    input.extend(c.iter().flatten());
    let (out, stats) = run_io(&kernel(&body), "k", 32, &input, 128).unwrap();
    assert_eq!(stats.by_class.tensor, 1);
    std::array::from_fn(|l| std::array::from_fn(|i| out[l * 4 + i]))
}

#[test]
fn mma_m16n8k16_f16_and_bf16_fragment_layout() {
    for bf in [false, true] {
        // Small integers and halves: products and sums are exact in f32, so the result is exact.
        let av = |r: usize, k: usize| ((r * 3 + k * 5) % 9) as f32 - 4.0;
        let bv = |k: usize, n: usize| ((k * 7 + n) % 5) as f32 * 0.5 - 1.0;
        let cv = |r: usize, n: usize| (r * 8 + n) as f32;
        let enc = |x: f32| -> u32 {
            if bf {
                bf16::from_f32(x).to_bits() as u32
            } else {
                f16::from_f32(x).to_bits() as u32
            }
        };
        let mut a = [[0u32; 4]; 32];
        let mut b = [[0u32; 2]; 32];
        let mut c = [[0u32; 4]; 32];
        for lane in 0..32 {
            let (g, t) = (lane / 4, lane % 4);
            for i in 0..8 {
                let row = if [0, 1, 4, 5].contains(&i) { g } else { g + 8 };
                let col = 2 * t + (i & 1) + if i >= 4 { 8 } else { 0 };
                a[lane][i / 2] |= enc(av(row, col)) << (16 * (i % 2));
            }
            for i in 0..4 {
                let k = 2 * t + (i & 1) + if i >= 2 { 8 } else { 0 };
                b[lane][i / 2] |= enc(bv(k, g)) << (16 * (i % 2));
            }
            for i in 0..4 {
                c[lane][i] = cv(g + if i >= 2 { 8 } else { 0 }, 2 * t + (i & 1)).to_bits();
            }
        }
        let ty = if bf { "bf16" } else { "f16" };
        let d = run_mma(
            &format!("mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32"),
            &a,
            &b,
            &c,
        );
        for lane in 0..32 {
            let (g, t) = (lane / 4, lane % 4);
            for i in 0..4 {
                let (row, col) = (g + if i >= 2 { 8 } else { 0 }, 2 * t + (i & 1));
                let want: f32 =
                    (0..16).map(|k| av(row, k) * bv(k, col)).sum::<f32>() + cv(row, col);
                assert_eq!(f32::from_bits(d[lane][i]), want, "{ty} lane {lane} d{i}");
            }
        }
    }
}

#[test]
fn mma_m16n8k32_s8_fragment_layout() {
    let av = |r: usize, k: usize| ((r * 31 + k * 17) % 255) as i32 - 127;
    let bv = |k: usize, n: usize| ((k * 13 + n * 29) % 255) as i32 - 127;
    let cv = |r: usize, n: usize| (r * 1000 + n) as i32 - 5000;
    let mut a = [[0u32; 4]; 32];
    let mut b = [[0u32; 2]; 32];
    let mut c = [[0u32; 4]; 32];
    for lane in 0..32 {
        let (g, t) = (lane / 4, lane % 4);
        for i in 0..16 {
            let row = if i < 4 || (8..12).contains(&i) {
                g
            } else {
                g + 8
            };
            let col = 4 * t + (i & 3) + if i >= 8 { 16 } else { 0 };
            a[lane][i / 4] |= (av(row, col) as u8 as u32) << (8 * (i % 4));
        }
        for i in 0..8 {
            let k = 4 * t + (i & 3) + if i >= 4 { 16 } else { 0 };
            b[lane][i / 4] |= (bv(k, g) as u8 as u32) << (8 * (i % 4));
        }
        for i in 0..4 {
            c[lane][i] = cv(g + if i >= 2 { 8 } else { 0 }, 2 * t + (i & 1)) as u32;
        }
    }
    let d = run_mma(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
        &a,
        &b,
        &c,
    );
    for lane in 0..32 {
        let (g, t) = (lane / 4, lane % 4);
        for i in 0..4 {
            let (row, col) = (g + if i >= 2 { 8 } else { 0 }, 2 * t + (i & 1));
            let want: i32 = (0..32).map(|k| av(row, k) * bv(k, col)).sum::<i32>() + cv(row, col);
            assert_eq!(d[lane][i] as i32, want, "lane {lane} d{i}");
        }
    }
}

#[test]
fn ldmatrix_x4_and_trans() {
    // Shared tile of four 8x8 b16 matrices; element (m, r, c) = m*1000 + r*10 + c. Row r of matrix
    // m starts at byte (m*8 + r) * 16; lane L supplies the address of row L%8 of matrix L/8.
    let val = |m: usize, r: usize, c: usize| (m * 1000 + r * 10 + c) as u32;
    let input: Vec<u32> = (0..4 * 8 * 4)
        .map(|w| {
            let (m, r, c) = (w / 32, (w / 4) % 8, 2 * (w % 4));
            val(m, r, c) | (val(m, r, c + 1) << 16)
        })
        .collect();
    for trans in [false, true] {
        let tr = if trans { ".trans" } else { "" };
        let body = format!(
            "
    .shared .align 16 .b8 tile[512];
    shl.b32 %r5, %r1, 4;
    mov.u32 %r6, tile;
    add.u32 %r7, %r6, %r5;
    mul.wide.u32 %rd6, %r1, 16;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.v4.u32 {{%r11, %r12, %r13, %r14}}, [%rd7];
    st.shared.v4.u32 [%r7], {{%r11, %r12, %r13, %r14}};
    bar.sync 0;
    ldmatrix.sync.aligned.m8n8.x4{tr}.shared.b16 {{%r20, %r21, %r22, %r23}}, [%r7];
    mul.wide.u32 %rd8, %r1, 16;
    add.s64 %rd9, %rd2, %rd8;
    st.global.v4.u32 [%rd9], {{%r20, %r21, %r22, %r23}};"
        );
        let (out, _) = run_io(&kernel(&body), "k", 32, &input, 128).unwrap();
        for lane in 0..32 {
            let (r, c) = (lane / 4, 2 * (lane % 4));
            for m in 0..4 {
                let (lo, hi) = if trans {
                    (val(m, c, r), val(m, c + 1, r))
                } else {
                    (val(m, r, c), val(m, r, c + 1))
                };
                assert_eq!(
                    out[lane * 4 + m],
                    lo | (hi << 16),
                    "trans={trans} lane {lane} r{m}"
                );
            }
        }
    }
}
