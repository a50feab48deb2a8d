//! `ingot synth`: deterministic synthetic deepseek2 GGUF models.
//!
//! No model can be downloaded where this project is built and tested, so it manufactures its own:
//! DeepSeek-V2-Lite-shaped files (`lite-4l`, `v2-lite`) for benches, and a `tiny` model with every
//! structural feature (dense lead layer, MoE with shared experts, MLA) for tests. Files follow
//! llama.cpp's loader rules (keys, tensors and per-tensor types of docs/deepseek2-model.md), so
//! llama.cpp itself loads them and the numbers can be compared engine against engine.
//!
//! Weights are random but realistic: Normal(0, 1/sqrt(fan_in)) projections, norm weights near 1,
//! so activations neither vanish nor blow up through the layers, and quantized with the project's
//! reference quantizers, or for IQ2_XXS, IQ2_XS and IQ1_S (no quantizer here: ggml's needs an
//! importance matrix) encoded as stand-in blocks of the drawn rows'
//! magnitude (never zeros, never constants: zeros make decode paths look faster than they are).
//! The same `(preset, layout, mix, seed)` always gives the same bytes, whatever the thread
//! count: every chunk of every tensor has its own random stream.

mod mix;
mod plan;
mod preset;
mod rng;
pub mod variant;
pub mod vocab;

use std::path::Path;

use ingot_gguf::{
    GgmlType, Gguf, GgufError, GgufWriter, MetaArray, MetaType, MetaValue, OutputFile, OutputPolicy,
};
use rayon::prelude::*;

pub use mix::{tensor_type, QuantMix};
pub use plan::{tensor_plan, Init, TensorPlan};
pub use preset::{Dims, Layout, Preset, Routing};
use rng::Rng;

/// The command line's message for a name none of `T`'s variants has: the bad value, then every
/// valid one.
fn unknown_name<T: strum::VariantNames>(what: &str, s: &str) -> String {
    format!(
        "unknown {what} '{s}' (expected one of: {})",
        T::VARIANTS.join(", ")
    )
}

/// Bumped whenever the same options would make different bytes (preset dims, draw order,
/// vocabulary), so caches keyed by the options (e.g. `ingot demo`'s) know a stored file is stale.
pub const REVISION: u32 = 3;

/// Elements per random stream: big enough to amortise seeding, small enough to spread over cores.
const CHUNK_ELEMENTS: u64 = 1 << 18;

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("quantizing {tensor} to {ty}: {msg}")]
    Quant {
        tensor: String,
        ty: &'static str,
        msg: String,
    },
    #[error(
        "preset {0} is a full-size header for plan counts and bytes per token; its weights are not written \
         (use a tiny-* preset for a model that runs)"
    )]
    HeaderOnly(Preset),
}

#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub preset: Preset,
    pub layout: Layout,
    pub mix: QuantMix,
    pub seed: u64,
}

impl SynthOptions {
    /// `preset` as `ingot synth` makes it by default: MLA layout, Q4_K_M, seed 42.
    pub fn q4_k_m(preset: Preset) -> Self {
        SynthOptions {
            preset,
            layout: Layout::Mla,
            mix: QuantMix::Q4KM,
            seed: 42,
        }
    }

    /// The model's `general.name`, e.g. `ingot-synth-tiny-mla-q4_k_m-s42`.
    pub fn model_name(&self) -> String {
        format!(
            "ingot-synth-{}-{}-{}-s{}",
            self.preset, self.layout, self.mix, self.seed
        )
    }
}

#[derive(Clone, Debug)]
pub struct SynthSummary {
    pub n_tensors: usize,
    pub n_params: u64,
    pub tensor_bytes: u64,
}

/// Bytes of tensor data the model will hold (before alignment padding).
pub fn planned_bytes(opts: &SynthOptions) -> u64 {
    tensor_plan(&opts.preset.dims(), opts.layout, opts.mix)
        .iter()
        .map(TensorPlan::nbytes)
        .sum()
}

/// The header writer of the model: every key and the tensor table.
fn writer(opts: &SynthOptions, dims: &Dims, plan: &[TensorPlan]) -> Result<GgufWriter, SynthError> {
    let mut w = GgufWriter::new(3);
    for (k, v) in metadata(opts, dims) {
        w.set_kv(&k, v);
    }
    for t in plan {
        w.add_tensor(&t.name, t.ty, &t.ne)?;
    }
    Ok(w)
}

