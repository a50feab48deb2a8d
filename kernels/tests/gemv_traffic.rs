//! Memory traffic of the gemv kernels at V2-Lite shapes, from ptx-sim's `LaunchStats`: bytes the
//! lanes request from global memory against the bytes the launch must read, and 32-byte sectors
//! per warp-level request.
//!
//! Each thread block stages the activation blocks its rows read once
//! (`ingot_abi::launch::gemv_stage_blocks`), so a launch reads its weights plus one activation
//! copy per block, blocks being sized so that this stays within 1.10 times the bytes the
//! launch must read (`ingot_abi::launch::gemv_min_block_rows`, which counts the 2-byte
//! aligned Q3_K and Q6_K blocks' re-alignment reads too). The weight-side ratio (the staged
//! copies subtracted) must stay within 1.05.

#![cfg(feature = "sim")]

mod support;

use ingot_abi::blocks::QK8_1;
use ingot_kernels::ops::gemv::GemvType;
use ptx_sim::{Arg, LaunchConfig, Module, Sim};

/// The bounds every gemv launch here meets: `read` bytes against `w_bytes` of weights, `x_bytes`
/// of activation the launch must read and `staged` bytes its blocks copied.
fn check_ratios(name: &str, shape: &str, read: u64, bytes: (u64, u64, u64)) {
    check_ratios_within(name, shape, read, bytes, 1.10);
}

/// [`check_ratios`] with the read bound `bound` (1.125 for the two-matrix kernels,
/// `ingot_abi::launch::GEMV_PAIR_WEIGHT_PER_ACT`).
fn check_ratios_within(
    name: &str,
    shape: &str,
    read: u64,
    (w_bytes, x_bytes, staged): (u64, u64, u64),
    bound: f64,
) {
    let must = (w_bytes + x_bytes) as f64;
    let raw = read as f64 / must;
    let weight_side = (read - staged) as f64 / w_bytes as f64;
    eprintln!(
        "{name}: {shape}: read {read} B, must {must} B (w {w_bytes} + x {x_bytes}), staged \
         {staged} B: raw {raw:.3}, weight-side {weight_side:.3}"
    );
    // Every weight byte is requested once, plus for the 2-byte aligned Q3_K / Q6_K blocks the
    // re-alignment words and the scale windows (114/110 and 218/210 bytes, < 4% over).
    assert!(
        (1.0..=1.05).contains(&weight_side),
        "{name}: {shape}: weight-side ratio {weight_side:.3} outside [1, 1.05]"
    );
    assert!(
        raw <= bound,
        "{name}: {shape}: read ratio {raw:.3} above the {bound} target"
    );
}

fn run(module: &Module, ty: GemvType, nrows: u32, ncols: u32) {
    let mut sim = Sim::new();
    let nb = (ncols as usize / ty.block_elems()) as u64;
    let w_bytes = nrows as u64 * nb * ty.block_bytes() as u64;
    let x_bytes = (ncols as usize / QK8_1 * 36) as u64;
    // Random bytes are fine for traffic (no value-dependent control flow in these kernels).
    let w = sim.alloc(w_bytes as usize).expect("alloc");
    let x = sim.alloc(x_bytes as usize).expect("alloc");
    let y = sim.alloc(nrows as usize * 4).expect("alloc");
    let fill: Vec<u8> = (0..w_bytes)
        .map(|i| ((i * 2654435761) >> 13) as u8)
        .collect();
    sim.write(w, &fill).expect("write");
    let desc = ty.plain();
    let units = ncols / ty.row_multiple() as u32;
    let warps = nrows.div_ceil(ingot_abi::launch::gemv_rows_per_warp(units, ty.unit()));
    let grid = desc.grid(warps);
    let stats = sim
        .launch(
            module,
            desc.name,
            LaunchConfig {
                grid,
                block: desc.block,
                shared_bytes: 0,
            },
            &[
                Arg::Ptr(w),
                Arg::Ptr(x),
                Arg::Ptr(y),
                Arg::U32(ncols),
                Arg::U32(nrows),
            ],
        )
        .expect("launch");
    let staged = u64::from(grid[0]) * x_bytes;
    eprintln!(
        "{}: {:.1} sectors/request; {} warp instr",
        desc.name,
        stats.sectors_read as f64 / stats.global_requests as f64,
        stats.warp_instructions
    );
    check_ratios(
        desc.name,
        &format!("{nrows}x{ncols}"),
        stats.global_bytes_read,
        (w_bytes, x_bytes, staged),
    );
}

