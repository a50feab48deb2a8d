//! Atomics on global and shared memory: every lane of many blocks contends on the same words.
mod common;
use common::*;
use ptx_sim::{Arg, Module, Sim};

#[test]
fn global_and_shared_atomics() {
    let body = "
    .shared .align 4 .b8 cnt[8];
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra SKIP;
    mov.u32 %r5, 0;
    st.shared.u32 [cnt], %r5;
    st.shared.u32 [cnt+4], %r5;
SKIP:
    bar.sync 0;
    atom.shared.add.u32 %r6, [cnt], 1;
    atom.shared.max.u32 %r7, [cnt+4], %r1;
    bar.sync 0;
    atom.global.add.u32 %r8, [%rd2], 1;
    atom.global.max.s32 %r9, [%rd2+4], %r1;
    atom.global.add.f32 %r10, [%rd2+8], 0f3F000000;
    // ptx-syntax 0.5 accepts `red` only with the operation before the state space.
    red.add.global.u32 [%rd2+12], %r1;
    atom.global.cas.b32 %r11, [%rd2+16], 0, %r1;
    atom.global.inc.u32 %r12, [%rd2+20], 9;
    @%p1 bra END;
    ld.shared.u32 %r13, [cnt];
    ld.shared.u32 %r14, [cnt+4];
    mov.u32 %r15, %ctaid.x;
    mul.wide.u32 %rd6, %r15, 8;
    add.s64 %rd7, %rd1, %rd6;
    st.global.v2.u32 [%rd7], {%r13, %r14};
END:";
    let m = Module::parse(&ptx(&kernel(body))).unwrap();
    let mut sim = Sim::new();
    let blocks = 16u32;
    let per_block = upload_u32(&mut sim, &vec![0; 2 * blocks as usize]);
    let out = upload_u32(&mut sim, &[0; 6]);
    sim.launch(
        &m,
        "k",
        cfg(blocks, 96),
        &[Arg::Ptr(per_block), Arg::Ptr(out)],
    )
    .unwrap();
    let pb = download_u32(&sim, per_block, 2 * blocks as usize);
    for b in 0..blocks as usize {
        assert_eq!(pb[2 * b], 96, "shared add in block {b}");
        assert_eq!(pb[2 * b + 1], 95, "shared max in block {b}");
    }
    let o = download_u32(&sim, out, 6);
    let n = 96 * blocks;
    assert_eq!(o[0], n);
    assert_eq!(o[1], 95);
    // n additions of 0.5 are exact in f32 for n < 2^24.
    assert_eq!(f32::from_bits(o[2]), n as f32 * 0.5);
    assert_eq!(
        o[3],
        (0..96).sum::<u32>() * blocks,
        "red.add of the thread ids"
    );
    // Exactly one thread wins the compare-and-swap from 0; thread 0 would leave 0, so accept any
    // tid.
    assert!(o[4] < 96);
    // inc wraps to 0 after 9: n increments from 0 land on n % 10.
    assert_eq!(o[5], n % 10);
}
