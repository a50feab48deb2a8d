//! Dot products against the f64 dot of the dequantized operands, and the activation
//! quantizers on vectors whose quantization is known exactly.

mod support;

use ingot_gguf::GgmlType;
use ingot_quant::blocks::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use ingot_quant::{
    can_vec_dot_q8_1, cpu_vec_dot_type, dequantize_row, f16_to_f32, quantize_q8_0, quantize_q8_1,
    quantize_q8_k, quantize_row, vec_dot_q8_0, vec_dot_q8_1, vec_dot_q8_k, QuantError,
};
use rand::{rngs::StdRng, SeedableRng};
use rand_distr::{Distribution, Normal};

const N: usize = 4 * 256;

fn gaussian(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    (0..n).map(|_| normal.sample(&mut rng)).collect()
}

fn quantized_row(ty: GgmlType, x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let mut q = vec![0u8; x.len() / ty.block_size() as usize * ty.type_size() as usize];
    quantize_row(ty, x, &mut q).unwrap();
    let mut w = vec![0.0f32; x.len()];
    dequantize_row(ty, &q, &mut w).unwrap();
    (q, w)
}

/// `(Σ w·a, Σ |w·a|)` in f64.
fn dot64(w: &[f32], a: &[f32]) -> (f64, f64) {
    w.iter().zip(a).fold((0.0, 0.0), |(s, m), (x, y)| {
        let p = f64::from(*x) * f64::from(*y);
        (s + p, m + p.abs())
    })
}

const WEIGHTS: [GgmlType; 12] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
    GgmlType::Iq4Nl,
    GgmlType::Iq4Xs,
];

fn dequantize_q8_1(act: &[BlockQ8_1]) -> Vec<f32> {
    act.iter()
        .flat_map(|b| b.qs.map(|q| f16_to_f32(b.d) * q as f32))
        .collect()
}

#[test]
fn q8_1_dot_matches_dequantized_dot() {
    let x = gaussian(1, N);
    let act = quantize_q8_1(&x);
    let a = dequantize_q8_1(&act);
    for (k, ty) in WEIGHTS.into_iter().enumerate() {
        assert!(can_vec_dot_q8_1(ty));
        let (q, w) = quantized_row(ty, &gaussian(100 + k as u64, N));
        let got = f64::from(vec_dot_q8_1(ty, &q, &act).unwrap());
        let (want, mag) = dot64(&w, &a);
        // Q4_0/Q5_0 apply their offset (−8/−16) and Q4_1/Q5_1 their min through `ds.y = Σx` of
        // the *float* activations, not d8·Σq, so they differ from the dequantized dot by
        // offset·(Σx − d8·Σq) per block: each |x − d8·q| ≤ d8/2 ≈ amax/254, ~1.6·d8 summed
        // over 32 random errors, plus the f16 rounding of s — about 5e-4 of Σ|w·a| at 32
        // blocks; bound 2e-3. All other types use only integer sums and O(10) f32 roundings
        // (2⁻²⁴ each) per call, on terms at most a few × |w·a|: bound 1e-6 of Σ|w·a|.
        let uses_sum = matches!(
            ty,
            GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q4_1 | GgmlType::Q5_1
        );
        let tol = if uses_sum { 2e-3 } else { 1e-6 };
        let rel = (got - want).abs() / mag;
        eprintln!("{ty:>6} · q8_1: {got:.6} vs {want:.6}, |diff|/Σ|wa| = {rel:.2e}");
        assert!(rel <= tol, "{ty}: {got} vs {want} ({rel:e} > {tol:e})");
    }
}

#[test]
fn q8_1_sum_path_is_exact_when_activations_are_exact() {
    // With activations that Q8_1 represents exactly (x = d8·q, d8 = 1/64, Σx exact in f16),
    // Σx equals d8·Σq and the ds.y route must agree with the dequantized dot to f32 rounding.
    let x: Vec<f32> = (0..N)
        .map(|i| ((i * 37 % 255) as i32 - 127) as f32 / 64.0)
        .map(|v| {
            if v.abs() > 1.984_375 {
                1.984_375f32.copysign(v)
            } else {
                v
            }
        })
        .collect();
    let mut x = x;
    for blk in x.chunks_mut(32) {
        blk[0] = 127.0 / 64.0; // pin amax so that d8 = amax/127 = 1/64 exactly
    }
    let act = quantize_q8_1(&x);
    assert!(act.iter().all(|b| f16_to_f32(b.d) == 1.0 / 64.0));
    let a = dequantize_q8_1(&act);
    assert_eq!(a, x, "activations chosen to be exact");
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q5_0,
        GgmlType::Q4_1,
        GgmlType::Q5_1,
    ] {
        let (q, w) = quantized_row(ty, &gaussian(7, N));
        let got = f64::from(vec_dot_q8_1(ty, &q, &act).unwrap());
        let (want, mag) = dot64(&w, &a);
        // Σx of 32 multiples of 1/64 below 64 in magnitude is exact in f16 only if it has at
        // most 11 significant bits; the residual f16 rounding of s is ≤ 2⁻¹¹·|Σx| per block,
        // which the 2e-4 bound (vs 2e-3 above) still separates from a wrong offset (≫ 1e-2).
        let rel = (got - want).abs() / mag;
        assert!(rel <= 2e-4, "{ty}: {got} vs {want} ({rel:e})");
    }
}

