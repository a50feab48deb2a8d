//! Every fault kind is reported as a typed error naming kernel, block, thread, line and address.
mod common;
use common::*;
use ptx_sim::{Arg, FaultKind, Module, Sim, SimError};

fn fault_of(body: &str, threads: u32) -> ptx_sim::Fault {
    match run_io(&kernel(body), "k", threads, &[0u32; 64], 64) {
        Err(SimError::Fault(f)) => *f,
        other => panic!("expected a fault, got {other:?}"),
    }
}

/// 1-based line of the first line containing `needle` in the wrapped kernel text.
fn line_of(body: &str, needle: &str) -> usize {
    ptx(&kernel(body))
        .lines()
        .position(|l| l.contains(needle))
        .unwrap()
        + 1
}

#[test]
fn out_of_bounds_global() {
    // Thread 5 reads one word past the 64-word input buffer.
    let body = "setp.eq.u32 %p1, %r1, 5;\n @%p1 ld.global.u32 %r2, [%rd3+236];";
    let f = fault_of(body, 32);
    assert_eq!(f.kind, FaultKind::OutOfBounds);
    assert_eq!(f.thread, [5, 0, 0]);
    assert_eq!(f.ptx_line, line_of(body, "[%rd3+236]"));
    assert_eq!(f.kernel, "k");
    // Base of the first allocation (slot 1) plus 64 words.
    assert_eq!(f.address, Some((1u64 << 36) + 256));
    let msg = SimError::Fault(Box::new(f)).to_string();
    assert!(
        msg.contains("out-of-bounds") && msg.contains("thread (5,0,0)"),
        "{msg}"
    );
}

#[test]
fn misaligned_global() {
    let f = fault_of("ld.global.u32 %r2, [%rd3+2];", 32);
    assert_eq!(f.kind, FaultKind::Misaligned);
    assert_eq!(f.thread, [0, 0, 0]);
    let f = fault_of("ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd3+4];", 32);
    assert_eq!(f.kind, FaultKind::Misaligned);
}

#[test]
fn out_of_bounds_shared() {
    let src = kernel(
        ".shared .align 4 .b8 tile[128];\n shl.b32 %r5, %r1, 3;\n st.shared.u32 [%r5], %r1;",
    );
    // Lane l stores at byte 8*l: lanes 16 and up are past the 128-byte tile.
    match run_io(&src, "k", 32, &[0u32; 64], 64) {
        Err(SimError::Fault(f)) => {
            assert_eq!(f.kind, FaultKind::OutOfBounds);
            assert_eq!(f.thread, [16, 0, 0]);
            assert_eq!(f.address, Some(128));
        }
        other => panic!("expected a fault, got {other:?}"),
    }
}

#[test]
fn barrier_divergence() {
    // Threads of the second warp exit before the barrier.
    let f = fault_of("setp.ge.u32 %p1, %r1, 32;\n @%p1 ret;\n bar.sync 0;", 64);
    assert_eq!(f.kind, FaultKind::BarrierDivergence);
    assert_eq!(f.thread, [32, 0, 0]);
    // Half a warp exits: the remaining half cannot complete the barrier.
    let f = fault_of("setp.ge.u32 %p1, %r1, 16;\n @%p1 ret;\n bar.sync 0;", 32);
    assert_eq!(f.kind, FaultKind::BarrierDivergence);
    assert_eq!(f.thread, [16, 0, 0]);
}

#[test]
fn shfl_outside_membermask() {
    // Lanes 0..15 shuffle with mask 0xffff but read lane (l ^ 16), outside the mask.
    let body = "setp.lt.u32 %p1, %r1, 16;\n @!%p1 bra DONE;\n shfl.sync.bfly.b32 %r10, %r1, 16, 0x1f, 0xffff;\nDONE:";
    let f = fault_of(body, 32);
    assert_eq!(f.kind, FaultKind::WarpSync);
    assert_eq!(f.ptx_line, line_of(body, "shfl"));
    // Mask claims lanes that do not execute the shuffle.
    let body = "setp.lt.u32 %p1, %r1, 16;\n @!%p1 bra DONE;\n shfl.sync.idx.b32 %r10, %r1, 0, 0x1f, 0xffffffff;\nDONE:";
    assert_eq!(fault_of(body, 32).kind, FaultKind::WarpSync);
}

