//! `mmq_q4k`, `mmq_q6k`, `mmq_q5k`, `mmq_q3k`, `mmq_q4_0`, `mmq_q4_1`, `mmq_iq4_nl`,
//! `mmq_q5_0`, `mmq_q5_1` and `mmq_q8_0` (prefill: Q4_K / Q6_K / Q5_K / Q3_K / Q4_0 / Q4_1 /
//! IQ4_NL / Q5_0 / Q5_1 / Q8_0 weights times the q8_1 activations of many tokens, int8 tensor
//! cores) against a CPU f64 reference of
//! the same quantized math, and their weight traffic.
//!
//! Weights are random valid blocks (every scale/min/level pattern occurs, `d` and `dmin`
//! non-zero; Q6_K's `d` of either sign); activations are random floats quantized per token by
//! the CPU q8_1 oracle, so this test does not depend on the quantize kernel. Shapes cover token
//! counts below, at and past the 64-token tile (1, 7, 64, 130), row counts below, at and past
//! the 64-row tile (64, 100, 576), one and eight super-blocks per row (with one, Q6_K's 210-byte
//! blocks start 2 bytes off a 4-byte word in every other row).
//!
//! The 32-weight types (Q4_0, IQ4_NL, Q5_0, Q8_0: 18-, 22- and 34-byte blocks, every other one
//! 2 bytes off a word; Q4_1, Q5_1: 20- and 24-byte blocks, whole words, `d` and `m` of either
//! sign)
//! take a few shapes instead of that grid, to keep the simulator's time small: `LEGACY_SHAPES`,
//! row counts 64 and 100, `ncols` 128 (half a step), 1408 (V2-Lite's `ffn_down_exps`: five steps
//! and half of one), 96 (an odd block count: every other row, and the matrix, end 2 bytes off a
//! word) and 512 (whole steps), 1, 7 and 70 tokens.

mod support;

use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{mmq_token_tiles, KernelDesc, MMQ_ROWS};
use ingot_abi::weight_types::GemvType;
use ingot_kernels::{ops, Accelerator};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use support::{download, poisoned, upload, Agree, SameLaunch};

const TOKENS: [usize; 4] = [1, 7, 64, 130];
const ROWS: [usize; 3] = [64, 100, 576];
const COLS: [usize; 2] = [256, 2048];
/// Independent input draws per shape (each from its own seed, taken from the test's seed).
const ROUNDS: usize = 2;
/// `(nrows, ncols, ntok)` of the 32-weight types' cases.
const LEGACY_SHAPES: [(usize, usize, usize); 5] = [
    (64, 128, 1),
    (100, 128, 70),
    (100, 1408, 70),
    (64, 1408, 7),
    (100, 96, 7),
];
const LEGACY_WHOLE_STEPS: (usize, usize, usize) = (100, 512, 7);

use support::mmq::Kind;

/// The `mmq` kernel of each weight type.
trait MmqKernel {
    fn desc(self) -> &'static KernelDesc;
    fn launch<B: Accelerator>(
        self,
        b: &mut B,
        bufs: (&B::Buf, &B::Buf, &B::Buf),
        dims: [usize; 3],
    ) -> ingot_kernels::Result<()>;
}

impl MmqKernel for Kind {
    fn desc(self) -> &'static KernelDesc {
        self.ty().mmq().expect("an mmq type")
    }

    fn launch<B: Accelerator>(
        self,
        b: &mut B,
        bufs: (&B::Buf, &B::Buf, &B::Buf),
        [nrows, ncols, ntok]: [usize; 3],
    ) -> ingot_kernels::Result<()> {
        ops::mmq::mmq(b, self.ty(), bufs, nrows, ncols, ntok)
    }
}

/// One launch's inputs: `nrows × ncols/block` weight blocks, `ntok × ncols/32` q8_1 blocks.
struct Case {
    kind: Kind,
    nrows: usize,
    ncols: usize,
    ntok: usize,
    w: Vec<u8>,
    act: Vec<BlockQ8_1>,
}

