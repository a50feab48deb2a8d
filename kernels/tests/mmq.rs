//! `mmq_q4k` (prefill: Q4_K weights times the q8_1 activations of many tokens, int8 tensor
//! cores) against a CPU f64 reference of the same quantized math, and its weight traffic.
//!
//! Weights are random valid Q4_K blocks (every scale/min/nibble pattern occurs, d and dmin
//! positive and non-zero); activations are random floats quantized per token by the CPU q8_1
//! oracle, so this test does not depend on the quantize kernel. Shapes cover token counts below,
//! at and past the 64-token tile (1, 7, 64, 130), row counts below, at and past the 64-row tile
//! (64, 100, 576), one and eight super-blocks per row.

mod support;

use half::f16;
use ingot_abi::blocks::{get_scale_min_k4, BlockQ4K, BlockQ8_1, QK8_1, QK_K};
use ingot_abi::launch::{mmq_token_tiles, MMQ_ROWS};
use ingot_kernels::{ops, Accelerator};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use support::{download, poisoned, upload, Agree, SameLaunch};

const TOKENS: [usize; 4] = [1, 7, 64, 130];
const ROWS: [usize; 3] = [64, 100, 576];
const COLS: [usize; 2] = [256, 2048];
/// Independent input draws per shape (each from its own seed, taken from the test's seed).
const ROUNDS: usize = 2;

fn random_q4k(rng: &mut impl Rng) -> BlockQ4K {
    let mut b = BlockQ4K {
        d: f16::from_f32(rng.random_range(1e-3f32..1e-2)).to_bits(),
        dmin: f16::from_f32(rng.random_range(1e-3f32..1e-2)).to_bits(),
        scales: [0; 12],
        qs: [0; 128],
    };
    rng.fill(&mut b.scales[..]);
    rng.fill(&mut b.qs[..]);
    b
}

/// The exact value of one row's dot product with one token's activation, and `Σ|term|` over
/// the terms the kernel adds (the scale of its rounding error): per sub-block `j` of 32,
/// `d·sc_j·d8·Σ q·q8 − dmin·m_j·d8·Σ q8`, all in f64 (every factor is an f16 or a small
/// integer, so the products are exact).
fn reference(row: &[BlockQ4K], act: &[BlockQ8_1]) -> (f64, f64) {
    let (mut sum, mut mag) = (0.0, 0.0);
    for (s, b) in row.iter().enumerate() {
        let d = f16::from_bits(b.d).to_f64();
        let dmin = f16::from_bits(b.dmin).to_f64();
        for j in 0..QK_K / QK8_1 {
            let (sc, m) = get_scale_min_k4(j, &b.scales);
            let a = &act[s * QK_K / QK8_1 + j];
            let d8 = f16::from_bits(a.d).to_f64();
            let (mut dot, mut qsum, mut abs) = (0i64, 0i64, 0i64);
            for i in 0..QK8_1 {
                let byte = b.qs[32 * (j / 2) + i];
                let q = i64::from(if j % 2 == 0 { byte & 0xF } else { byte >> 4 });
                let q8 = i64::from(a.qs[i]);
                dot += q * q8;
                qsum += q8;
                abs += q * q8.abs();
            }
            let (scale, min) = (d * f64::from(sc), dmin * f64::from(m));
            sum += scale * d8 * dot as f64 - min * d8 * qsum as f64;
            mag += (scale * abs as f64 + min * qsum.abs() as f64) * d8.abs();
        }
    }
    (sum, mag)
}

/// One launch's inputs: `nrows × ncols/256` weight blocks, `ntok × ncols/32` q8_1 blocks.
struct Case {
    nrows: usize,
    ncols: usize,
    ntok: usize,
    w: Vec<BlockQ4K>,
    act: Vec<BlockQ8_1>,
}

