//! Byte-identity with ggml's own reference quantizers, for every quantizable type.
//!
//! The expected FNV-1a hashes below were computed from ggml's C code, not from this crate:
//! `ggml/src/ggml-quants.c` as vendored in the PyPI sdist `llama-cpp-python` 0.3.36, compiled with
//! `gcc -O2 -std=gnu11` for baseline x86-64 (no FMA contraction) and driven by
//! `tests/ggml_harness.c` (build line inside), which calls
//! `quantize_row_{q4_0,q4_1,q5_0,q5_1,q8_0,q8_K}_ref` and
//! `quantize_{q2_K,q3_K,q4_K,q5_K,q6_K,iq4_nl,iq4_xs,iq2_s,iq3_xxs,iq3_s,iq1_m}(…, imatrix = NULL)`
//! (the functions `llama-quantize` calls; the grid ones after `iq{2,3}xs_init_impl`) on the input
//! of [`input`], dumped with `INGOT_QUANT_DUMP_INPUT=/path/x.f32 cargo test -p ingot-quant --test
//! ggml_reference`.
//!
//! Why no-FMA: built with `-march=haswell`, GCC contracts `a*b+c` into FMAs and Q2_K, Q4_K,
//! Q6_K, IQ4_NL and IQ4_XS change; the golden `tiny-mla-q4_k_m` model's Q4_K tensor matches
//! the no-FMA build (and this crate) byte for byte, and not the FMA build.

use ingot_abi::hash::{fnv1a, splitmix64};
use ingot_gguf::GgmlType;
use ingot_quant::{quantize_q8_k, quantize_row};

/// 64 super-blocks: Gaussian-like values plus the cases where quantizers special-case or
/// round on ties: zeros, constants of either sign, tiny and huge magnitudes, one-signed
/// blocks, values on a quarter grid, outliers, a single spike, f16-representable values.
fn input() -> Vec<f32> {
    let mut s = 0x1234_5678_9abc_def0u64;
    let mut uniform = move || {
        // splitmix64 → 24-bit uniform in [0, 1), exact in f32.
        (splitmix64(&mut s) >> 40) as f32 / (1u32 << 24) as f32
    };
    // Irwin–Hall(4) − 2, scaled to unit variance: bell-shaped, plain arithmetic only (no libm,
    // so the input is bit-identical on every platform).
    let mut gauss = move || (uniform() + uniform() + uniform() + uniform() - 2.0) * 1.732_050_8;
    let mut x = Vec::with_capacity(64 * 256);
    for sb in 0..64 {
        for i in 0..256 {
            let g = gauss();
            x.push(match sb {
                0 => 0.0,
                1 => 0.5,
                2 => -0.25,
                3 => g * 1e-20,
                4 => g.abs() + 0.01,
                5 => -g.abs(),
                6 => g * 1e4,
                7 => (g * 4.0).round() / 4.0,
                8 => g * if i % 17 == 3 { 50.0 } else { 1.0 },
                9 => f32::from(i == 37),
                10 => half::f16::from_f32(g).to_f32(),
                11 => g * if i < 128 { 1e-3 } else { 1.0 },
                12 => (g * 8.0).round(),
                _ => g,
            });
        }
    }
    x
}

/// FNV-1a 64 of ggml's output for [`input`], per type.
const EXPECTED: &[(GgmlType, u64)] = &[
    (GgmlType::Q4_0, 0x46dc_eb85_c1ce_de45),
    (GgmlType::Q4_1, 0xcedd_9059_e7e6_fd4b),
    (GgmlType::Q5_0, 0x1754_896d_5eb9_cd70),
    (GgmlType::Q5_1, 0xa673_bcc1_965a_b7a0),
    (GgmlType::Q8_0, 0xdea0_fb8f_91f2_db8b),
    (GgmlType::Q2K, 0x5de0_5843_17ce_3a68),
    (GgmlType::Q3K, 0xc189_a9b1_7baa_09db),
    (GgmlType::Q4K, 0x0f2f_1590_af2d_6369),
    (GgmlType::Q5K, 0x5457_dd4f_df0f_33c3),
    (GgmlType::Q6K, 0x668f_d190_f97a_9213),
    (GgmlType::Iq4Nl, 0xecad_1cbe_4c75_c7f8),
    (GgmlType::Iq4Xs, 0x2571_7156_fc00_6bd6),
    (GgmlType::Iq2S, 0xa565_13d7_5512_864f),
    (GgmlType::Iq3Xxs, 0xce47_6084_5294_3893),
    (GgmlType::Iq3S, 0x89d0_0756_1bc4_8de9),
    (GgmlType::Iq1M, 0x634f_bfbd_2301_9dc4),
];

/// Same for `quantize_row_q8_K_ref` (ggml leaves `bsums` of an all-zero block unwritten; the
/// harness buffer was zeroed, matching this crate's zeros).
const EXPECTED_Q8K: u64 = 0x2b1b_74c9_5cbe_562c;

#[test]
fn quantizers_reproduce_ggml_bytes() {
    let x = input();
    if let Ok(path) = std::env::var("INGOT_QUANT_DUMP_INPUT") {
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(path, bytes).expect("dump input");
    }
    let mut failures = Vec::new();
    for &(ty, want) in EXPECTED {
        let mut q = vec![0u8; x.len() / ty.block_size() as usize * ty.type_size() as usize];
        quantize_row(ty, &x, &mut q).unwrap();
        let got = fnv1a(&q);
        eprintln!("{ty}: {got:#018x}");
        if got != want {
            failures.push(format!("{ty}: hash {got:#018x}, ggml {want:#018x}"));
        }
    }
    let q8k = quantize_q8_k(&x);
    let got = fnv1a(bytemuck::cast_slice(&q8k));
    eprintln!("Q8_K: {got:#018x}");
    if got != EXPECTED_Q8K {
        failures.push(format!("Q8_K: hash {got:#018x}, ggml {EXPECTED_Q8K:#018x}"));
    }
    assert_eq!(EXPECTED.len(), 16, "one hash per quantizable block type");
    assert!(failures.is_empty(), "{failures:#?}");
}
