//! Instruction forms that needed front-end or IR support beyond the basic set: `red` with the ISA's
//! modifier order, `bar.sync` with a thread count, and carry arithmetic (`add.cc`/`addc`,
//! `sub.cc`/`subc`).
mod common;
use common::*;
use ptx_sim::{FaultKind, SimError};

#[test]
fn red_in_isa_modifier_order_is_accepted() {
    // Each of the 64 threads adds its index to out[0] (the ISA order `red.global.add`, as nvcc and
    // LLVM write it), and its index times two with the memory-model qualifiers in front.
    let body = "red.global.add.u32 [%rd2], %r1;\n shl.b32 %r5, %r1, 1;\n red.relaxed.gpu.global.add.u32 [%rd2+4], %r5;";
    let (out, _) = run_io(&kernel(body), "k", 64, &[0; 64], 2).unwrap();
    let sum: u32 = (0..64).sum();
    assert_eq!(out, vec![sum, 2 * sum]);
}

#[test]
fn bar_sync_with_the_whole_block_as_count_is_a_barrier() {
    // 40 threads: two warps, the count is rounded up to whole warps (64). Each thread publishes
    // `tid + 100` in the input buffer, then reads the value of thread `39 - tid`, which for warp 0
    // was written by warp 1: without the barrier warp 0 would read zeros.
    let body = "add.s32 %r5, %r1, 100;\n st.global.u32 [%rd3], %r5;\n bar.sync 0, 64;\n sub.s32 %r6, 39, %r1;\n mul.wide.u32 %rd6, %r6, 4;\n add.s64 %rd7, %rd1, %rd6;\n ld.global.u32 %r7, [%rd7];\n st.global.u32 [%rd4], %r7;";
    let (out, stats) = run_io(&kernel(body), "k", 40, &[0; 40], 40).unwrap();
    let want: Vec<u32> = (0..40).map(|t| 139 - t).collect();
    assert_eq!(out, want);
    assert_eq!(stats.barriers, 1);
}

#[test]
fn bar_sync_with_a_partial_count_is_reported() {
    let err = run_io(&kernel("bar.sync 1, 32;"), "k", 64, &[0; 64], 64).unwrap_err();
    match err {
        SimError::Fault(f) => {
            assert_eq!(f.kind, FaultKind::BarrierDivergence);
            assert!(f.detail.contains("count of 32"), "{}", f.detail);
        }
        other => panic!("expected a fault, got {other}"),
    }
}

#[test]
fn carry_chains_add_and_subtract_64_bit_values_from_32_bit_halves() {
    let (a, b, c) = (words(1), words(2), words(3));
    // (b:a) + (a:c) and (b:a) - (a:c), high halves.
    let add = lanes3(
        "add.cc.u32 %r11, %r2, %r4;\n addc.u32 %r10, %r3, %r2;",
        &a,
        &b,
        &c,
    );
    let sub = lanes3(
        "sub.cc.u32 %r11, %r2, %r4;\n subc.u32 %r10, %r3, %r2;",
        &a,
        &b,
        &c,
    );
    // A carry-out that is not consumed by the next instruction stays set: `addc.cc` then `addc`.
    let three = lanes3(
        "add.cc.u32 %r11, %r2, %r4;\n addc.cc.u32 %r12, %r3, %r2;\n addc.u32 %r10, %r2, %r3;",
        &a,
        &b,
        &c,
    );
    for l in 0..32 {
        let x = (u64::from(b[l]) << 32) | u64::from(a[l]);
        let y = (u64::from(a[l]) << 32) | u64::from(c[l]);
        assert_eq!(add[l], (x.wrapping_add(y) >> 32) as u32, "add lane {l}");
        assert_eq!(sub[l], (x.wrapping_sub(y) >> 32) as u32, "sub lane {l}");
        // 96-bit (a:b:a) + (b:a:c): the top word.
        let lo = u128::from(x) | (u128::from(a[l]) << 64);
        let hi = u128::from(y) | (u128::from(b[l]) << 64);
        assert_eq!(three[l], ((lo + hi) >> 64) as u32, "3-word add lane {l}");
    }
}
