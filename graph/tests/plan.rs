//! The plan built from synthetic headers: node counts, buffer accounting, type errors, and the
//! check against a kernel table.

mod support;

use ingot_abi::launch::{KernelDesc, Param};
use ingot_gguf::GgmlType;
use ingot_graph::{build_plan, BufferKind, NodeArg, PlanError, PlanOptions};
use ingot_synth::{Layout, Preset, QuantMix};

#[test]
fn v2_lite_plan_counts_and_bytes() {
    let h = support::header(Preset::V2Lite, Layout::Mla, QuantMix::Q4KM);
    let ctx = 4096;
    let plan = build_plan(&h, PlanOptions::for_ctx(ctx)).expect("v2-lite plan");
    let s = plan.summary();
    println!("v2-lite q4_k_m mla, ctx {ctx}: {s}");
    println!("kernels: {}", s.kernels.join(" "));
    for (i, n) in plan
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.layer.is_none_or(|l| l <= 1))
    {
        println!("  {i:3} {:<28} {}", n.label, n.kernel);
    }
    assert_eq!(s.nodes_per_layer.len(), 27);
    assert_eq!(
        s.nodes,
        s.nodes_per_layer.iter().sum::<usize>() + s.nodes_outside_layers
    );
    // Every tensor of an MLA-layout file is read by some node and uploaded exactly once.
    let file_bytes: u64 = h.tensors.iter().map(|t| t.nbytes).sum();
    assert_eq!(s.weight_bytes, file_bytes);
    // 27 layers x ctx rows x (512 + 64) f16.
    assert_eq!(s.kv_cache_bytes, 27 * ctx as u64 * 576 * 2);
    // With every fused kernel in the committed PTX, a layer is attn_q+kv_a with the rope as
    // its tail and attn_k_b in one chained launch (gemv2_rope_kb: q4k pair, q5_0 attn_k_b),
    // flash, the merge with attn_v_b and attn_output in one chained launch (attn_merge_v_b_o:
    // attn_v_b and attn_output are both q4k; its tail writes ffn_norm), then a dense layer's
    // gate_up and down (5), a MoE layer's FFN in one chained launch: gate/up with the router
    // gemv and routing, and down (moe_ffn_q4k_q4k_*: 64 experts); each FFN down's tail
    // writes the next layer's attn_norm (the last layer's: output_norm), and the embedding
    // fetch's tail writes layer 0's, so no layer has an attn_norm node (5 in the dense layer
    // 0). A MoE layer's FFN and the next layer's
    // projections are one launch (moe_ffn_rope_kb_*, the FFN's layer's node): layer 1's
    // projections follow the dense FFN (4 nodes), every later layer's join the FFN before
    // (3). The head is lm_head+argmax (its last block advances the state), after the
    // embedding fetch.
    assert_eq!(s.nodes_per_layer[0], 5, "dense layer 0");
    assert_eq!(s.nodes_per_layer[1], 4, "the first MoE layer");
    assert!(s.nodes_per_layer[2..].iter().all(|&n| n == 3), "{s:?}");
    let joined = |p: &ingot_graph::Plan| {
        p.nodes
            .iter()
            .filter(|n| n.kernel.starts_with("moe_ffn_rope_kb_q4k_q4k_"))
            .count()
    };
    assert_eq!(joined(&plan), 25);
    assert_eq!(kernels_in(&plan, "attn_merge_v_b_o_q4k"), 27);
    assert_eq!(kernels_in(&plan, "attn_merge_v_b_q4k"), 0);
    assert_eq!(kernels_in(&plan, "moe_down_q4k_q4k"), 0);
    assert_eq!(kernels_in(&plan, "attn_merge_q8_1"), 0);
    assert_eq!(kernels_in(&plan, "gemv2_rope_kb_q4k_q5_0"), 2);
    // Kept apart (`chain_layers` off): every MoE layer 4 nodes, the same launches otherwise.
    let apart = build_plan(
        &h,
        PlanOptions {
            chain_layers: false,
            ..PlanOptions::for_ctx(ctx)
        },
    )
    .expect("plan");
    let a = apart.summary();
    assert!(a.nodes_per_layer[1..].iter().all(|&n| n == 4), "{a:?}");
    assert_eq!((joined(&apart), a.nodes), (0, s.nodes + 25));
    assert_eq!(kernels_in(&apart, "gemv2_rope_kb_q4k_q5_0"), 27);
    assert_eq!(kernels_in(&plan, "gemv2_rope_q4k_q8_1"), 0);
    assert_eq!(kernels_in(&plan, "gemv_grouped_q5_0_q8_1"), 0);
    assert_eq!(kernels_in(&plan, "rope_kv_q8_1"), 0);
    let norms = |k: &str| kernels_in(&plan, k);
    assert_eq!(norms("rmsnorm_q8_1") + norms("rmsnorm_q8_1_f32"), 0);
    // The embedding fetch (the first node) writes layer 0's attn_norm.
    let embed = &plan.nodes[0];
    let d = ingot_abi::launch::EMBED_Q4K.desc;
    let mode = d
        .params
        .iter()
        .position(|p| p.name == "norm")
        .expect("a norm parameter");
    assert_eq!(embed.kernel, d.name);
    assert!(matches!(
        embed.args[mode],
        ingot_graph::NodeArg::U32(ingot_abi::launch::DOWN_NORM_Q8_1_F32)
    ));
    assert_eq!(kernels_in(&plan, "moe_router_f32"), 0);
    // The q4_k_m mix's down pairs: q5_0 + q4k and q8_0 + q6k; the last layer's FFN alone.
    let chained = kernels_in(&plan, "moe_ffn_q4k_q4k_q5_0_q4k")
        + kernels_in(&plan, "moe_ffn_q4k_q4k_q8_0_q6k");
    assert_eq!((chained, joined(&plan)), (1, 25));
    assert_eq!(kernels_in(&plan, "moe_gate_up_router_q4k"), 0);
    // The dense layer's gate/up runs the plain kernel (no router code).
    assert_eq!(kernels_in(&plan, "moe_gate_up_q4k"), 1);
    assert_eq!(
        kernels_in(&plan, "moe_route") + kernels_in(&plan, "gemv_f32"),
        0
    );
    assert_eq!(s.nodes_outside_layers, 2);
    let kernels = |k: &str| plan.nodes.iter().filter(|n| n.kernel == k).count();
    assert_eq!(
        kernels("flash_latent_mma"),
        27,
        "16 heads run on tensor cores"
    );
    assert_eq!(kernels("argmax_step"), 0);
    assert!(plan.device_argmax);
}

