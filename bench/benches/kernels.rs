//! `cargo bench -p ingot-bench`: every case of `ingot_bench::cases::CASES`.
//!
//! On a GPU: criterion drives CUDA-event timings (`iter_custom`), then a summary table gives
//! each kernel's median time, GB/s of the bytes it must move, and that as a fraction of the
//! card's device-to-device copy bandwidth measured in the same run (a cold case above it marks
//! the bench invalid: exit status 2). Without a GPU: each case
//! runs once in the PTX simulator and its counters are printed; no time is measured.
//!
//! A non-flag argument filters cases by substring of `kernel/tensor` (as criterion does).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use criterion::Criterion;
use ingot_bench::cases::{Case, CASES};
use ingot_bench::device::Device;
use ingot_bench::gpu::{median, GpuRig};
use ingot_bench::report::{gpu_table, over_copy, sass_table, sim_table, GpuResult};
use ingot_bench::{sim, witness};

/// Criterion samples per case; each is one `iter_custom` call.
const SAMPLES: usize = 10;
/// Repetitions of the reference copy.
const COPY_REPS: usize = 9;

fn filter() -> Option<String> {
    std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .filter(|a| !a.is_empty())
}

fn selected() -> Vec<&'static Case> {
    let f = filter();
    CASES
        .iter()
        .filter(|c| f.as_ref().is_none_or(|f| c.id().contains(f.as_str())))
        .collect()
}

fn main() {
    let code = match GpuRig::open(0) {
        Ok(rig) => run_gpu(rig),
        Err(ingot_bench::BenchError::Cuda(
            e @ (ingot_cuda::CudaError::NoDriver | ingot_cuda::CudaError::NoDevice { .. }),
        )) if ingot_cuda::gpu_required() => {
            eprintln!("{}", ingot_cuda::no_gpu_message("kernel bench", &e));
            1
        }
        // A GPU that is there but cannot be used (a JIT or context error) is a failure whenever
        // a GPU is required: simulator counters would read as the card's result.
        Err(e) if ingot_cuda::gpu_required() => {
            eprintln!(
                "kernel bench: opening GPU 0 failed: {e}; {}=1, so this is a failure",
                ingot_cuda::REQUIRE_GPU_VAR
            );
            1
        }
        Err(e) => run_sim(&e.to_string()),
    };
    std::process::exit(code);
}

fn run_sim(no_gpu: &str) -> i32 {
    println!("no GPU ({no_gpu}): simulator counters only, no time measured");
    println!("{}", witness::cpu(witness::rayon_threads()));
    let mut dev = match Device::sim() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let mut reports = Vec::new();
    let mut failed = 0;
    for case in selected() {
        let start = Instant::now();
        match sim::run_case(&mut dev, case) {
            Ok(r) => {
                eprintln!(
                    "  {} simulated in {:.1} s",
                    case.id(),
                    start.elapsed().as_secs_f64()
                );
                reports.push(r);
            }
            Err(e) => {
                eprintln!("  {}: FAILED: {e}", case.id());
                failed += 1;
            }
        }
    }
    print!("{}", sim_table(&reports));
    if reports.iter().any(|r| r.reduced()) {
        println!(
            "* fewer rows simulated than the real shape (simulated buffers capped at {} KB); \
             read/need and per-row figures are for the rows that ran",
            sim::SIM_MAX_BUFFER_BYTES / 1024
        );
    }
    print_sass(&reports.iter().map(|r| r.case.kernel).collect::<Vec<_>>());
    println!(
        "read/need: global bytes loaded over bytes the kernel must read (1.000 = each once); \
         sect/req: 32-byte sectors per warp-level global request; sect eff: bytes requested over \
         bytes of sectors touched; table KB: code-book bytes loaded (module-scope tables the L1 \
         serves once warm; not in read KB)"
    );
    i32::from(failed > 0)
}