impl Case {
    fn draw(rng: &mut StdRng, nrows: usize, ncols: usize, ntok: usize) -> Case {
        let w = (0..nrows * ncols / QK_K).map(|_| random_q4k(rng)).collect();
        let xf: Vec<f32> = (0..ntok * ncols)
            .map(|_| rng.random_range(-2.0f32..2.0))
            .collect();
        // q8_1 blocks never straddle tokens (ncols is a multiple of 32), so quantizing the
        // token-major floats in one call quantizes each token's row.
        let act = ingot_quant::quantize_q8_1(&xf);
        Case {
            nrows,
            ncols,
            ntok,
            w,
            act,
        }
    }
}

impl SameLaunch for Case {
    /// Uploads the inputs, launches on a poisoned output and returns its bytes.
    fn run<B: Accelerator>(&self, b: &mut B) -> Vec<u8> {
        let wb = upload(b, bytemuck::cast_slice(&self.w));
        let xb = upload(b, bytemuck::cast_slice(&self.act));
        let yb = poisoned(b, self.ntok * self.nrows * 4);
        ops::mmq::mmq_q4k(b, (&wb, &xb, &yb), self.nrows, self.ncols, self.ntok).expect("launch");
        download(b, &yb)
    }
}

fn check_case<B: Accelerator>(b: &mut B, c: &Case) {
    let (nrows, ncols, ntok) = (c.nrows, c.ncols, c.ntok);
    let nsb = ncols / QK_K;
    let y: Vec<f32> = c
        .run(b)
        .chunks_exact(4)
        .map(|v| f32::from_le_bytes([v[0], v[1], v[2], v[3]]))
        .collect();
    // Every output written: the poison (NaN) is gone everywhere.
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        panic!(
            "{}: mmq_q4k {nrows}x{ncols}, {ntok} tokens: y[{i}] = {} (token {}, row {}) not \
             written",
            b.name(),
            y[i],
            i / nrows,
            i % nrows
        );
    }
    let mut worst = 0.0f64;
    for t in 0..ntok {
        let act = &c.act[t * ncols / QK8_1..(t + 1) * ncols / QK8_1];
        for r in 0..nrows {
            let (want, mag) = reference(&c.w[r * nsb..(r + 1) * nsb], act);
            // The kernel's integer dot products (tensor cores) and the factors `d·sc`,
            // `dmin·m` and `d8·Σq8` are exact in f32 (11-bit f16 mantissas times integers
            // below 2^13); each sub-block then costs one rounded product `scale·d8` and two
            // rounded fused adds into the accumulator, whose partial sums stay below Σ|term|.
            // Over the 8·nsb sub-blocks that is 3·8·nsb roundings of at most 2^-24·Σ|term|
            // each; the tolerance is twice that bound, the order of the f32 additions being
            // the only difference from the reference (whose own f64 error is ~2^-29 of it).
            let tol = 2.0 * 24.0 * nsb as f64 * f64::from(f32::EPSILON) / 2.0 * mag;
            let got = f64::from(y[t * nrows + r]);
            let err = (got - want).abs();
            assert!(
                err <= tol,
                "{}: mmq_q4k {nrows}x{ncols}, {ntok} tokens: token {t} row {r}: got {got}, \
                 reference {want}, |err| {err:e} > tol {tol:e}",
                b.name()
            );
            worst = worst.max(err / mag);
        }
    }
    eprintln!(
        "{}: mmq_q4k {nrows}x{ncols}, {ntok} tokens: max |err|/Σ|term| = {worst:.2e}",
        b.name()
    );
}

fn check_q4k<B: Accelerator>(b: &mut B) {
    let mut seeds = support::rng("mmq_q4k");
    for round in 0..ROUNDS {
        let seed: u64 = seeds.random();
        eprintln!("mmq_q4k round {round}: inputs from seed {seed}");
        let mut rng = StdRng::seed_from_u64(seed);
        for ncols in COLS {
            for nrows in ROWS {
                for ntok in TOKENS {
                    check_case(b, &Case::draw(&mut rng, nrows, ncols, ntok));
                }
            }
        }
    }
}

#[test]
fn mmq_q4k_matches_reference() {
    on_every_backend!(check_q4k);
}

