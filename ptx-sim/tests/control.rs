//! Divergence, reconvergence, loops and barriers.
mod common;
use common::*;
use ptx_sim::{Arg, FaultKind, Module, Sim, SimError};

#[test]
fn nested_if_else_reconverges() {
    // if (a & 1) { if (a & 2) r = 1 else r = 2 } else { r = 3 }; then r += 10 after the join (all
    // lanes).
    let body = "
    and.b32 %r5, %r2, 1;
    setp.eq.u32 %p1, %r5, 0;
    @%p1 bra ELSE;
    and.b32 %r6, %r2, 2;
    setp.eq.u32 %p2, %r6, 0;
    @%p2 bra INNER_ELSE;
    mov.u32 %r10, 1;
    bra.uni INNER_JOIN;
INNER_ELSE:
    mov.u32 %r10, 2;
INNER_JOIN:
    bra.uni JOIN;
ELSE:
    mov.u32 %r10, 3;
JOIN:
    activemask.b32 %r7;
    setp.eq.u32 %p3, %r7, -1;
    selp.u32 %r8, 10, 1000, %p3;
    add.u32 %r10, %r10, %r8;";
    let a: [u32; 32] = std::array::from_fn(|i| (i as u32 * 7) % 4);
    let got = lanes3(body, &a, &[0; 32], &[0; 32]);
    for i in 0..32 {
        let r = if a[i] & 1 != 0 {
            if a[i] & 2 != 0 {
                1
            } else {
                2
            }
        } else {
            3
        };
        // +10 proves all 32 lanes were active again at the join.
        assert_eq!(got[i], r + 10, "lane {i}");
    }
}

#[test]
fn loop_with_per_lane_trip_counts() {
    // sum = 0; for j in 0..a: sum += j; afterwards every lane sees the full warp active.
    let body = "
    mov.u32 %r10, 0;
    mov.u32 %r5, 0;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra DONE;
LOOP:
    add.u32 %r10, %r10, %r5;
    add.u32 %r5, %r5, 1;
    setp.lt.u32 %p2, %r5, %r2;
    @%p2 bra LOOP;
DONE:
    activemask.b32 %r7;
    popc.b32 %r8, %r7;
    mul.lo.u32 %r8, %r8, 1000000;
    add.u32 %r10, %r10, %r8;";
    let a: [u32; 32] = std::array::from_fn(|i| (i as u32 * 5) % 17);
    let got = lanes3(body, &a, &[0; 32], &[0; 32]);
    for i in 0..32 {
        let want: u32 = (0..a[i]).sum::<u32>() + 32 * 1_000_000;
        assert_eq!(got[i], want, "lane {i}");
    }
}

#[test]
fn shared_memory_producer_consumer_across_warps() {
    // 128 threads: each writes tid*3 to tile[tid]; after the barrier reads tile[127 - tid] (another
    // warp).
    let body = "
    .shared .align 4 .b8 tile[512];
    mul.lo.u32 %r5, %r1, 3;
    shl.b32 %r6, %r1, 2;
    mov.u32 %r7, tile;
    add.u32 %r8, %r7, %r6;
    st.shared.u32 [%r8], %r5;
    bar.sync 0;
    sub.u32 %r9, 127, %r1;
    shl.b32 %r9, %r9, 2;
    add.u32 %r9, %r7, %r9;
    ld.shared.u32 %r10, [%r9];
    st.global.u32 [%rd4], %r10;";
    let (out, stats) = run_io(&kernel(body), "k", 128, &[0; 128], 128).unwrap();
    for t in 0..128u32 {
        assert_eq!(out[t as usize], (127 - t) * 3, "thread {t}");
    }
    assert_eq!(stats.barriers, 1);
    // Consecutive words: no bank conflicts for either the store or the load.
    assert_eq!(stats.shared_bank_conflicts, 0);
    assert_eq!(stats.shared_requests, 8);
}

