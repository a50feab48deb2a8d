//! Per-tensor types of a quant mix, following llama.cpp's `llama_tensor_get_type_impl` and
//! `tensor_type_fallback` (current mainline, docs/deepseek2-model.md#quant-mixes) for the
//! tensors a deepseek2 model has.

use ingot_gguf::GgmlType;
use strum::{Display, EnumString, IntoStaticStr, VariantNames};

use crate::unknown_name;

/// A quant mix, named as llama-quantize names it (any case on the command line); the name is in
/// `general.name`, so part of a file's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Display, EnumString, IntoStaticStr, VariantNames)]
#[strum(
    ascii_case_insensitive,
    parse_err_ty = String,
    parse_err_fn = QuantMix::unknown
)]
pub enum QuantMix {
    #[strum(serialize = "f32")]
    F32,
    #[strum(serialize = "q8_0")]
    Q8_0,
    #[strum(serialize = "q4_k_m")]
    Q4KM,
    #[strum(serialize = "q3_k_m")]
    Q3KM,
    #[strum(serialize = "q2_k")]
    Q2K,
    #[strum(serialize = "iq4_xs")]
    Iq4Xs,
    #[strum(serialize = "iq2_xxs")]
    Iq2Xxs,
    #[strum(serialize = "iq1_s")]
    Iq1S,
    #[strum(serialize = "iq3_xxs")]
    Iq3Xxs,
}

impl QuantMix {
    pub const ALL: [QuantMix; 9] = [
        QuantMix::F32,
        QuantMix::Q8_0,
        QuantMix::Q4KM,
        QuantMix::Q3KM,
        QuantMix::Q2K,
        QuantMix::Iq4Xs,
        QuantMix::Iq2Xxs,
        QuantMix::Iq1S,
        QuantMix::Iq3Xxs,
    ];

    pub fn name(self) -> &'static str {
        self.into()
    }

    fn unknown(s: &str) -> String {
        unknown_name::<QuantMix>("quant mix", s)
    }

    /// `general.file_type` (llama_ftype): ALL_F32 0, MOSTLY_Q8_0 7, MOSTLY_Q2_K 10,
    /// MOSTLY_Q3_K_M 12, MOSTLY_Q4_K_M 15, MOSTLY_IQ2_XXS 19, MOSTLY_IQ3_XXS 23, MOSTLY_IQ1_S 24,
    /// MOSTLY_IQ4_XS 30.
    pub fn file_type(self) -> u32 {
        match self {
            QuantMix::F32 => 0,
            QuantMix::Q8_0 => 7,
            QuantMix::Q3KM => 12,
            QuantMix::Q4KM => 15,
            QuantMix::Q2K => 10,
            QuantMix::Iq4Xs => 30,
            QuantMix::Iq2Xxs => 19,
            QuantMix::Iq1S => 24,
            QuantMix::Iq3Xxs => 23,
        }
    }

    fn default_type(self) -> GgmlType {
        match self {
            QuantMix::F32 => GgmlType::F32,
            QuantMix::Q8_0 => GgmlType::Q8_0,
            QuantMix::Q4KM => GgmlType::Q4K,
            QuantMix::Q3KM => GgmlType::Q3K,
            QuantMix::Q2K => GgmlType::Q2K,
            QuantMix::Iq4Xs => GgmlType::Iq4Xs,
            QuantMix::Iq2Xxs => GgmlType::Iq2Xxs,
            QuantMix::Iq1S => GgmlType::Iq1S,
            QuantMix::Iq3Xxs => GgmlType::Iq3Xxs,
        }
    }
}

