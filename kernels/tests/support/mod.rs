//! Shared test plumbing: the backend loop, seeded inputs, poisoned outputs.

#![allow(dead_code)]

use ingot_kernels::backend::cuda::CudaBackend;
use ingot_kernels::Backend;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// Runs a generic test body on every available backend: the PTX simulator (feature `sim`) and
/// the GPU when `ingot_cuda` finds one. A missing backend is reported on stderr, never silently.
/// A GPU that exists but fails to load the module fails the test.
#[macro_export]
macro_rules! on_every_backend {
    ($body:ident) => {{
        #[cfg(feature = "sim")]
        {
            let mut sim = ingot_kernels::backend::sim::SimBackend::new().expect("ptx-sim backend");
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

/// The GPU backend, or `None` after printing why the GPU half is skipped.
pub fn gpu() -> Option<CudaBackend> {
    use ingot_cuda::CudaError;
    match CudaBackend::new(0) {
        Ok(g) => Some(g),
        Err(e @ (CudaError::NoDriver | CudaError::NoDevice { .. })) => {
            eprintln!("GPU half skipped: {e}");
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
pub fn upload<B: Backend>(b: &mut B, data: &[u8]) -> B::Buf {
    let buf = b.alloc(data.len()).expect("alloc");
    b.upload(&buf, data).expect("upload");
    buf
}

/// Allocates an output buffer filled with 0xFF (NaN as f32, an impossible q8_1 block), so a
/// byte the kernel fails to write cannot match the oracle.
pub fn poisoned<B: Backend>(b: &mut B, bytes: usize) -> B::Buf {
    upload(b, &vec![0xFF; bytes])
}

/// Downloads a whole buffer.
pub fn download<B: Backend>(b: &mut B, buf: &B::Buf) -> Vec<u8> {
    let mut out = vec![0u8; b.buf_len(buf)];
    b.download(buf, &mut out).expect("download");
    out
}

/// Downloads `n` floats.
pub fn download_f32<B: Backend>(b: &mut B, buf: &B::Buf, n: usize) -> Vec<f32> {
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
