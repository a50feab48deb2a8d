//! The bench table matches the kernel table, and the simulator path measures what it claims.

use ingot_bench::cases::{Shape, CASES};
use ingot_bench::device::Device;
use ingot_bench::sim::{self, SIM_MAX_BUFFER_BYTES, SIM_ROW_QUANTUM};

#[test]
fn every_case_names_a_kernel_of_the_module() {
    for case in CASES {
        assert!(
            ingot_kernels::kernel(case.kernel).is_some(),
            "{}: no such kernel in ingot_abi::launch",
            case.id()
        );
        assert!(
            ingot_kernels::PTX.contains(&format!(".entry {}(", case.kernel)),
            "{}: kernel missing from the committed PTX",
            case.id()
        );
    }
    let mut ids: Vec<String> = CASES.iter().map(|c| c.id()).collect();
    ids.sort();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "case ids must be unique");
}

#[test]
fn gemv_required_bytes_are_weights_plus_vectors() {
    let case = CASES
        .iter()
        .find(|c| c.id() == "gemv_q4k_q8_1/attn_q")
        .expect("case");
    let s = case.shape;
    // Q4_K: 144 bytes per 256 weights; q8_1: 36 bytes per 32 activations; f32 output.
    let (read, written) = case.required_bytes(s).unwrap();
    assert_eq!(read, s.rows * s.cols / 256 * 144 + s.cols / 32 * 36);
    assert_eq!(written, s.rows * 4);
}

#[test]
fn sim_shape_caps_large_cases_and_keeps_small_ones() {
    for case in CASES {
        let s = sim::sim_shape(case).unwrap();
        assert_eq!(s.cols, case.shape.cols);
        assert!(s.rows <= case.shape.rows);
        if s != case.shape {
            assert_eq!(s.rows % SIM_ROW_QUANTUM, 0, "{}", case.id());
            assert!(
                case.buffer_bytes(s).unwrap() <= SIM_MAX_BUFFER_BYTES || s.rows == SIM_ROW_QUANTUM,
                "{}",
                case.id()
            );
        } else {
            let small = case.buffer_bytes(s).unwrap() <= SIM_MAX_BUFFER_BYTES;
            assert!(small || s.rows <= SIM_ROW_QUANTUM, "{}", case.id());
        }
    }
}

/// Every case runs on the simulator; each must read at least every byte it needs once (a
/// kernel that skipped weights would read less), write exactly its output, and the counters
/// must be non-trivial.
#[test]
fn every_case_runs_on_the_simulator() {
    let mut dev = Device::sim().unwrap();
    for case in CASES {
        // 64 rows: whole thread blocks, a few warps each, quick in a debug test build.
        let shape = Shape {
            rows: case.shape.rows.min(64),
            ..case.shape
        };
        let r = sim::run_case_at(&mut dev, case, shape).unwrap();
        eprintln!(
            "{}: rows {} instr {} read {} need {} sectors/req {:.2}",
            case.id(),
            r.shape.rows,
            r.stats.warp_instructions,
            r.stats.global_bytes_read,
            r.required_read,
            r.sectors_per_request()
        );
        assert!(r.stats.warp_instructions > 0);
        assert!(
            r.stats.global_bytes_read as usize >= r.required_read,
            "{}: read {} < required {}",
            case.id(),
            r.stats.global_bytes_read,
            r.required_read
        );
        // Exactly the output, plus at most the bookkeeping buffers (those of which no byte is
        // required: the StepStates the argmax kernels update, the keys and done counter the fused
        // lm_head's last block sets back to 0).
        let written = r.stats.global_bytes_written as usize;
        let state: usize = (case.buffers)(shape)
            .iter()
            .filter(|b| b.moved == Some(0))
            .map(|b| b.bytes().expect("a bookkeeping buffer's size"))
            .sum();
        assert!(
            (r.required_written..=r.required_written + state).contains(&written),
            "{}: wrote {written}, output is {}",
            case.id(),
            r.required_written
        );
        let spr = r.sectors_per_request();
        assert!((1.0..=32.0).contains(&spr), "{}: {spr}", case.id());
    }
}

