//! `quantize_q8_1` against the CPU oracle `ingot_quant::quantize_q8_1`: bit-exact.

mod support;

use ingot_abi::blocks::QK8_1;
use ingot_kernels::{ops, Accelerator};
use rand::Rng;
use support::{download, f32_bytes, poisoned, upload, Agree, SameLaunch};

/// Random non-zero floats of mixed magnitude, plus hand-made blocks: one with exact rounding
/// ties (`amax = 127` so `d = 1` and `x/d = k + 0.5` exactly; `roundf` must go away from zero),
/// one all-zero block (`amax = 0`: `d = 0`, all quants 0), and (when `n` has a third block) the
/// floats just above and below ties (`k + 0.5 ± 1 ulp`), which the branch-free rounding
/// (`round_away_i32`) must send to the nearer integer.
fn inputs(rng: &mut impl Rng, n: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n)
        .map(|_| {
            let mag = 10f32.powi(rng.random_range(-3..3));
            let v = rng.random_range(0.05f32..1.0) * mag;
            if rng.random() {
                v
            } else {
                -v
            }
        })
        .collect();
    let ties = &mut x[..QK8_1];
    ties[0] = 127.0;
    for (i, t) in ties.iter_mut().enumerate().skip(1) {
        *t = (i as f32 - 16.0) + 0.5;
    }
    x[QK8_1..2 * QK8_1].fill(0.0);
    if n >= 3 * QK8_1 {
        let near = &mut x[2 * QK8_1..3 * QK8_1];
        near[0] = -127.0;
        for (i, t) in near.iter_mut().enumerate().skip(1) {
            let tie = (i as f32 - 16.0) + 0.5;
            let bits = tie.to_bits();
            // Odd i: one ulp away from zero; even i: one ulp toward zero.
            *t = f32::from_bits(if i % 2 == 1 { bits + 1 } else { bits - 1 });
        }
    }
    x
}

fn check<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("quantize_q8_1");
    // 1184 = 37 blocks: the last thread block is partial; 8192 fills whole thread blocks.
    for n in [64usize, 1184, 8192] {
        let x = inputs(&mut rng, n);
        let expect: Vec<u8> = bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&x)).to_vec();
        let xb = upload(b, &f32_bytes(&x));
        let yb = poisoned(b, expect.len());
        ops::quantize_q8_1(b, &xb, &yb, n).expect("launch");
        let got = download(b, &yb);
        if let Some(i) = (0..got.len()).find(|&i| got[i] != expect[i]) {
            let blk = i / 36;
            panic!(
                "{}: n={n}: first mismatch at byte {i} (block {blk}, byte {}): got {:#04x}, \
                 expected {:#04x}; block inputs {:?}",
                b.name(),
                i % 36,
                got[i],
                expect[i],
                &x[blk * QK8_1..(blk + 1) * QK8_1]
            );
        }
        eprintln!(
            "{}: quantize_q8_1 n={n}: {} bytes bit-exact",
            b.name(),
            got.len()
        );
    }
}

#[test]
fn quantize_q8_1_matches_oracle_bit_exactly() {
    on_every_backend!(check);
}

/// One `quantize_q8_1` launch on fixed inputs, for the sim-vs-GPU comparison.
struct Quantize(Vec<f32>);

impl SameLaunch for Quantize {
    fn run<B: Accelerator>(&self, b: &mut B) -> Vec<u8> {
        let xb = upload(b, &f32_bytes(&self.0));
        let yb = poisoned(b, self.0.len() / QK8_1 * 36);
        ops::quantize_q8_1(b, &xb, &yb, self.0.len()).expect("launch");
        download(b, &yb)
    }
}

/// Simulator against GPU on the same inputs (skipped without a GPU): q8_1 blocks, bit-exact.
#[test]
fn quantize_q8_1_sim_matches_gpu() {
    let mut rng = support::rng("quantize_q8_1 sim-vs-GPU");
    let l = Quantize(inputs(&mut rng, 8192));
    support::sim_matches_gpu("quantize_q8_1 n=8192", &l, Agree::Bits);
}