#[test]
fn trap_and_unsupported() {
    let f = fault_of("setp.eq.u32 %p1, %r1, 3;\n @%p1 trap;", 32);
    assert_eq!(f.kind, FaultKind::Trap);
    assert_eq!(f.thread, [3, 0, 0]);
    // A texture fetch loads but cannot launch.
    let src = ptx(&kernel("suq.width.b32 %r10, [%rd1];"));
    let m = Module::parse(&src).unwrap();
    assert_eq!(m.unsupported("k").len(), 1);
    let mut sim = Sim::new();
    let p = sim.alloc(4).unwrap();
    match sim.launch(&m, "k", cfg(1, 32), &[Arg::Ptr(p), Arg::Ptr(p)]) {
        Err(SimError::Unsupported { kernel, line, text }) => {
            assert_eq!(kernel, "k");
            assert!(text.starts_with("suq.width.b32"), "{text}");
            assert_eq!(
                line,
                src.lines().position(|l| l.contains("suq")).unwrap() + 1
            );
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn step_limit_stops_infinite_loop() {
    let m = Module::parse(&ptx(&kernel(
        "LOOP:\n add.s32 %r2, %r2, 1;\n bra.uni LOOP;",
    )))
    .unwrap();
    let mut sim = Sim::new();
    sim.set_step_limit(10_000);
    let p = sim.alloc(256).unwrap();
    match sim.launch(&m, "k", cfg(2, 64), &[Arg::Ptr(p), Arg::Ptr(p)]) {
        Err(SimError::Fault(f)) => {
            assert_eq!(f.kind, FaultKind::StepLimit);
            assert_eq!(f.block, [0, 0, 0]);
        }
        other => panic!("expected a step-limit fault, got {other:?}"),
    }
}

#[test]
fn use_after_free_and_bad_args() {
    let m = Module::parse(&ptx(&kernel("ld.global.u32 %r2, [%rd3];"))).unwrap();
    let mut sim = Sim::new();
    let p = sim.alloc(256).unwrap();
    let q = sim.alloc(256).unwrap();
    sim.free(p);
    let e = sim
        .launch(&m, "k", cfg(1, 32), &[Arg::Ptr(p), Arg::Ptr(q)])
        .unwrap_err();
    assert!(
        matches!(e, SimError::Fault(ref f) if f.kind == FaultKind::OutOfBounds),
        "{e}"
    );
    let e = sim.launch(&m, "k", cfg(1, 32), &[Arg::Ptr(q)]).unwrap_err();
    assert!(matches!(e, SimError::BadArgs { .. }), "{e}");
    let e = sim
        .launch(&m, "k", cfg(1, 32), &[Arg::U32(1), Arg::Ptr(q)])
        .unwrap_err();
    assert!(matches!(e, SimError::BadArgs { .. }), "{e}");
    let e = sim
        .launch(&m, "k", cfg(1, 2000), &[Arg::Ptr(q), Arg::Ptr(q)])
        .unwrap_err();
    assert!(matches!(e, SimError::BadLaunch { .. }), "{e}");
    assert!(matches!(
        sim.alloc(usize::MAX / 2),
        Err(SimError::OutOfMemory { .. })
    ));
    assert!(matches!(
        Module::parse("garbage !"),
        Err(SimError::Parse { .. })
    ));
}

/// A prefetch moves nothing but must name memory of the launch: one past the input buffer (thread
/// 3 of `%rd3 = input + 4·tid`, 256 bytes) is an out-of-bounds fault at its line (even before a
/// grid-dependency wait, where a prefetch is allowed), one inside it or a predicated-off one
/// runs, an unaligned one too (a line is prefetched, not a word).
#[test]
fn prefetch_outside_every_buffer() {
    let past =
        "setp.eq.u32 %p1, %r1, 3;\n @%p1 prefetch.global.L2 [%rd3+244];\n griddepcontrol.wait;";
    let f = fault_of(past, 32);
    assert_eq!(f.kind, FaultKind::OutOfBounds);
    assert_eq!(f.thread, [3, 0, 0]);
    assert_eq!(f.ptx_line, line_of(past, "prefetch"));
    assert_eq!(f.address, Some((1u64 << 36) + 256));
    assert!(f.detail.contains("prefetch"), "{}", f.detail);
    let generic = "prefetchu.L1 [%rd3+300];";
    assert_eq!(fault_of(generic, 32).kind, FaultKind::OutOfBounds);
    let input: Vec<u32> = (0..64).map(|i| 3 * i + 2).collect();
    // Each executing lane counts one prefetched line; a predicated-off lane none.
    for (ok, lines) in [
        ("prefetch.global.L2::evict_last [%rd3+129];", 32),
        (
            "setp.eq.u32 %p1, %r1, 99;\n @%p1 prefetch.global.L2 [%rd3+4096];",
            0,
        ),
    ] {
        let body = format!(
            "{ok}\n griddepcontrol.wait;\n ld.global.u32 %r2, [%rd3];\n st.global.u32 [%rd4], %r2;"
        );
        let (out, stats) = run_io(&kernel(&body), "k", 32, &input, 64).expect(ok);
        assert_eq!(out[..32], input[..32], "{ok}");
        assert_eq!(stats.prefetch_lanes, lines, "{ok}");
    }
}

/// A kernel that waits on its predecessor (`griddepcontrol.wait`, Hopper's programmatic dependent
/// launch) may compute and prefetch before the wait but not touch global memory: a load before it
/// is a fault naming the line; the same load after it, or a kernel without a wait, runs. Shared
/// memory before the wait is allowed.
#[test]
fn global_access_before_grid_dependency_wait() {
    let load = "ld.global.u32 %r2, [%rd3];";
    let store = "st.global.u32 [%rd4], %r2;";
    let prefetch = "prefetch.global.L2 [%rd3];";
    let early = format!("{prefetch}\n {load}\n griddepcontrol.wait;\n {store}");
    let f = fault_of(&early, 32);
    assert_eq!(f.kind, FaultKind::BeforeGridDependencyWait);
    assert_eq!(f.ptx_line, line_of(&early, load));
    // A generic address into global memory is global memory too.
    let generic = "cvta.global.u64 %rd5, %rd3;\n ld.u32 %r2, [%rd5];\n griddepcontrol.wait;";
    assert_eq!(
        fault_of(generic, 32).kind,
        FaultKind::BeforeGridDependencyWait
    );
    let ok = format!(
        ".shared .align 4 .b8 t[128];\n shl.b32 %r5, %r1, 2;\n st.shared.u32 [%r5], %r1;\n {prefetch}\n \
         griddepcontrol.wait;\n griddepcontrol.launch_dependents;\n {load}\n {store}"
    );
    let input: Vec<u32> = (0..64).map(|i| 7 * i + 1).collect();
    let (out, _) = run_io(&kernel(&ok), "k", 32, &input, 64).expect("the waited load runs");
    assert_eq!(&out[..32], &input[..32]);
    // Without a wait in the kernel the same early load is an ordinary load.
    let (out, _) = run_io(&kernel(&format!("{load}\n {store}")), "k", 32, &input, 64)
        .expect("no wait, no rule");
    assert_eq!(&out[..32], &input[..32]);
}

/// `ld.global.nc` (and `ldu`) may read through the non-coherent cache, which the kernel must
/// not write for the launch's lifetime: a non-coherent load of a word a store of the same launch
/// wrote (any thread, any block; here another thread's, after the barrier that orders it) is a
/// fault naming the load's line and address. A coherent load of it runs, and so does a
/// non-coherent load of a word only the host or an earlier launch wrote, or of the neighbour of
/// a written word.
#[test]
fn non_coherent_load_of_memory_this_launch_wrote() {
    // Thread t stores its input to out[t]; after the barrier, thread t reads out[t ^ 1].
    let body = |load: &str| {
        format!(
            "ld.global.u32 %r2, [%rd3];\n st.global.u32 [%rd4], %r2;\n bar.sync 0;\n \
             xor.b32 %r3, %r1, 1;\n mul.wide.u32 %rd6, %r3, 4;\n add.s64 %rd7, %rd2, %rd6;\n \
             {load} %r4, [%rd7];\n st.global.u32 [%rd4+128], %r4;"
        )
    };
    for load in [
        "ld.global.nc.u32",
        "ldu.global.u32",
        "ld.global.nc.L1::no_allocate.u32",
    ] {
        let src = body(load);
        let f = fault_of(&src, 32);
        assert_eq!(f.kind, FaultKind::NonCoherentRead, "{load}");
        assert_eq!(f.ptx_line, line_of(&src, load), "{load}");
        // Base of the output allocation (slot 2) plus thread 0's word of its neighbour's.
        assert_eq!(f.address, Some((2u64 << 36) + 4), "{load}");
        let msg = SimError::Fault(Box::new(f)).to_string();
        assert!(msg.contains("non-coherent"), "{msg}");
    }
    let input: Vec<u32> = (0..64).map(|i| 7 * i + 1).collect();
    for load in ["ld.global.u32", "ld.relaxed.gpu.global.u32"] {
        let (out, _) = run_io(&kernel(&body(load)), "k", 32, &input, 64).expect(load);
        let swapped: Vec<u32> = (0..32).map(|t| input[t ^ 1]).collect();
        assert_eq!(out[32..], swapped[..], "{load}");
    }
    // Only the host wrote the input: a non-coherent load of it runs; so does one of a word
    // beside the stored ones (out[32 + t] is stored only after the load).
    let plain = "ld.global.nc.u32 %r2, [%rd3];\n st.global.u32 [%rd4], %r2;\n \
                 ld.global.nc.u32 %r5, [%rd4+128];\n st.global.u32 [%rd4+128], %r5;";
    let (out, _) = run_io(&kernel(plain), "k", 32, &input, 64).expect("host-written input");
    assert_eq!(out[..32], input[..32]);
    // A second launch may read what the first wrote.
    let m = Module::parse(&ptx(&kernel(
        "ld.global.nc.u32 %r2, [%rd3];\n st.global.u32 [%rd4], %r2;",
    )))
    .expect("module");
    let mut sim = Sim::new();
    let a = upload_u32(&mut sim, &input);
    let b = upload_u32(&mut sim, &[0; 64]);
    let c = upload_u32(&mut sim, &[0; 64]);
    sim.launch(&m, "k", cfg(1, 32), &[Arg::Ptr(a), Arg::Ptr(b)])
        .expect("first launch");
    sim.launch(&m, "k", cfg(1, 32), &[Arg::Ptr(b), Arg::Ptr(c)])
        .expect("the next launch reads the first's output non-coherently");
    assert_eq!(download_u32(&sim, c, 32), input[..32]);
}