#[test]
fn a_bad_shape_is_a_typed_error() {
    let case = CASES
        .iter()
        .find(|c| c.kernel == "gemv_q4k_q8_1")
        .expect("case");
    let mut dev = Device::sim().unwrap();
    let small = Shape {
        rows: 8,
        cols: 2048,
    };
    let host = ingot_bench::setup::host_buffers(case, small).unwrap();
    let bufs = ingot_bench::setup::upload(&mut dev, &(case.buffers)(small), &host).unwrap();
    // 16 rows need twice the weight buffer that was uploaded for 8.
    let err = (case.launch)(
        &mut dev,
        &bufs,
        Shape {
            rows: 16,
            cols: 2048,
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("buffer `w`"), "{err}");
}

fn case(id: &str) -> &'static ingot_bench::cases::Case {
    CASES
        .iter()
        .find(|c| c.id() == id)
        .unwrap_or_else(|| panic!("no case {id}"))
}

/// MoE cases require the 6 selected experts' rows and the shared experts', but
/// allocate all 64 stacked experts. Block sizes: Q4_K 144 B / 256, Q5_0 22 B / 32, q8_1
/// 36 B / 32; the selection's 6 ids and 6 weights are 48 bytes, each routed tensor's 6 expert
/// table entries 48 more.
#[test]
fn moe_required_bytes_are_the_selected_experts_and_the_shared_ones() {
    let (n_embd, ff, ff_sh, used, experts) = (2048, 1408, 2816, 6, 64);
    let q4k = |rows: usize, cols: usize| rows * cols / 256 * 144;
    let q5_0 = |rows: usize, cols: usize| rows * cols / 32 * 22;
    let q8_1 = |n: usize| n / 32 * 36;

    let gate_up = case("moe_gate_up_q4k/ffn_gate_up_exps+shexp");
    let (read, written) = gate_up.required_bytes(gate_up.shape).unwrap();
    let expect = q8_1(n_embd) + 48 + 2 * 48 + 2 * q4k(used * ff, n_embd) + 2 * q4k(ff_sh, n_embd);
    assert_eq!(read, expect);
    assert_eq!(written, q8_1(used * ff) + q8_1(ff_sh));
    let allocated = gate_up.buffer_bytes(gate_up.shape).unwrap();
    assert!(allocated >= 2 * q4k(experts * ff, n_embd), "{allocated}");

    let down = case("moe_down_q5_0_q4k/ffn_down_exps+shexp");
    let (read, written) = down.required_bytes(down.shape).unwrap();
    let expect = q8_1(used * ff + ff_sh)
        + 48
        + 48
        + q5_0(used * n_embd, ff)
        + q4k(n_embd, ff_sh)
        + n_embd * 4;
    assert_eq!(read, expect);
    assert_eq!(written, n_embd * 4);
}

/// Flash attention at depth 4096 requires the 4096 cache rows of 1152 bytes (512 latent + 64
/// rope f16) and the query (16 heads × (512 + 64) f32) once, and writes the partials of the
/// segments it uses: 4096 rows are 128 tiles of 32, at least 2 tiles per segment, so 64
/// segments (under the 264-block cap), each 16 heads × (512 f16 + an f32 (m, l) pair).
#[test]
fn flash_required_bytes_are_the_cache_rows_and_the_query() {
    for kernel in ["flash_latent", "flash_latent_mma"] {
        let c = case(&format!("{kernel}/kv_cache@4096"));
        let (read, written) = c.required_bytes(c.shape).unwrap();
        assert_eq!(read, 4096 * 1152 + 16 * (512 + 64) * 4, "{kernel}");
        assert_eq!(written, 64 * 16 * (512 * 2 + 8), "{kernel}");
    }
    let c = case("flash_latent/kv_cache@1024");
    let (read, written) = c.required_bytes(c.shape).unwrap();
    assert_eq!(read, 1024 * 1152 + 16 * (512 + 64) * 4);
    assert_eq!(written, 16 * 16 * (512 * 2 + 8));
}

