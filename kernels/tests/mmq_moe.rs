//! `mmq_moe_q4k`, `mmq_moe_q6k`, `mmq_moe_q5k`, `mmq_moe_q3k`, `mmq_moe_q4_0`, `mmq_moe_q4_1`,
//! `mmq_moe_iq4_nl`, `mmq_moe_q5_0`, `mmq_moe_q5_1` and `mmq_moe_q8_0` (prefill's routed
//! experts: one launch over every expert's sorted pairs, Q4_K / Q6_K / Q5_K / Q3_K / Q4_0 /
//! Q4_1 / IQ4_NL / Q5_0 / Q5_1 / Q8_0 weights times the q8_1
//! activations of each pair's token, int8 tensor cores) against a CPU
//! f64 reference per pair, its argument checks, and its weight traffic.
//!
//! Weights are random valid blocks (every scale/min/level pattern occurs, `d` and `dmin` non-zero,
//! Q6_K's `d` of either sign); activations are random floats quantized per token by the CPU q8_1
//! oracle. Shapes: 8 experts × 64 rows × 512 columns and 64 experts × 128 rows × 256 columns,
//! routings of 1, 7, 64 and 130 tokens × k ∈ {1, 6} distinct experts per token, drawn so that the
//! last expert gets no pair and expert 0 is favoured (more than 64 pairs, hence two pair tiles, at
//! 130 tokens). The 32-weight types take fewer cases, to keep the simulator's time small
//! (`LEGACY_CASES`): V2-Lite's `ffn_down_exps` rows (1408 columns: five steps and half of one), 128
//! and 96 columns (half a step; an odd block count, so every other row ends 2 bytes off a word) and
//! 512 (whole steps), at 7 and 70 tokens. These all pass the identity `pair_row` (pair-major
//! outputs); two more cases permute it: the per-head products of MLA attention (16 heads as
//! experts, 70 tokens, pairs sorted by head reading and writing row `t·16 + h`: token-major
//! outputs), and a random permutation with one entry out of range (clamped to the last row).
//!
//! The references and the block draws repeat `tests/mmq.rs`'s ones (a test file cannot
//! import another's items).

mod support;

use ingot_abi::blocks::{BlockQ4K, BlockQ8_1, QK8_1};
use ingot_abi::launch::{mmq_moe_items, KernelDesc, MMQ_MOE_PAIRS, MMQ_ROWS, MMQ_WARPS};
use ingot_abi::weight_types::GemvType;
use ingot_kernels::{ops, Accelerator};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::mem::size_of;
use support::{download, poisoned, upload, Agree, SameLaunch};

/// `(n_expert, rows, ncols)` of the stacked expert weights.
const SHAPES: [(usize, usize, usize); 2] = [(8, 64, 512), (64, 128, 256)];
const TOKENS: [usize; 4] = [1, 7, 64, 130];
const KS: [usize; 2] = [1, 6];
/// `((n_expert, rows, ncols), ntok, k)` of the 32-weight types' cases.
const LEGACY_CASES: [((usize, usize, usize), usize, usize); 4] = [
    ((8, 64, 1408), 70, 6),
    ((8, 100, 128), 7, 1),
    ((4, 64, 96), 70, 1),
    ((8, 64, 512), 7, 6),
];
const BLOCK: usize = size_of::<BlockQ4K>();

use support::mmq::Kind;

/// The `mmq_moe` kernel of each weight type.
fn desc(kind: Kind) -> &'static KernelDesc {
    kind.ty().mmq_moe().expect("an mmq type")
}

/// One launch's inputs: stacked weights, activations, and the routing sorted by expert.
struct Case {
    kind: Kind,
    n_expert: usize,
    rows: usize,
    ncols: usize,
    ntok: usize,
    w: Vec<u8>,
    act: Vec<BlockQ8_1>,
    pair_token: Vec<u32>,
    expert_start: Vec<u32>,
    /// Each pair's output row (the identity list unless a case says otherwise).
    pair_row: Vec<u32>,
}