#[test]
fn shared_memory_starts_poisoned_in_every_block() {
    // Each of 4 blocks reads its thread's word of `tile` before any write, stores what it saw to
    // out[32·ctaid + tid], then writes the word: a later block (on one host thread, the same
    // scratch buffers) must see neither that write nor zeros.
    let body = "
    .shared .align 4 .b8 tile[128];
    mov.u32 %r2, %ctaid.x;
    mad.lo.u32 %r3, %r2, 32, %r1;
    mul.wide.u32 %rd6, %r3, 4;
    add.s64 %rd7, %rd2, %rd6;
    mov.u32 %r7, tile;
    shl.b32 %r6, %r1, 2;
    add.u32 %r8, %r7, %r6;
    ld.shared.u32 %r10, [%r8];
    st.global.u32 [%rd7], %r10;
    st.shared.u32 [%r8], %r1;";
    let m = Module::parse(&ptx(&kernel(body))).unwrap();
    let out = one_thread(|| {
        let mut sim = Sim::new();
        let i = upload_u32(&mut sim, &[0; 32]);
        let o = upload_u32(&mut sim, &[0; 128]);
        sim.launch(&m, "k", cfg(4, 32), &[Arg::Ptr(i), Arg::Ptr(o)])
            .unwrap();
        download_u32(&sim, o, 128)
    });
    assert!(out.iter().all(|&w| w == u32::MAX), "{out:x?}");
}

#[test]
fn bank_conflicts_and_coalescing_counters() {
    // Stride-32-word shared accesses put all 32 lanes in bank 0: 32 wavefronts instead of 1.
    let body = "
    .shared .align 4 .b8 tile[4096];
    shl.b32 %r6, %r1, 7;
    st.shared.u32 [%r6], %r1;
    mul.wide.u32 %rd6, %r1, 32;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.u32 %r10, [%rd7];";
    let (_, stats) = run_io(&kernel(body), "k", 32, &[0; 32 * 8], 1).unwrap();
    assert_eq!(stats.shared_bank_conflicts, 31);
    // Each lane's word sits in its own 32-byte sector; the prologue's parameter loads are not
    // global.
    assert_eq!(stats.sectors_read, 32);
    assert_eq!(stats.global_bytes_read, 128);
}

/// A divergent region holding a bounds/zero check that branches to a `trap` block which never
/// rejoins (what rustc emits for a runtime `u32 /`), followed by `bar.sync`. Lanes that pass the
/// check must reconverge before the barrier: the trap path does not reach the kernel exit, so it
/// must not move the branch's reconvergence point to the exit.
fn divide_then_barrier(divisors: &[u32; 64]) -> Result<Vec<u32>, SimError> {
    let body = "
    ld.global.u32 %r2, [%rd3];
    mov.u32 %r10, 7;
    and.b32 %r5, %r1, 1;
    setp.eq.u32 %p1, %r5, 0;
    @%p1 bra JOIN;
    setp.ne.u32 %p2, %r2, 0;
    @%p2 bra DIVIDE;
    bra.uni PANIC;
DIVIDE:
    div.u32 %r10, 1000, %r2;
JOIN:
    bar.sync 0;
    st.global.u32 [%rd4], %r10;
    ret;
PANIC:
    trap;";
    run_io(&kernel(body), "k", 64, divisors, 64).map(|(out, _)| out)
}

#[test]
fn trap_path_does_not_block_reconvergence_before_barrier() {
    let divisors: [u32; 64] = std::array::from_fn(|i| i as u32 % 5 + 1);
    let out = divide_then_barrier(&divisors).unwrap_or_else(|e| panic!("{e}"));
    for (t, (&got, &d)) in out.iter().zip(&divisors).enumerate() {
        let want = if t % 2 == 1 { 1000 / d } else { 7 };
        assert_eq!(got, want, "thread {t}");
    }
}

#[test]
fn lane_on_the_trap_path_still_traps() {
    let mut divisors: [u32; 64] = std::array::from_fn(|i| i as u32 % 5 + 1);
    // Only odd threads divide; thread 37 (warp 1, lane 5) divides by zero.
    divisors[37] = 0;
    match divide_then_barrier(&divisors) {
        Err(SimError::Fault(f)) => {
            assert_eq!(f.kind, FaultKind::Trap, "{f}");
            assert_eq!(f.thread, [37, 0, 0]);
        }
        other => panic!("expected a trap fault, got {other:?}"),
    }
}