#[test]
fn attention_split_fills_the_gpu() {
    use ingot_abi::launch::{flash_block_heads, flash_segments};
    // One block per SM at most (a flash block's registers fill an SM) whatever the context:
    // while the blocks a context leaves without a segment can share the heads of those that
    // have one, segments of at least 2 tiles of 32 rows (64 rows); past that, every block a
    // segment of whole tiles.
    let o = PlanOptions::for_device(4096, 82);
    assert_eq!(o.flash_blocks, 82);
    assert_eq!(o.flash_split(16), 82);
    // 128 tiles: 64 segments of 2 would leave 18 SMs idle; 82 of 1-2 tiles fill them.
    assert_eq!(flash_segments(4096, o.flash_split(16) as u32).count, 82);
    let deep = PlanOptions::for_device(32_768, 82);
    assert_eq!(deep.flash_split(16), 82);
    // 1024 tiles over 82 blocks: 12-13 tiles each, every SM streaming.
    let count = flash_segments(32_768, deep.flash_split(16) as u32).count;
    assert_eq!(count, 82, "{count} blocks");
    // A short context: one segment at depth 0, its 16 heads one a block; 4 segments (depth
    // 200), one head a block (64 blocks of the 82); 32 segments (depth 2000), 8 heads a block;
    // 64 segments, 16 heads a block.
    let short = PlanOptions::for_device(100, 132).flash_split(16) as u32;
    assert_eq!(short, 132);
    assert_eq!(flash_block_heads(flash_segments(1, short).count, short), 1);
    assert_eq!(flash_block_heads(flash_segments(201, 82).count, 82), 1);
    assert_eq!(flash_block_heads(flash_segments(2001, 82).count, 82), 8);
    assert_eq!(flash_block_heads(flash_segments(4096, 82).count, 82), 16);
    assert_eq!(PlanOptions::for_device(1 << 20, 132).flash_split(16), 132);
    // Head groups share the blocks: GLM-4.7-Flash's 20 heads (2 groups) on 82 SMs take 41
    // each, Kimi-K2's 64 (4 groups) 20, V3's 128 (8) 10; on 132 SMs the 2 groups take 66
    // each; at least one.
    assert_eq!(o.flash_split(20), 41);
    assert_eq!(o.flash_split(64), 20);
    assert_eq!(o.flash_split(128), 10);
    assert_eq!(PlanOptions::for_device(4096, 132).flash_split(20), 66);
    assert_eq!(PlanOptions::for_device(1 << 20, 132).flash_split(20), 66);
    assert_eq!(PlanOptions::for_device(100, 82).flash_split(128), 10);
    assert_eq!(PlanOptions::for_device(100, 4).flash_split(128), 1);
    assert_eq!(
        PlanOptions::for_ctx(4096),
        PlanOptions::for_device(4096, 82)
    );
}

