//! Counter and result regression: fixed launches of real kernels (and one synthetic kernel that
//! exercises divergence, byte loads, local memory through generic addresses, atomics, bank
//! conflicts and a partial warp) must keep producing the same [`LaunchStats`] and the same output
//! bytes.
//!
//! The pinned values were produced by the simulator before its execution core was rewritten for
//! speed (commit 7228f24's interpreter); they are the reference that the fast paths must reproduce
//! exactly. Where a counter can be derived from the launch by hand, it is also checked against that
//! derivation.
mod workloads;

use ptx_sim::{Arg, ClassCounts, LaunchConfig, LaunchStats, Module, Sim};
use workloads::*;

/// Threads per block and blocks of the synthetic launch.
const MIX_THREADS: u32 = 80;
const MIX_BLOCKS: u32 = 2;
/// Threads with a global index at or past this exit after the barrier.
const MIX_LIVE: u32 = 150;

const MIX_PTX: &str = "
.version 7.8
.target sm_86
.address_size 64

.visible .entry mix(.param .u64 mix_param_0, .param .u64 mix_param_1)
{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 8 .b8 tile[2048];
    .local .align 8 .b8 frame[64];
    ld.param.u64 %rd1, [mix_param_0];
    ld.param.u64 %rd2, [mix_param_1];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.lo.s32 %r5, %r4, 3;
    cvt.u64.u32 %rd3, %r5;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u8 %r6, [%rd4];
    mov.u32 %r7, tile;
    mul.lo.s32 %r8, %r1, 12;
    add.s32 %r9, %r7, %r8;
    st.shared.u32 [%r9], %r6;
    bar.sync 0;
    shl.b32 %r10, %r1, 3;
    add.s32 %r10, %r7, %r10;
    ld.shared.u32 %r11, [%r10];
    ld.shared.u32 %r12, [tile];
    atom.shared.add.u32 %r13, [tile+4], 1;
    setp.ge.u32 %p3, %r4, 150;
    @%p3 exit;
    mov.u64 %rd5, frame;
    cvta.local.u64 %rd6, %rd5;
    st.u32 [%rd6+4], %r6;
    st.local.v2.u32 [frame+8], {%r11, %r12};
    ld.u32 %r14, [%rd6+4];
    ld.local.v2.u32 {%r15, %r16}, [frame+8];
    atom.global.add.u32 %r17, [%rd2], %r6;
    setp.lt.u32 %p1, %r6, 100;
    @%p1 bra $L_small;
    mul.lo.s32 %r18, %r14, 7;
    bra.uni $L_join;
$L_small:
    add.s32 %r18, %r14, %r15;
$L_join:
    and.b32 %r19, %r6, 7;
    mov.u32 %r20, 0;
    mov.u32 %r21, 0;
$L_loop:
    setp.ge.u32 %p2, %r20, %r19;
    @%p2 bra $L_done;
    add.s32 %r21, %r21, %r20;
    mul.lo.s32 %r21, %r21, 3;
    add.s32 %r20, %r20, 1;
    bra.uni $L_loop;
$L_done:
    cvt.rn.f32.u32 %r22, %r21;
    fma.rn.f32 %r22, %r22, 0f3F000000, %r22;
    add.s32 %r23, %r18, %r16;
    add.s32 %r23, %r23, %r13;
    mul.wide.u32 %rd7, %r4, 8;
    add.s64 %rd8, %rd2, %rd7;
    st.global.v2.u32 [%rd8+8], {%r23, %r22};
    ret;
}
";

fn mix(sim: &mut Sim) -> Launch {
    let mut input = vec![0u8; 512];
    Rng::new(7).fill(&mut input);
    let pin = sim.alloc(input.len()).unwrap();
    sim.write(pin, &input).unwrap();
    let out_bytes = 8 + 8 * (MIX_THREADS * MIX_BLOCKS) as usize;
    let out = sim.alloc(out_bytes).unwrap();
    Launch {
        kernel: "mix",
        cfg: LaunchConfig {
            grid: [MIX_BLOCKS, 1, 1],
            block: [MIX_THREADS, 1, 1],
            shared_bytes: 0,
        },
        args: vec![Arg::Ptr(pin), Arg::Ptr(out)],
        out,
        out_bytes,
    }
}

fn run(ptx: &str, make: impl FnOnce(&mut Sim, &mut Rng) -> Launch) -> (LaunchStats, u64) {
    let m = Module::parse(ptx).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Sim::new();
    let launch = make(&mut sim, &mut Rng::new(42));
    let r = launch.run(&mut sim, &m).unwrap_or_else(|e| panic!("{e}"));
    println!("{}: {:?} output hash {:#x}", launch.kernel, r.0, r.1);
    r
}

/// `LaunchStats` from its fields in declaration order, class counts as
/// `[int, fp32, fp16, fp64, mem_global, mem_shared, mem_local, control, tensor, other]`.
fn stats(warp: u64, thread: u64, class: [u64; 10], rest: [u64; 10]) -> LaunchStats {
    let [int, fp32, fp16, fp64, mem_global, mem_shared, mem_local, control, tensor, other] = class;
    let [global_bytes_read, global_bytes_written, sectors_read, sectors_written, global_requests, shared_requests, shared_bank_conflicts, barriers, blocks, _] =
        rest;
    LaunchStats {
        warp_instructions: warp,
        thread_instructions: thread,
        by_class: ClassCounts {
            int,
            fp32,
            fp16,
            fp64,
            mem_global,
            mem_shared,
            mem_local,
            control,
            tensor,
            other,
        },
        global_bytes_read,
        global_bytes_written,
        host_bytes_read: 0,
        host_bytes_fetched: 0,
        host_bytes_written: 0,
        module_bytes_read: 0,
        module_requests: 0,
        sectors_read,
        sectors_written,
        global_requests,
        shared_requests,
        shared_bank_conflicts,
        barriers,
        blocks,
        prefetch_lanes: 0,
    }
}

