//! `embed_<type>` against `ingot_quant::dequantize_row`, bit for bit: the kernels decode with
//! the CPU's float operations in the CPU's order (explicitly rounded where an FMA could form).

mod quant_blocks;
mod support;

use half::{bf16, f16};
use ingot_abi::step::StepState;
use ingot_gguf::GgmlType;
use ingot_kernels::ops::embed::{embed, EmbedType};
use ingot_kernels::ops::moe::DownNorm;
use ingot_kernels::ops::norm::rmsnorm_q8_1_f32;
use ingot_kernels::Accelerator;
use rand::Rng;
use support::{download, download_f32, poisoned, upload};

fn ggml(ty: EmbedType) -> GgmlType {
    match ty {
        EmbedType::F32 => GgmlType::F32,
        EmbedType::F16 => GgmlType::F16,
        EmbedType::Bf16 => GgmlType::Bf16,
        EmbedType::Q4_0 => GgmlType::Q4_0,
        EmbedType::Q5_0 => GgmlType::Q5_0,
        EmbedType::Q5_1 => GgmlType::Q5_1,
        EmbedType::Q8_0 => GgmlType::Q8_0,
        EmbedType::Iq4Nl => GgmlType::Iq4Nl,
        EmbedType::Q3K => GgmlType::Q3K,
        EmbedType::Q4K => GgmlType::Q4K,
        EmbedType::Q5K => GgmlType::Q5K,
        EmbedType::Q6K => GgmlType::Q6K,
    }
}

/// A random table of `rows` rows of `n` elements (non-zero floats for the float types).
fn random_table(rng: &mut impl Rng, ty: EmbedType, rows: usize, n: usize) -> Vec<u8> {
    let float = |rng: &mut dyn rand::RngCore| {
        let v: f32 = rng.random_range(0.01f32..4.0);
        if rng.random() {
            v
        } else {
            -v
        }
    };
    match ty {
        EmbedType::F32 => (0..rows * n)
            .flat_map(|_| float(rng).to_le_bytes())
            .collect(),
        EmbedType::F16 => (0..rows * n)
            .flat_map(|_| f16::from_f32(float(rng)).to_bits().to_le_bytes())
            .collect(),
        EmbedType::Bf16 => (0..rows * n)
            .flat_map(|_| bf16::from_f32(float(rng)).to_bits().to_le_bytes())
            .collect(),
        _ => quant_blocks::random_blocks(rng, ggml(ty), rows * n / ty.block().0),
    }
}

fn state(token: u32) -> Vec<u8> {
    bytemuck::bytes_of(&StepState {
        token,
        pos: 7,
        next_token: 0,
        steps_done: 3,
    })
    .to_vec()
}

fn check<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("embed");
    for ty in EmbedType::ALL {
        let qk = ty.block().0.max(32);
        // 2048: the V2-Lite width (one block of the launch); 2560: a partial second block;
        // one k-quant super-block (or 32 elements): the smallest row.
        for (n, n_vocab) in [(2048usize, 5usize), (2560, 3), (qk, 9)] {
            let table = random_table(&mut rng, ty, n_vocab, n);
            let row_bytes = table.len() / n_vocab;
            let tb = upload(b, &table);
            let token = rng.random_range(0..n_vocab);
            let sb = upload(b, &state(token as u32));
            let yb = poisoned(b, (n + 16) * 4);
            embed(b, ty, (&tb, &sb, &yb), (n, n_vocab), None).expect("launch");
            let y = download_f32(b, &yb, n);
            let mut want = vec![0f32; n];
            ingot_quant::dequantize_row(
                ggml(ty),
                &table[token * row_bytes..(token + 1) * row_bytes],
                &mut want,
            )
            .expect("dequantize");
            for e in 0..n {
                assert_eq!(
                    y[e].to_bits(),
                    want[e].to_bits(),
                    "{}: {ty:?} n={n} token {token} element {e}: got {}, want {}",
                    b.name(),
                    y[e],
                    want[e]
                );
            }
            assert!(
                download(b, &yb)[n * 4..].iter().all(|&v| v == 0xFF),
                "{}: {ty:?} wrote past y[n]",
                b.name()
            );
            // The state is only read.
            assert_eq!(download(b, &sb), state(token as u32));

            // An out-of-range token writes NaNs and reads no row.
            let sb = upload(b, &state(n_vocab as u32));
            embed(b, ty, (&tb, &sb, &yb), (n, n_vocab), None).expect("launch");
            assert!(
                download_f32(b, &yb, n).iter().all(|v| v.is_nan()),
                "{}: {ty:?} out-of-range token",
                b.name()
            );
        }
        eprintln!("{}: embed {ty:?} bit-identical", b.name());
    }
}

