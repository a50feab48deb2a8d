//! `ModelConfig::from_gguf`: the keys read, checked and defaulted as llama.cpp does, and the
//! shape check of every tensor ([`crate::tensors::validate_shapes`]).

use ingot_gguf::{Gguf, MetaValue};

use super::{AttnTemperature, ExpertGateUp, GatingFunc, GroupScore, ModelConfig};
use crate::error::{ModelError, Result};
use crate::rope::{RopeParams, RopeScalingType};
use crate::tensor_names::{layer_name, OUTPUT};
use crate::tensors;

/// Prefix of every architecture-specific key.
const ARCH: &str = "deepseek2";

/// Upper bound accepted for any single dimension key. Keeps products of two dimensions far from
/// overflow; real models are below 2^18 everywhere.
const MAX_DIM: u64 = 1 << 31;

impl ModelConfig {
    /// Reads and validates the configuration: architecture, keys, derived values, and every
    /// tensor's shape.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self> {
        let keys = Keys { gguf };
        let arch = keys.str_req("general.architecture")?;
        if arch != ARCH {
            return Err(ModelError::WrongArchitecture {
                found: arch.to_owned(),
            });
        }
        let name = keys.str_opt("general.name")?.map(str::to_owned);

        let n_embd = keys.dim_req(&arch_key("embedding_length"))?;
        let block_count = keys.dim_req(&arch_key("block_count"))?;
        let nextn_key = arch_key("nextn_predict_layers");
        let n_nextn = keys.count_opt(&nextn_key)?.unwrap_or(0);
        if n_nextn >= block_count {
            return Err(invalid(
                &nextn_key,
                format!("{n_nextn} leaves no decoding layer of block_count {block_count}"),
            ));
        }
        let n_layer = block_count - n_nextn;
        check_block_count(gguf, block_count, n_layer, n_nextn, &nextn_key)?;
        let n_ctx_train = keys.dim_req(&arch_key("context_length"))?;
        let n_head = keys
            .uniform_dim_opt(&arch_key("attention.head_count"))?
            .unwrap_or(1);
        let n_dense_lead = keys.count_req(&arch_key("leading_dense_block_count"))?;
        if n_dense_lead > n_layer {
            return Err(invalid(
                &arch_key("leading_dense_block_count"),
                format!("{n_dense_lead} exceeds the {n_layer} decoding layers"),
            ));
        }
        let vocab = match keys.dim_opt(&arch_key("vocab_size"))? {
            Some(v) => v,
            None => keys.array_len("tokenizer.ggml.tokens")?,
        };
        let rms_eps = keys.f32_req(&arch_key("attention.layer_norm_rms_epsilon"))?;
        if !(rms_eps.is_finite() && rms_eps >= 0.0) {
            return Err(invalid(
                &arch_key("attention.layer_norm_rms_epsilon"),
                format!("{rms_eps}"),
            ));
        }

        // Attention widths. `key_length_mla`/`value_length_mla` exist in MLA-era files, where
        // `key_length` is the absorbed row (kv_lora + d_rope); older files carry the per-head
        // widths in `key_length`/`value_length`.
        let kv_lora = keys.dim_req(&arch_key("attention.kv_lora_rank"))?;
        let q_lora_key = arch_key("attention.q_lora_rank");
        let q_lora = match keys.count_opt(&q_lora_key)? {
            Some(0) => None,
            Some(r) => Some(r),
            // llama.cpp only lets the 26/27-layer Lite models (and Kanana-2's 48 layers with a
            // 128,256 vocabulary) omit it.
            None if n_layer == 26 || n_layer == 27 || (n_layer == 48 && vocab == 128_256) => None,
            None => return Err(ModelError::MissingKey { key: q_lora_key }),
        };
        let key_length = keys
            .dim_opt(&arch_key("attention.key_length"))?
            .unwrap_or(n_embd / n_head);
        let value_length = keys
            .dim_opt(&arch_key("attention.value_length"))?
            .unwrap_or(key_length);
        let d_qk = keys
            .dim_opt(&arch_key("attention.key_length_mla"))?
            .unwrap_or(key_length);
        let d_v = keys
            .dim_opt(&arch_key("attention.value_length_mla"))?
            .unwrap_or(value_length);
        let rot_key = arch_key("rope.dimension_count");
        let d_rope = keys.dim_opt(&rot_key)?.unwrap_or(key_length);
        if d_rope % 2 != 0 || d_rope >= d_qk {
            return Err(invalid(
                &rot_key,
                format!("{d_rope} must be even and smaller than the per-head key width {d_qk}"),
            ));
        }
        let d_nope = d_qk - d_rope;