impl Case {
    fn draw(
        rng: &mut StdRng,
        kind: Kind,
        (n_expert, rows, ncols): (usize, usize, usize),
        ntok: usize,
        k: usize,
    ) -> Case {
        let w = (0..n_expert * rows * ncols / kind.block_weights())
            .flat_map(|_| kind.random_block(rng))
            .collect();
        let xf: Vec<f32> = (0..ntok * ncols)
            .map(|_| rng.random_range(-2.0f32..2.0))
            .collect();
        let act = ingot_quant::quantize_q8_1(&xf);
        // Each token picks k distinct experts among 0 .. n_expert − 1 (the last never gets a
        // pair); its first pick is expert 0 three times in four.
        let mut pairs = Vec::new();
        for t in 0..ntok {
            let mut pool: Vec<u32> = (0..n_expert as u32 - 1).collect();
            pool.shuffle(rng);
            if rng.random_range(0..4) != 0 {
                let at = pool.iter().position(|&e| e == 0).unwrap();
                pool.swap(0, at);
            }
            pairs.extend(pool[..k].iter().map(|&e| (e, t as u32)));
        }
        pairs.sort();
        let mut expert_start = vec![0u32; n_expert + 1];
        for &(e, _) in &pairs {
            expert_start[e as usize + 1] += 1;
        }
        for e in 0..n_expert {
            expert_start[e + 1] += expert_start[e];
        }
        let pair_token: Vec<u32> = pairs.iter().map(|&(_, t)| t).collect();
        let pair_row = (0..pair_token.len() as u32).collect();
        Case {
            kind,
            n_expert,
            rows,
            ncols,
            ntok,
            w,
            act,
            pair_token,
            expert_start,
            pair_row,
        }
    }

    /// The per-head products of MLA attention as the planner runs them: `n_head` heads as the
    /// experts (`w` stacks their matrices), `ntok` tokens whose `n_head` rows each are in `x`
    /// (`x` has `ntok·n_head` rows, row `t·n_head + h` token `t`'s input to head `h`), pairs
    /// sorted by head, `p = h·ntok + t`, reading row `t·n_head + h` and writing it back to
    /// the same row of `y`: `pair_token = pair_row`, so the outputs come out token-major.
    fn heads(
        rng: &mut StdRng,
        kind: Kind,
        (n_head, rows, ncols): (usize, usize, usize),
        ntok: usize,
    ) -> Case {
        let w = (0..n_head * rows * ncols / kind.block_weights())
            .flat_map(|_| kind.random_block(rng))
            .collect();
        let xf: Vec<f32> = (0..ntok * n_head * ncols)
            .map(|_| rng.random_range(-2.0f32..2.0))
            .collect();
        let act = ingot_quant::quantize_q8_1(&xf);
        let list: Vec<u32> = (0..n_head)
            .flat_map(|h| (0..ntok).map(move |t| (t * n_head + h) as u32))
            .collect();
        Case {
            kind,
            n_expert: n_head,
            rows,
            ncols,
            ntok: ntok * n_head,
            w,
            act,
            pair_token: list.clone(),
            expert_start: (0..=n_head).map(|h| (h * ntok) as u32).collect(),
            pair_row: list,
        }
    }

    fn counts(&self) -> Vec<usize> {
        self.expert_start
            .windows(2)
            .map(|s| (s[1] - s[0]) as usize)
            .collect()
    }
}

impl SameLaunch for Case {
    /// Uploads the inputs, launches on a poisoned output and returns its bytes.
    fn run<B: Accelerator>(&self, b: &mut B) -> Vec<u8> {
        let wb = upload(b, &self.w);
        let xb = upload(b, bytemuck::cast_slice(&self.act));
        let pb = upload(b, bytemuck::cast_slice(&self.pair_token));
        let sb = upload(b, bytemuck::cast_slice(&self.expert_start));
        let rb = upload(b, bytemuck::cast_slice(&self.pair_row));
        let yb = poisoned(b, self.pair_token.len() * self.rows * 4);
        let ty = self.kind.ty();
        ops::mmq::check_routing(ty, &self.pair_token, &self.expert_start, self.ntok)
            .expect("routing");
        ops::mmq::mmq_moe(
            b,
            ty,
            (&wb, &xb, &pb, &sb, &rb, &yb),
            self.rows,
            self.ncols,
            self.ntok,
            self.pair_token.len(),
            self.n_expert,
        )
        .expect("launch");
        download(b, &yb)
    }
}