impl Case {
    fn draw(rng: &mut StdRng, kind: Kind, nrows: usize, ncols: usize, ntok: usize) -> Case {
        let w = (0..nrows * ncols / kind.block_weights())
            .flat_map(|_| kind.random_block(rng))
            .collect();
        let xf: Vec<f32> = (0..ntok * ncols)
            .map(|_| rng.random_range(-2.0f32..2.0))
            .collect();
        // q8_1 blocks never straddle tokens (ncols is a multiple of 32), so quantizing the
        // token-major floats in one call quantizes each token's row.
        let act = ingot_quant::quantize_q8_1(&xf);
        Case {
            kind,
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
        let wb = upload(b, &self.w);
        let xb = upload(b, bytemuck::cast_slice(&self.act));
        let yb = poisoned(b, self.ntok * self.nrows * 4);
        self.kind
            .launch(b, (&wb, &xb, &yb), [self.nrows, self.ncols, self.ntok])
            .expect("launch");
        download(b, &yb)
    }
}

fn check_case<B: Accelerator>(b: &mut B, c: &Case) {
    let (kind, nrows, ncols, ntok) = (c.kind, c.nrows, c.ncols, c.ntok);
    let name = kind.desc().name;
    let subs = ncols / QK8_1;
    let row_bytes = ncols / kind.block_weights() * kind.block_bytes();
    let y: Vec<f32> = c
        .run(b)
        .chunks_exact(4)
        .map(|v| f32::from_le_bytes([v[0], v[1], v[2], v[3]]))
        .collect();
    // Every output written: the poison (NaN) is gone everywhere.
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        panic!(
            "{}: {name} {nrows}x{ncols}, {ntok} tokens: y[{i}] = {} (token {}, row {}) not \
             written",
            b.name(),
            y[i],
            i / nrows,
            i % nrows
        );
    }
    // The kernel's integer dot products (tensor cores, and Q6_K's combination of its two groups)
    // and the staged factors (`d·sc`, `dmin·m`, `d8·Σq8`: 11-bit f16 mantissas times integers below
    // 2^13; the 32-weight types' `d` and `m`) are exact in f32; each sub-block then costs the
    // type's rounded operations (`Kind::roundings_per_sub_block`), each off by at most 2^-24 of the
    // running sum, which stays below Σ|term|. Over the ncols/32 sub-blocks that bounds the error by
    // subs·roundings·2^-24·Σ|term|; the tolerance is twice the bound. The only other difference
    // from the reference is the order of the f32 additions (the reference's own f64 error is ~2^-29
    // of the bound). The zero sub-blocks a 32-weight row stages past its end add exact zeros and
    // are not counted.
    let bound = subs as f64 * kind.roundings_per_sub_block() * f64::from(f32::EPSILON) / 2.0;
    let mut worst = 0.0f64;
    for t in 0..ntok {
        let act = &c.act[t * ncols / QK8_1..(t + 1) * ncols / QK8_1];
        for r in 0..nrows {
            let (want, mag) = kind.reference(&c.w[r * row_bytes..(r + 1) * row_bytes], act);
            let tol = 2.0 * bound * mag;
            let got = f64::from(y[t * nrows + r]);
            let err = (got - want).abs();
            assert!(
                err <= tol,
                "{}: {name} {nrows}x{ncols}, {ntok} tokens: token {t} row {r}: got {got}, \
                 reference {want}, |err| {err:e} > tol {tol:e}",
                b.name()
            );
            worst = worst.max(err / mag);
        }
    }
    eprintln!(
        "{}: {name} {nrows}x{ncols}, {ntok} tokens: max |err|/Σ|term| = {worst:.2e} (tolerance \
         {:.2e})",
        b.name(),
        2.0 * bound
    );
}

fn check<B: Accelerator>(b: &mut B, kind: Kind) {
    let name = kind.desc().name;
    let mut seeds = support::rng(name);
    for round in 0..ROUNDS {
        let seed: u64 = seeds.random();
        eprintln!("{name} round {round}: inputs from seed {seed}");
        let mut rng = StdRng::seed_from_u64(seed);
        for ncols in COLS {
            for nrows in ROWS {
                for ntok in TOKENS {
                    check_case(b, &Case::draw(&mut rng, kind, nrows, ncols, ntok));
                }
            }
        }
    }
}