/// The simulator against the GPU on the same launches (skipped without a GPU): the integer
/// `mma` is exact on both and every f32 operation is `.rn` in a fixed order, so the bits must
/// agree.
#[test]
fn mmq_q4k_sim_matches_gpu() {
    let mut rng = support::rng("mmq_q4k sim vs GPU");
    for (nrows, ncols, ntok) in [(576, 2048, 130), (100, 256, 7)] {
        let c = Case::draw(&mut rng, nrows, ncols, ntok);
        support::sim_matches_gpu(
            &format!("mmq_q4k {nrows}x{ncols}, {ntok} tokens"),
            &c,
            Agree::Bits,
        );
    }
}

/// Global bytes a launch reads: each weight byte once per token tile and each activation byte
/// once per row tile (a block stages its tile's weights and activations once and every warp
/// reads them from shared memory), against the `W + X` it must read. Read from ptx-sim's
/// counters, which count the bytes each executed load requests (predicated-off loads of rows
/// and tokens past the edges request nothing).
#[cfg(feature = "sim")]
#[test]
fn mmq_q4k_reads_weights_once_per_token_tile() {
    use ingot_abi::launch::{mmq_items, MMQ_Q4K};
    use ptx_sim::{Arg, LaunchConfig, Module, Sim};

    let module = Module::parse(ingot_kernels::PTX).expect("parse PTX");
    let mut rng = support::rng("mmq_q4k traffic");
    for (nrows, ncols, ntok) in [(576, 2048, 130), (100, 2048, 64), (576, 256, 7)] {
        let c = Case::draw(&mut rng, nrows, ncols, ntok);
        let mut sim = Sim::new();
        let w_bytes = std::mem::size_of_val(c.w.as_slice()) as u64;
        let x_bytes = std::mem::size_of_val(c.act.as_slice()) as u64;
        let w = sim.alloc(w_bytes as usize).expect("alloc");
        let x = sim.alloc(x_bytes as usize).expect("alloc");
        let y = sim.alloc(ntok * nrows * 4).expect("alloc");
        sim.write(w, bytemuck::cast_slice(&c.w)).expect("write");
        sim.write(x, bytemuck::cast_slice(&c.act)).expect("write");
        let items = mmq_items(nrows as u32, ntok as u32).expect("items");
        let stats = sim
            .launch(
                &module,
                MMQ_Q4K.name,
                LaunchConfig {
                    grid: MMQ_Q4K.grid(items),
                    block: MMQ_Q4K.block,
                    shared_bytes: MMQ_Q4K.shared_bytes,
                },
                &[
                    Arg::Ptr(w),
                    Arg::Ptr(x),
                    Arg::Ptr(y),
                    Arg::U32(ncols as u32),
                    Arg::U32(nrows as u32),
                    Arg::U32(ntok as u32),
                ],
            )
            .expect("launch");
        let token_tiles = u64::from(mmq_token_tiles(ntok as u32));
        let row_tiles = nrows.div_ceil(MMQ_ROWS as usize) as u64;
        let bound = w_bytes * token_tiles + x_bytes * row_tiles;
        let read = stats.global_bytes_read;
        eprintln!(
            "mmq_q4k {nrows}x{ncols}, {ntok} tokens: read {read} B, must read {} B (w {w_bytes} \
             + x {x_bytes}), bound {bound} B (w x {token_tiles} token tiles + x x {row_tiles} \
             row tiles), per-token weight reads would be {} B; {} warp instr, {} shared bank \
             conflicts",
            w_bytes + x_bytes,
            w_bytes * ntok as u64,
            stats.warp_instructions,
            stats.shared_bank_conflicts
        );
        assert!(
            read <= bound,
            "mmq_q4k {nrows}x{ncols}, {ntok} tokens: read {read} B > bound {bound} B"
        );
        assert!(
            read >= w_bytes + x_bytes,
            "read {read} B < the {} B the launch must read",
            w_bytes + x_bytes
        );
    }
}