/// The prefill products require their tile traffic: `mmq_q4k` at 512 tokens reads the 2048 ×
/// 2048 Q4_K weights once per token tile (8) and the 512 q8_1 rows once per row tile (32);
/// `mmq_moe_q5_0` over the heads reads each head's 512 × 128 Q5_0 weights once per tile of
/// its 512 pairs (8) and each of the 8192 pairs' 4 q8_1 blocks once per row tile (8), plus
/// the two 8192-word pair lists and the 17 head offsets. The flash of a first 512-token chunk
/// streams rows `0..=2k + 1` for token pair `k` (Σ 2k + 2 = 256·257 rows of 1152 bytes) and
/// reads the query once.
#[test]
fn prefill_required_bytes_are_the_tile_traffic() {
    let q4k = |rows: usize, cols: usize| rows * cols / 256 * 144;
    let q5_0 = |rows: usize, cols: usize| rows * cols / 32 * 22;
    let q8_1 = |n: usize| n / 32 * 36;

    let c = case("mmq_q4k/attn_output@512tok");
    let (read, written) = c.required_bytes(c.shape).unwrap();
    assert_eq!(read, 8 * q4k(2048, 2048) + 32 * q8_1(512 * 2048));
    assert_eq!(written, 512 * 2048 * 4);

    let c = case("mmq_moe_q5_0/attn_k_b@512tok");
    let (read, written) = c.required_bytes(c.shape).unwrap();
    let lists = 2 * 8192 * 4 + 17 * 4;
    assert_eq!(read, 16 * 8 * q5_0(512, 128) + 8 * 8192 * q8_1(128) + lists);
    assert_eq!(written, 8192 * 512 * 4);

    let c = case("flash_latent_prefill/kv_cache@0+512tok");
    let (read, written) = c.required_bytes(c.shape).unwrap();
    assert_eq!(read, 256 * 257 * 1152 + 512 * 16 * (512 + 64) * 4);
    assert_eq!(written, 512 * 16 * 512 * 4);
}

/// The chunk routing the MoE prefill cases share is a stable sort of 512 tokens × 6 distinct
/// experts spread over all 64: offsets from 0 to 3072, each expert's pairs in token order,
/// `pair_of` a permutation that finds each choice.
#[test]
fn chunk_routing_sorts_every_choice() {
    use ingot_bench::inputs::chunk_routing;
    let r = chunk_routing(512, 64, 6).unwrap();
    assert_eq!(r.expert_start.len(), 65);
    assert_eq!((r.expert_start[0], r.expert_start[64]), (0, 3072));
    let counts = r.counts();
    assert!(counts.iter().all(|&n| n > 0), "{counts:?}");
    assert!(*counts.iter().max().unwrap() < 3 * 48, "{counts:?}");
    for e in 0..64 {
        let (a, b) = (r.expert_start[e] as usize, r.expert_start[e + 1] as usize);
        assert!(
            r.pair_token[a..b].windows(2).all(|w| w[0] < w[1]),
            "expert {e}"
        );
    }
    let mut seen = vec![false; 3072];
    for (j, &p) in r.pair_of.iter().enumerate() {
        assert_eq!(r.pair_token[p as usize] as usize, j / 6);
        assert!(!std::mem::replace(&mut seen[p as usize], true));
    }
}