/// The header `synthesize` would write (keys, tokenizer and tensor table with their offsets),
/// without any tensor data: what a plan or a bytes-per-token count needs, for any preset including
/// the full-size ones.
pub fn header(opts: &SynthOptions) -> Result<Gguf, SynthError> {
    let dims = opts.preset.dims();
    let w = writer(opts, &dims, &tensor_plan(&dims, opts.layout, opts.mix))?;
    Ok(Gguf {
        version: 3,
        alignment: ingot_gguf::DEFAULT_ALIGNMENT,
        kv: w.kv().to_vec(),
        tensors: w.tensor_infos()?,
        data_offset: w.header_bytes()?.len() as u64,
    })
}

/// Writes the model to `out` atomically (temp file + rename), replacing a regular file there.
/// `progress` draws a bar on stderr. Refuses the header-only presets ([`Preset::header_only`]).
pub fn synthesize(
    opts: &SynthOptions,
    out: &Path,
    progress: bool,
) -> Result<SynthSummary, SynthError> {
    synthesize_to(opts, out, &OutputPolicy::REPLACE, progress)
}

/// [`synthesize`] under the caller's [`OutputPolicy`] for `out`, checked before any tensor is
/// drawn.
pub fn synthesize_to(
    opts: &SynthOptions,
    out: &Path,
    policy: &OutputPolicy,
    progress: bool,
) -> Result<SynthSummary, SynthError> {
    if opts.preset.header_only() {
        return Err(SynthError::HeaderOnly(opts.preset));
    }
    let out = OutputFile::create(out, policy).map_err(GgufError::from)?;
    let dims = opts.preset.dims();
    let plan = tensor_plan(&dims, opts.layout, opts.mix);
    let w = writer(opts, &dims, &plan)?;
    let total: u64 = plan.iter().map(TensorPlan::nbytes).sum();
    let bar = if progress {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg:>28} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .expect("static template is valid")
            .progress_chars("=> "),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut data = w.begin_output(out)?;
    for t in &plan {
        bar.set_message(t.name.clone());
        let bytes = tensor_bytes(opts.seed, &dims, t)?;
        data.write_tensor(&bytes)?;
        bar.inc(bytes.len() as u64);
    }
    data.finish()?;
    bar.finish_and_clear();
    Ok(SynthSummary {
        n_tensors: plan.len(),
        n_params: plan.iter().map(TensorPlan::n_elements).sum(),
        tensor_bytes: total,
    })
}

/// The f32 values of rows `[row0, row0 + n_rows)` of a directly drawn tensor.
fn draw_rows(seed: u64, t: &TensorPlan, chunk: u64, out: &mut [f32]) {
    let mut rng = Rng::for_stream(seed, &t.name, chunk);
    match t.init {
        Init::Normal { std } => out.iter_mut().for_each(|v| *v = rng.normal() * std),
        Init::NormWeight => out
            .iter_mut()
            .for_each(|v| *v = (0.8 + 0.4 * rng.uniform()) as f32),
        Init::KFromKvB | Init::VFromKvB => unreachable!("derived tensors are sliced, not drawn"),
    }
}

fn rows_per_chunk(row_len: u64) -> u64 {
    (CHUNK_ELEMENTS / row_len).max(1)
}

/// All f32 values of a directly drawn tensor (used for the small `attn_kv_b` that k_b/v_b slice).
fn draw_all(seed: u64, t: &TensorPlan) -> Vec<f32> {
    let row = t.row_len() as usize;
    let per = rows_per_chunk(t.row_len()) as usize;
    let mut v = vec![0f32; t.n_elements() as usize];
    v.par_chunks_mut(per * row)
        .enumerate()
        .for_each(|(c, chunk)| draw_rows(seed, t, c as u64, chunk));
    v
}

