//! Helpers shared by the integration tests: a PTX wrapper and buffer round trips.
#![allow(dead_code)]

use ptx_sim::{Arg, DevicePtr, LaunchConfig, LaunchStats, Module, Sim, SimError};

/// Wraps a kernel body in the module header rustc emits for sm_86.
pub fn ptx(body: &str) -> String {
    format!(".version 7.8\n.target sm_86\n.address_size 64\n\n{body}\n")
}

pub fn cfg(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        shared_bytes: 0,
    }
}

/// Runs `f` on one host thread, so that the in-order schedule runs the blocks one after another
/// in index order (with more threads, blocks run concurrently and a real host race may or may
/// not expose a missing barrier).
pub fn one_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool")
        .install(f)
}

pub fn upload_u32(sim: &mut Sim, v: &[u32]) -> DevicePtr {
    let p = sim.alloc(v.len() * 4).unwrap();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    sim.write(p, &bytes).unwrap();
    p
}

pub fn download_u32(sim: &Sim, p: DevicePtr, n: usize) -> Vec<u32> {
    let mut b = vec![0u8; n * 4];
    sim.read(p, &mut b).unwrap();
    b.chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Runs `kernel(in, out)` on one block of `threads` threads where `in` holds `input` and `out` has
/// `out_words` u32; returns `out`.
pub fn run_io(
    src: &str,
    kernel: &str,
    threads: u32,
    input: &[u32],
    out_words: usize,
) -> Result<(Vec<u32>, LaunchStats), SimError> {
    let m = Module::parse(&ptx(src))?;
    let mut sim = Sim::new();
    let i = upload_u32(&mut sim, input);
    let o = upload_u32(&mut sim, &vec![0; out_words]);
    let stats = sim.launch(&m, kernel, cfg(1, threads), &[Arg::Ptr(i), Arg::Ptr(o)])?;
    Ok((download_u32(&sim, o, out_words), stats))
}

/// Kernel prologue: `%rd1` = in, `%rd2` = out, `%r1` = tid.x, `%rd3` = in + 4*tid, `%rd4` = out +
/// 4*tid.
pub const PROLOGUE: &str = "
    .reg .pred %p<8>;
    .reg .b16 %h<8>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<16>;
    .reg .f32 %f<16>;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd3, %rd1, %rd5;
    add.s64 %rd4, %rd2, %rd5;
";

/// A one-block kernel `k(in, out)` whose body follows [`PROLOGUE`].
pub fn kernel(body: &str) -> String {
    format!(".visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)\n{{\n{PROLOGUE}\n{body}\n    ret;\n}}\n")
}

/// Runs `body` on 32 threads with `%r2 = a[tid]`, `%r3 = b[tid]`, `%r4 = c[tid]`, and returns each
/// thread's `%r10`.
pub fn lanes3(body: &str, a: &[u32; 32], b: &[u32; 32], c: &[u32; 32]) -> Vec<u32> {
    let src = kernel(&format!(
        "ld.global.u32 %r2, [%rd3];\n ld.global.u32 %r3, [%rd3+128];\n ld.global.u32 %r4, [%rd3+256];\n{body}\n st.global.u32 [%rd4], %r10;"
    ));
    let input: Vec<u32> = a.iter().chain(b).chain(c).copied().collect();
    match run_io(&src, "k", 32, &input, 32) {
        Ok((out, _)) => out,
        Err(e) => panic!("{e}"),
    }
}

/// Deterministic pseudo-random words (xorshift), mixed with edge values in the first lanes.
pub fn words(seed: u32) -> [u32; 32] {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    let mut out = [0u32; 32];
    let edges = [0, 1, u32::MAX, 0x8000_0000, 0x7fff_ffff, 31, 32, 33];
    for (i, o) in out.iter_mut().enumerate() {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        *o = if i < edges.len() {
            edges[(i + seed as usize) % edges.len()]
        } else {
            s
        };
    }
    out
}