#[test]
fn legacy_layout_derives_absorbed_weights() {
    let h = support::header_for(&support::tiny64(), Layout::Legacy, QuantMix::Q4KM);
    let plan = build_plan(&h, PlanOptions::for_ctx(64)).expect("tiny legacy plan");
    let derived: Vec<&str> = plan
        .buffers
        .iter()
        .filter(|b| matches!(b.kind, BufferKind::Derived { .. }))
        .map(|b| b.name.as_str())
        .collect();
    // k_b and v_b for each of the 3 layers.
    assert_eq!(derived.len(), 6, "{derived:?}");
    assert!(derived.contains(&"blk.2.attn_k_b.weight"));
    let mla = build_plan(
        &support::header_for(&support::tiny64(), Layout::Mla, QuantMix::Q4KM),
        PlanOptions::for_ctx(64),
    )
    .expect("tiny mla plan");
    // Same step, same launches; only where the absorbed weights come from differs.
    let kernels =
        |p: &ingot_graph::Plan| p.nodes.iter().map(|n| n.label.clone()).collect::<Vec<_>>();
    assert_eq!(kernels(&plan), kernels(&mla));
}

#[test]
fn unsupported_weight_type_names_the_tensor() {
    let mut h = support::header_for(&support::tiny64(), Layout::Mla, QuantMix::Q4KM);
    let t = h
        .tensors
        .iter_mut()
        .find(|t| t.name == "blk.1.attn_q.weight")
        .expect("tensor exists");
    t.ty = GgmlType::Tq2_0;
    t.nbytes = t.ty.row_bytes(t.ne[0]).expect("256-multiple rows") * t.ne[1];
    let err = build_plan(&h, PlanOptions::for_ctx(64)).expect_err("TQ2_0 has no gemv");
    let msg = err.to_string();
    assert!(matches!(err, PlanError::UnsupportedType { .. }), "{msg}");
    assert!(
        msg.contains("blk.1.attn_q.weight") && msg.contains("TQ2_0"),
        "{msg}"
    );
}