#[test]
fn q8_k_dot_matches_dequantized_dot() {
    let x = gaussian(2, N);
    let act = quantize_q8_k(&x);
    let a: Vec<f32> = act
        .iter()
        .flat_map(|b: &BlockQ8K| b.qs.map(|q| b.d * q as f32))
        .collect();
    for (k, ty) in [
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Iq4Xs,
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(cpu_vec_dot_type(ty), Some(GgmlType::Q8K));
        let (q, w) = quantized_row(ty, &gaussian(200 + k as u64, N));
        let got = f64::from(vec_dot_q8_k(ty, &q, &act).unwrap());
        let (want, mag) = dot64(&w, &a);
        // Integer group sums are exact; a handful of f32 products and one f32 sum per block
        // remain (2⁻²⁴ each): 1e-6 of Σ|w·a|.
        let rel = (got - want).abs() / mag;
        eprintln!("{ty:>6} · q8_K: {got:.6} vs {want:.6}, |diff|/Σ|wa| = {rel:.2e}");
        assert!(rel <= 1e-6, "{ty}: {got} vs {want} ({rel:e})");
    }
}

/// The grid types (random valid blocks, scales about 1e-2 of either sign) against
/// Q8_K, each block's term `c·(d·y.d)·Σ ls·Σ level·q8` (IQ1: `d·y.d·(Σ… + δ·Σ…)`) with `c` a
/// power of two. Per block: exact integer sums, at most three f32 roundings, each term at most
/// the block's Σ|w·a|; one rounding per f32 addition of the 4 block terms; the reference's own
/// f32 roundings in `w = db·level` (two) and `a = d8·q` (one). About 9·2⁻²⁴ ≈ 5.4e-7 of Σ|w·a|
/// in all: bound 1e-6. A wrong scale, sign or grid point is off by far more (≫ 1e-3).
#[test]
fn grid_type_dots_match_dequantized_dot() {
    use rand::{rngs::StdRng, SeedableRng};
    for seed in 0..8u64 {
        let x = gaussian(300 + seed, N);
        let act = quantize_q8_k(&x);
        let a: Vec<f32> = act
            .iter()
            .flat_map(|b: &BlockQ8K| b.qs.map(|q| b.d * q as f32))
            .collect();
        let mut rng = StdRng::seed_from_u64(seed);
        for (k, ty) in support::GRID_TYPES.into_iter().enumerate() {
            assert_eq!(cpu_vec_dot_type(ty), Some(GgmlType::Q8K));
            let scales = gaussian(400 + 10 * seed + k as u64, N / 256);
            let q = support::grid_blocks(&mut rng, ty, N / 256, |i| {
                ingot_quant::f32_to_f16(scales[i] * 1e-2)
            });
            let mut w = vec![0.0f32; N];
            dequantize_row(ty, &q, &mut w).unwrap();
            let got = f64::from(vec_dot_q8_k(ty, &q, &act).unwrap());
            let (want, mag) = dot64(&w, &a);
            let rel = (got - want).abs() / mag;
            if seed == 0 {
                eprintln!("{ty:>7} · q8_K: {got:.6} vs {want:.6}, |diff|/Σ|wa| = {rel:.2e}");
            }
            assert!(rel <= 1e-6, "{ty} seed {seed}: {got} vs {want} ({rel:e})");
        }
    }
}

