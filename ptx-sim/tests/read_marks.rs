//! `Sim::was_read`: which allocations a launch read from (loads, atomics), as opposed to those it
//! only wrote; host reads and writes do not count, and `clear_read_marks` forgets.

use ptx_sim::{Arg, LaunchConfig, Module, Sim};

/// `out[i] = a[i]` for every thread, and thread 0 adds 1 to `*c` atomically.
const PTX: &str = "
.version 7.8
.target sm_86
.address_size 64

.visible .entry copy(.param .u64 pa, .param .u64 pout, .param .u64 pc)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pout];
    ld.param.u64 %rd3, [pc];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    ld.global.u32 %r2, [%rd5];
    st.global.u32 [%rd6], %r2;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra done;
    atom.global.add.u32 %r3, [%rd3], 1;
done:
    ret;
}
";

#[test]
fn launches_mark_what_they_read() {
    let m = Module::parse(PTX).unwrap();
    let mut sim = Sim::new();
    let n = 32usize;
    let (a, out, c, idle) = (
        sim.alloc(4 * n).unwrap(),
        sim.alloc(4 * n).unwrap(),
        sim.alloc(4).unwrap(),
        sim.alloc(4).unwrap(),
    );
    sim.write(a, &[7u8; 128]).unwrap();
    sim.write(idle, &[1u8; 4]).unwrap();
    let mut scratch = [0u8; 4];
    sim.read(idle, &mut scratch).unwrap();
    let marks = |sim: &Sim| [a, out, c, idle].map(|p| sim.was_read(p));
    assert_eq!(marks(&sim), [false; 4], "host reads and writes do not mark");
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [n as u32, 1, 1],
        shared_bytes: 0,
    };
    sim.launch(&m, "copy", cfg, &[Arg::Ptr(a), Arg::Ptr(out), Arg::Ptr(c)])
        .unwrap();
    assert_eq!(
        marks(&sim),
        [true, false, true, false],
        "a is loaded, out only stored, c atomically updated, idle untouched"
    );
    sim.clear_read_marks();
    assert_eq!(marks(&sim), [false; 4]);
    // The output of one launch, read by the next, is marked then.
    let out2 = sim.alloc(4 * n).unwrap();
    sim.launch(
        &m,
        "copy",
        cfg,
        &[Arg::Ptr(out), Arg::Ptr(out2), Arg::Ptr(c)],
    )
    .unwrap();
    assert_eq!(marks(&sim), [false, true, true, false]);
    assert!(!sim.was_read(out2));
}