/// The tolerance of one output relative to its `Σ|term|`. As `tests/mmq.rs`: the integer dots and
/// the staged factors are exact in f32, each of the ncols/32 sub-blocks costs the type's roundings
/// (Q4_K 3: `scale·d8` and two fused adds; Q6_K 2; the 32-weight types 1, the fused add: `d·d8` is
/// exact; Q4_1 and Q5_1 2, the scale and min fused adds), each off by at most 2^-24 of a running
/// sum below Σ|term|; the tolerance is twice that bound (zero sub-blocks staged past a 32-weight
/// row's end add exact zeros).
fn tol_rel(c: &Case) -> f64 {
    let bound =
        (c.ncols / QK8_1) as f64 * c.kind.roundings_per_sub_block() * f64::from(f32::EPSILON) / 2.0;
    2.0 * bound
}

/// Runs the case on a poisoned (NaN) output and returns it, after checking that every float
/// was written.
fn run_checked<B: Accelerator>(b: &mut B, c: &Case, what: &str) -> Vec<f32> {
    let y: Vec<f32> = c
        .run(b)
        .chunks_exact(4)
        .map(|v| f32::from_le_bytes([v[0], v[1], v[2], v[3]]))
        .collect();
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        panic!(
            "{what}: y[{i}] = {} (output row {}, row {}) not written",
            y[i],
            i / c.rows,
            i % c.rows
        );
    }
    y
}

/// Checks output row `out` of `y` against expert `e`'s rows times activation row `t`; returns
/// the worst `|err|/Σ|term|`.
fn check_row(c: &Case, y: &[f32], what: &str, (out, e, t): (usize, usize, usize)) -> f64 {
    let (rows, ncols) = (c.rows, c.ncols);
    let row_bytes = ncols / c.kind.block_weights() * c.kind.block_bytes();
    let act = &c.act[t * ncols / QK8_1..(t + 1) * ncols / QK8_1];
    let mut worst = 0.0f64;
    for r in 0..rows {
        let row = (e * rows + r) * row_bytes;
        let (want, mag) = c.kind.reference(&c.w[row..row + row_bytes], act);
        let tol = tol_rel(c) * mag;
        let got = f64::from(y[out * rows + r]);
        let err = (got - want).abs();
        assert!(
            err <= tol,
            "{what}: output row {out} (expert {e}, x row {t}) row {r}: got {got}, reference \
             {want}, |err| {err:e} > tol {tol:e}"
        );
        worst = worst.max(err / mag);
    }
    worst
}

fn check_case<B: Accelerator>(b: &mut B, c: &Case, k: usize) {
    let (rows, ncols, n_expert, ntok) = (c.rows, c.ncols, c.n_expert, c.ntok);
    let n_pairs = c.pair_token.len();
    let identity = c.pair_row.iter().enumerate().all(|(p, &r)| r as usize == p);
    let what = format!(
        "{}: {} {n_expert}x{rows}x{ncols}, {ntok} tokens x k {k} ({n_pairs} pairs, \
         counts {:?}, pair_row {})",
        b.name(),
        desc(c.kind).name,
        c.counts(),
        if identity { "identity" } else { "permuted" }
    );
    let y = run_checked(b, c, &what);
    let mut worst = 0.0f64;
    for e in 0..n_expert {
        for p in c.expert_start[e] as usize..c.expert_start[e + 1] as usize {
            // Rows past the buffer land on its last row.
            let out = (c.pair_row[p] as usize).min(n_pairs - 1);
            worst = worst.max(check_row(c, &y, &what, (out, e, c.pair_token[p] as usize)));
        }
    }
    eprintln!(
        "{what}: max |err|/Σ|term| = {worst:.2e} (tolerance {:.2e})",
        tol_rel(c)
    );
}