        // Feed-forward widths and routing.
        let has_moe = block_count > n_dense_lead;
        let ff_key = arch_key("feed_forward_length");
        let ff_dense = match keys.uniform_dim_opt(&ff_key)? {
            Some(v) => v,
            None if n_dense_lead == 0 => 0,
            None => return Err(ModelError::MissingKey { key: ff_key }),
        };
        let (ff_expert, n_expert, n_expert_used, n_expert_shared, expert_weights_scale) = if has_moe
        {
            let n_expert = keys.dim_req(&arch_key("expert_count"))?;
            let used_key = arch_key("expert_used_count");
            let n_used = keys.dim_req(&used_key)?;
            if n_used > n_expert {
                return Err(invalid(
                    &used_key,
                    format!("{n_used} exceeds expert_count {n_expert}"),
                ));
            }
            (
                keys.dim_req(&arch_key("expert_feed_forward_length"))?,
                n_expert,
                n_used,
                keys.count_req(&arch_key("expert_shared_count"))?,
                keys.f32_req(&arch_key("expert_weights_scale"))?,
            )
        } else {
            (0, 0, 0, 0, 1.0)
        };
        let expert_weights_scale = if expert_weights_scale == 0.0 {
            1.0
        } else {
            expert_weights_scale
        };
        if !expert_weights_scale.is_finite() {
            return Err(invalid(
                &arch_key("expert_weights_scale"),
                format!("{expert_weights_scale}"),
            ));
        }
        let expert_weights_norm = keys
            .bool_opt(&arch_key("expert_weights_norm"))?
            .unwrap_or(false);
        let gating_key = arch_key("expert_gating_func");
        let gating = match keys.count_opt(&gating_key)? {
            // llama.cpp's fallback for files without the key: GLM-4.7-Flash (47 layers + 1 MTP
            // block, 154,880 tokens) routes by sigmoid, older DeepSeek-V2/V2.5 files by softmax.
            // Newer llama.cpp counts the 47 without the MTP block, older the 48 with it; both are
            // accepted.
            None | Some(0)
                if [n_layer, block_count].iter().any(|&n| n == 47 || n == 48)
                    && vocab == 154_880 =>
            {
                GatingFunc::Sigmoid
            }
            None | Some(0) | Some(1) => GatingFunc::Softmax,
            Some(2) => GatingFunc::Sigmoid,
            Some(other) => {
                return Err(ModelError::Unsupported(format!(
                    "{gating_key} = {other} (only 1 softmax and 2 sigmoid are implemented)"
                )))
            }
        };
        let n_expert_group = keys
            .count_opt(&arch_key("expert_group_count"))?
            .unwrap_or(0)
            .max(1);
        let group_used_key = arch_key("expert_group_used_count");
        let n_expert_group_used = keys.count_opt(&group_used_key)?.unwrap_or(0).max(1);
        if n_expert_group > 1 {
            validate_groups(
                n_expert,
                n_expert_used,
                n_expert_group,
                n_expert_group_used,
                gating.group_score(),
                &group_used_key,
            )?;
        }

