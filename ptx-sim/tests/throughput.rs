//! Simulator speed, in warp instructions per second of wall time (all host cores), on the
//! rustc-compiled `row_sum` fixture and on the project's real kernels at model shapes. Ignored by
//! default (they want a release build): `cargo test --release -p ptx-sim --test throughput --
//! --ignored --nocapture`.
mod workloads;

use ptx_sim::{LaunchStats, Module, Sim};
use std::time::Instant;
use workloads::*;

/// CPU time consumed so far by all threads of this process, in seconds (Linux: the sum of
/// `/proc/self/task/*/schedstat`, nanosecond resolution); `None` elsewhere. On a shared machine
/// this is steadier than wall time, which counts time spent waiting for a core.
fn process_cpu_seconds() -> Option<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 * 1e-9)
}

/// Best of `reps` timed launches (after one warm-up launch), as warp instructions per second of
/// wall time, and per second of CPU time (i.e. per busy core).
fn measure(name: &str, ptx: &str, reps: usize, make: impl FnOnce(&mut Sim, &mut Rng) -> Launch) {
    let m = Module::parse(ptx).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Sim::new();
    let launch = make(&mut sim, &mut Rng::new(1));
    let run = |sim: &mut Sim| -> LaunchStats {
        launch
            .run(sim, &m)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .0
    };
    let stats = run(&mut sim);
    let (mut best, mut best_cpu) = (f64::MAX, f64::MAX);
    for _ in 0..reps {
        let (t, cpu) = (Instant::now(), process_cpu_seconds());
        let s = run(&mut sim);
        best = best.min(t.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (cpu, process_cpu_seconds()) {
            best_cpu = best_cpu.min(b - a);
        }
        assert_eq!(
            s, stats,
            "{name}: counters differ between identical launches"
        );
    }
    let per_s = |secs: f64| stats.warp_instructions as f64 / secs * 1e-6;
    println!(
        "{name}: {} warp instructions, {} blocks, best {:.1} ms: {:.1} M warp instructions/s wall, \
         {:.1} M per CPU-second ({} threads available)",
        stats.warp_instructions,
        stats.blocks,
        best * 1e3,
        per_s(best),
        per_s(best_cpu),
        rayon::current_num_threads()
    );
    assert!(stats.warp_instructions > 0);
}

#[test]
#[ignore]
fn row_sum_fixture() {
    // `lens: &[u32; 4]` limits the grid to 4 rows (a larger row index traps on the bounds check).
    measure("row_sum 4x2^20", RUST_PTX, 5, |sim, rng| {
        row_sum(sim, rng, 4, 1 << 20, 256)
    });
}

#[test]
#[ignore]
fn gemv_q4k_2048() {
    measure("gemv_q4k_q8_1 2048x2048", INGOT_PTX, 5, |sim, rng| {
        gemv_q4k(sim, rng, 2048, 2048)
    });
}

#[test]
#[ignore]
fn gemv_q3k_2048() {
    measure("gemv_q3k_q8_1 2048x2048", INGOT_PTX, 5, |sim, rng| {
        gemv_q3k(sim, rng, 2048, 2048)
    });
}

#[test]
#[ignore]
fn rmsnorm_and_quantize_2048() {
    measure("rmsnorm_f32 4x2048", INGOT_PTX, 3, |sim, rng| {
        rmsnorm(sim, rng, 4, 2048)
    });
    measure("quantize_q8_1 2048", INGOT_PTX, 3, |sim, rng| {
        quantize_q8_1(sim, rng, 2048)
    });
}