fn check<B: Accelerator>(b: &mut B, kind: Kind) {
    let name = desc(kind).name;
    let mut seeds = support::rng(name);
    let seed: u64 = seeds.random();
    eprintln!("{name}: inputs from seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    for shape in SHAPES {
        for ntok in TOKENS {
            for k in KS {
                let c = Case::draw(&mut rng, kind, shape, ntok, k);
                let counts = c.counts();
                assert_eq!(counts[shape.0 - 1], 0, "the last expert gets no pair");
                if ntok == 130 && k == 6 {
                    assert!(counts[0] > 64, "expert 0 spans two pair tiles: {counts:?}");
                }
                check_case(b, &c, k);
            }
        }
    }
}

/// The 32-weight types: [`LEGACY_CASES`], one draw each.
fn check_legacy<B: Accelerator>(b: &mut B, kind: Kind) {
    let name = desc(kind).name;
    let seed: u64 = support::rng(name).random();
    eprintln!("{name}: inputs from seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    for (shape, ntok, k) in LEGACY_CASES {
        let c = Case::draw(&mut rng, kind, shape, ntok, k);
        assert_eq!(c.counts()[shape.0 - 1], 0, "the last expert gets no pair");
        check_case(b, &c, k);
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
fn mmq_moe_q4k_matches_reference() {
    on_every_backend!(check_q4k);
}

#[test]
fn mmq_moe_q6k_matches_reference() {
    on_every_backend!(check_q6k);
}

#[test]
fn mmq_moe_q5k_matches_reference() {
    on_every_backend!(check_q5k);
}

#[test]
fn mmq_moe_q3k_matches_reference() {
    on_every_backend!(check_q3k);
}

#[test]
fn mmq_moe_q5_0_matches_reference() {
    on_every_backend!(check_q5_0);
}

#[test]
fn mmq_moe_q8_0_matches_reference() {
    on_every_backend!(check_q8_0);
}

#[test]
fn mmq_moe_q4_0_matches_reference() {
    on_every_backend!(check_q4_0);
}

#[test]
fn mmq_moe_iq4_nl_matches_reference() {
    on_every_backend!(check_iq4_nl);
}

#[test]
fn mmq_moe_q4_1_matches_reference() {
    on_every_backend!(check_q4_1);
}

#[test]
fn mmq_moe_q5_1_matches_reference() {
    on_every_backend!(check_q5_1);
}

/// Heads of MLA attention as the experts: V2-Lite's 16 heads.
const HEADS: usize = 16;
/// Tokens of the heads cases: two pair tiles and a part of a third per head, and head `h`'s
/// pairs start at `70·h`, mostly not on a tile boundary.
const HEAD_TOKENS: usize = 70;

/// [`Case::heads`] at `(rows, ncols)`: `y` (poisoned before the run) must hold, at row
/// `t·16 + h`, head `h`'s product with `x` row `t·16 + h`, by the reference laid out
/// token-major on its own (not through the lists).
fn check_heads<B: Accelerator>(b: &mut B, kind: Kind, (rows, ncols): (usize, usize)) {
    let name = desc(kind).name;
    let seed: u64 = support::rng(&format!("{name} heads")).random();
    let mut rng = StdRng::seed_from_u64(seed);
    let c = Case::heads(&mut rng, kind, (HEADS, rows, ncols), HEAD_TOKENS);
    assert_eq!(c.pair_token.len(), HEADS * HEAD_TOKENS);
    let what = format!(
        "{}: {name} heads as experts, {HEADS} heads x {rows} x {ncols}, {HEAD_TOKENS} tokens \
         (pairs sorted by head, pair_token = pair_row = t*{HEADS} + h), inputs from seed {seed}",
        b.name()
    );
    let y = run_checked(b, &c, &what);
    let mut worst = 0.0f64;
    for t in 0..HEAD_TOKENS {
        for h in 0..HEADS {
            let row = t * HEADS + h;
            worst = worst.max(check_row(&c, &y, &what, (row, h, row)));
        }
    }
    eprintln!(
        "{what}: max |err|/Σ|term| = {worst:.2e} (tolerance {:.2e})",
        tol_rel(&c)
    );
}

/// V2-Lite's per-head matrices: `attn_k_b`'s type and width (Q5_0 rows of 128 weights; 128
/// of its 512 rows per head, two row tiles, to keep the simulator's time small: the 512-row
/// case passes too, in about 30 s) and `attn_v_b`'s shape (Q4_K, 128 rows of 512).
fn check_heads_all<B: Accelerator>(b: &mut B) {
    check_heads(b, Kind::Q5_0, (128, 128));
    check_heads(b, Kind::Q4K, (128, 512));
}

/// A permuted `pair_row` with one entry out of range (`u32::MAX`, in place of the pair that
/// had row `n_pairs − 1`, so no other pair writes that row): its outputs land on row
/// `n_pairs − 1`, every other pair's on its own row, and nothing outside `y` is touched.
fn check_bad_row<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("mmq_moe pair_row out of range");
    for kind in [Kind::Q4K, Kind::Q5_0] {
        let mut c = Case::draw(&mut rng, kind, (8, 64, 512), 7, 6);
        let n_pairs = c.pair_token.len();
        c.pair_row.shuffle(&mut rng);
        let q = c
            .pair_row
            .iter()
            .position(|&r| r as usize == n_pairs - 1)
            .unwrap();
        c.pair_row[q] = u32::MAX;
        eprintln!("pair {q} of {n_pairs}: pair_row u32::MAX");
        check_case(b, &c, 6);
    }
}

#[test]
fn mmq_moe_heads_as_experts_token_major() {
    on_every_backend!(check_heads_all);
}

#[test]
fn mmq_moe_clamps_pair_row() {
    on_every_backend!(check_bad_row);
}

/// The simulator against the GPU on the same launch (skipped without a GPU): exact integer
/// `mma` and `.rn` f32 operations in a fixed order, so the bits must agree.
#[test]
fn mmq_moe_sim_matches_gpu() {
    let mut rng = support::rng("mmq_moe sim vs GPU");
    for (kind, shape, ntok, k) in [
        (Kind::Q4K, (64, 128, 256), 130, 6),
        (Kind::Q4K, (8, 64, 512), 7, 1),
        (Kind::Q6K, (64, 128, 256), 130, 6),
        (Kind::Q6K, (8, 64, 512), 7, 1),
        (Kind::Q5K, (64, 128, 256), 130, 6),
        (Kind::Q5K, (8, 64, 512), 7, 1),
        (Kind::Q3K, (64, 128, 256), 130, 6),
        (Kind::Q3K, (8, 64, 512), 7, 1),
        (Kind::Q5_0, (8, 64, 1408), 70, 6),
        (Kind::Q8_0, (8, 64, 1408), 70, 6),
        (Kind::Q4_0, (8, 64, 1408), 70, 6),
        (Kind::Iq4Nl, (8, 64, 1408), 70, 6),
        (Kind::Q4_1, (8, 64, 1408), 70, 6),
        (Kind::Q5_1, (8, 64, 1408), 70, 6),
    ] {
        let c = Case::draw(&mut rng, kind, shape, ntok, k);
        support::sim_matches_gpu(
            &format!("{} {shape:?}, {ntok} tokens x k {k}", desc(kind).name),
            &c,
            Agree::Bits,
        );
    }
}

/// Host copies of bad routings are named; bad sizes are typed errors that launch nothing.
#[test]
fn mmq_moe_rejects_bad_arguments() {
    use ingot_kernels::KernelError;
    let r = ops::mmq::check_routing(GemvType::Q4K, &[0, 1, 2], &[0, 2, 1, 3], 3).unwrap_err();
    assert!(r.to_string().contains("decreases at expert 1"), "{r}");
    let r = ops::mmq::check_routing(GemvType::Q4K, &[0, 1, 2], &[0, 2, 2], 3).unwrap_err();
    assert!(r.to_string().contains("n_pairs = 3"), "{r}");
    let r = ops::mmq::check_routing(GemvType::Q4K, &[0, 5], &[0, 1, 2], 3).unwrap_err();
    assert!(r.to_string().contains("pair 1 names token 5 of 3"), "{r}");
    ops::mmq::check_routing(GemvType::Q4K, &[0, 1, 2], &[0, 0, 3, 3], 3).expect("valid routing");

    let mut r = support::recorder::Recorder::default();
    // 2 experts x 64 rows x 256 columns, 3 tokens, 6 pairs.
    let ok = (
        &(2 * 64 * BLOCK),
        &(3 * 8 * 36),
        &(6 * 4),
        &(3 * 4),
        &(6 * 4),
        &(6 * 64 * 4),
    );
    ops::mmq::mmq_moe(&mut r, GemvType::Q4K, ok, 64, 256, 3, 6, 2).expect("valid launch");
    let e = ops::mmq::mmq_moe(&mut r, GemvType::Q4K, ok, 64, 300, 3, 6, 2).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let e = ops::mmq::mmq_moe(&mut r, GemvType::Q4K, ok, 64, 256, 3, 0, 2).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let short = (ok.0, ok.1, ok.2, &(2 * 4), ok.4, ok.5);
    let e = ops::mmq::mmq_moe(&mut r, GemvType::Q4K, short, 64, 256, 3, 6, 2).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::BufferTooSmall {
                param: "expert_start",
                ..
            }
        ),
        "{e}"
    );
    let short = (ok.0, ok.1, &(5 * 4), ok.3, ok.4, ok.5);
    let e = ops::mmq::mmq_moe(&mut r, GemvType::Q4K, short, 64, 256, 3, 6, 2).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::BufferTooSmall {
                param: "pair_token",
                ..
            }
        ),
        "{e}"
    );
    let short = (ok.0, ok.1, ok.2, ok.3, &(5 * 4), ok.5);
    let e = ops::mmq::mmq_moe(&mut r, GemvType::Q4K, short, 64, 256, 3, 6, 2).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::BufferTooSmall {
                param: "pair_row",
                ..
            }
        ),
        "{e}"
    );
    let short = (&(2 * 64 * BLOCK - 1), ok.1, ok.2, ok.3, ok.4, ok.5);
    let e = ops::mmq::mmq_moe(&mut r, GemvType::Q4K, short, 64, 256, 3, 6, 2).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "w", .. }),
        "{e}"
    );
    // One launch, of mmq_moe_items(64, 6, 2) = 1 row tile x (0 + 2) slots.
    assert_eq!(r.launches.len(), 1);
    assert_eq!(
        r.launches[0],
        ("mmq_moe_q4k".into(), [2, 1, 1], [256, 1, 1])
    );
}