        let rope = read_rope(&keys, d_rope, n_ctx_train)?;
        let kq_scale = rope.kq_scale(d_qk);
        let attn_temperature = read_attn_temperature(&keys)?;

        let layout = tensors::detect_layout(gguf)?;
        let has_expert_bias = has_moe
            && gguf
                .tensor(&layer_name(n_dense_lead, "exp_probs_b.bias"))
                .is_some();
        let gate_up = if has_moe
            && gguf
                .tensor(&layer_name(n_dense_lead, "ffn_gate_up_exps.weight"))
                .is_some()
        {
            ExpertGateUp::Merged
        } else {
            ExpertGateUp::Split
        };
        let tied_output = gguf.tensor(OUTPUT).is_none();

        let mut config = ModelConfig {
            name,
            n_embd,
            n_layer,
            n_nextn,
            n_dense_lead,
            n_head,
            n_ctx_train,
            vocab,
            kv_lora,
            q_lora,
            d_nope,
            d_rope,
            d_v,
            ff_dense,
            ff_expert,
            n_expert,
            n_expert_used,
            n_expert_shared,
            n_expert_group,
            n_expert_group_used,
            gating,
            gate_up,
            expert_weights_norm,
            expert_weights_scale,
            has_expert_bias,
            rms_eps,
            layout,
            tied_output,
            rope,
            kq_scale,
            attn_temperature,
            bytes_per_token: 0,
        };
        config.bytes_per_token = tensors::validate_shapes(gguf, &config)?;
        Ok(config)
    }
}

fn validate_groups(
    n_expert: usize,
    n_used: usize,
    groups: usize,
    groups_used: usize,
    score: GroupScore,
    key: &str,
) -> Result<()> {
    if !n_expert.is_multiple_of(groups) {
        return Err(invalid(
            key,
            format!("{n_expert} experts do not split into {groups} groups"),
        ));
    }
    if groups_used > groups || groups_used * (n_expert / groups) < n_used {
        return Err(invalid(
            key,
            format!("{groups_used} of {groups} groups cannot hold {n_used} selected experts"),
        ));
    }
    if score == GroupScore::TopTwoSum && n_expert / groups < 2 {
        return Err(invalid(
            key,
            "group scores sum the top 2 experts, so groups need at least 2".into(),
        ));
    }
    Ok(())
}

fn read_attn_temperature(keys: &Keys<'_>) -> Result<Option<AttnTemperature>> {
    let scale_key = arch_key("attention.temperature_scale");
    let length_key = arch_key("attention.temperature_length");
    let scale = keys.f32_opt(&scale_key)?.unwrap_or(0.0);
    if scale == 0.0 {
        return Ok(None);
    }
    if !scale.is_finite() {
        return Err(invalid(&scale_key, format!("{scale}")));
    }
    let length = match keys.count_opt(&length_key)? {
        Some(n) if n > 0 && n <= u32::MAX as usize => n as u32,
        Some(n) => return Err(invalid(&length_key, format!("{n} (must be 1..2^32)"))),
        None => {
            return Err(invalid(
                &length_key,
                format!("missing while {scale_key} = {scale} (the temperature needs its period)"),
            ))
        }
    };
    Ok(Some(AttnTemperature { scale, length }))
}

