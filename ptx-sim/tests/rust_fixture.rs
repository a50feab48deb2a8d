//! rustc-generated PTX (tests/fixtures/rust_kernels.{rs,ptx}) parses and runs.
//! Rebuild the fixture with the recipe in tests/fixtures/rust_kernels.rs's header comment.
mod common;
use common::*;
use ptx_sim::{Arg, FaultKind, LaunchConfig, Module, Sim, SimError};

const PTX: &str = include_str!("fixtures/rust_kernels.ptx");

fn f32s(sim: &mut Sim, v: &[f32]) -> ptx_sim::DevicePtr {
    let p = sim.alloc(v.len() * 4).unwrap();
    sim.write(
        p,
        &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
    )
    .unwrap();
    p
}

fn read_f32s(sim: &Sim, p: ptx_sim::DevicePtr, n: usize) -> Vec<f32> {
    download_u32(sim, p, n)
        .into_iter()
        .map(f32::from_bits)
        .collect()
}

#[test]
fn saxpy_matches_host() {
    let m = Module::parse(PTX).unwrap();
    assert_eq!(m.kernels(), vec!["row_sum", "saxpy"]);
    let mut sim = Sim::new();
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.37 - 50.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i as f32).sqrt()).collect();
    let (px, py) = (f32s(&mut sim, &x), f32s(&mut sim, &y));
    let a = 1.75f32;
    let stats = sim
        .launch(
            &m,
            "saxpy",
            cfg(4, 256),
            &[Arg::U32(n as u32), Arg::F32(a), Arg::Ptr(px), Arg::Ptr(py)],
        )
        .unwrap();
    let got = read_f32s(&sim, py, n);
    // The PTX does mul.rn then add.rn (no fma contraction), which is exactly the host's `a * x +
    // y`.
    for i in 0..n {
        assert_eq!(got[i].to_bits(), (a * x[i] + y[i]).to_bits(), "element {i}");
    }
    // 1000 active threads read x and y and write y, 4 bytes each.
    assert_eq!(stats.global_bytes_read, 8 * n as u64);
    assert_eq!(stats.global_bytes_written, 4 * n as u64);
}

#[test]
fn row_sum_with_shuffles_shared_memory_and_barrier() {
    let m = Module::parse(PTX).unwrap();
    let mut sim = Sim::new();
    let (rows, cols) = (3usize, 300usize);
    // Small integers: every partial sum is exact in f32, so the result is order-independent.
    let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 7) % 13) as f32).collect();
    let px = f32s(&mut sim, &x);
    let lens = upload_u32(&mut sim, &[cols as u32; 4]);
    let out = sim.alloc(rows * 4).unwrap();
    let block = 128u32;
    let launch = LaunchConfig {
        grid: [rows as u32, 1, 1],
        block: [block, 1, 1],
        shared_bytes: block / 32 * 4,
    };
    let stats = sim
        .launch(
            &m,
            "row_sum",
            launch,
            &[
                Arg::Ptr(px),
                Arg::U32(cols as u32),
                Arg::Ptr(lens),
                Arg::Ptr(out),
            ],
        )
        .unwrap();
    let got = read_f32s(&sim, out, rows);
    for r in 0..rows {
        let want: f32 = x[r * cols..(r + 1) * cols].iter().sum();
        assert_eq!(got[r], want, "row {r}");
    }
    assert_eq!(stats.barriers, rows as u64);
    assert!(
        stats.by_class.other >= 5 * 4 * rows as u64,
        "5 shuffles per warp: {stats:?}"
    );

    // A length mismatch makes the kernel's own check execute `trap`.
    let bad = upload_u32(&mut sim, &[cols as u32, 1, cols as u32, 0]);
    let err = sim
        .launch(
            &m,
            "row_sum",
            launch,
            &[
                Arg::Ptr(px),
                Arg::U32(cols as u32),
                Arg::Ptr(bad),
                Arg::Ptr(out),
            ],
        )
        .unwrap_err();
    match err {
        SimError::Fault(f) => {
            assert_eq!(f.kind, FaultKind::Trap);
            assert_eq!(f.block, [1, 0, 0]);
        }
        other => panic!("expected a trap, got {other}"),
    }
}