/// Global bytes a launch reads, from ptx-sim's counters (the bytes each executed load requests;
/// predicated-off loads request nothing), against the bound: each expert's weights once per
/// tile of 64 of its pairs (an expert with no pair: never), each pair's activation row once per
/// row tile, and the routing words: per block each of its 8 warps reads the `n_expert` offsets
/// to find its expert and 2 more (its start and end), and per row tile every pair's token index
/// is read by the 8 threads that stage its 8 q8_1 blocks and its output row by the 32 that
/// store its column (8 lanes of each of the 4 row warps, once per tile).
#[cfg(feature = "sim")]
#[test]
fn mmq_moe_reads_each_expert_once_per_pair_tile() {
    use ptx_sim::{Arg, LaunchConfig, Sim};

    let module = ingot_kernels::backend::sim::module().expect("parse PTX");
    let mut rng = support::rng("mmq_moe traffic");
    for (kind, shape, ntok, k) in [
        (Kind::Q4K, (64, 128, 256), 130, 6),
        (Kind::Q4K, (8, 64, 512), 130, 1),
        (Kind::Q4K, (8, 64, 512), 7, 6),
        (Kind::Q6K, (64, 128, 256), 130, 6),
        (Kind::Q6K, (8, 64, 512), 130, 1),
        (Kind::Q5K, (64, 128, 256), 130, 6),
        (Kind::Q5K, (8, 64, 512), 130, 1),
        (Kind::Q3K, (64, 128, 256), 130, 6),
        (Kind::Q3K, (8, 64, 512), 130, 1),
        (Kind::Q5_0, (8, 64, 1408), 70, 6),
        (Kind::Q5_0, (4, 64, 96), 70, 1),
        (Kind::Q8_0, (8, 64, 1408), 70, 6),
        (Kind::Q4_0, (8, 64, 1408), 70, 6),
        (Kind::Q4_0, (4, 64, 96), 70, 1),
        (Kind::Iq4Nl, (8, 64, 1408), 70, 6),
        (Kind::Iq4Nl, (4, 64, 96), 70, 1),
        (Kind::Q4_1, (8, 64, 1408), 70, 6),
        (Kind::Q4_1, (4, 64, 96), 70, 1),
        (Kind::Q5_1, (8, 64, 1408), 70, 6),
        (Kind::Q5_1, (4, 64, 96), 70, 1),
    ] {
        let d = desc(kind);
        let c = Case::draw(&mut rng, kind, shape, ntok, k);
        let (n_expert, rows, ncols) = shape;
        let n_pairs = c.pair_token.len();
        let mut sim = Sim::new();
        let x_bytes = std::mem::size_of_val(c.act.as_slice());
        let buf = |sim: &mut Sim, data: &[u8]| {
            let b = sim.alloc(data.len()).expect("alloc");
            sim.write(b, data).expect("write");
            b
        };
        let w = buf(&mut sim, &c.w);
        let x = buf(&mut sim, bytemuck::cast_slice(&c.act));
        let pt = buf(&mut sim, bytemuck::cast_slice(&c.pair_token));
        let es = buf(&mut sim, bytemuck::cast_slice(&c.expert_start));
        let pr = buf(&mut sim, bytemuck::cast_slice(&c.pair_row));
        let y = sim.alloc(n_pairs * rows * 4).expect("alloc");
        let items = mmq_moe_items(rows as u32, n_pairs as u32, n_expert as u32).expect("items");
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
                    Arg::Ptr(pt),
                    Arg::Ptr(es),
                    Arg::Ptr(pr),
                    Arg::Ptr(y),
                    Arg::U32(ncols as u32),
                    Arg::U32(rows as u32),
                    Arg::U32(ntok as u32),
                    Arg::U32(n_pairs as u32),
                    Arg::U32(n_expert as u32),
                ],
            )
            .expect("launch");
        // A Q6_K block starting 2 bytes off a 4-byte word (every odd-numbered one: 210 ≡ 2 mod
        // 4; an expert holds an even number of blocks here) is read from the word before it
        // and reads 2 bytes of `d` again: 4 bytes more per such block (as `tests/mmq.rs`; the
        // 32-weight types read exactly their blocks).
        let blocks = rows * ncols / kind.block_weights();
        let realign: u64 = (0..blocks).map(|i| kind.realign_bytes(i)).sum();
        let blocks = blocks as u64;
        let expert_bytes = blocks * kind.block_bytes() as u64 + realign;
        let pair_tiles: u64 = c
            .counts()
            .iter()
            .map(|&n| n.div_ceil(MMQ_MOE_PAIRS as usize) as u64)
            .sum();
        let row_tiles = rows.div_ceil(MMQ_ROWS as usize) as u64;
        let x_row = (ncols / QK8_1 * size_of::<BlockQ8_1>()) as u64;
        let weights = expert_bytes * pair_tiles;
        let acts = n_pairs as u64 * x_row * row_tiles;
        let routing = u64::from(items) * u64::from(MMQ_WARPS) * 4 * (n_expert as u64 + 2)
            + n_pairs as u64 * row_tiles * (8 + 32) * 4;
        let bound = weights + acts + routing;
        let read = stats.global_bytes_read;
        let used: u64 = c.counts().iter().filter(|&&n| n > 0).count() as u64
            * blocks
            * kind.block_bytes() as u64;
        eprintln!(
            "{} {n_expert}x{rows}x{ncols}, {ntok} tokens x k {k} ({n_pairs} pairs, \
             {pair_tiles} pair tiles, {items} blocks): read {read} B, bound {bound} B (weights \
             {expert_bytes} x {pair_tiles} pair tiles = {weights} + activations {n_pairs} pairs \
             x {x_row} x {row_tiles} row tiles = {acts} + routing {routing}); the routed experts' \
             weights {used} B and x {x_bytes} B; {} warp instr, {} shared bank conflicts",
            d.name, stats.warp_instructions, stats.shared_bank_conflicts
        );
        assert!(read <= bound, "{}: read {read} B > bound {bound} B", d.name);
        assert!(
            read >= used,
            "read {read} B < the {used} B of routed expert weights"
        );
    }
}