#[test]
fn mix_counters_and_output_are_pinned() {
    let (s, hash) = run(MIX_PTX, |sim, _| mix(sim));
    // Derivable by hand: 2 blocks, each with one barrier.
    assert_eq!(s.blocks, u64::from(MIX_BLOCKS));
    assert_eq!(s.barriers, u64::from(MIX_BLOCKS));
    // Every thread reads one byte; live ones add 4 bytes atomically; live ones store 8 bytes.
    assert_eq!(
        s.global_bytes_read,
        u64::from(MIX_THREADS * MIX_BLOCKS) + 4 * u64::from(MIX_LIVE)
    );
    assert_eq!(s.global_bytes_written, 8 * u64::from(MIX_LIVE));
    // The stride-8-byte shared load puts two words in each bank for the two full warps of a block
    // (one extra wavefront each); the 16-lane warp and the stride-12 store are conflict-free.
    assert_eq!(s.shared_bank_conflicts, 2 * u64::from(MIX_BLOCKS));
    assert_eq!(
        s,
        stats(
            528,
            9360,
            [314, 6, 0, 0, 18, 24, 24, 118, 0, 24],
            [760, 1200, 24, 43, 18, 24, 4, 2, 2, 0]
        )
    );
    // The output includes words of `tile` no thread wrote, which start as 0xFF bytes.
    assert_eq!(hash, 0x6b68_1a6f_fd02_9607);
}

#[test]
fn row_sum_counters_and_output_are_pinned() {
    let (s, hash) = run(RUST_PTX, |sim, rng| row_sum(sim, rng, 3, 300, 128));
    assert_eq!(s.blocks, 3);
    // Each row's 300 floats, plus `lens[row]` read by each of the 128 threads of its block.
    assert_eq!(s.global_bytes_read, 3 * 300 * 4 + 3 * 128 * 4);
    assert_eq!(
        s,
        stats(
            981,
            23742,
            [534, 102, 0, 0, 45, 24, 0, 144, 0, 132],
            [5136, 12, 135, 3, 45, 24, 0, 3, 3, 0]
        )
    );
    assert_eq!(hash, 0x8466_9574_f4ea_4cd6);
}

#[test]
fn gemv_q4k_counters_and_output_are_pinned() {
    let (s, hash) = run(INGOT_PTX, |sim, rng| gemv_q4k(sim, rng, 37, 512));
    // One f32 per row written.
    assert_eq!(s.global_bytes_written, 37 * 4);
    assert_eq!(
        s,
        stats(
            6206,
            118006,
            [3903, 555, 0, 0, 481, 0, 0, 339, 0, 928],
            [42624, 148, 4551, 37, 481, 0, 0, 0, 10, 0]
        )
    );
    assert_eq!(hash, 0x08c3_ede1_38e0_8116);
}

#[test]
fn gemv_q3k_counters_and_output_are_pinned() {
    let (s, hash) = run(INGOT_PTX, |sim, rng| gemv_q3k(sim, rng, 9, 768));
    assert_eq!(s.global_bytes_written, 9 * 4);
    assert_eq!(
        s,
        stats(
            3402,
            48366,
            [2430, 207, 0, 0, 351, 0, 0, 60, 0, 354],
            [16200, 36, 1527, 9, 351, 0, 0, 0, 3, 0]
        )
    );
    assert_eq!(hash, 0xf0ff_7dbf_6756_eb15);
}

#[test]
fn quantize_q8_1_counters_and_output_are_pinned() {
    let (s, hash) = run(INGOT_PTX, |sim, rng| quantize_q8_1(sim, rng, 2048 + 96));
    // 2144 floats read; 67 blocks of 36 bytes written.
    assert_eq!(s.global_bytes_read, 2144 * 4);
    assert_eq!(s.global_bytes_written, 67 * 36);
    assert_eq!(
        s,
        stats(
            3311,
            87007,
            [938, 1211, 0, 0, 51, 0, 0, 448, 0, 663],
            [8576, 2412, 268, 151, 51, 0, 0, 0, 3, 0]
        )
    );
    assert_eq!(hash, 0xb9d7_7beb_9d80_8652);
}

#[test]
fn rmsnorm_counters_and_output_are_pinned() {
    let (s, hash) = run(INGOT_PTX, |sim, rng| rmsnorm(sim, rng, 3, 1000));
    // x read twice per row (sum of squares, then scaling) and w once per row; y written once.
    assert_eq!(s.global_bytes_read, 3 * 1000 * 4 * 3);
    assert_eq!(s.global_bytes_written, 3 * 1000 * 4);
    assert_eq!(
        s,
        stats(
            2616,
            76284,
            [1056, 792, 0, 0, 96, 216, 0, 192, 0, 264],
            [36000, 12000, 1125, 375, 96, 216, 0, 3, 3, 0]
        )
    );
    assert_eq!(hash, 0x835a_3cac_73ec_ab2f);
}
