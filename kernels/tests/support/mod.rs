//! Shared test plumbing: the backend loop, seeded inputs, poisoned outputs.

#![allow(dead_code)]

pub mod attention;
pub mod gemv_type;
pub mod mmq;
#[cfg(feature = "sim")]
pub mod moe_args;
pub mod recorder;
pub mod rmsnorm;

use ingot_kernels::backend::cuda::CudaAccelerator;
use ingot_kernels::Accelerator;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// Runs a generic test body on every available accelerator: the PTX simulator (feature `sim`)
/// and the GPU when `ingot_cuda` finds one. A missing GPU is reported on stderr, never silently,
/// and fails the test when `INGOT_REQUIRE_GPU=1` (see [`gpu`]). A GPU that exists but fails to
/// load the module fails the test.
#[macro_export]
macro_rules! on_every_backend {
    ($body:ident) => {{
        #[cfg(feature = "sim")]
        if $crate::support::sim_half_wanted() {
            let mut sim =
                ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim backend");
            $body(&mut sim);
        }
        #[cfg(not(feature = "sim"))]
        eprintln!("sim half skipped: ingot-kernels built without feature `sim`");
        match $crate::support::gpu() {
            Some(mut gpu) => $body(&mut gpu),
            None => {}
        }
    }};
}

/// Whether [`on_every_backend`]'s simulator half runs: always, except with `INGOT_GPU_ONLY=1`,
/// which the device script sets because CI runs the simulator halves on every commit and the
/// GPU machine's minutes are scarce (the sim-vs-GPU comparisons still run the simulator).
pub fn sim_half_wanted() -> bool {
    if gpu_only() {
        eprintln!("sim half skipped: INGOT_GPU_ONLY=1");
    }
    !gpu_only()
}

/// `INGOT_GPU_ONLY=1`: skip the simulator halves; the GPU halves then must run (no GPU fails).
fn gpu_only() -> bool {
    std::env::var("INGOT_GPU_ONLY").is_ok_and(|v| v.trim() == "1")
}

/// The GPU accelerator, or `None` after printing why the GPU half is skipped. Without a GPU
/// and with `INGOT_REQUIRE_GPU=1` (set by `scripts/device-check.sh`) this panics instead, so a
/// skipped GPU half can never pass silently.
pub fn gpu() -> Option<CudaAccelerator> {
    use ingot_cuda::CudaError;
    match CudaAccelerator::new(0) {
        Ok(g) => Some(g),
        Err(e @ (CudaError::NoDriver | CudaError::NoDevice { .. })) => {
            let msg = ingot_cuda::no_gpu_message("kernel test", &e);
            if ingot_cuda::gpu_required() || gpu_only() {
                panic!("{msg}");
            }
            eprintln!("{msg}");
            None
        }
        Err(e) => panic!("a CUDA device exists but the kernels could not be loaded: {e}"),
    }
}

/// A fresh seed per run unless `INGOT_TEST_SEED` pins one; printed so a failure can be replayed.
pub fn rng(test: &str) -> StdRng {
    let seed = std::env::var("INGOT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x5eed)
        });
    eprintln!("{test}: seed {seed} (INGOT_TEST_SEED={seed} to replay)");
    StdRng::seed_from_u64(seed)
}

/// Allocates a buffer and uploads `data`.
pub fn upload<B: Accelerator>(b: &mut B, data: &[u8]) -> B::Buf {
    let buf = b.alloc(data.len()).expect("alloc");
    b.upload(&buf, data).expect("upload");
    buf
}

/// Allocates an output buffer filled with 0xFF (NaN as f32, an impossible q8_1 block), so a
/// byte the kernel fails to write cannot match the oracle.
pub fn poisoned<B: Accelerator>(b: &mut B, bytes: usize) -> B::Buf {
    upload(b, &vec![0xFF; bytes])
}

/// Downloads a whole buffer.
pub fn download<B: Accelerator>(b: &mut B, buf: &B::Buf) -> Vec<u8> {
    let mut out = vec![0u8; b.buf_len(buf)];
    b.download(buf, &mut out).expect("download");
    out
}

/// Downloads `n` floats.
pub fn download_f32<B: Accelerator>(b: &mut B, buf: &B::Buf, n: usize) -> Vec<f32> {
    let mut out = vec![0u8; n * 4];
    b.download(buf, &mut out).expect("download");
    out.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Little-endian bytes of a float slice.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One launch a test can run on any backend: uploads its inputs, launches, and returns the
/// output bytes (fresh buffers per call, so each backend sees the same inputs).
pub trait SameLaunch {
    fn run<B: Accelerator>(&self, b: &mut B) -> Vec<u8>;
}

/// How two backends' outputs of one launch must agree.
#[derive(Clone, Copy, Debug)]
pub enum Agree {
    /// Every byte equal (integer results, q8_1 blocks, and f32 results whose summation order
    /// the kernel fixes).
    Bits,
    /// Little-endian f32s within `rel·|sim| + abs` of each other.
    F32 { rel: f32, abs: f32 },
}

/// Runs `l` on the simulator and on the GPU and checks that the outputs agree as `agree` says,
/// so a GPU run is also the final word on the simulator. Prints why it was skipped when either
/// backend is missing; returns whether the comparison ran.
pub fn sim_matches_gpu<L: SameLaunch>(what: &str, l: &L, agree: Agree) -> bool {
    #[cfg(not(feature = "sim"))]
    {
        let _ = (l, agree);
        eprintln!("{what}: sim-vs-GPU skipped: ingot-kernels built without feature `sim`");
        false
    }
    #[cfg(feature = "sim")]
    {
        let Some(mut gpu) = gpu() else {
            eprintln!("{what}: sim-vs-GPU skipped: no GPU");
            return false;
        };
        let mut sim = ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim backend");
        let (s, g) = (l.run(&mut sim), l.run(&mut gpu));
        assert_eq!(s.len(), g.len(), "{what}: output lengths differ");
        match agree {
            Agree::Bits => {
                if let Some(i) = (0..s.len()).find(|&i| s[i] != g[i]) {
                    panic!(
                        "{what}: sim and GPU differ first at byte {i}: {:#04x} vs {:#04x}",
                        s[i], g[i]
                    );
                }
            }
            Agree::F32 { rel, abs } => {
                for (i, (a, c)) in s.chunks_exact(4).zip(g.chunks_exact(4)).enumerate() {
                    let a = f32::from_le_bytes([a[0], a[1], a[2], a[3]]);
                    let c = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    assert!(
                        (a - c).abs() <= rel * a.abs() + abs,
                        "{what}: float {i}: sim {a} vs GPU {c}"
                    );
                }
            }
        }
        eprintln!("{what}: sim and GPU agree ({} bytes, {agree:?})", s.len());
        true
    }
}
