//! End-to-end checks of `synthesize`: the files read back through the project's GGUF reader and
//! dequantizers, are deterministic, non-degenerate, and the two layouts hold the same model.

use std::path::{Path, PathBuf};

use ingot_gguf::{GgmlType, GgufFile};
use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};

fn make(dir: &Path, layout: Layout, mix: QuantMix, seed: u64) -> PathBuf {
    let opts = SynthOptions {
        preset: Preset::Tiny,
        layout,
        mix,
        seed,
    };
    let path = dir.join(format!("{}.gguf", opts.model_name()));
    synthesize(&opts, &path, false).expect("synthesize tiny");
    path
}

fn dequant(f: &GgufFile, name: &str) -> Vec<f32> {
    let t = f.header().tensor(name).expect("tensor present").clone();
    let mut out = vec![0f32; t.n_elements() as usize];
    ingot_quant::dequantize_row(t.ty, f.tensor_data(&t), &mut out).expect("dequantize");
    out
}

#[test]
fn every_mix_and_layout_reads_back_with_realistic_values() {
    let dir = tempfile::tempdir().unwrap();
    for layout in [Layout::Mla, Layout::Legacy] {
        for mix in QuantMix::ALL {
            let path = make(dir.path(), layout, mix, 42);
            let f = GgufFile::open(&path).expect("reader accepts synth output");
            let h = f.header();
            assert_eq!(
                h.get("general.architecture").and_then(|v| v.as_str()),
                Some("deepseek2")
            );
            let per_layer = |dense: usize, moe: usize| 3 + dense + 2 * moe;
            let expected = match layout {
                Layout::Mla => per_layer(11, 15),
                Layout::Legacy => per_layer(10, 14),
            };
            assert_eq!(h.tensors.len(), expected, "{layout} {mix}");
            for t in &h.tensors {
                let v = dequant(&f, &t.name);
                let n = v.len() as f64;
                let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
                let var = v
                    .iter()
                    .map(|&x| (f64::from(x) - mean).powi(2))
                    .sum::<f64>()
                    / n;
                assert!(v.iter().all(|x| x.is_finite()), "{}: non-finite", t.name);
                // Not constant and not zero: the spread is a sizeable part of the drawn std.
                assert!(
                    var.sqrt() > 0.01,
                    "{} ({}): degenerate std {}",
                    t.name,
                    t.ty.name(),
                    var.sqrt()
                );
                if t.name.contains("norm") {
                    assert!(v.iter().all(|&x| (0.79..=1.21).contains(&x)), "{}", t.name);
                }
            }
            if mix == QuantMix::Q4KM {
                let ty = |n: &str| h.tensor(n).unwrap().ty;
                assert_eq!(ty("blk.0.ffn_gate.weight"), GgmlType::Q4K);
                assert_eq!(ty("output.weight"), GgmlType::Q6K);
                assert_eq!(ty("blk.1.ffn_down_exps.weight"), GgmlType::Q5_0);
                assert_eq!(ty("blk.2.ffn_down_exps.weight"), GgmlType::Q8_0);
            }
        }
    }
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let a = std::fs::read(make(dir.path(), Layout::Mla, QuantMix::Q4KM, 7)).unwrap();
    let sub = dir.path().join("again");
    std::fs::create_dir(&sub).unwrap();
    let b = std::fs::read(make(&sub, Layout::Mla, QuantMix::Q4KM, 7)).unwrap();
    assert!(a == b, "two runs with seed 7 differ");
    let c = std::fs::read(make(dir.path(), Layout::Mla, QuantMix::Q4KM, 8)).unwrap();
    assert_eq!(a.len(), c.len());
    assert!(a != c, "seeds 7 and 8 gave the same file");
}