/// The 32-weight types: [`LEGACY_SHAPES`] and one whole-step shape, one draw each.
fn check_legacy<B: Accelerator>(b: &mut B, kind: Kind) {
    let name = kind.desc().name;
    let seed: u64 = support::rng(name).random();
    eprintln!("{name}: inputs from seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    for (nrows, ncols, ntok) in LEGACY_SHAPES.into_iter().chain([LEGACY_WHOLE_STEPS]) {
        check_case(b, &Case::draw(&mut rng, kind, nrows, ncols, ntok));
    }
}

fn check_q5_0<B: Accelerator>(b: &mut B) {
    check_legacy(b, Kind::Q5_0);
}

fn check_q8_0<B: Accelerator>(b: &mut B) {
    check_legacy(b, Kind::Q8_0);
}

fn check_q4_0<B: Accelerator>(b: &mut B) {
    check_legacy(b, Kind::Q4_0);
}

fn check_iq4_nl<B: Accelerator>(b: &mut B) {
    check_legacy(b, Kind::Iq4Nl);
}

fn check_q4_1<B: Accelerator>(b: &mut B) {
    check_legacy(b, Kind::Q4_1);
}

fn check_q5_1<B: Accelerator>(b: &mut B) {
    check_legacy(b, Kind::Q5_1);
}

fn check_q4k<B: Accelerator>(b: &mut B) {
    check(b, Kind::Q4K);
}

fn check_q6k<B: Accelerator>(b: &mut B) {
    check(b, Kind::Q6K);
}

fn check_q5k<B: Accelerator>(b: &mut B) {
    check(b, Kind::Q5K);
}

fn check_q3k<B: Accelerator>(b: &mut B) {
    check(b, Kind::Q3K);
}

#[test]
fn mmq_q4k_matches_reference() {
    on_every_backend!(check_q4k);
}

#[test]
fn mmq_q6k_matches_reference() {
    on_every_backend!(check_q6k);
}

#[test]
fn mmq_q5k_matches_reference() {
    on_every_backend!(check_q5k);
}

#[test]
fn mmq_q3k_matches_reference() {
    on_every_backend!(check_q3k);
}

#[test]
fn mmq_q5_0_matches_reference() {
    on_every_backend!(check_q5_0);
}

#[test]
fn mmq_q8_0_matches_reference() {
    on_every_backend!(check_q8_0);
}

#[test]
fn mmq_q4_0_matches_reference() {
    on_every_backend!(check_q4_0);
}

#[test]
fn mmq_iq4_nl_matches_reference() {
    on_every_backend!(check_iq4_nl);
}

#[test]
fn mmq_q4_1_matches_reference() {
    on_every_backend!(check_q4_1);
}

#[test]
fn mmq_q5_1_matches_reference() {
    on_every_backend!(check_q5_1);
}