#[test]
fn embedding_rows_match_dequantize_row() {
    on_every_backend!(check);
}

/// The norm tail writes what `rmsnorm_q8_1_f32` writes from the same row, bit for bit (q8_1
/// blocks and floats), with the row itself unchanged, and leaves its counter at 0 so a second
/// launch (a replay) does it again: widths of 8 and 10 blocks and of one, several types.
fn norm_tail_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("embed norm tail");
    for (ty, n, n_vocab) in [
        (EmbedType::Q4K, 2048usize, 5usize),
        (EmbedType::F16, 2560, 3),
        (EmbedType::Q8_0, 32, 4),
    ] {
        let table = random_table(&mut rng, ty, n_vocab, n);
        let w: Vec<f32> = (0..n).map(|_| rng.random_range(0.5f32..1.5)).collect();
        let eps = 1e-6;
        let (tb, wb) = (upload(b, &table), upload(b, bytemuck::cast_slice(&w)));
        let q8_bytes = n / 32 * 36;
        for token in [1u32, 2] {
            let sb = upload(b, &state(token));
            let yb = poisoned(b, n * 4);
            let (q8, f32s, count) = (
                poisoned(b, q8_bytes),
                poisoned(b, n * 4),
                upload(b, &[0; 4]),
            );
            let tail = DownNorm {
                w: &wb,
                q8: &q8,
                f32: &f32s,
                count: &count,
                eps,
            };
            for _ in 0..2 {
                embed(b, ty, (&tb, &sb, &yb), (n, n_vocab), Some(&tail)).expect("launch");
                assert_eq!(download(b, &count), [0; 4], "{}: {ty:?} counter", b.name());
            }
            let (want_q8, want_f32) = (poisoned(b, q8_bytes), poisoned(b, n * 4));
            rmsnorm_q8_1_f32(b, (&yb, &wb, &want_q8, &want_f32), 1, n, eps).expect("rmsnorm");
            assert_eq!(
                download(b, &q8),
                download(b, &want_q8),
                "{}: {ty:?} n={n} q8_1",
                b.name()
            );
            assert_eq!(
                download(b, &f32s),
                download(b, &want_f32),
                "{}: {ty:?} n={n}",
                b.name()
            );
            // The row is the plain fetch's.
            let plain = poisoned(b, n * 4);
            embed(b, ty, (&tb, &sb, &plain), (n, n_vocab), None).expect("launch");
            assert_eq!(
                download(b, &yb),
                download(b, &plain),
                "{}: {ty:?} row",
                b.name()
            );
        }
    }
}

#[test]
fn the_norm_tail_writes_rmsnorm_q8_1_bits() {
    on_every_backend!(norm_tail_cases);
}

#[test]
fn bad_embedding_shapes_are_typed_errors() {
    #[cfg(feature = "sim")]
    {
        let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("sim");
        let t = b.alloc(1024).expect("alloc");
        let s = b.alloc(16).expect("alloc");
        let y = b.alloc(4096).expect("alloc");
        // 100 is not a whole number of Q4_K super-blocks.
        assert!(embed(&mut b, EmbedType::Q4K, (&t, &s, &y), (100, 1), None).is_err());
        // The table is too small for 9 rows of 256 Q4_K elements.
        assert!(embed(&mut b, EmbedType::Q4K, (&t, &s, &y), (256, 9), None).is_err());
        // No vocabulary.
        assert!(embed(&mut b, EmbedType::F32, (&t, &s, &y), (4, 0), None).is_err());
        // The state buffer must hold a StepState.
        let small = b.alloc(8).expect("alloc");
        assert!(embed(&mut b, EmbedType::F32, (&t, &small, &y), (4, 1), None).is_err());
    }
}