#[test]
fn gemv_traffic_at_v2_lite_shapes() {
    let m = ingot_kernels::backend::sim::module().expect("parse PTX");
    run(m, GemvType::Q4K, 3072, 2048);
    run(m, GemvType::Q4K, 576, 2048);
    run(m, GemvType::Q5K, 1408, 2048);
    run(m, GemvType::Q3K, 3072, 2048);
    run(m, GemvType::Q6K, 2048, 2048);
    run(m, GemvType::Q6K, 2048, 2816);
    run(m, GemvType::Q8_0, 2048, 10944);
    run(m, GemvType::Q8_0, 2048, 1408);
    run(m, GemvType::Q5_0, 2048, 1408);
    // attn_k_b's short rows (128 weights: 2 lanes per row, 16 rows per warp).
    run(m, GemvType::Q5_0, 8192, 128);
    // lm_head rows of the Q4_K_M mix (a slice of the 102400).
    run(m, GemvType::Q6K, 8192, 2048);
    run(m, GemvType::Q5_1, 2048, 1408);
    run(m, GemvType::Q4_0, 2048, 1408);
    run(m, GemvType::Iq4Nl, 2048, 1408);
}

/// The two-matrix kernels (`attn_q` or `attn_q_a` with `attn_kv_a_mqa` in one launch), whose
/// blocks are sized by the looser 1.125 bound: V2-Lite's 3,072 + 576 rows of 2,048 and V3's
/// 1,536 + 576 rows of 7,168.
#[test]
fn gemv_pair_traffic() {
    let m = ingot_kernels::backend::sim::module().expect("parse PTX");
    for (ty, n0, n1, ncols) in [
        (GemvType::Q4K, 3072u32, 576u32, 2048u32),
        (GemvType::Q6K, 3072, 576, 2048),
        (GemvType::Q4K, 1536, 576, 7168),
        (GemvType::Q8_0, 1536, 576, 7168),
    ] {
        let mut sim = Sim::new();
        let nrows = n0 + n1;
        let row = (ncols as usize / ty.block_elems() * ty.block_bytes()) as u64;
        let x_bytes = (ncols as usize / QK8_1 * 36) as u64;
        let w = sim.alloc((nrows as u64 * row) as usize).expect("alloc");
        let fill: Vec<u8> = (0..nrows as u64 * row)
            .map(|i| ((i * 2654435761) >> 13) as u8)
            .collect();
        sim.write(w, &fill).expect("write");
        let x = sim.alloc(x_bytes as usize).expect("alloc");
        let y = sim.alloc(nrows as usize * 4).expect("alloc");
        let units = ncols / ty.row_multiple() as u32;
        let warps = nrows.div_ceil(ingot_abi::launch::gemv_pair_rows_per_warp(units, ty.unit()));
        let desc = ty.pair();
        let s = launch(
            &mut sim,
            m,
            desc.name,
            warps,
            &[
                Arg::Ptr(w),
                Arg::Ptr(ptx_sim::DevicePtr(w.0 + n0 as u64 * row)),
                Arg::Ptr(x),
                Arg::Ptr(y),
                Arg::Ptr(ptx_sim::DevicePtr(y.0 + n0 as u64 * 4)),
                Arg::U32(ncols),
                Arg::U32(n0),
                Arg::U32(n1),
            ],
        );
        let staged = u64::from(desc.grid(warps)[0]) * x_bytes;
        check_ratios_within(
            desc.name,
            &format!("{n0}+{n1}x{ncols}"),
            s.global_bytes_read,
            (nrows as u64 * row, x_bytes, staged),
            1.125,
        );
    }
}

