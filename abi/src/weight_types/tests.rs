//! The registry's rows and the kernels it names.

use super::*;

#[test]
fn rows_are_distinct_and_round_trip() {
    for (i, &t) in GemvType::ALL.iter().enumerate() {
        assert_eq!(GemvType::from_ggml_id(t.ggml_id()), Some(t));
        for &u in &GemvType::ALL[i + 1..] {
            assert_ne!(t.tag(), u.tag());
            assert_ne!(t.ggml_id(), u.ggml_id());
        }
        assert_eq!(t.unit().elems as usize % t.block_elems(), 0);
        // d first; every field inside the block, two bytes apart at least.
        let f = t.f16_fields();
        assert_eq!(f.is_empty(), t.is_float() || t == GemvType::Iq1M);
        assert!(f.iter().all(|&o| o + 2 <= t.block_bytes()));
        assert!(f.windows(2).all(|w| w[0].abs_diff(w[1]) >= 2));
    }
    assert_eq!(GemvType::from_ggml_id(9), None); // Q8_1: activations only
    assert_eq!(GemvType::Q4K.plain().name, "gemv_q4k_q8_1");
    assert_eq!(
        GemvType::down(GemvType::Q5_0, GemvType::Q4K).map(|d| d.name),
        Some("moe_down_q5_0_q4k")
    );
    assert_eq!(GemvType::down(GemvType::Q4K, GemvType::Q5_0), None);
    assert_eq!(GemvType::Iq3S.gate_up().name, "moe_gate_up_iq3_s");
    assert_eq!(
        GemvType::Iq3S.gate_up_router().name,
        "moe_gate_up_router_iq3_s"
    );
    assert_eq!(
        GemvType::gate_up_router_mixed(GemvType::Iq1S, GemvType::Q6K).map(|d| d.name),
        Some("moe_gate_up_router_iq1_s_q6k")
    );
    // The fused kernels cover exactly the pairs the plain ones do.
    for &r in &GemvType::ALL {
        for &s in &GemvType::ALL {
            assert_eq!(
                GemvType::gate_up_mixed(r, s).is_some(),
                GemvType::gate_up_router_mixed(r, s).is_some(),
                "{r:?} with {s:?}"
            );
        }
    }
    assert_eq!(GemvType::Q5_0.argmax(), None);
    assert_eq!(GemvType::Q4K.mmq().map(|d| d.name), Some("mmq_q4k"));
    assert_eq!(
        GemvType::Iq4Nl.mmq_moe().map(|d| d.name),
        Some("mmq_moe_iq4_nl")
    );
    assert!(GemvType::ALL
        .iter()
        .all(|t| t.mmq().is_some() == GemvType::MMQ.contains(t)
            && t.mmq_moe().is_some() == t.mmq().is_some()));
}

/// A `chain_ffn_rope_kb` row chains a `chain_ffn` row's launch and a `chain_rope_kb` row's.
#[test]
fn ffn_rope_kb_rows_chain_registry_rows() {
    for &(g, d, r) in CHAIN_FFN_ROPE_KB {
        assert!(CHAIN_FFN.contains(&(g, d)), "{g:?} {d:?}: no chain_ffn row");
        assert!(CHAIN_ROPE_KB.contains(&r), "{r:?}: no chain_rope_kb row");
        assert!(GemvType::moe_ffn_rope_kb(g, d, r).is_some());
    }
    assert_eq!(
        GemvType::moe_ffn_rope_kb(
            (GemvType::Q4K, GemvType::Q4K),
            (GemvType::Q5_0, GemvType::Q4K),
            (GemvType::Q4K, GemvType::Q5_0)
        )
        .map(|k| k.name),
        Some("moe_ffn_rope_kb_q4k_q4k_q5_0_q4k_q4k_q5_0")
    );
}

#[test]
fn kernel_names_are_unique() {
    for (i, a) in KERNELS.iter().enumerate() {
        assert!(
            KERNELS[i + 1..].iter().all(|b| b.name != a.name),
            "{}",
            a.name
        );
    }
}