/// The tiny preset's rows of 32 weights are refused with an error naming the tensor.
#[test]
fn rows_the_gemv_cannot_take_name_the_tensor() {
    // The preset's attn_k_b rows of 32 (one q8_1 block) suit the grouped gemv (chained into
    // the projections' launch: `gemv2_rope_kb_q4k_q5_0`).
    let h = support::header(Preset::Tiny, Layout::Mla, QuantMix::Q4KM);
    let plan = build_plan(&h, PlanOptions::for_ctx(64)).expect("tiny plan");
    assert!(plan
        .nodes
        .iter()
        .any(|n| n.label == "blk.0 attn_q+attn_kv_a_mqa+rope_kv+attn_k_b"));
    // Expert rows of 96 (an odd number of 32-weight blocks) do not suit the fused MoE kernels,
    // which take 64-weight units.
    let dims = ingot_synth::Dims {
        ff_expert: 96,
        ..Preset::Tiny.dims()
    };
    let h = support::header_for(&dims, Layout::Mla, QuantMix::Q4KM);
    let err = build_plan(&h, PlanOptions::for_ctx(64)).expect_err("expert rows of 96");
    assert!(matches!(err, PlanError::UnsupportedShape { .. }), "{err}");
    assert!(err.to_string().contains("ffn_down_exps.weight"), "{err}");
    assert!(err.to_string().contains("multiple of 64"), "{err}");
}

/// The down kernel stages every routed slot's and the shared experts' activations in shared
/// memory: 8 slots of 2,048 and one shared expert of 2,048 (V3, Kimi-K2: 576 q8_1 blocks) fill
/// the stage exactly; a ninth slot does not fit, and the plan says so instead of overflowing it.
#[test]
fn moe_down_activations_beyond_the_stage_are_refused() {
    use ingot_abi::launch::{moe_down_stage_blocks, MOE_DOWN_STAGE_BLOCKS};
    let dims = |n_used| ingot_synth::Dims {
        n_expert_used: n_used,
        n_shared: 1,
        ff_expert: 2048,
        ..Preset::Tiny.dims()
    };
    assert_eq!(
        moe_down_stage_blocks(8, 2048, 2048),
        MOE_DOWN_STAGE_BLOCKS as u64
    );
    let h = support::header_for(&dims(8), Layout::Mla, QuantMix::Q4KM);
    build_plan(&h, PlanOptions::for_ctx(64)).expect("8 slots of 2048 fit the stage");
    let h = support::header_for(&dims(9), Layout::Mla, QuantMix::Q4KM);
    let err = build_plan(&h, PlanOptions::for_ctx(64)).expect_err("9 slots of 2048");
    assert!(matches!(err, PlanError::UnsupportedModel(_)), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("moe_down") && msg.contains("640 q8_1 blocks") && msg.contains("576"),
        "{msg}"
    );
}

#[test]
fn bad_context_is_an_error() {
    let h = support::header(Preset::Tiny, Layout::Mla, QuantMix::F32);
    for ctx in [0, 163_841] {
        let err = build_plan(&h, PlanOptions::for_ctx(ctx)).expect_err("ctx out of range");
        assert!(matches!(err, PlanError::Context { .. }), "{err}");
    }
}

