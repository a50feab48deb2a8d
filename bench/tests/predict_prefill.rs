//! The prediction of a prefill chunk (`ingot plan --prefill N --predict CARD`): the bucket's plan
//! counted with its token word set and an even routing, so the routed experts' products read
//! every expert a chunk of that many tokens touches, and the speed is the chunk's tokens over
//! its time.

use ingot_bench::predict::{card_named, plan_table, TableOptions, DEFAULT_CONSTANTS};
use ingot_synth::{header, Layout, Preset, QuantMix, SynthOptions};

#[test]
fn a_chunk_is_counted_with_every_expert_it_touches_and_timed_per_token() {
    let h = header(&SynthOptions {
        preset: Preset::Lite4l,
        layout: Layout::Mla,
        mix: QuantMix::Q4KM,
        seed: 0,
    })
    .unwrap();
    let card = card_named("3090").unwrap();
    let opts = TableOptions {
        ctx: 128,
        depth: 0,
        card: Some(card),
        max_blocks: 3,
        constants: DEFAULT_CONSTANTS,
        expert_cache: None,
        cache_type: Default::default(),
        prefill: Some(64),
    };
    let table = plan_table(&h, opts).expect("prefill table");
    println!("{table}");
    assert_eq!(table.tokens, 64);
    let p = table.prediction.as_ref().expect("a prediction");
    assert!((p.tok_s - 64.0 / p.step_s).abs() <= 1e-9 * p.tok_s);
    // The floor is the chunk's bytes at the efficient bandwidth, and the step is not below it.
    let efficient = card.dram_gbps * 1e9 * DEFAULT_CONSTANTS.dram_efficiency.value;
    assert!((p.dram_floor_s - table.dram_bytes as f64 / efficient).abs() <= 1e-9 * p.step_s);
    assert!(p.step_s >= p.dram_floor_s);
    assert!(table.to_string().contains("where the time goes"));
    // 64 tokens × 6 slots over 64 experts touch every expert: the gate product of each MoE
    // layer reads at least the whole stacked tensor once.
    let gate_bytes = h
        .tensors
        .iter()
        .find(|t| t.name == "blk.1.ffn_gate_exps.weight")
        .unwrap()
        .nbytes;
    let row = table
        .rows
        .iter()
        .find(|r| r.label == "blk.1 ffn_gate_exps")
        .expect("the routed gate product");
    assert!(row.kernel.starts_with("mmq_moe_"), "{}", row.kernel);
    assert!(
        row.dram_bytes >= gate_bytes,
        "{} DRAM bytes < the tensor's {gate_bytes}",
        row.dram_bytes
    );
    // A chunk past the cache is refused, naming the depth.
    let past = TableOptions { depth: 100, ..opts };
    assert!(plan_table(&h, past).is_err());
}