fn read_rope(keys: &Keys<'_>, n_rot: usize, n_ctx_train: usize) -> Result<RopeParams> {
    let type_key = arch_key("rope.scaling.type");
    let scaling = match keys.str_opt(&type_key)?.unwrap_or("linear") {
        "none" => RopeScalingType::None,
        "linear" => RopeScalingType::Linear,
        "yarn" => RopeScalingType::Yarn,
        other => {
            return Err(ModelError::Unsupported(format!(
                "{type_key} = {other:?} (none, linear and yarn are implemented)"
            )))
        }
    };
    let factor_key = arch_key("rope.scaling.factor");
    let factor = match keys.f32_opt(&factor_key)? {
        Some(f) if f != 0.0 => f,
        _ => keys.f32_opt(&arch_key("rope.scale_linear"))?.unwrap_or(0.0),
    };
    let freq_scale = match (scaling, factor) {
        (RopeScalingType::None, _) => 1.0,
        (_, 0.0) => 1.0,
        (_, f) if f.is_finite() && f > 0.0 => 1.0 / f,
        (_, f) => return Err(invalid(&factor_key, format!("{f} (must be positive)"))),
    };
    let base_key = arch_key("rope.freq_base");
    let freq_base = keys.f32_opt(&base_key)?.unwrap_or(10000.0);
    if !(freq_base.is_finite() && freq_base > 1.0) {
        return Err(invalid(&base_key, format!("{freq_base} (must be > 1)")));
    }
    let n_ctx_orig = keys
        .dim_opt(&arch_key("rope.scaling.original_context_length"))?
        .unwrap_or(n_ctx_train);
    let attn_factor = keys
        .f32_opt(&arch_key("rope.scaling.attn_factor"))?
        .unwrap_or(1.0);
    let yarn_log_mul = keys
        .f32_opt(&arch_key("rope.scaling.yarn_log_multiplier"))?
        .unwrap_or(0.0);
    for (key, v) in [
        ("rope.scaling.attn_factor", attn_factor),
        ("rope.scaling.yarn_log_multiplier", yarn_log_mul),
    ] {
        if !v.is_finite() {
            return Err(invalid(&arch_key(key), format!("{v}")));
        }
    }
    Ok(RopeParams {
        n_rot,
        freq_base,
        scaling,
        freq_scale,
        n_ctx_orig,
        beta_fast: 32.0,
        beta_slow: 1.0,
        attn_factor,
        yarn_log_mul,
    })
}

fn arch_key(suffix: &str) -> String {
    format!("{ARCH}.{suffix}")
}

/// Fewest tensors a decoding layer can have: attention norm, one query projection, `attn_kv_a_mqa`,
/// its norm, one KV up-projection (legacy `attn_kv_b`), `attn_output`, the FFN norm, and three FFN
/// tensors (dense gate/up/down, or router + merged gate_up + down).
const MIN_LAYER_TENSORS: usize = 10;
/// Tensors every file has besides its layers: `token_embd` and `output_norm` (`output` may be
/// tied).
const MIN_GLOBAL_TENSORS: usize = 2;

/// Checks `block_count` against the file before anything is sized from it: the tensor lists built
/// from the configuration are proportional to `block_count`, so a 3 MB header claiming 10^7 blocks
/// would otherwise cost gigabytes before the first missing tensor is noticed. Every decoding layer
/// needs at least [`MIN_LAYER_TENSORS`] tensors of the file's own, and the NextN/MTP blocks
/// (optional, so not counted against the file) may not outnumber the decoding layers; together this
/// bounds every per-block list by the tensor table the parser already holds.
fn check_block_count(
    gguf: &Gguf,
    block_count: usize,
    n_layer: usize,
    n_nextn: usize,
    nextn_key: &str,
) -> Result<()> {
    let n_tensors = gguf.tensors.len();
    let need = n_layer
        .saturating_mul(MIN_LAYER_TENSORS)
        .saturating_add(MIN_GLOBAL_TENSORS);
    if need > n_tensors {
        return Err(invalid(
            &arch_key("block_count"),
            format!(
                "{block_count} cannot be right: {n_layer} decoding layers need at least {need} tensors \
                 ({MIN_LAYER_TENSORS} per layer + {MIN_GLOBAL_TENSORS}), and the file has {n_tensors}"
            ),
        ));
    }
    if n_nextn > n_layer {
        return Err(invalid(
            nextn_key,
            format!(
                "{n_nextn} cannot be right: more NextN/MTP blocks than the {n_layer} decoding layers \
                 (block_count {block_count})"
            ),
        ));
    }
    Ok(())
}