/// `ncols` per type: a multiple of 256 for the k-quants, of 32 for the 32-weight types; bad
/// shapes are typed errors that launch nothing.
#[test]
fn mmq_checks_ncols_per_type() {
    use ingot_kernels::KernelError;
    let mut r = support::recorder::Recorder::default();
    // 64 rows × 1408 columns of Q5_0 (44 blocks of 22 bytes), 7 tokens.
    let ok = (&(64 * 44 * 22), &(7 * 44 * 36), &(7 * 64 * 4));
    ops::mmq::mmq(&mut r, GemvType::Q5_0, ok, 64, 1408, 7).expect("valid launch");
    let e = ops::mmq::mmq(&mut r, GemvType::Q5_0, ok, 64, 1400, 7).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let short = (&(64 * 44 * 22 - 1), ok.1, ok.2);
    let e = ops::mmq::mmq(&mut r, GemvType::Q5_0, short, 64, 1408, 7).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "w", .. }),
        "{e}"
    );
    let e = ops::mmq::mmq(&mut r, GemvType::Q4K, ok, 64, 1408, 7).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let q8 = (&(64 * 4 * 34), &(7 * 4 * 36), &(7 * 64 * 4));
    ops::mmq::mmq(&mut r, GemvType::Q8_0, q8, 64, 128, 7).expect("valid launch");
    // 64 rows × 96 columns of Q4_0 and IQ4_NL (3 blocks of 18 bytes).
    let q4 = (&(64 * 3 * 18), &(7 * 3 * 36), &(7 * 64 * 4));
    ops::mmq::mmq(&mut r, GemvType::Q4_0, q4, 64, 96, 7).expect("valid launch");
    ops::mmq::mmq(&mut r, GemvType::Iq4Nl, q4, 64, 96, 7).expect("valid launch");
    let short = (&(64 * 3 * 18 - 1), q4.1, q4.2);
    let e = ops::mmq::mmq(&mut r, GemvType::Iq4Nl, short, 64, 96, 7).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "w", .. }),
        "{e}"
    );
    // 64 rows × 96 columns of Q5_1 (3 blocks of 24 bytes).
    let q5 = (&(64 * 3 * 24), q4.1, q4.2);
    ops::mmq::mmq(&mut r, GemvType::Q5_1, q5, 64, 96, 7).expect("valid launch");
    let e = ops::mmq::mmq(&mut r, GemvType::Q5_1, q5, 64, 80, 7).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    assert_eq!(r.launches.len(), 5);
    assert_eq!(r.launches[0], ("mmq_q5_0".into(), [1, 1, 1], [256, 1, 1]));
    assert_eq!(r.launches[1], ("mmq_q8_0".into(), [1, 1, 1], [256, 1, 1]));
    assert_eq!(r.launches[2], ("mmq_q4_0".into(), [1, 1, 1], [256, 1, 1]));
    assert_eq!(r.launches[3], ("mmq_iq4_nl".into(), [1, 1, 1], [256, 1, 1]));
    assert_eq!(r.launches[4], ("mmq_q5_1".into(), [1, 1, 1], [256, 1, 1]));
}

/// The simulator against the GPU on the same launches (skipped without a GPU): the integer
/// `mma` is exact on both and every f32 operation is `.rn` in a fixed order, so the bits must
/// agree.
#[test]
fn mmq_sim_matches_gpu() {
    let mut rng = support::rng("mmq sim vs GPU");
    for (kind, shapes) in [
        (Kind::Q4K, &[(576, 2048, 130), (100, 256, 7)][..]),
        (Kind::Q6K, &[(576, 2048, 130), (100, 256, 7)]),
        (Kind::Q5K, &[(576, 2048, 130), (100, 256, 7)]),
        (Kind::Q3K, &[(576, 2048, 130), (100, 256, 7)]),
        (Kind::Q5_0, &[(100, 1408, 70), (64, 96, 7)]),
        (Kind::Q8_0, &[(100, 1408, 70), (64, 96, 7)]),
        (Kind::Q4_0, &[(100, 1408, 70), (64, 96, 7)]),
        (Kind::Iq4Nl, &[(100, 1408, 70), (64, 96, 7)]),
        (Kind::Q4_1, &[(100, 1408, 70), (64, 96, 7)]),
        (Kind::Q5_1, &[(100, 1408, 70), (64, 96, 7)]),
    ] {
        for &(nrows, ncols, ntok) in shapes {
            let c = Case::draw(&mut rng, kind, nrows, ncols, ntok);
            support::sim_matches_gpu(
                &format!("{} {nrows}x{ncols}, {ntok} tokens", kind.desc().name),
                &c,
                Agree::Bits,
            );
        }
    }
}