#[test]
fn mla_slices_are_the_legacy_kv_b() {
    let dir = tempfile::tempdir().unwrap();
    let mla = GgufFile::open(&make(dir.path(), Layout::Mla, QuantMix::F32, 3)).unwrap();
    let legacy = GgufFile::open(&make(dir.path(), Layout::Legacy, QuantMix::F32, 3)).unwrap();
    let d = Preset::Tiny.dims();
    let (r, nope, dv) = (d.kv_lora as usize, d.d_nope as usize, d.d_v as usize);
    for l in 0..d.n_layer {
        let kv_b = dequant(&legacy, &format!("blk.{l}.attn_kv_b.weight"));
        let k_b = dequant(&mla, &format!("blk.{l}.attn_k_b.weight"));
        let v_b = dequant(&mla, &format!("blk.{l}.attn_v_b.weight"));
        for h in 0..d.n_head as usize {
            for c in 0..r {
                for dd in 0..nope {
                    assert_eq!(
                        k_b[dd + nope * (c + r * h)],
                        kv_b[(h * (nope + dv) + dd) * r + c]
                    );
                }
                for j in 0..dv {
                    assert_eq!(
                        v_b[c + r * (j + dv * h)],
                        kv_b[(h * (nope + dv) + nope + j) * r + c]
                    );
                }
            }
        }
        // Every other tensor is identical between the layouts.
        let q = format!("blk.{l}.attn_q.weight");
        assert_eq!(dequant(&mla, &q), dequant(&legacy, &q));
    }
}

/// The family's tiny presets are deterministic, and `header` is exactly the header `synthesize`
/// writes.
#[test]
fn family_presets_write_their_structure_and_header_matches_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for preset in [
        Preset::TinyV3,
        Preset::TinyMoonlight,
        Preset::TinyK2,
        Preset::TinyGlm,
    ] {
        let opts = SynthOptions {
            preset,
            layout: Layout::Mla,
            mix: QuantMix::Q4KM,
            seed: 5,
        };
        let path = dir.path().join(format!("{}.gguf", opts.model_name()));
        synthesize(&opts, &path, false).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let again = dir.path().join("again.gguf");
        synthesize(&opts, &again, false).unwrap();
        assert!(
            bytes == std::fs::read(&again).unwrap(),
            "{preset}: not deterministic"
        );

        let f = GgufFile::open(&path).unwrap();
        assert_eq!(f.header(), &ingot_synth::header(&opts).unwrap(), "{preset}");
        let h = f.header();
        let d = preset.dims();
        let key = |k: &str| h.get(&format!("deepseek2.{k}")).and_then(|v| v.as_u64());
        assert_eq!(key("block_count"), Some(d.n_layer + d.n_nextn), "{preset}");
        assert_eq!(key("attention.q_lora_rank"), Some(d.q_lora), "{preset}");
        assert_eq!(key("expert_gating_func"), Some(2), "{preset}");
        assert_eq!(
            h.get("tokenizer.ggml.pre").and_then(|v| v.as_str()),
            Some(d.pre)
        );
        assert!(h.tensor("blk.1.exp_probs_b.bias").is_some(), "{preset}");
        assert_eq!(
            h.tensor("blk.0.attn_q_a.weight").is_some(),
            d.q_lora > 0,
            "{preset}"
        );
        let mtp = format!("blk.{}.nextn.eh_proj.weight", d.n_layer);
        assert_eq!(h.tensor(&mtp).is_some(), d.n_nextn > 0, "{preset}");
    }
}

/// The full-size presets give a header (for plan counts and bytes per token) and refuse to write
/// weights.
#[test]
fn full_size_presets_are_header_only() {
    let dir = tempfile::tempdir().unwrap();
    for preset in [Preset::V3, Preset::K2, Preset::Glm47Flash] {
        assert!(preset.header_only());
        let opts = SynthOptions {
            preset,
            layout: Layout::Mla,
            mix: QuantMix::Q4KM,
            seed: 1,
        };
        let h = ingot_synth::header(&opts).unwrap();
        let d = preset.dims();
        assert_eq!(
            h.get("deepseek2.block_count").and_then(|v| v.as_u64()),
            Some(d.n_layer + d.n_nextn)
        );
        let gb = h.total_tensor_bytes() as f64 / 1e9;
        println!(
            "{preset}: {} tensors, {gb:.0} GB of q4_k_m weights",
            h.tensors.len()
        );
        let err = synthesize(&opts, &dir.path().join("x.gguf"), false).unwrap_err();
        assert!(err.to_string().contains("header"), "{err}");
        assert!(!dir.path().join("x.gguf").exists());
    }
    // GLM-4.7-Flash files carry no gating key (llama.cpp's fallback picks sigmoid for them).
    let glm = ingot_synth::header(&SynthOptions {
        preset: Preset::Glm47Flash,
        layout: Layout::Mla,
        mix: QuantMix::Q4KM,
        seed: 1,
    })
    .unwrap();
    assert!(glm.get("deepseek2.expert_gating_func").is_none());
}
