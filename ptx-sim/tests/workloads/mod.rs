//! Deterministic launches of real kernels, shared by the counter regression test and the throughput
//! benchmark: the rustc fixture (`row_sum`) and the project's kernels as of the snapshot
//! `fixtures/ingot_kernels.ptx` (a copy of `kernels/ptx/ingot.ptx`; a copy, so that the pinned
//! counters do not move when the kernels are rebuilt).
#![allow(dead_code)]

use ptx_sim::{Arg, DevicePtr, LaunchConfig, LaunchStats, Module, Sim, SimError};

pub const INGOT_PTX: &str = include_str!("../fixtures/ingot_kernels.ptx");
pub const RUST_PTX: &str = include_str!("../fixtures/rust_kernels.ptx");

/// Bytes of one Q4_K super-block (f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes).
pub const Q4K_BYTES: usize = 144;
/// Bytes of one Q3_K super-block (32 hmask, 64 qs, 12 scales, f16 d).
pub const Q3K_BYTES: usize = 110;
/// Bytes of one q8_1 block (f16 d, f16 s, 32 signed bytes).
pub const Q8_1_BYTES: usize = 36;
/// Values per K-quant super-block and per q8_1 block.
pub const QK_K: usize = 256;
pub const QK8_1: usize = 32;

/// xorshift64*: a fixed, dependency-free byte source.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn fill(&mut self, out: &mut [u8]) {
        for b in out {
            *b = (self.next_u64() >> 56) as u8;
        }
    }
    /// A positive normal f16 in [2^-9, 2^-7): the magnitude of real block scales.
    pub fn f16_scale(&mut self) -> [u8; 2] {
        let bits = 0x1800u16 + (self.next_u64() % 0x800) as u16;
        bits.to_le_bytes()
    }
}

/// One launch: kernel, configuration, arguments, and the output buffer to read back.
pub struct Launch {
    pub kernel: &'static str,
    pub cfg: LaunchConfig,
    pub args: Vec<Arg>,
    pub out: DevicePtr,
    pub out_bytes: usize,
}

impl Launch {
    /// Runs the launch and returns its counters and an FNV-1a hash of the output bytes.
    pub fn run(&self, sim: &mut Sim, m: &Module) -> Result<(LaunchStats, u64), SimError> {
        let stats = sim.launch(m, self.kernel, self.cfg, &self.args)?;
        let mut out = vec![0u8; self.out_bytes];
        sim.read(self.out, &mut out)?;
        Ok((stats, fnv1a(&out)))
    }
}

/// FNV-1a 64, written here because the PTX tools know nothing of ingot (ingot's own is
/// `ingot_abi::hash`).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn upload(sim: &mut Sim, bytes: &[u8]) -> DevicePtr {
    let p = sim.alloc(bytes.len()).expect("alloc");
    sim.write(p, bytes).expect("write");
    p
}

fn cfg1(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        shared_bytes: 0,
    }
}

/// `ncols / 32` q8_1 blocks with valid f16 scales and random quants.
fn q8_1_vector(rng: &mut Rng, ncols: usize) -> Vec<u8> {
    let mut x = vec![0u8; ncols / QK8_1 * Q8_1_BYTES];
    for b in x.chunks_mut(Q8_1_BYTES) {
        rng.fill(b);
        b[0..2].copy_from_slice(&rng.f16_scale());
        b[2..4].copy_from_slice(&rng.f16_scale());
    }
    x
}

/// `gemv_q4k_q8_1` on an `nrows x ncols` matrix of random Q4_K blocks (4 rows per block of 128
/// threads).
pub fn gemv_q4k(sim: &mut Sim, rng: &mut Rng, nrows: usize, ncols: usize) -> Launch {
    let mut w = vec![0u8; nrows * ncols / QK_K * Q4K_BYTES];
    for b in w.chunks_mut(Q4K_BYTES) {
        rng.fill(b);
        b[0..2].copy_from_slice(&rng.f16_scale());
        b[2..4].copy_from_slice(&rng.f16_scale());
    }
    gemv("gemv_q4k_q8_1", sim, rng, &w, nrows, ncols)
}