fn invalid(key: &str, reason: String) -> ModelError {
    ModelError::InvalidValue {
        key: key.to_owned(),
        reason,
    }
}

/// Typed access to the key/value section with this crate's errors.
struct Keys<'a> {
    gguf: &'a Gguf,
}

impl<'a> Keys<'a> {
    fn get(&self, key: &str) -> Option<&'a MetaValue> {
        self.gguf.get(key)
    }

    fn str_opt(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key)
            .map(|v| v.as_str().ok_or_else(|| key_type(key, "string")))
            .transpose()
    }

    fn str_req(&self, key: &str) -> Result<&'a str> {
        self.str_opt(key)?.ok_or_else(|| missing(key))
    }

    fn f32_opt(&self, key: &str) -> Result<Option<f32>> {
        self.get(key)
            .map(|v| v.as_f32().ok_or_else(|| key_type(key, "float")))
            .transpose()
    }

    fn f32_req(&self, key: &str) -> Result<f32> {
        self.f32_opt(key)?.ok_or_else(|| missing(key))
    }

    fn bool_opt(&self, key: &str) -> Result<Option<bool>> {
        self.get(key)
            .map(|v| v.as_bool().ok_or_else(|| key_type(key, "bool")))
            .transpose()
    }

    /// A count that may be 0 (bounded like a dimension).
    fn count_opt(&self, key: &str) -> Result<Option<usize>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let n = v
            .as_u64()
            .ok_or_else(|| key_type(key, "unsigned integer"))?;
        if n > MAX_DIM {
            return Err(invalid(key, format!("{n} exceeds the limit {MAX_DIM}")));
        }
        Ok(Some(n as usize))
    }

    fn count_req(&self, key: &str) -> Result<usize> {
        self.count_opt(key)?.ok_or_else(|| missing(key))
    }

    /// A dimension: an integer in `1..=MAX_DIM`.
    fn dim_opt(&self, key: &str) -> Result<Option<usize>> {
        match self.count_opt(key)? {
            Some(0) => Err(invalid(key, "0 (must be at least 1)".into())),
            other => Ok(other),
        }
    }

    fn dim_req(&self, key: &str) -> Result<usize> {
        self.dim_opt(key)?.ok_or_else(|| missing(key))
    }

    /// A dimension stored either as a scalar or as a per-layer array whose entries must all be
    /// equal.
    fn uniform_dim_opt(&self, key: &str) -> Result<Option<usize>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let Some(array) = v.as_array() else {
            return self.dim_opt(key);
        };
        let mut value = None;
        for item in &array.items {
            let n = item
                .as_u64()
                .ok_or_else(|| key_type(key, "array of unsigned integers"))?;
            match value {
                None => value = Some(n),
                Some(first) if first != n => {
                    return Err(ModelError::Unsupported(format!(
                        "{key} differs between layers ({first} vs {n})"
                    )))
                }
                Some(_) => {}
            }
        }
        match value {
            None => Err(invalid(key, "empty array".into())),
            Some(0) => Err(invalid(key, "0 (must be at least 1)".into())),
            Some(n) if n > MAX_DIM => Err(invalid(key, format!("{n} exceeds the limit {MAX_DIM}"))),
            Some(n) => Ok(Some(n as usize)),
        }
    }

    fn array_len(&self, key: &str) -> Result<usize> {
        let v = self.get(key).ok_or_else(|| missing(key))?;
        let array = v.as_array().ok_or_else(|| key_type(key, "array"))?;
        match array.len() {
            0 => Err(invalid(key, "empty array".into())),
            n => Ok(n),
        }
    }
}

fn missing(key: &str) -> ModelError {
    ModelError::MissingKey {
        key: key.to_owned(),
    }
}

fn key_type(key: &str, expected: &'static str) -> ModelError {
    ModelError::KeyType {
        key: key.to_owned(),
        expected,
    }
}