#[test]
fn q8_0_dot_matches_dequantized_dot() {
    let x = gaussian(3, N);
    let act = quantize_q8_0(&x);
    let a: Vec<f32> = act
        .iter()
        .flat_map(|b: &BlockQ8_0| b.qs.map(|q| f16_to_f32(b.d) * q as f32))
        .collect();
    for (k, ty) in [
        GgmlType::Q4_0,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::Iq4Nl,
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(cpu_vec_dot_type(ty), Some(GgmlType::Q8_0));
        let (q, w) = quantized_row(ty, &gaussian(300 + k as u64, N));
        let got = f64::from(vec_dot_q8_0(ty, &q, &act).unwrap());
        let (want, mag) = dot64(&w, &a);
        // Integer block sums, one f32 product chain per block: 1e-6 of Σ|w·a|.
        let rel = (got - want).abs() / mag;
        assert!(rel <= 1e-6, "{ty}: {got} vs {want} ({rel:e})");
    }
}

#[test]
fn q8_1_cuda_quantization_of_known_vector() {
    // amax = 127 makes d = 1 exactly, so q = roundf(x): ties go away from zero (2.5 → 3,
    // −2.5 → −3, 0.5 → 1), unlike nearest_int. s is the float sum Σx = 127 + 1.49 = 128.49,
    // stored as f16 → 128.5 (spacing 0.125 at 128). 40 inputs → 2 blocks, the second
    // zero-padded; a block with amax = 0 has d = s = 0 and zero quants.
    let mut x = vec![0.0f32; 40];
    x[..6].copy_from_slice(&[127.0, -2.5, 2.5, 0.5, -0.5, 1.49]);
    x[32] = -3.0;
    x[33] = 1.0;
    let b = quantize_q8_1(&x);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].d, 0x3C00, "d = 1.0");
    assert_eq!(f16_to_f32(b[0].s), 128.5);
    assert_eq!(&b[0].qs[..7], &[127, -3, 3, 1, -1, 1, 0]);
    // Block 2: amax 3 → d = 3/127; q = roundf(x/d) = [−127, 42.33 → 42].
    assert_eq!(f16_to_f32(b[1].d), half_round(3.0 / 127.0));
    assert_eq!(f16_to_f32(b[1].s), -2.0);
    assert_eq!(&b[1].qs[..3], &[-127, 42, 0]);
    let z = quantize_q8_1(&[0.0; 32]);
    assert_eq!((z[0].d, z[0].s, z[0].qs), (0, 0, [0; 32]));
}

/// f32 → nearest binary16 value, for stating expectations.
fn half_round(v: f32) -> f32 {
    f16_to_f32(ingot_quant::f32_to_f16(v))
}

#[test]
fn q8_k_quantization_of_known_vector() {
    // max = +127 (signed value of largest |x|) → iscale = −127/127 = −1, d = 1/iscale = −1,
    // q = min(127, nearest_int(−x)): ties to even (2.5 → −2, −2.5 → 2, 0.5 → 0, 1.5 → −2).
    let mut x = vec![0.0f32; 256];
    x[..6].copy_from_slice(&[127.0, 2.5, -2.5, 0.5, 1.5, -126.0]);
    x[16] = 7.0;
    let b = quantize_q8_k(&x);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].d, -1.0);
    assert_eq!(&b[0].qs[..6], &[-127, -2, 2, 0, -2, 126]);
    assert_eq!(b[0].bsums[0], -127 - 2 + 2 - 2 + 126);
    assert_eq!(b[0].bsums[1], -7);
    assert!(b[0].bsums[2..].iter().all(|&s| s == 0));
    // A short row is zero-padded to a whole super-block.
    assert_eq!(quantize_q8_k(&x[..10]).len(), 1);
}

#[test]
fn length_and_type_errors_are_typed() {
    let act1 = quantize_q8_1(&vec![1.0; 256]);
    let actk = quantize_q8_k(&vec![1.0; 256]);
    let row = vec![0u8; 144];
    assert!(matches!(
        vec_dot_q8_1(GgmlType::Q4K, &row[..143], &act1),
        Err(QuantError::RowBytes { .. })
    ));
    assert!(matches!(
        vec_dot_q8_1(GgmlType::Q4K, &row, &act1[..7]),
        Err(QuantError::ActivationLength {
            expected: 8,
            actual: 7,
            ..
        })
    ));
    assert!(matches!(
        vec_dot_q8_1(GgmlType::F16, &row, &act1),
        Err(QuantError::Unsupported { .. })
    ));
    assert!(matches!(
        vec_dot_q8_k(GgmlType::Q4_0, &row, &actk),
        Err(QuantError::Unsupported { .. })
    ));
    assert!(matches!(
        vec_dot_q8_k(GgmlType::Q4K, &[0u8; 288], &actk),
        Err(QuantError::ActivationLength { .. })
    ));
    let mut out = vec![0.0f32; 255];
    assert!(matches!(
        dequantize_row(GgmlType::Q4K, &row, &mut out),
        Err(QuantError::PartialBlock { .. })
    ));
    let mut out = vec![0.0f32; 256];
    assert!(matches!(
        dequantize_row(GgmlType::Q4K, &row[..100], &mut out),
        Err(QuantError::ByteLength {
            expected: 144,
            actual: 100,
            ..
        })
    ));
    assert!(matches!(
        dequantize_row(GgmlType::I32, &[0u8; 1024], &mut out),
        Err(QuantError::Unsupported { .. })
    ));
    let mut q = vec![0u8; 292];
    assert!(matches!(
        quantize_row(GgmlType::Q8K, &out, &mut q),
        Err(QuantError::Unsupported { .. })
    ));
    let msg = dequantize_row(GgmlType::Q4K, &row[..100], &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("Q4_K") && msg.contains("144") && msg.contains("100"),
        "{msg}"
    );
}