/// One launch of `name` over `items` with `args`, returning its stats.
fn launch(
    sim: &mut Sim,
    module: &Module,
    name: &str,
    items: u32,
    args: &[Arg],
) -> ptx_sim::LaunchStats {
    let desc = ingot_kernels::kernel(name).expect("kernel in the launch table");
    sim.launch(
        module,
        name,
        LaunchConfig {
            grid: desc.grid(items),
            block: desc.block,
            shared_bytes: desc.shared_bytes,
        },
        args,
    )
    .expect("launch")
}

#[test]
fn norm_embed_argmax_traffic() {
    let module = ingot_kernels::backend::sim::module().expect("parse PTX");
    let mut sim = Sim::new();
    let n = 2048u32;
    let x = sim.alloc(n as usize * 4).expect("alloc");
    let w = sim.alloc(n as usize * 4).expect("alloc");
    let y = sim.alloc(n as usize / 32 * 36).expect("alloc");
    let ones: Vec<u8> = (0..n).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    sim.write(x, &ones).expect("write");
    let s = launch(
        &mut sim,
        module,
        "rmsnorm_q8_1",
        1,
        &[
            Arg::Ptr(x),
            Arg::Ptr(w),
            Arg::Ptr(y),
            Arg::U32(n),
            Arg::F32(1e-6),
        ],
    );
    let must = 2 * n as u64 * 4;
    let ratio = s.global_bytes_read as f64 / must as f64;
    eprintln!(
        "rmsnorm_q8_1 1x{n}: read {} B, must {must} B (x + w): {ratio:.3}; {:.1} sectors/request",
        s.global_bytes_read,
        s.sectors_read as f64 / s.global_requests as f64
    );
    // x is read twice (Σx², then normalize; the second pass hits L1 on a GPU) and w once.
    assert!(ratio <= 1.5 + 1e-9, "rmsnorm_q8_1 read ratio {ratio}");

    let vocab = 102_400u32;
    let logits = sim.alloc(vocab as usize * 4).expect("alloc");
    let state = sim.alloc(16).expect("alloc");
    let s = launch(
        &mut sim,
        module,
        "argmax_step",
        1,
        &[Arg::Ptr(logits), Arg::Ptr(state), Arg::U32(vocab)],
    );
    let must = vocab as u64 * 4 + 8;
    let ratio = s.global_bytes_read as f64 / must as f64;
    eprintln!(
        "argmax_step {vocab}: read {} B, must {must} B (logits + pos, steps_done): {ratio:.4}; \
         {:.1} sectors/request",
        s.global_bytes_read,
        s.sectors_read as f64 / s.global_requests as f64
    );
    assert!(ratio <= 1.001, "argmax_step read ratio {ratio}");

    // Embedding: each element is decoded on its own (scales re-read per element, from L1 on a
    // GPU); a row is a few KB per token, so the ratio is reported, not a target. Every thread
    // of the grid also reads the step's token (4 bytes, one broadcast sector a warp): counted
    // apart, it is no read of the row.
    use ingot_abi::launch::{EMBED_PER_THREAD, EMBED_THREADS};
    let threads = u64::from(n.div_ceil(EMBED_THREADS * EMBED_PER_THREAD) * EMBED_THREADS);
    let rows = 4u32;
    for (name, bytes_per_row) in [
        ("embed_q4k", 1152u32),
        ("embed_q6k", 1680),
        ("embed_q8_0", 2176),
        ("embed_f32", 8192),
    ] {
        let table = sim.alloc((rows * bytes_per_row) as usize).expect("alloc");
        let out = sim.alloc(n as usize * 4).expect("alloc");
        let s = launch(
            &mut sim,
            module,
            name,
            n,
            &[
                Arg::Ptr(table),
                Arg::Ptr(state),
                Arg::Ptr(out),
                Arg::U32(n),
                Arg::U32(rows),
                // No norm tail (`DOWN_NORM_NONE`): the row's traffic alone.
                Arg::Ptr(out),
                Arg::Ptr(out),
                Arg::Ptr(out),
                Arg::Ptr(out),
                Arg::U32(ingot_abi::launch::DOWN_NORM_NONE),
                Arg::F32(0.0),
            ],
        );
        let must = u64::from(bytes_per_row);
        let token = 4 * threads;
        let ratio = (s.global_bytes_read - token) as f64 / must as f64;
        eprintln!(
            "{name} 1x{n}: read {} B ({token} B of it the token), must {must} B: {ratio:.2}; \
             {:.1} sectors/request",
            s.global_bytes_read,
            s.sectors_read as f64 / s.global_requests as f64
        );
        assert!(ratio < 16.0, "{name} read ratio {ratio}");
    }
}