/// `SHARED_WEIGHT_COLUMN_COST`, which the speculative prediction applies to a verify's nodes, is
/// what the `m`-column Q4_K gemv costs in the simulator: each column past the first adds that
/// share of the plain gemv's warp instructions on `attn_output` (2048 x 2048), within 0.01 (the
/// constant rounds the three measurements to two decimals).
#[test]
fn shared_weight_column_cost_is_the_kernels() {
    use ingot_bench::predict::speculative::SHARED_WEIGHT_COLUMN_COST;
    let mut dev = Device::sim().unwrap();
    let mut instr = |kernel: &str| {
        let case = CASES
            .iter()
            .find(|c| c.kernel == kernel && c.tensor == "attn_output")
            .unwrap_or_else(|| panic!("no {kernel}/attn_output case"));
        sim::run_case(&mut dev, case)
            .unwrap()
            .stats
            .warp_instructions as f64
    };
    let plain = instr("gemv_q4k_q8_1");
    for m in 2..=4 {
        let cols = instr(&format!("gemv_cols{m}_q4k"));
        let per_column = (cols - plain) / ((m - 1) as f64 * plain);
        eprintln!("{m} columns: {cols} warp instructions, {per_column:.4} of the plain gemv's per extra column");
        assert!(
            (per_column - SHARED_WEIGHT_COLUMN_COST).abs() <= 0.01,
            "{m} columns: {per_column:.4} per column, the prediction assumes {SHARED_WEIGHT_COLUMN_COST}"
        );
    }
}

/// The share of the one-column case `plain`'s warp instructions each column past the first adds
/// in the multi-column case `cols(m)`, m = 2, 3, 4, in the simulator: within `tolerance` of
/// `want`, the constant the speculative prediction's "built" column applies.
fn column_cost_is(plain: &str, cols: impl Fn(usize) -> String, (want, tolerance): (f64, f64)) {
    // One fixed interleaving: a chained launch's waits spin the same instructions every run.
    let mut dev = Device::sim_with(ptx_sim::Schedule::Random { seed: 41 }).unwrap();
    let mut instr = |kernel: &str| {
        let case = CASES
            .iter()
            .find(|c| c.kernel == kernel)
            .unwrap_or_else(|| panic!("no {kernel} case"));
        sim::run_case(&mut dev, case)
            .unwrap()
            .stats
            .warp_instructions as f64
    };
    let one = instr(plain);
    for m in 2..=4 {
        let kernel = cols(m);
        let all = instr(&kernel);
        let per_column = (all - one) / ((m - 1) as f64 * one);
        eprintln!(
            "{kernel}: {all} warp instructions, {per_column:.4} of {plain}'s per extra column"
        );
        assert!(
            (per_column - want).abs() <= tolerance,
            "{kernel}: {per_column:.4} per column, the prediction assumes {want}"
        );
    }
}

/// `HEAD_COLUMN_COST` is what `gemv_argmax_colsM_q6k_q8_1` costs on `output` (Q6_K 102400 x
/// 2048 as the simulator runs it), within 0.03; the three measurements fall from 0.88 to 0.85
/// as the shared staging and tail spread over more columns.
#[test]
fn fused_head_columns_cost_what_the_prediction_says() {
    use ingot_bench::predict::speculative::HEAD_COLUMN_COST;
    column_cost_is(
        "gemv_argmax_q6k_q8_1",
        |m| format!("gemv_argmax_cols{m}_q6k_q8_1"),
        (HEAD_COLUMN_COST, 0.03),
    );
}

/// `MERGE_OUT_COLUMN_COST` is what `attn_merge_v_b_o_colsM_q4k` costs on V2-Lite's attention at
/// depth 1 (the merges are per column, and so are the row dots' instructions), within 0.03; the
/// output blocks' waits for the merge count under one fixed interleaving (`column_cost_is`).
#[test]
fn fused_merge_out_columns_cost_what_the_prediction_says() {
    use ingot_bench::predict::speculative::MERGE_OUT_COLUMN_COST;
    column_cost_is(
        "attn_merge_v_b_o_q4k",
        |m| format!("attn_merge_v_b_o_cols{m}_q4k"),
        (MERGE_OUT_COLUMN_COST, 0.03),
    );
}