fn run_gpu(mut rig: GpuRig) -> i32 {
    match witness::gpu(0) {
        Ok(w) => println!("{w}"),
        Err(e) => println!("gpu: {} (NVML unavailable: {e})", rig.name()),
    }
    let copy = match rig.copy_gbps(COPY_REPS) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: reference copy: {e}");
            return 1;
        }
    };
    println!(
        "device-to-device copy: {copy:.1} GB/s (read + written, {} MiB, median of {COPY_REPS}); L2 {} MB",
        ingot_bench::gpu::COPY_BYTES >> 20,
        rig.l2_bytes as f64 / 1e6
    );
    let mut criterion = Criterion::default()
        .sample_size(SAMPLES)
        .warm_up_time(std::time::Duration::from_millis(200))
        .measurement_time(std::time::Duration::from_millis(50))
        .configure_from_args();
    let rig = Arc::new(Mutex::new(rig));
    let mut results = Vec::new();
    let mut failed = 0;
    for case in selected() {
        match bench_case(&mut criterion, &rig, case) {
            Ok(r) => results.push(r),
            Err(e) => {
                eprintln!("{}: FAILED: {e}", case.id());
                failed += 1;
            }
        }
    }
    println!(
        "\nsummary (median of {SAMPLES} samples; GB/s = bytes the kernel must read + write / time)"
    );
    print!("{}", gpu_table(&results, copy));
    print_sass(&results.iter().map(|r| r.case.kernel).collect::<Vec<_>>());
    let invalid = over_copy(&results, copy);
    if !invalid.is_empty() {
        println!(
            "bench INVALID: {} cold case(s) above the {copy:.1} GB/s device-to-device copy of this run \
             (first: {}/{}); the timing does not measure the kernels",
            invalid.len(),
            invalid[0].case.kernel,
            invalid[0].case.tensor
        );
        return 2;
    }
    println!("bench valid: every cold case is below the {copy:.1} GB/s copy of this run");
    i32::from(failed > 0)
}

fn bench_case(
    criterion: &mut Criterion,
    rig: &Arc<Mutex<GpuRig>>,
    case: &'static Case,
) -> ingot_bench::Result<GpuResult> {
    let mut guard = rig.lock().unwrap_or_else(|p| p.into_inner());
    let prepared = guard.prepare(case)?;
    let l2 = guard.l2_bytes;
    drop(guard);
    // Per-launch seconds of every iter_custom call. Criterion's warm-up calls it too; its
    // measurement phase is the last SAMPLES calls, which is what the median is taken over.
    let per_launch: Arc<Mutex<Vec<f64>>> = Arc::default();
    let mut error = None;
    {
        let mut group = criterion.benchmark_group(case.kernel);
        group.throughput(criterion::Throughput::Bytes(prepared.required as u64));
        group.bench_function(case.tensor, |b| {
            b.iter_custom(|iters| {
                let mut rig = rig.lock().unwrap_or_else(|p| p.into_inner());
                match rig.time(case, &prepared, iters) {
                    Ok(t) => {
                        per_launch
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(t.as_secs_f64() / iters.max(1) as f64);
                        t
                    }
                    Err(e) => {
                        error.get_or_insert(e);
                        std::time::Duration::from_nanos(1)
                    }
                }
            })
        });
        group.finish();
    }
    if let Some(e) = error {
        return Err(e);
    }
    let mut samples = per_launch.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let from = samples.len().saturating_sub(SAMPLES);
    let median_s = median(&mut samples[from..]).unwrap_or(f64::NAN);
    Ok(GpuResult {
        case: *case,
        median_s,
        required: prepared.required,
        working_set: prepared.working_set,
        cold: prepared.cold(l2),
    })
}

/// The gemv kernels' SASS per 256 weights (`ingot_bench::sass`), or the announced reason it is
/// skipped (no ptxas/cuobjdump).
fn print_sass(kernels: &[&'static str]) {
    match ingot_bench::sass::gemv_sass(kernels) {
        Ok(rows) if rows.is_empty() => {}
        Ok(rows) => {
            print!("{}", sass_table(&rows));
            println!(
                "loop: SASS instructions of the weight-streaming loop (ptxas --entry, cuobjdump); \
                 weights/iter: weights one iteration of a warp covers; SASS/256w: per super-block"
            );
        }
        Err(e) => println!(
            "SASS per 256 weights: SKIPPED ({e}; `cargo xtask tools` installs ptxas and cuobjdump \
             and prints the paths to set in INGOT_PTXAS and INGOT_CUOBJDUMP)"
        ),
    }
}