/// Global bytes a launch reads: each weight byte once per token tile and each activation byte once
/// per row tile (a block stages its tile's weights and activations once and every warp reads them
/// from shared memory), against the `W + X` it must read. A Q6_K block that starts 2 bytes off a
/// 4-byte word (every odd-numbered one: 210 ≡ 2 mod 4) is read from the word before it and reads 2
/// bytes of `d` twice, 4 bytes more (`Kind::realign_bytes`; the 32-weight types, Q4_1's and Q5_1's
/// whole-word blocks too, read exactly their blocks, and nothing of the zero blocks past a row's
/// end). Read from ptx-sim's counters, which count the bytes each executed load requests
/// (predicated-off loads of rows and tokens past the edges request nothing).
#[cfg(feature = "sim")]
#[test]
fn mmq_reads_weights_once_per_token_tile() {
    use ingot_abi::launch::mmq_items;
    use ptx_sim::{Arg, LaunchConfig, Sim};

    let module = ingot_kernels::backend::sim::module().expect("parse PTX");
    let mut rng = support::rng("mmq traffic");
    for (kind, shapes) in [
        (
            Kind::Q4K,
            &[(576, 2048, 130), (100, 2048, 64), (576, 256, 7)][..],
        ),
        (
            Kind::Q6K,
            &[(576, 2048, 130), (100, 2048, 64), (576, 256, 7)],
        ),
        (
            Kind::Q5K,
            &[(576, 2048, 130), (100, 2048, 64), (576, 256, 7)],
        ),
        (
            Kind::Q3K,
            &[(576, 2048, 130), (100, 2048, 64), (576, 256, 7)],
        ),
        (Kind::Q5_0, &[(100, 1408, 70), (100, 96, 7)]),
        (Kind::Q8_0, &[(100, 1408, 70), (100, 96, 7)]),
        (Kind::Q4_0, &[(100, 1408, 70), (100, 96, 7)]),
        (Kind::Iq4Nl, &[(100, 1408, 70), (100, 96, 7)]),
        (Kind::Q4_1, &[(100, 1408, 70), (100, 96, 7)]),
        (Kind::Q5_1, &[(100, 1408, 70), (100, 96, 7)]),
    ] {
        let d = kind.desc();
        for &(nrows, ncols, ntok) in shapes {
            let c = Case::draw(&mut rng, kind, nrows, ncols, ntok);
            let mut sim = Sim::new();
            let w_bytes = c.w.len() as u64;
            let x_bytes = std::mem::size_of_val(c.act.as_slice()) as u64;
            let w = sim.alloc(c.w.len()).expect("alloc");
            let x = sim.alloc(x_bytes as usize).expect("alloc");
            let y = sim.alloc(ntok * nrows * 4).expect("alloc");
            sim.write(w, &c.w).expect("write");
            sim.write(x, bytemuck::cast_slice(&c.act)).expect("write");
            let items = mmq_items(nrows as u32, ntok as u32).expect("items");
            let stats = sim
                .launch(
                    module,
                    d.name,
                    LaunchConfig {
                        grid: d.grid(items),
                        block: d.block,
                        shared_bytes: d.shared_bytes,
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
            let blocks = nrows * ncols / kind.block_weights();
            let realign: u64 = (0..blocks).map(|i| kind.realign_bytes(i)).sum();
            let token_tiles = u64::from(mmq_token_tiles(ntok as u32));
            let row_tiles = nrows.div_ceil(MMQ_ROWS as usize) as u64;
            let bound = (w_bytes + realign) * token_tiles + x_bytes * row_tiles;
            let read = stats.global_bytes_read;
            eprintln!(
                "{} {nrows}x{ncols}, {ntok} tokens: read {read} B, must read {} B (w {w_bytes} \
                 + x {x_bytes}), bound {bound} B ((w + {realign}) x {token_tiles} token tiles \
                 + x x {row_tiles} row tiles), per-token weight reads would be {} B; {} warp \
                 instr, {} shared bank conflicts",
                d.name,
                w_bytes + x_bytes,
                w_bytes * ntok as u64,
                stats.warp_instructions,
                stats.shared_bank_conflicts
            );
            assert!(
                read <= bound,
                "{} {nrows}x{ncols}, {ntok} tokens: read {read} B > bound {bound} B",
                d.name
            );
            assert!(
                read >= w_bytes + x_bytes,
                "{}: read {read} B < the {} B the launch must read",
                d.name,
                w_bytes + x_bytes
            );
        }
    }
}