/// A kernel table made from the plan's own nodes passes the check; changing one parameter's
/// kind or count, or dropping a kernel, fails it with an error that names the node.
#[test]
fn check_against_a_kernel_table() {
    let h = support::header_for(&support::tiny64(), Layout::Mla, QuantMix::Q4KM);
    let plan = build_plan(&h, PlanOptions::for_ctx(64)).expect("plan");
    let table: Vec<&'static KernelDesc> = plan
        .summary()
        .kernels
        .iter()
        .map(|name| {
            let node = plan.nodes.iter().find(|n| &n.kernel == name).expect("used");
            let params: Vec<Param> = node
                .args
                .iter()
                .map(|a| Param {
                    name: "p",
                    kind: a.kind(),
                })
                .collect();
            &*Box::leak(Box::new(KernelDesc {
                name: Box::leak(name.clone().into_boxed_str()),
                params: Box::leak(params.into_boxed_slice()),
                block: [32, 1, 1],
                items_per_block: 1,
                shared_bytes: 0,
            }))
        })
        .collect();
    let ptx: String = table
        .iter()
        .map(|d| format!(".entry {}(\n", d.name))
        .collect();
    let lookup = |name: &str| table.iter().copied().find(|d| d.name == name);
    assert_eq!(
        plan.check(lookup, &ptx).expect("consistent").len(),
        plan.nodes.len()
    );

    let missing = plan
        .check(lookup, &ptx.replace(".entry flash_latent_mma(", ""))
        .expect_err("flash_latent_mma removed");
    assert!(
        missing.to_string().contains("flash_latent_mma"),
        "{missing}"
    );

    let mut bad = plan.clone();
    let i = bad
        .nodes
        .iter()
        .position(|n| n.kernel == "moe_gate_up_q4k")
        .expect("moe");
    bad.nodes[i].args[3] = NodeArg::F32(1.0);
    let err = bad.check(lookup, &ptx).expect_err("kind changed");
    assert!(
        matches!(err, PlanError::ArgKind { node, index: 3, .. } if node == i),
        "{err}"
    );
    bad.nodes[i].args.pop();
    let err = bad.check(lookup, &ptx).expect_err("count changed");
    assert!(matches!(err, PlanError::ArgCount { .. }), "{err}");
}

