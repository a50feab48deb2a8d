//! Files whose projections use the IQ1/IQ2/IQ3 grid types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
//! IQ1_S, IQ1_M) decode on the oracle (dequantized weights) and on the CPU backend (the grid
//! types' Q8_K dot products), and the two agree within the band of the other quantized mixes.
//!
//! The file is `ingot synth`'s tiny model with every projection whose rows split into 256-blocks
//! re-encoded as a grid type (the seven types in turn; `ingot_quant::quantize_or_stand_in`:
//! ggml's reference quantizer for IQ3_XXS, IQ3_S, IQ2_S and IQ1_M, stand-in blocks with the RMS of
//! the weights they replace for IQ2_XXS, IQ2_XS and IQ1_S, which have no quantizer here).
//! The model means nothing; what is checked is that both backends read the types the same way.

mod common;

use common::{compare_logits, max_abs_diff, oracle_and_cpu, std_dev};
use ingot_gguf::{GgufFile, GgufWriter};
use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};

use ingot_quant::GRID_TYPES;

const PROMPT: [u32; 6] = [510, 84, 104, 101, 32, 113];
const STEPS: usize = 12;

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
    for (t, &(ty, conv)) in header.tensors.iter().zip(&types) {
        if conv {
            // The Q8_0 weights, re-encoded.
            let mut x = vec![0f32; t.n_elements() as usize];
            ingot_quant::dequantize_row(t.ty, src.tensor_data(t), &mut x).unwrap();
            let mut q = vec![0u8; x.len() / 256 * ty.type_size() as usize];
            ingot_quant::quantize_or_stand_in(ty, &x, &mut q).unwrap();
            data.write_tensor(&q).unwrap();
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
    let worst = ingot_testdata::worst(want.iter().zip(&got).map(|(w, g)| max_abs_diff(w, g)));
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