/// Values of `attn_k_b` or `attn_v_b` taken from the layer's `attn_kv_b` {kv_lora,
/// n_head*(nope+v)}: k_b (d, c, h) = kv_b[h*(nope+v) + d][c]; v_b (c, j, h) = kv_b[h*(nope+v) +
/// nope + j][c] (docs/deepseek2-model.md#tensors).
fn sliced_from_kv_b(seed: u64, d: &Dims, t: &TensorPlan) -> Vec<f32> {
    let kv_b = TensorPlan {
        name: plan::kv_b_name(&t.name),
        ne: vec![d.kv_lora, d.n_head * (d.d_nope + d.d_v)],
        ty: GgmlType::F32,
        init: Init::Normal {
            std: 1.0 / (d.kv_lora as f32).sqrt(),
        },
    };
    let src = draw_all(seed, &kv_b);
    let (r, nope, dv, nh) = (
        d.kv_lora as usize,
        d.d_nope as usize,
        d.d_v as usize,
        d.n_head as usize,
    );
    let at = |row: usize, c: usize| src[row * r + c];
    let mut out = Vec::with_capacity(t.n_elements() as usize);
    match t.init {
        Init::KFromKvB => {
            for h in 0..nh {
                for c in 0..r {
                    for dd in 0..nope {
                        out.push(at(h * (nope + dv) + dd, c));
                    }
                }
            }
        }
        Init::VFromKvB => {
            for h in 0..nh {
                for j in 0..dv {
                    for c in 0..r {
                        out.push(at(h * (nope + dv) + nope + j, c));
                    }
                }
            }
        }
        _ => unreachable!("only k_b/v_b are sliced"),
    }
    out
}

fn quantize_rows(t: &TensorPlan, rows: &[f32], out: &mut [u8]) -> Result<(), SynthError> {
    let row_len = t.row_len() as usize;
    let row_bytes = out.len() / (rows.len() / row_len);
    for (x, q) in rows.chunks(row_len).zip(out.chunks_mut(row_bytes)) {
        ingot_quant::quantize_or_stand_in(t.ty, x, q).map_err(|e| SynthError::Quant {
            tensor: t.name.clone(),
            ty: t.ty.name(),
            msg: e.to_string(),
        })?;
    }
    Ok(())
}

/// The tensor's bytes in its GGUF type. Chunks of rows are drawn and quantized in parallel.
fn tensor_bytes(seed: u64, d: &Dims, t: &TensorPlan) -> Result<Vec<u8>, SynthError> {
    let row_bytes = t.nbytes() / t.n_rows();
    let mut out = vec![0u8; t.nbytes() as usize];
    if matches!(t.init, Init::KFromKvB | Init::VFromKvB) {
        let values = sliced_from_kv_b(seed, d, t);
        quantize_rows(t, &values, &mut out)?;
        return Ok(out);
    }
    let per = rows_per_chunk(t.row_len());
    out.par_chunks_mut((per * row_bytes) as usize)
        .enumerate()
        .try_for_each(|(c, q)| {
            let rows = q.len() / row_bytes as usize;
            let mut x = vec![0f32; rows * t.row_len() as usize];
            draw_rows(seed, t, c as u64, &mut x);
            quantize_rows(t, &x, q)
        })?;
    Ok(out)
}

fn u32v(v: u64) -> MetaValue {
    MetaValue::U32(u32::try_from(v).expect("model dimensions fit in u32"))
}

fn strings(items: Vec<String>) -> MetaValue {
    MetaValue::Array(MetaArray {
        elem: MetaType::String,
        items: items.into_iter().map(MetaValue::String).collect(),
    })
}