#[test]
fn unaligned_buffers_give_identical_results() {
    // GGUF data is 32-byte aligned, but a caller's slice may not be: the block readers must
    // fall back to unaligned copies and produce the same values.
    let x = gaussian(9, N);
    for ty in [GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q8_0] {
        let (q, w) = quantized_row(ty, &x);
        let mut shifted = vec![0u8; q.len() + 1];
        shifted[1..].copy_from_slice(&q);
        let mut w2 = vec![0.0f32; N];
        dequantize_row(ty, &shifted[1..], &mut w2).unwrap();
        assert_eq!(w, w2, "{ty}");
        let act = quantize_q8_1(&x);
        assert_eq!(
            vec_dot_q8_1(ty, &q, &act).unwrap(),
            vec_dot_q8_1(ty, &shifted[1..], &act).unwrap()
        );
    }
}

#[test]
fn q8_1_offsets_and_mins_use_the_documented_sums() {
    // Hand-built blocks where the dequantized weights are constant, so the result depends only
    // on how the kernel applies offsets and mins. Activations: q = 1, d8 = 1, and an `s`
    // (ds.y) deliberately inconsistent with d8·Σq = 32.
    use bytemuck::bytes_of;
    use ingot_quant::blocks::{BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5_0};
    const ONE: u16 = 0x3C00;
    const FIVE: u16 = 0x4500;
    let act = |s: u16| BlockQ8_1 {
        d: ONE,
        s,
        qs: [1; 32],
    };

    // Q4_0, all nibbles 8 (weights 0): d4·(Σ 8·q8·d8 − 8·s) = 256 − 8·s. With s = 0 → 256;
    // an implementation subtracting via d8·Σq would give 0.
    let w = BlockQ4_0 {
        d: ONE,
        qs: [0x88; 16],
    };
    assert_eq!(
        vec_dot_q8_1(GgmlType::Q4_0, bytes_of(&w), &[act(0)]).unwrap(),
        256.0
    );
    assert_eq!(
        vec_dot_q8_1(GgmlType::Q4_0, bytes_of(&w), &[act(ONE)]).unwrap(),
        248.0
    );

    // Q5_0, all levels 16 (nibble 0, 5th bit set; weights 0): 512 − 16·s.
    let w = BlockQ5_0 {
        d: ONE,
        qh: [0xFF; 4],
        qs: [0; 16],
    };
    assert_eq!(
        vec_dot_q8_1(GgmlType::Q5_0, bytes_of(&w), &[act(0)]).unwrap(),
        512.0
    );

    // Q4_1 with d = 0, m = 1 (weights 1): Σ over calls of m·s/2 = s.
    let w = BlockQ4_1 {
        d: 0,
        m: ONE,
        qs: [0x37; 16],
    };
    assert_eq!(
        vec_dot_q8_1(GgmlType::Q4_1, bytes_of(&w), &[act(FIVE)]).unwrap(),
        5.0
    );

    // Q4_K with d = 0, dmin = 1, every min 1 (weights −1): −dmin·Σ_j m_j·d8·Σq = −256,
    // whatever `s` says: the k-quant min uses the integer sum of the quantized activations.
    let mut scales = [0u8; 12];
    scales[4..8].fill(1); // m_0..m_3 = 1
    scales[8..12].fill(0x10); // m_4..m_7 = 1 (high nibbles), sc = 0
    let w = BlockQ4K {
        d: 0,
        dmin: ONE,
        scales,
        qs: [0x5A; 128],
    };
    let acts = [act(0x6400); 8]; // s = 1024, ignored
    assert_eq!(
        vec_dot_q8_1(GgmlType::Q4K, bytes_of(&w), &acts).unwrap(),
        -256.0
    );
}