/// `gemv_q3k_q8_1` on an `nrows x ncols` matrix of random Q3_K blocks.
pub fn gemv_q3k(sim: &mut Sim, rng: &mut Rng, nrows: usize, ncols: usize) -> Launch {
    let mut w = vec![0u8; nrows * ncols / QK_K * Q3K_BYTES];
    for b in w.chunks_mut(Q3K_BYTES) {
        rng.fill(b);
        b[108..110].copy_from_slice(&rng.f16_scale());
    }
    gemv("gemv_q3k_q8_1", sim, rng, &w, nrows, ncols)
}

fn gemv(
    kernel: &'static str,
    sim: &mut Sim,
    rng: &mut Rng,
    w: &[u8],
    nrows: usize,
    ncols: usize,
) -> Launch {
    let x = q8_1_vector(rng, ncols);
    let (pw, px) = (upload(sim, w), upload(sim, &x));
    let out = sim.alloc(nrows * 4).expect("alloc");
    Launch {
        kernel,
        cfg: cfg1(nrows.div_ceil(4) as u32, 128),
        args: vec![
            Arg::Ptr(pw),
            Arg::Ptr(px),
            Arg::Ptr(out),
            Arg::U32(ncols as u32),
            Arg::U32(nrows as u32),
        ],
        out,
        out_bytes: nrows * 4,
    }
}

/// Small-integer floats in [-8, 8], exact in every format the kernels use.
fn floats(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|_| (((rng.next_u64() % 17) as f32) - 8.0).to_le_bytes())
        .collect()
}

/// `quantize_q8_1` of `n` floats (1024 per block of 256 threads).
pub fn quantize_q8_1(sim: &mut Sim, rng: &mut Rng, n: usize) -> Launch {
    let px = upload(sim, &floats(rng, n));
    let out = sim.alloc(n / QK8_1 * Q8_1_BYTES).expect("alloc");
    Launch {
        kernel: "quantize_q8_1",
        cfg: cfg1(n.div_ceil(1024) as u32, 256),
        args: vec![Arg::Ptr(px), Arg::Ptr(out), Arg::U32(n as u32)],
        out,
        out_bytes: n / QK8_1 * Q8_1_BYTES,
    }
}

/// `rmsnorm_f32` of `rows` rows of `n` floats (one block of 256 threads per row).
pub fn rmsnorm(sim: &mut Sim, rng: &mut Rng, rows: usize, n: usize) -> Launch {
    let px = upload(sim, &floats(rng, rows * n));
    let pw = upload(sim, &floats(rng, n));
    let out = sim.alloc(rows * n * 4).expect("alloc");
    Launch {
        kernel: "rmsnorm_f32",
        cfg: cfg1(rows as u32, 256),
        args: vec![
            Arg::Ptr(px),
            Arg::Ptr(pw),
            Arg::Ptr(out),
            Arg::U32(n as u32),
            Arg::F32(1e-6),
        ],
        out,
        out_bytes: rows * n * 4,
    }
}

/// The fixture's `row_sum` over `rows` (at most 4) rows of `cols` floats, `block` threads per row.
pub fn row_sum(sim: &mut Sim, rng: &mut Rng, rows: usize, cols: usize, block: u32) -> Launch {
    let px = upload(sim, &floats(rng, rows * cols));
    let lens: Vec<u8> = [cols as u32; 4]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let plens = upload(sim, &lens);
    let out = sim.alloc(rows * 4).expect("alloc");
    Launch {
        kernel: "row_sum",
        cfg: LaunchConfig {
            grid: [rows as u32, 1, 1],
            block: [block, 1, 1],
            shared_bytes: block / 32 * 4,
        },
        args: vec![
            Arg::Ptr(px),
            Arg::U32(cols as u32),
            Arg::Ptr(plens),
            Arg::Ptr(out),
        ],
        out,
        out_bytes: rows * 4,
    }
}