/// Rows of an odd number of 32-element blocks (tiny models): odd rows of 2-mod-4-byte blocks
/// start 2 bytes off a word, so each of their units is read as one extra aligned word (4 of
/// `unit + 4` bytes); the trailing block is read as exact 2-byte halves.
#[test]
fn gemv_traffic_odd_block_rows() {
    let m = ingot_kernels::backend::sim::module().expect("parse PTX");
    run(m, GemvType::Q4_0, 2048, 96);
    run(m, GemvType::Q8_0, 2048, 160);
    run(m, GemvType::Iq4Nl, 1024, 32);
    run(m, GemvType::Q5_1, 1024, 96);
}

/// The grouped gemv with the q8_1 epilogue at V2-Lite's `attn_v_b` (16 heads × 128 rows of 512
/// against each head's 512 latent values, x stride 16 blocks): the same bounds as the f32
/// kernels, each block staging its head's 16 blocks; the epilogue itself reads no global memory.
#[test]
fn gemv_q8_1_out_traffic_attn_v_b() {
    let module = ingot_kernels::backend::sim::module().expect("parse PTX");
    let (nrows, ncols, rpg, stride) = (2048u32, 512u32, 128u32, 16u32);
    for ty in [GemvType::Q4K, GemvType::Q5_0, GemvType::Q8_0, GemvType::Q6K] {
        let mut sim = Sim::new();
        let nb = (ncols as usize / ty.block_elems()) as u64;
        let w_bytes = nrows as u64 * nb * ty.block_bytes() as u64;
        let groups = (nrows / rpg) as u64;
        let x_bytes = groups * stride as u64 * 36;
        let w = sim.alloc(w_bytes as usize).expect("alloc");
        let x = sim.alloc(x_bytes as usize).expect("alloc");
        let y = sim.alloc(nrows as usize / 32 * 36).expect("alloc");
        let fill: Vec<u8> = (0..w_bytes)
            .map(|i| ((i * 2654435761) >> 13) as u8)
            .collect();
        sim.write(w, &fill).expect("write");
        let s = launch(
            &mut sim,
            module,
            ty.grouped_q8_1_out().name,
            nrows / 32,
            &[
                Arg::Ptr(w),
                Arg::Ptr(x),
                Arg::Ptr(y),
                Arg::U32(ncols),
                Arg::U32(nrows),
                Arg::U32(rpg),
                Arg::U32(stride),
            ],
        );
        // 32 rows per block, inside one 128-row group: one head's 16 blocks each.
        let staged = u64::from(nrows / 32) * (ncols as usize / QK8_1 * 36) as u64;
        eprintln!(
            "{}: {:.1} sectors/request; {} barriers",
            ty.grouped_q8_1_out().name,
            s.sectors_read as f64 / s.global_requests as f64,
            s.barriers
        );
        check_ratios(
            ty.grouped_q8_1_out().name,
            &format!("{nrows}x{ncols} groups of {rpg}"),
            s.global_bytes_read,
            (w_bytes, x_bytes, staged),
        );
    }
}
