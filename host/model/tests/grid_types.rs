//! Files whose projections use the IQ1/IQ2/IQ3 grid types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
//! IQ1_S, IQ1_M) decode on the oracle (dequantized weights) and on the CPU backend (the grid
//! types' Q8_K dot products), and the two agree within the band of the other quantized mixes.
//!
//! ggml's quantizers for these types need an importance matrix, and this project has none (nor
//! a quantizer for them), so the file is `ingot synth`'s tiny model with every projection whose
//! rows split into 256-blocks replaced by random valid blocks of a grid type (the seven types in
//! turn), each block's `d` set so its weights have the synthetic model's RMS, 1/sqrt(fan_in).
//! The model means nothing; what is checked is that both backends read the types the same way.

mod common;

use common::{compare_logits, max_abs_diff, oracle_and_cpu, std_dev};
use ingot_gguf::{GgmlType, GgufFile, GgufWriter};
use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};

use ingot_quant::GRID_TYPES;

const PROMPT: [u32; 6] = [510, 84, 104, 101, 32, 113];
const STEPS: usize = 12;

/// xorshift64* (the test needs reproducible bytes, not quality).
struct Bits(u64);

impl Bits {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Sets the f16 `d` of one grid-type block (IQ1_M keeps it in the top nibbles of its scales).
fn set_d(ty: GgmlType, block: &mut [u8], d: u16) {
    if ty == GgmlType::Iq1M {
        let at = block.len() - 8;
        let mut sc: [u8; 8] = block[at..].try_into().unwrap();
        ingot_quant::blocks::iq1m_set_d(&mut sc, d);
        block[at..].copy_from_slice(&sc);
    } else {
        block[..2].copy_from_slice(&d.to_le_bytes());
    }
}

/// `n_blocks` random blocks of `ty` (every byte pattern is valid apart from `d`), each scaled so
/// that its 256 weights have RMS `rms`.
fn random_blocks(ty: GgmlType, n_blocks: usize, rms: f32, bits: &mut Bits) -> Vec<u8> {
    let ts = ty.type_size() as usize;
    let mut out = vec![0u8; n_blocks * ts];
    let mut w = [0.0f32; 256];
    for b in out.chunks_exact_mut(ts) {
        for c in b.chunks_mut(8) {
            let v = bits.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
        set_d(ty, b, ingot_quant::f32_to_f16(1.0));
        ingot_quant::dequantize_row(ty, b, &mut w).unwrap();
        let at_one = (w.iter().map(|v| v * v).sum::<f32>() / 256.0).sqrt();
        set_d(ty, b, ingot_quant::f32_to_f16(rms / at_one));
    }
    out
}

/// Whether a tensor of the tiny model becomes a grid type: 2-D or 3-D projections with rows of
/// whole 256-blocks, except the router (kept as the mixes keep it) and the embedding.
fn converted(name: &str, ne: &[u64]) -> bool {
    ne.len() >= 2
        && ne[0].is_multiple_of(256)
        && !name.contains("ffn_gate_inp")
        && !name.starts_with("token_embd")
}

#[test]
fn grid_type_projections_decode_alike_on_oracle_and_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SynthOptions {
        preset: Preset::Tiny,
        layout: Layout::Mla,
        mix: QuantMix::Q8_0,
        seed: 11,
    };
    let base = dir.path().join("base.gguf");
    synthesize(&opts, &base, false).unwrap();
    let src = GgufFile::open(&base).unwrap();
    let header = src.header();

    // Same metadata (alignment included) and tensor order; only types and bytes change.
    let mut w = GgufWriter::new(header.version);
    for (k, v) in &header.kv {
        w.set_kv(k, v.clone());
    }
    let mut types = Vec::new();
    let mut used = [0usize; GRID_TYPES.len()];
    for t in &header.tensors {
        let ty = if converted(&t.name, &t.ne) {
            let k = types.iter().filter(|&&(_, c)| c).count() % GRID_TYPES.len();
            used[k] += 1;
            types.push((GRID_TYPES[k], true));
            GRID_TYPES[k]
        } else {
            types.push((t.ty, false));
            t.ty
        };
        w.add_tensor(&t.name, ty, &t.ne).unwrap();
    }
    assert!(
        used.iter().all(|&n| n >= 2),
        "every grid type in use: {used:?}"
    );
    let path = dir.path().join("grid.gguf");
    let mut data = w.begin(&path).unwrap();
    let mut bits = Bits(0x9e37_79b9_7f4a_7c15);
    for (t, &(ty, conv)) in header.tensors.iter().zip(&types) {
        if conv {
            let n_blocks = (t.n_elements() / 256) as usize;
            let rms = 1.0 / (t.ne[0] as f32).sqrt();
            data.write_tensor(&random_blocks(ty, n_blocks, rms, &mut bits))
                .unwrap();
        } else {
            data.write_tensor(src.tensor_data(t)).unwrap();
        }
    }
    data.finish().unwrap();

    let file = GgufFile::open(&path).unwrap();
    let (want, got) = oracle_and_cpu(&file, &PROMPT, STEPS);

    // The band of the quantized mixes in synth_mixes.rs (30% of the logits' spread, from the
    // 8-bit activation rounding the CPU backend adds), with no position allowed outside it
    // (softmax routing); a misread block (wrong scale, sign or grid point) moves the logits by
    // the whole spread.
    let spread = std_dev(&want.concat());
    let band = 0.3 * spread;
    let worst = want
        .iter()
        .zip(&got)
        .map(|(w, g)| max_abs_diff(w, g))
        .fold(0.0f32, f32::max);
    let seen = compare_logits(&want, &got, band, |pos| {
        format!("grid types, position {pos}")
    });
    println!(
        "grid types {used:?} per type: {} positions, max |cpu - oracle| {worst:.3e} (band {band:.3e}, \
         spread {spread:.2}), same top-1 at {} (required at {})",
        want.len(),
        seen.agree,
        seen.clear
    );
    assert!(spread > 0.0 && worst.is_finite());
    assert!(
        worst < band,
        "max |cpu - oracle| {worst} exceeds band {band}"
    );
}
