//! Headers of synthetic models without their tensor data: the plan needs only the header, and a
//! full V2-Lite file would be gigabytes.

#![allow(dead_code)]

use ingot_gguf::{Gguf, MetaValue, TensorInfo};
use ingot_synth::{tensor_plan, Dims, Layout, Preset, QuantMix};

/// The header `ingot synth` would write for `preset`/`layout`/`mix`, minus the tokenizer keys
/// (the vocabulary size comes from `vocab_size`), with tensor offsets laid out as the writer does.
pub fn header(preset: Preset, layout: Layout, mix: QuantMix) -> Gguf {
    header_for(&preset.dims(), layout, mix)
}

/// The tiny preset with rows the gemv kernels take (multiples of 64): `d_nope`, `d_v` 64 and
/// `ff_expert` 128 instead of 32, 32 and 96.
pub fn tiny64() -> Dims {
    Dims {
        d_nope: 64,
        d_v: 64,
        ff_expert: 128,
        ..Preset::Tiny.dims()
    }
}

/// [`tiny64`] with V2-Lite's latent width `kv_lora` = 512, the width `attn_merge_v_b_*` is
/// built for, so its plan runs the merge and `attn_v_b` as one node.
pub fn tiny512() -> Dims {
    Dims {
        kv_lora: 512,
        ..tiny64()
    }
}

/// [`header`] for any dimensions.
pub fn header_for(d: &Dims, layout: Layout, mix: QuantMix) -> Gguf {
    let d = d.clone();
    let kv = keys(&d, layout);
    let mut offset = 0;
    let tensors = tensor_plan(&d, layout, mix)
        .into_iter()
        .map(|t| {
            let info = TensorInfo {
                nbytes: t.nbytes(),
                name: t.name,
                ne: t.ne,
                ty: t.ty,
                offset,
            };
            offset =
                ingot_gguf::align_up(offset + info.nbytes, 32).expect("synthetic sizes are small");
            info
        })
        .collect();
    Gguf {
        version: 3,
        alignment: 32,
        kv,
        tensors,
        data_offset: 0,
    }
}

/// The model keys `ingot synth` writes (docs/deepseek2-model.md#gguf-keys), without the
/// tokenizer.
pub fn keys(d: &Dims, layout: Layout) -> Vec<(String, MetaValue)> {
    let a = |k: &str| format!("deepseek2.{k}");
    let u = |v: u64| MetaValue::U32(v as u32);
    let mut kv: Vec<(String, MetaValue)> = vec![
        (
            "general.architecture".into(),
            MetaValue::String("deepseek2".into()),
        ),
        (a("context_length"), u(d.context_length)),
        (a("embedding_length"), u(d.n_embd)),
        (a("block_count"), u(d.n_layer)),
        (a("feed_forward_length"), u(d.ff_dense)),
        (a("attention.head_count"), u(d.n_head)),
        (a("rope.freq_base"), MetaValue::F32(10000.0)),
        (a("attention.layer_norm_rms_epsilon"), MetaValue::F32(1e-6)),
        (a("expert_used_count"), u(d.n_expert_used)),
        (a("expert_count"), u(d.n_expert)),
        (a("leading_dense_block_count"), u(d.n_dense_lead)),
        (a("vocab_size"), u(d.n_vocab)),
        (a("attention.q_lora_rank"), u(0)),
        (a("attention.kv_lora_rank"), u(d.kv_lora)),
        (a("expert_feed_forward_length"), u(d.ff_expert)),
        (a("expert_shared_count"), u(d.n_shared)),
        (a("expert_weights_scale"), MetaValue::F32(1.0)),
        (a("rope.dimension_count"), u(d.d_rope)),
        (a("rope.scaling.type"), MetaValue::String("yarn".into())),
        (a("rope.scaling.factor"), MetaValue::F32(40.0)),
        (a("rope.scaling.original_context_length"), u(4096)),
        (
            a("rope.scaling.yarn_log_multiplier"),
            MetaValue::F32(0.0707),
        ),
    ];
    match layout {
        Layout::Mla => kv.extend([
            (a("attention.key_length"), u(d.kv_lora + d.d_rope)),
            (a("attention.value_length"), u(d.kv_lora)),
            (a("attention.key_length_mla"), u(d.d_nope + d.d_rope)),
            (a("attention.value_length_mla"), u(d.d_v)),
        ]),
        Layout::Legacy => kv.extend([
            (a("attention.key_length"), u(d.d_nope + d.d_rope)),
            (a("attention.value_length"), u(d.d_v)),
        ]),
    }
    kv
}

/// Writes `ingot synth`'s model of `preset`/`layout`/`mix` with seed 42 to `path` and returns
/// its model name.
pub fn write_preset(
    path: &std::path::Path,
    preset: Preset,
    layout: Layout,
    mix: QuantMix,
) -> String {
    let opts = ingot_synth::SynthOptions {
        preset,
        layout,
        mix,
        seed: 42,
    };
    ingot_synth::synthesize(&opts, path, false).expect("synthesize");
    opts.model_name()
}

/// Writes a deepseek2 model of any dimensions: the tensor list and per-tensor types of
/// `ingot_synth` for `layout`/`mix`, values Normal(0, 1/sqrt(row length)) for projections and
/// uniform in [0.8, 1.2] for norms, drawn from a fixed seed. (`ingot synth` only makes its
/// presets; this makes shapes the presets do not cover.)
pub fn write_model(path: &std::path::Path, d: &Dims, layout: Layout, mix: QuantMix, seed: u64) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut w = ingot_gguf::GgufWriter::new(3);
    for (k, v) in keys(d, layout) {
        w.set_kv(&k, v);
    }
    let plan = tensor_plan(d, layout, mix);
    for t in &plan {
        w.add_tensor(&t.name, t.ty, &t.ne).expect("valid tensor");
    }
    let mut data = w.begin(path).expect("create model file");
    for t in &plan {
        let n = t.n_elements() as usize;
        let values: Vec<f32> = if t.name.contains("norm") {
            (0..n).map(|_| rng.random_range(0.8f32..1.2)).collect()
        } else {
            let std = 1.0 / (t.row_len() as f32).sqrt();
            (0..n)
                .map(|_| {
                    // Box-Muller: a standard normal from two uniforms.
                    let (u1, u2): (f32, f32) = (rng.random_range(1e-7..1.0), rng.random());
                    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos() * std
                })
                .collect()
        };
        let mut bytes = vec![0u8; t.nbytes() as usize];
        ingot_quant::quantize_tensor(t.ty, &values, &mut bytes).expect("quantize");
        data.write_tensor(&bytes).expect("write tensor");
    }
    data.finish().expect("finish model file");
}
