//! The device check's first step (`scripts/device-check.sh`): open GPU 0, load the kernels (the
//! device's embedded cubin, else the committed PTX through the JIT) and say how long that took,
//! then run one kernel (`quantize_q8_1`, integer and `.rn` arithmetic only, so bit-identical by
//! construction) on the GPU and in ptx-sim and compare every byte, and both with the CPU oracle.
//! Each stage prints one `smoke:` line, so the first one missing from a log names the stage that
//! failed. Without a GPU the test says so and passes, unless `INGOT_REQUIRE_GPU=1`, when it fails.
//!
//! `INGOT_JIT_LOG=<path>` writes the JIT's verbose info log (registers, spills per kernel) there.

mod support;

use ingot_abi::blocks::QK8_1;
use ingot_kernels::backend::cuda::CudaAccelerator;
use ingot_kernels::{ops, Accelerator};
use rand::Rng;
use support::{download, f32_bytes, poisoned, upload};

/// 64 blocks of 32 values (two thread blocks of the kernel).
const N: usize = 2048;

fn quantize<B: Accelerator>(b: &mut B, x: &[f32]) -> Vec<u8> {
    let xb = upload(b, &f32_bytes(x));
    let yb = poisoned(b, x.len() / QK8_1 * 36);
    ops::quantize_q8_1(b, &xb, &yb, x.len()).expect("quantize_q8_1 launch");
    download(b, &yb)
}

#[test]
fn smoke_open_jit_and_one_kernel_against_the_simulator() {
    let started = std::time::Instant::now();
    let mut gpu = match CudaAccelerator::new(0) {
        Ok(g) => g,
        Err(e @ (ingot_cuda::CudaError::NoDriver | ingot_cuda::CudaError::NoDevice { .. })) => {
            let msg = ingot_cuda::no_gpu_message("smoke", &e);
            assert!(!ingot_cuda::gpu_required(), "{msg}");
            eprintln!("{msg}");
            return;
        }
        Err(e) => panic!("smoke: the device opened but the module did not load: {e}"),
    };
    let jit = gpu.jit_report();
    println!(
        "smoke: device {} opened and module loaded ({}): jit {:.0} ms, cuModuleLoadDataEx {:.0} ms, \
         open+load {:.0} ms, info log {} lines",
        gpu.name(),
        jit.source.describe(),
        jit.jit_ms,
        jit.load_ms,
        started.elapsed().as_secs_f64() * 1e3,
        jit.info_log.lines().count()
    );
    println!("smoke: kernels: {}", jit.summary());
    // A build that embeds a cubin for this device must load it: a silent fallback to the JIT
    // would hide a broken cubin and cost every user the JIT's time.
    let cc = gpu.gpu().compute_capability().expect("compute capability");
    let skipped = ingot_kernels::cubin::cubins_disabled();
    if let Some(c) = ingot_kernels::cubin::for_device(cc).filter(|_| !skipped) {
        assert_eq!(
            jit.source,
            ingot_cuda::ModuleSource::Cubin(c.arch.to_string()),
            "smoke: this build embeds the {} cubin for compute capability {cc:?} but loaded {}",
            c.arch,
            jit.summary()
        );
    }
    if let Some(path) = std::env::var_os("INGOT_JIT_LOG") {
        match std::fs::write(&path, &jit.info_log) {
            Ok(()) => println!("smoke: JIT info log written to {}", path.to_string_lossy()),
            Err(e) => eprintln!("smoke: could not write the JIT info log to {path:?}: {e}"),
        }
    }

    let mut rng = support::rng("smoke");
    let x: Vec<f32> = (0..N).map(|_| rng.random_range(-4.0f32..4.0)).collect();
    let expect: Vec<u8> = bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&x)).to_vec();
    let on_gpu = quantize(&mut gpu, &x);
    println!("smoke: quantize_q8_1 ran on the GPU");
    let mut sim = ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim");
    let on_sim = quantize(&mut sim, &x);
    if let Some(i) = (0..on_gpu.len()).find(|&i| on_gpu[i] != on_sim[i]) {
        panic!(
            "smoke: quantize_q8_1 differs between GPU and ptx-sim first at byte {i} (block {}): \
             {:#04x} vs {:#04x}",
            i / 36,
            on_gpu[i],
            on_sim[i]
        );
    }
    assert_eq!(on_sim, expect, "smoke: ptx-sim differs from the CPU oracle");
    println!(
        "smoke: quantize_q8_1 n={N}: GPU, ptx-sim and the CPU oracle agree bit for bit ({} bytes)",
        on_gpu.len()
    );
}