/// Every V2-Lite variant the synthesizer makes plans into kernels the committed PTX exports,
/// with argument lists that match their descriptors.
#[test]
fn v2_lite_variants_fit_the_committed_kernels() {
    let mut failures = Vec::new();
    for layout in [Layout::Mla, Layout::Legacy] {
        for mix in [QuantMix::Q4KM, QuantMix::Q3KM, QuantMix::Q8_0] {
            let h = support::header(Preset::V2Lite, layout, mix);
            let checked = build_plan(&h, PlanOptions::for_ctx(4096))
                .and_then(|p| p.check_committed().map(|_| p.summary()));
            match checked {
                Ok(s) => println!("v2-lite {layout:?} {mix}: {s}"),
                Err(e) => failures.push(format!("v2-lite {layout:?} {mix}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn kernels_in(plan: &ingot_graph::Plan, k: &str) -> usize {
    plan.nodes.iter().filter(|n| n.kernel == k).count()
}

/// A low-rank query (tiny-v3: `attn_q_a`, `attn_q_a_norm`, `attn_q_b`) plans as the first
/// product beside `attn_kv_a_mqa` with the fused rmsnorm + q8_1 of its output as the tail
/// (`gemv2_norm_*`), and the `attn_q_b` gemv with the rope as its tail (`gemv2_rope_*` with no
/// second matrix); where the registry has the types' row, those and `attn_k_b` are one chained
/// launch (`gemv2_norm_rope_kb_*`). Every other node of the layer is the full-rank plan's.
#[test]
fn low_rank_query_plans_q_a_norm_q_b() {
    for mix in [QuantMix::Q4KM, QuantMix::Q8_0] {
        let h = synth_header(Preset::TinyV3, mix);
        let plan = build_plan(&h, PlanOptions::for_ctx(256)).expect("tiny-v3 plan");
        plan.check_committed().expect("committed kernels");
        let labels: Vec<&str> = plan.nodes.iter().map(|n| n.label.as_str()).collect();
        for il in 0..3 {
            let at = |s: &str| {
                labels
                    .iter()
                    .position(|l| l.starts_with(&format!("blk.{il} {s}")))
                    .unwrap_or_else(|| panic!("{mix}: no node blk.{il} {s} in {labels:?}"))
            };
            let first = at("attn_q_a+attn_kv_a_mqa+attn_q_a_norm");
            let q_a = &plan.nodes[first];
            // All three chained where the registry has the row (q8_0's Q8_0 + Q8_0); not the
            // tiny q4_k_m's (a Q5_0 attn_q_b beside Q4_K attn_q_a).
            if mix == QuantMix::Q8_0 {
                assert!(
                    q_a.kernel.starts_with("gemv2_norm_rope_kb_"),
                    "{}",
                    q_a.kernel
                );
                assert!(
                    q_a.label.ends_with("+attn_q_b+rope_kv+attn_k_b"),
                    "{}",
                    q_a.label
                );
                let q_b = format!("blk.{il} attn_q_b");
                assert!(!labels.iter().any(|l| l.starts_with(&q_b)), "{labels:?}");
                continue;
            }
            assert!(q_a.kernel.starts_with("gemv2_norm_"), "{}", q_a.kernel);
            assert!(
                !q_a.kernel.starts_with("gemv2_norm_rope_kb_"),
                "{}",
                q_a.kernel
            );
            let rope = at("attn_q_b+rope_kv");
            assert!(first < rope);
            let q_b = &plan.nodes[rope];
            assert!(q_b.kernel.starts_with("gemv2_rope_"), "{}", q_b.kernel);
            assert!(!q_b.label.ends_with("+attn_k_b"), "{}", q_b.label);
            assert_eq!(q_b.args[7], NodeArg::U32(0), "no second matrix");
        }
        assert!(
            !labels.iter().any(|l| l.ends_with(" rope_kv")),
            "{labels:?}"
        );
        assert!(
            !labels.iter().any(|l| l.ends_with(" attn_q_a_norm")),
            "{labels:?}"
        );
        assert!(!labels.iter().any(|l| l.ends_with(" attn_q")), "{labels:?}");
        let s = plan.summary();
        let file_bytes: u64 = h.tensors.iter().map(|t| t.nbytes).sum();
        assert_eq!(s.weight_bytes, file_bytes, "{mix}: every tensor read once");
    }
}

/// The header `ingot synth` writes for `preset` (every key of the family: q_lora, routing).
fn synth_header(preset: Preset, mix: QuantMix) -> ingot_gguf::Gguf {
    ingot_synth::header(&ingot_synth::SynthOptions {
        preset,
        layout: Layout::Mla,
        mix,
        seed: 0,
    })
    .expect("synthetic header")
}

/// The full-size members of the family plan from their headers alone (no weights) into kernels
/// the committed PTX exports: DeepSeek-V3 (128 heads, 256 experts in 8 groups), Kimi-K2 (64
/// heads, 384 experts) and GLM-4.7-Flash (20 heads: a head group of 16 and a partial one of 4).
#[test]
fn full_size_family_plans() {
    let mut failures = Vec::new();
    for (preset, flash) in [
        (Preset::V3, "flash_latent_mma"),
        (Preset::K2, "flash_latent_mma"),
        (Preset::Glm47Flash, "flash_latent_mma"),
    ] {
        let h = synth_header(preset, QuantMix::Q4KM);
        match build_plan(&h, PlanOptions::for_ctx(4096)).and_then(|p| {
            p.check_committed()?;
            Ok(p)
        }) {
            Ok(plan) => {
                let s = plan.summary();
                println!("{preset} q4_k_m: {s}");
                let c = ingot_model::ModelConfig::from_gguf(&h).expect("config");
                assert_eq!(kernels_in(&plan, flash), c.n_layer, "{preset}");
                assert_eq!(kernels_in(&plan, "attn_q_b"), 0);
                assert_eq!(
                    plan.nodes
                        .iter()
                        .filter(|n| n.label.contains("attn_q_b+rope_kv"))
                        .count(),
                    c.n_layer,
                    "{preset}: one attn_q_b (with the rope) per layer"
                );
                // Up to 64 experts the router runs in the gate/up launch (with the down kernel
                // chained in where the registry has the types' moe_ffn kernel); more (V3,
                // Kimi-K2) route in moe_router_f32 before the plain gate/up kernel (no router
                // code).
                let fused = plan
                    .nodes
                    .iter()
                    .filter(|n| {
                        n.kernel.starts_with("moe_gate_up_router_")
                            || n.kernel.starts_with("moe_ffn_")
                    })
                    .count();
                let apart = kernels_in(&plan, "moe_router_f32");
                let moe = c.n_moe_layers();
                let want = if c.n_expert <= 64 { (moe, 0) } else { (0, moe) };
                assert_eq!((fused, apart), want, "{preset}: {} experts", c.n_expert);
            }
            Err(e) => failures.push(format!("{preset}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Mistral Large 3's attention temperature: the position advances on the device, so the plan
/// carries the factor of every position as one constant table (llama.cpp's formula, evaluated
/// by the host as the CPU backends do) and every flash node reads it.
#[test]
fn attention_temperature_is_a_per_position_table() {
    use ingot_abi::launch::{TEMPERATURE_NONE, TEMPERATURE_TABLE};
    use ingot_gguf::MetaValue;
    let plain = build_plan(
        &synth_header(Preset::TinyV3, QuantMix::Q4KM),
        PlanOptions::for_ctx(64),
    )
    .expect("plan");
    let mut h = synth_header(Preset::TinyV3, QuantMix::Q4KM);
    h.kv.push((
        "deepseek2.attention.temperature_scale".into(),
        MetaValue::F32(0.1),
    ));
    h.kv.push((
        "deepseek2.attention.temperature_length".into(),
        MetaValue::U32(8),
    ));
    let plan = build_plan(&h, PlanOptions::for_ctx(64)).expect("temperature planned");
    assert_eq!(plan.nodes.len(), plain.nodes.len(), "no extra launch");
    let c = ingot_model::ModelConfig::from_gguf(&h).expect("config");
    let t = c.attn_temperature.as_ref().expect("temperature");
    let table = plan
        .buffers
        .iter()
        .position(|b| b.name == "const.attn_temperature")
        .expect("table");
    let BufferKind::Constant { data } = &plan.buffers[table].kind else {
        panic!("the table is not a constant");
    };
    let want: Vec<u8> = (0..64).flat_map(|p| t.factor(p).to_le_bytes()).collect();
    assert_eq!(data, &want);
    let flags = |plan: &ingot_graph::Plan| -> Vec<(Option<usize>, NodeArg)> {
        plan.nodes
            .iter()
            .filter(|n| n.kernel.starts_with("flash_latent"))
            .map(|n| {
                // The flash kernels' parameters by name (`FlashLatentArgs`).
                let at = |name: &str| {
                    let params = ingot_abi::launch::FLASH_LATENT_MMA.desc.params;
                    n.args[params.iter().position(|p| p.name == name).unwrap()]
                };
                (
                    match at("temp") {
                        NodeArg::Buf(r) => Some(r.buf.0 as usize),
                        _ => None,
                    },
                    at("temperature"),
                )
            })
            .collect()
    };
    let with = flags(&plan);
    assert_eq!(with.len(), c.n_layer);
    assert!(with
        .iter()
        .all(|&(b, f)| b == Some(table) && f == NodeArg::U32(TEMPERATURE_TABLE)));
    assert!(flags(&plain)
        .iter()
        .all(|&(_, f)| f == NodeArg::U32(TEMPERATURE_NONE)));
}

/// Merged expert gate/up tensors: the same launches, the gate/up kernel reading both halves
/// through its gate pointer (`GATE_UP_MERGED`).
#[test]
fn merged_gate_up_experts_are_planned() {
    use ingot_abi::launch::{GATE_UP_MERGED, GATE_UP_SEPARATE};
    let split = synth_header(Preset::TinyV3, QuantMix::Q4KM);
    let mut h = split.clone();
    let mut merged = Vec::new();
    for t in &h.tensors {
        if t.name.ends_with("ffn_up_exps.weight") {
            continue;
        }
        let mut t = t.clone();
        if let Some(prefix) = t.name.strip_suffix("ffn_gate_exps.weight") {
            t.name = format!("{prefix}ffn_gate_up_exps.weight");
            t.ne[1] *= 2;
        }
        merged.push(t);
    }
    h.tensors = merged;
    let c = ingot_model::ModelConfig::from_gguf(&h).expect("a merged file configures");
    assert_eq!(c.gate_up, ingot_model::config::ExpertGateUp::Merged);
    let layouts = |h: &ingot_gguf::Gguf| -> (usize, Vec<(String, NodeArg)>) {
        let plan = build_plan(h, PlanOptions::for_ctx(64)).expect("plan");
        let gate_up = plan
            .nodes
            .iter()
            .filter(|n| n.label.ends_with("moe_gate_up_swiglu"))
            .map(|n| {
                let NodeArg::Buf(gate) = n.args[2] else {
                    panic!("gate is not a buffer")
                };
                // `layout`, the 13th argument with or without the router's after it.
                (plan.buffers[gate.buf.0 as usize].name.clone(), n.args[12])
            })
            .collect();
        (plan.nodes.len(), gate_up)
    };
    let (n_split, split) = layouts(&split);
    let (n_merged, merged) = layouts(&h);
    assert_eq!(n_split, n_merged);
    assert_eq!(merged.len(), c.n_moe_layers());
    for ((sname, sflag), (mname, mflag)) in split.iter().zip(&merged) {
        assert!(
            sname.ends_with("ffn_gate_exps.weight") && *sflag == NodeArg::U32(GATE_UP_SEPARATE)
        );
        assert!(
            mname.ends_with("ffn_gate_up_exps.weight") && *mflag == NodeArg::U32(GATE_UP_MERGED)
        );
    }
}

/// The flash launch hands the FFN's first weight rows ahead past the merge; the merge streams its
/// `attn_output` weight evict-first (`Node::l2_streaming`) so those lines stay in L2. In every
/// layer exactly the launch that reads `attn_output` carries the mark, on that weight among its
/// own arguments. V2-Lite's and GLM-4.7-Flash's merges (the latter's `attn_output` alone 5.6 MiB,
/// more than the handoff) both let the flash hand the shared expert's gate rows ahead; Kimi-K2's
/// `attn_v_b` (64 heads, 2.25 MiB) and the 4 MiB handoff would not fit a 6 MiB L2, so its flash
/// hands the merge its own weights.
#[test]
fn the_merge_streams_attn_output_past_the_lines_handed_ahead() {
    for (preset, past_merge) in [
        (Preset::V2Lite, true),
        (Preset::Glm47Flash, true),
        (Preset::K2, false),
    ] {
        let h = synth_header(preset, QuantMix::Q4KM);
        let plan = build_plan(&h, PlanOptions::for_ctx(256)).expect("plan");
        let descs = plan.check_committed().expect("committed kernels");
        let mut marked = 0;
        for (n, d) in plan.nodes.iter().zip(&descs) {
            if n.kernel.starts_with("flash_latent") {
                let k = d
                    .params
                    .iter()
                    .position(|p| p.name == "next_a")
                    .expect("next_a");
                let NodeArg::Buf(r) = n.args[k] else {
                    panic!("next_a is a buffer")
                };
                let handed = &plan.buffers[r.buf.0 as usize].name;
                let ffn = handed.ends_with("ffn_gate_shexp.weight")
                    || handed.ends_with("ffn_gate.weight");
                let merge = handed.ends_with("attn_v_b.weight");
                assert!(if past_merge { ffn } else { merge }, "{preset:?}: {handed}");
            }
            let Some(w) = n.l2_streaming else {
                continue;
            };
            marked += 1;
            let layer = n.layer.expect("a layer's launch");
            let decl = &plan.buffers[w.0 as usize];
            assert_eq!(decl.name, format!("blk.{layer}.attn_output.weight"));
            assert!(matches!(decl.kind, BufferKind::Weight { .. }));
            assert!(n
                .args
                .iter()
                .any(|a| matches!(a, NodeArg::Buf(r) if r.buf == w)));
        }
        assert_eq!(marked, plan.summary().nodes_per_layer.len(), "{preset:?}");
    }
}