/// The GGUF metadata a current llama.cpp converter writes for deepseek2
/// (docs/deepseek2-model.md#gguf-keys, docs/deepseek2-model.md#tokenizer).
fn metadata(opts: &SynthOptions, d: &Dims) -> Vec<(String, MetaValue)> {
    let a = |k: &str| format!("deepseek2.{k}");
    let mut kv: Vec<(String, MetaValue)> = vec![
        (
            "general.architecture".into(),
            MetaValue::String("deepseek2".into()),
        ),
        ("general.name".into(), MetaValue::String(opts.model_name())),
        (a("context_length"), u32v(d.context_length)),
        (a("embedding_length"), u32v(d.n_embd)),
        (a("block_count"), u32v(d.block_count())),
        (a("feed_forward_length"), u32v(d.ff_dense)),
        (a("attention.head_count"), u32v(d.n_head)),
        (a("rope.freq_base"), MetaValue::F32(10000.0)),
        (a("attention.layer_norm_rms_epsilon"), MetaValue::F32(1e-6)),
        (a("expert_used_count"), u32v(d.n_expert_used)),
        (a("expert_count"), u32v(d.n_expert)),
        (a("leading_dense_block_count"), u32v(d.n_dense_lead)),
        (a("vocab_size"), u32v(d.n_vocab)),
        (a("attention.q_lora_rank"), u32v(d.q_lora)),
        (a("attention.kv_lora_rank"), u32v(d.kv_lora)),
    ];
    match opts.layout {
        Layout::Mla => kv.extend([
            (a("attention.head_count_kv"), u32v(1)),
            (a("attention.key_length"), u32v(d.kv_lora + d.d_rope)),
            (a("attention.value_length"), u32v(d.kv_lora)),
            (a("attention.key_length_mla"), u32v(d.d_nope + d.d_rope)),
            (a("attention.value_length_mla"), u32v(d.d_v)),
        ]),
        Layout::Legacy => kv.extend([
            (a("attention.head_count_kv"), u32v(d.n_head)),
            (a("attention.key_length"), u32v(d.d_nope + d.d_rope)),
            (a("attention.value_length"), u32v(d.d_v)),
        ]),
    }
    if d.n_nextn > 0 {
        kv.push((a("nextn_predict_layers"), u32v(d.n_nextn)));
    }
    let r = &d.routing;
    kv.extend([
        (a("expert_feed_forward_length"), u32v(d.ff_expert)),
        (a("expert_shared_count"), u32v(d.n_shared)),
        (a("expert_weights_scale"), MetaValue::F32(r.weights_scale)),
        (a("expert_weights_norm"), MetaValue::Bool(r.weights_norm)),
    ]);
    if r.gating_key {
        kv.push((a("expert_gating_func"), u32v(if r.sigmoid { 2 } else { 1 })));
    }
    if r.n_group > 1 {
        kv.push((a("expert_group_count"), u32v(r.n_group)));
        kv.push((a("expert_group_used_count"), u32v(r.n_group_used)));
    }
    kv.extend([
        (a("rope.dimension_count"), u32v(d.d_rope)),
        (a("rope.scaling.type"), MetaValue::String("yarn".into())),
        (a("rope.scaling.factor"), MetaValue::F32(40.0)),
        (a("rope.scaling.original_context_length"), u32v(4096)),
        (a("rope.scaling.yarn_beta_fast"), MetaValue::F32(32.0)),
        (a("rope.scaling.yarn_beta_slow"), MetaValue::F32(1.0)),
        (
            a("rope.scaling.yarn_log_multiplier"),
            MetaValue::F32(0.0707),
        ),
    ]);
    let vocab = vocab::build(d.n_vocab, d.bos, d.eos);
    kv.extend([
        (
            "tokenizer.ggml.model".into(),
            MetaValue::String("gpt2".into()),
        ),
        ("tokenizer.ggml.pre".into(), MetaValue::String(d.pre.into())),
        ("tokenizer.ggml.tokens".into(), strings(vocab.tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            MetaValue::Array(MetaArray {
                elem: MetaType::I32,
                items: vocab.token_types.into_iter().map(MetaValue::I32).collect(),
            }),
        ),
        ("tokenizer.ggml.merges".into(), strings(vocab.merges)),
        ("tokenizer.ggml.bos_token_id".into(), u32v(d.bos)),
        ("tokenizer.ggml.eos_token_id".into(), u32v(d.eos)),
        ("tokenizer.ggml.padding_token_id".into(), u32v(d.eos)),
        ("tokenizer.ggml.add_bos_token".into(), MetaValue::Bool(true)),
        (
            "tokenizer.ggml.add_eos_token".into(),
            MetaValue::Bool(false),
        ),
    ]);
    if opts.mix != QuantMix::F32 {
        kv.push(("general.quantization_version".into(), u32v(2)));
    }
    kv.push((
        "general.file_type".into(),
        u32v(u64::from(opts.mix.file_type())),
    ));
    kv
}
