//! Simulator speed on the rustc-compiled `row_sum` fixture. Ignored by default (it wants a release build):
//! `cargo test --release -p ptx-sim --test throughput -- --ignored --nocapture`.
mod common;
use common::*;
use ptx_sim::{Arg, LaunchConfig, Module, Sim};
use std::time::Instant;

#[test]
#[ignore]
fn warp_instructions_per_second() {
    let m = Module::parse(include_str!("fixtures/rust_kernels.ptx")).unwrap();
    let mut sim = Sim::new();
    // `lens: &[u32; 4]` limits the grid to 4 rows (a larger row index traps on the bounds check).
    let (rows, cols) = (4usize, 1usize << 20);
    let x: Vec<u32> = (0..rows * cols)
        .map(|i| ((i % 5) as f32).to_bits())
        .collect();
    let px = upload_u32(&mut sim, &x);
    let lens = upload_u32(&mut sim, &[cols as u32; 4]);
    let out = sim.alloc(rows * 4).unwrap();
    let launch = LaunchConfig {
        grid: [rows as u32, 1, 1],
        block: [256, 1, 1],
        shared_bytes: 32,
    };
    let mut best = f64::MAX;
    let mut stats = None;
    for _ in 0..3 {
        let t = Instant::now();
        let mut total = 0u64;
        for _ in 0..2 {
            let s = sim
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
            total += s.warp_instructions;
            stats = Some(s);
        }
        best = best.min(t.elapsed().as_secs_f64() / total as f64);
    }
    let s = stats.unwrap();
    println!(
        "row_sum: {} warp instructions per launch, {:.1} M warp instructions/s ({} threads available)",
        s.warp_instructions,
        1e-6 / best,
        rayon::current_num_threads()
    );
    assert!(s.warp_instructions > 0);
}