/// llama.cpp's `use_more_bits(i, n)`.
fn use_more_bits(i: u64, n: u64) -> bool {
    let (i, n) = (i as i64, n as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

fn layer_of(name: &str) -> Option<u64> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

/// The type llama-quantize gives tensor `name` (row length `ne0`, `n_dims` dimensions) in a model
/// of `n_layer` layers, without an importance matrix. 1-D tensors, norms and the router stay F32.
/// The Q2_K and IQ4_XS rules are mainline's `llama_tensor_get_type_impl` (read at commit
/// 007dbbf3): `attn_kv_b` is attn_v-like (Q2_K: Q4_K if `n_gqa ≥ 4`, else Q3_K; IQ4_XS: Q5_K if
/// `n_gqa ≥ 4`), where the legacy layout that has it writes `head_count_kv = n_head`, so
/// `n_gqa = 1`; `attn_k_b`, `attn_v_b`, `attn_kv_a_mqa` and `attn_q*` keep the default.
pub fn tensor_type(mix: QuantMix, name: &str, ne0: u64, n_dims: usize, n_layer: u64) -> GgmlType {
    let quantizable = n_dims >= 2
        && name.ends_with("weight")
        && !name.contains("_norm.weight")
        && !name.contains("ffn_gate_inp.weight");
    if !quantizable || mix == QuantMix::F32 {
        return GgmlType::F32;
    }
    if matches!(mix, QuantMix::Iq2Xxs | QuantMix::Iq1S | QuantMix::Iq3Xxs) {
        return fallback(dynamic_type(mix, name, n_layer), ne0);
    }
    let mut ty = mix.default_type();
    if name == "output.weight" {
        // Q8_0 if the row does not split into k-quant blocks, else Q6_K (unless the mix is Q8_0).
        if !ne0.is_multiple_of(ty.block_size()) {
            ty = GgmlType::Q8_0;
        } else if ty != GgmlType::Q8_0 {
            ty = GgmlType::Q6K;
        }
        return fallback(ty, ne0);
    }
    let layer = layer_of(name).unwrap_or(0);
    if name.contains("attn_kv_b.weight") {
        // attention-v-like tensors count on their own counter: one per layer.
        match mix {
            QuantMix::Q4KM if use_more_bits(layer, n_layer) => ty = GgmlType::Q6K,
            QuantMix::Q3KM => {
                ty = if layer < 2 {
                    GgmlType::Q5K
                } else {
                    GgmlType::Q4K
                }
            }
            QuantMix::Q2K => ty = GgmlType::Q3K,
            _ => {}
        }
    } else if name.contains("ffn_down") {
        match mix {
            QuantMix::Q4KM if use_more_bits(layer, n_layer) => ty = GgmlType::Q6K,
            QuantMix::Q3KM => {
                ty = if layer < n_layer / 16 {
                    GgmlType::Q5K
                } else {
                    GgmlType::Q4K
                }
            }
            QuantMix::Q2K => ty = GgmlType::Q3K,
            QuantMix::Iq4Xs if layer < n_layer / 8 => ty = GgmlType::Q5K,
            _ => {}
        }
    } else if name.contains("attn_output.weight") {
        match mix {
            QuantMix::Q3KM => ty = GgmlType::Q4K,
            QuantMix::Q2K => ty = GgmlType::Q3K,
            _ => {}
        }
    }
    fallback(ty, ne0)
}

/// The IQ2_XXS, IQ1_S and IQ3_XXS mixes, modelled on unsloth's dynamic DeepSeek-V3/R1 files
/// (UD-IQ2_XXS, UD-IQ1_S; unsloth.ai/blog/deepseekr1-dynamic; UD-IQ3_XXS of the later R1/V3
/// uploads), not on llama-quantize (which refuses these types without an importance matrix): only
/// the routed experts take the low-bit type, their `ffn_down_exps` one step up in some layers (the
/// blog's "2.5/2.06-bit" and "2.06/1.56-bit" down projections, IQ3_S beside IQ3_XXS; which layers
/// is not published, so llama.cpp's `use_more_bits` split picks them); the shared experts and the
/// dense FFN's down projection are 6-bit (Q6_K), the attention, the dense FFN's gate/up and the
/// embedding 4-bit (Q4_K), `output` Q6_K.
fn dynamic_type(mix: QuantMix, name: &str, n_layer: u64) -> GgmlType {
    let (low, down_more) = match mix {
        QuantMix::Iq1S => (GgmlType::Iq1S, GgmlType::Iq2Xxs),
        QuantMix::Iq3Xxs => (GgmlType::Iq3Xxs, GgmlType::Iq3S),
        _ => (GgmlType::Iq2Xxs, GgmlType::Iq2S),
    };
    let layer = layer_of(name).unwrap_or(0);
    if name.contains("ffn_down_exps") {
        if use_more_bits(layer, n_layer) {
            down_more
        } else {
            low
        }
    } else if name.contains("_exps") {
        low
    } else if name.contains("_shexp") || name.contains("ffn_down") || name == "output.weight" {
        GgmlType::Q6K
    } else {
        GgmlType::Q4K
    }
}

/// `tensor_type_fallback`: rows that do not split into blocks of the chosen type.
fn fallback(ty: GgmlType, ne0: u64) -> GgmlType {
    if ne0.is_multiple_of(ty.block_size()) {
        return ty;
    }
    let next = match ty {
        GgmlType::Q2K | GgmlType::Q3K => GgmlType::Q4_0,
        GgmlType::Q4K => GgmlType::Q5_0,
        GgmlType::Q5K => GgmlType::Q5_1,
        GgmlType::Q6K => GgmlType::Q8_0,
        GgmlType::Iq4Xs
        | GgmlType::Iq2Xxs
        | GgmlType::Iq2Xs
        | GgmlType::Iq2S
        | GgmlType::Iq3Xxs
        | GgmlType::Iq3S
        | GgmlType::Iq1S
        | GgmlType::Iq1M => GgmlType::Iq4Nl,
        other => other,
    };
    if ne0.is_multiple_of(next.block_size()) {
        next
    } else {
        GgmlType::F16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are part of every file's bytes (`general.name`): pinned; parsed in any case.
    #[test]
    fn names_are_pinned_and_parse_in_any_case() {
        let names: Vec<&str> = QuantMix::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(QuantMix::VARIANTS, names.as_slice());
        assert_eq!(
            names.join(" "),
            "f32 q8_0 q4_k_m q3_k_m q2_k iq4_xs iq2_xxs iq1_s iq3_xxs"
        );
        for m in QuantMix::ALL {
            assert_eq!(m.to_string().to_uppercase().parse::<QuantMix>(), Ok(m));
        }
        assert_eq!(
            "q4_k".parse::<QuantMix>().unwrap_err(),
            "unknown quant mix 'q4_k' (expected one of: f32, q8_0, q4_k_m, q3_k_m, q2_k, iq4_xs, \
             iq2_xxs, iq1_s, iq3_xxs)"
        );
    }

    #[test]
    fn use_more_bits_matches_spec_for_27_layers() {
        let more: Vec<u64> = (0..27).filter(|&i| use_more_bits(i, 27)).collect();
        assert_eq!(more, vec![0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26]);
    }

    #[test]
    fn v2_lite_q4_k_m_types_match_spec() {
        let t = |name: &str, ne0: u64, nd: usize| tensor_type(QuantMix::Q4KM, name, ne0, nd, 27);
        assert_eq!(t("output.weight", 2048, 2), GgmlType::Q6K);
        assert_eq!(t("token_embd.weight", 2048, 2), GgmlType::Q4K);
        assert_eq!(t("blk.3.attn_k_b.weight", 128, 3), GgmlType::Q5_0);
        assert_eq!(t("blk.3.attn_v_b.weight", 512, 3), GgmlType::Q4K);
        assert_eq!(t("blk.0.ffn_down.weight", 10944, 2), GgmlType::Q8_0);
        assert_eq!(t("blk.5.ffn_down_exps.weight", 1408, 3), GgmlType::Q8_0);
        assert_eq!(t("blk.4.ffn_down_exps.weight", 1408, 3), GgmlType::Q5_0);
        assert_eq!(t("blk.4.ffn_down_shexp.weight", 2816, 2), GgmlType::Q4K);
        assert_eq!(t("blk.5.ffn_down_shexp.weight", 2816, 2), GgmlType::Q6K);
        assert_eq!(t("blk.4.ffn_gate_inp.weight", 2048, 2), GgmlType::F32);
        assert_eq!(t("blk.4.attn_norm.weight", 2048, 1), GgmlType::F32);
        assert_eq!(t("blk.5.attn_kv_b.weight", 512, 2), GgmlType::Q6K);
    }

    #[test]
    fn spec_counts_for_v2_lite_q4_k_m() {
        // docs/deepseek2-model.md#quant-mixes: Q4_K 229, Q5_0 41, Q6_K 13, Q8_0 13, F32 108
        // (MLA layout).
        let plan = crate::plan::tensor_plan(
            &crate::Preset::V2Lite.dims(),
            crate::Layout::Mla,
            QuantMix::Q4KM,
        );
        let count = |ty| plan.iter().filter(|t| t.ty == ty).count();
        assert_eq!(count(GgmlType::Q4K), 229);
        assert_eq!(count(GgmlType::Q5_0), 41);
        assert_eq!(count(GgmlType::Q6K), 13);
        assert_eq!(count(GgmlType::Q8_0), 13);
        assert_eq!(count(GgmlType::F32), 108);
    }

    #[test]
    fn v3_dynamic_iq_mixes_take_the_low_bit_types_in_the_routed_experts_only() {
        let t = |mix, name: &str, ne0: u64, nd: usize| tensor_type(mix, name, ne0, nd, 61);
        for (mix, low, more) in [
            (QuantMix::Iq2Xxs, GgmlType::Iq2Xxs, GgmlType::Iq2S),
            (QuantMix::Iq1S, GgmlType::Iq1S, GgmlType::Iq2Xxs),
            (QuantMix::Iq3Xxs, GgmlType::Iq3Xxs, GgmlType::Iq3S),
        ] {
            assert_eq!(t(mix, "blk.9.ffn_gate_exps.weight", 7168, 3), low);
            assert_eq!(t(mix, "blk.9.ffn_up_exps.weight", 7168, 3), low);
            // use_more_bits(i, 61): i < 7, i ≥ 53, or (i − 7) % 3 == 2.
            assert_eq!(t(mix, "blk.3.ffn_down_exps.weight", 2048, 3), more);
            assert_eq!(t(mix, "blk.10.ffn_down_exps.weight", 2048, 3), low);
            assert_eq!(t(mix, "blk.9.ffn_down_exps.weight", 2048, 3), more);
            assert_eq!(
                t(mix, "blk.9.ffn_down_shexp.weight", 2048, 2),
                GgmlType::Q6K
            );
            assert_eq!(t(mix, "blk.0.ffn_down.weight", 18432, 2), GgmlType::Q6K);
            assert_eq!(t(mix, "blk.0.ffn_gate.weight", 7168, 2), GgmlType::Q4K);
            assert_eq!(t(mix, "blk.9.attn_q_b.weight", 1536, 2), GgmlType::Q4K);
            assert_eq!(t(mix, "blk.9.attn_k_b.weight", 128, 3), GgmlType::Q5_0);
            assert_eq!(t(mix, "token_embd.weight", 7168, 2), GgmlType::Q4K);
            assert_eq!(t(mix, "output.weight", 7168, 2), GgmlType::Q6K);
            assert_eq!(t(mix, "blk.9.ffn_gate_inp.weight", 7168, 2), GgmlType::F32);
            // V2-Lite's 1408-wide expert rows do not split into 256-blocks.
            assert_eq!(
                t(mix, "blk.10.ffn_down_exps.weight", 1408, 3),
                GgmlType::Iq4Nl
            );
        }
    }

    #[test]
    fn v2_lite_q2_k_and_iq4_xs_types_match_mainline() {
        let q2 = |name: &str, ne0: u64, nd: usize| tensor_type(QuantMix::Q2K, name, ne0, nd, 27);
        assert_eq!(q2("token_embd.weight", 2048, 2), GgmlType::Q2K);
        assert_eq!(q2("output.weight", 2048, 2), GgmlType::Q6K);
        assert_eq!(q2("blk.3.attn_q.weight", 2048, 2), GgmlType::Q2K);
        assert_eq!(q2("blk.3.attn_k_b.weight", 128, 3), GgmlType::Q4_0);
        assert_eq!(q2("blk.3.attn_v_b.weight", 512, 3), GgmlType::Q2K);
        assert_eq!(q2("blk.3.attn_kv_b.weight", 512, 2), GgmlType::Q3K);
        assert_eq!(q2("blk.3.attn_output.weight", 2048, 2), GgmlType::Q3K);
        assert_eq!(q2("blk.0.ffn_down.weight", 10944, 2), GgmlType::Q4_0);
        assert_eq!(q2("blk.4.ffn_down_exps.weight", 1408, 3), GgmlType::Q4_0);
        assert_eq!(q2("blk.4.ffn_down_shexp.weight", 2816, 2), GgmlType::Q3K);
        assert_eq!(q2("blk.4.ffn_gate_exps.weight", 2048, 3), GgmlType::Q2K);
        let iq = |name: &str, ne0: u64, nd: usize| tensor_type(QuantMix::Iq4Xs, name, ne0, nd, 27);
        assert_eq!(iq("token_embd.weight", 2048, 2), GgmlType::Iq4Xs);
        assert_eq!(iq("output.weight", 2048, 2), GgmlType::Q6K);
        assert_eq!(iq("blk.3.attn_k_b.weight", 128, 3), GgmlType::Iq4Nl);
        assert_eq!(iq("blk.3.attn_output.weight", 2048, 2), GgmlType::Iq4Xs);
        // Layers below n_layer/8 = 3: Q5_K (no importance matrix), 1408-wide rows as Q5_1.
        assert_eq!(iq("blk.0.ffn_down.weight", 10944, 2), GgmlType::Q5_1);
        assert_eq!(iq("blk.2.ffn_down_exps.weight", 1408, 3), GgmlType::Q5_1);
        assert_eq!(iq("blk.2.ffn_down_shexp.weight", 2816, 2), GgmlType::Q5K);
        assert_eq!(iq("blk.3.ffn_down_exps.weight", 1408, 3), GgmlType::Iq4Nl);
        assert_eq!(iq("blk.3.ffn_down_shexp.weight", 2816, 2), GgmlType::Iq4Xs);
    }

    #[test]
    fn fallbacks_follow_mainline() {
        assert_eq!(fallback(GgmlType::Q3K, 128), GgmlType::Q4_0);
        assert_eq!(fallback(GgmlType::Q5K, 96), GgmlType::Q5_1);
        assert_eq!(fallback(GgmlType::Q6K, 16), GgmlType::F16);
        assert_eq!(fallback(GgmlType::Q4K, 256), GgmlType::Q4K);
    }
}
