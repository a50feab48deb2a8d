//! The MoE glue of a prefill chunk (`ingot_abi::launch` family `moe_prefill`) against CPU
//! references: `moe_pairs` (the expert-sorted pair list: exact), `moe_swiglu_q8_1` (SwiGLU to
//! q8_1: f64 within the quantizer's error, and bit for bit the CPU quantizer on the
//! simulator), `moe_combine` (weighted expert sum into the residual: the CPU backend's f32
//! order bit for bit, and f64 within its roundings), their argument checks, and the chain
//! `moe_pairs` → `mmq_moe_q4k` down over per-pair rows with `pair_self` → `moe_combine` on
//! device outputs only.
//!
//! Shapes are small (the whole file is a few seconds of simulator time) but cover the edges:
//! one token, one expert, a chunk of 512 tokens, 512 experts, an expert with no pair and one
//! with most of them, one token choosing an expert twice, ids past `n_expert`.

mod support;

use half::f16;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::moe::{ExpertSelection, MAX_EXPERTS_USED};
use ingot_kernels::ops::moe_prefill::{self, GateUp};
use ingot_kernels::Accelerator;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use support::{download, download_f32, f32_bytes, poisoned, upload, Agree, SameLaunch};

const EPS: f64 = f32::EPSILON as f64 / 2.0;
/// Poisoned words past each output that must stay untouched.
const GUARD: usize = 4;

/// How a routing case draws each token's choices.
#[derive(Clone, Copy, Debug)]
enum Draw {
    /// `n_used` distinct experts among all but the last (which gets no pair); the first pick
    /// is expert 0 three times in four (one expert with many pairs).
    Favoured,
    /// Every choice expert 0 (one expert with every pair, the others none).
    AllOne,
    /// Ids anywhere in `0 .. n_expert + 40`, repeats allowed: ids past `n_expert` count as the
    /// last expert, and a token may choose one expert twice (ties in the stable order).
    Wild,
}

/// One `moe_pairs` launch: `ntok` selections (entries past `n_used` hold junk the kernel must
/// not read as choices).
struct Pairs {
    sel: Vec<ExpertSelection>,
    ntok: usize,
    n_used: usize,
    n_expert: usize,
}

impl Pairs {
    fn draw(rng: &mut StdRng, ntok: usize, n_used: usize, n_expert: usize, how: Draw) -> Pairs {
        let sel = (0..ntok)
            .map(|_| {
                let mut s = ExpertSelection::default();
                for v in s.ids.iter_mut() {
                    *v = rng.random_range(0..u32::MAX);
                }
                for w in s.weights.iter_mut() {
                    *w = rng.random_range(0.05f32..1.0);
                }
                match how {
                    Draw::Favoured => {
                        let top = (n_expert as u32).max(2) - 1;
                        let mut pool: Vec<u32> = (0..top).collect();
                        pool.shuffle(rng);
                        if rng.random_range(0..4) != 0 {
                            let at = pool.iter().position(|&e| e == 0).unwrap();
                            pool.swap(0, at);
                        }
                        s.ids[..n_used].copy_from_slice(&pool[..n_used]);
                    }
                    Draw::AllOne => s.ids[..n_used].fill(0),
                    Draw::Wild => {
                        for v in &mut s.ids[..n_used] {
                            *v = rng.random_range(0..n_expert as u32 + 40);
                        }
                        if n_used > 1 {
                            s.ids[1] = s.ids[0];
                        }
                    }
                }
                s
            })
            .collect();
        Pairs {
            sel,
            ntok,
            n_used,
            n_expert,
        }
    }

    fn n_pairs(&self) -> usize {
        self.ntok * self.n_used
    }

    /// `(expert_start, pair_token, pair_of)`: a stable sort of the choices `j = t·n_used + s`
    /// by clamped expert.
    fn reference(&self) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let e_of = |j: usize| {
            let id = self.sel[j / self.n_used].ids[j % self.n_used];
            id.min(self.n_expert as u32 - 1) as usize
        };
        let mut order: Vec<usize> = (0..self.n_pairs()).collect();
        order.sort_by_key(|&j| e_of(j)); // stable: equal experts keep choice order
        let mut start = vec![0u32; self.n_expert + 1];
        for &j in &order {
            start[e_of(j) + 1] += 1;
        }
        for e in 0..self.n_expert {
            start[e + 1] += start[e];
        }
        let pair_token = order.iter().map(|&j| (j / self.n_used) as u32).collect();
        let mut pair_of = vec![0u32; self.n_pairs()];
        for (p, &j) in order.iter().enumerate() {
            pair_of[j] = p as u32;
        }
        (start, pair_token, pair_of)
    }
}

impl SameLaunch for Pairs {
    /// `expert_start`, `pair_token`, `pair_of`, `pair_self` with their guard words, concatenated.
    fn run<B: Accelerator>(&self, b: &mut B) -> Vec<u8> {
        let sel = upload(b, bytemuck::cast_slice(&self.sel));
        let np = self.n_pairs();
        let bufs = [self.n_expert + 1, np, np, np].map(|n| poisoned(b, 4 * (n + GUARD)));
        moe_prefill::moe_pairs(
            b,
            &sel,
            (&bufs[0], &bufs[1], &bufs[2], &bufs[3]),
            self.ntok,
            self.n_used,
            self.n_expert,
        )
        .expect("launch");
        bufs.iter().flat_map(|buf| download(b, buf)).collect()
    }
}

/// `bytes` read as consecutive `T`s.
fn read<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    bytes
        .chunks_exact(std::mem::size_of::<T>())
        .map(bytemuck::pod_read_unaligned)
        .collect()
}

fn check_pairs<B: Accelerator>(b: &mut B, c: &Pairs, how: Draw) {
    let what = format!(
        "{}: moe_pairs {} tokens x {} of {} experts ({how:?})",
        b.name(),
        c.ntok,
        c.n_used,
        c.n_expert
    );
    let out: Vec<u32> = read(&c.run(b));
    let np = c.n_pairs();
    let (start, token, of) = c.reference();
    let self_ids: Vec<u32> = (0..np as u32).collect();
    let mut at = 0;
    for (name, want) in [
        ("expert_start", &start),
        ("pair_token", &token),
        ("pair_of", &of),
        ("pair_self", &self_ids),
    ] {
        let got = &out[at..at + want.len()];
        if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
            panic!("{what}: {name}[{i}] = {:#x}, want {:#x}", got[i], want[i]);
        }
        let guard = &out[at + want.len()..at + want.len() + GUARD];
        assert!(
            guard.iter().all(|&w| w == u32::MAX),
            "{what}: {name} written past its {} words: {guard:x?}",
            want.len()
        );
        at += want.len() + GUARD;
    }
    let counts: Vec<u32> = start.windows(2).map(|s| s[1] - s[0]).collect();
    let busiest = counts.iter().max().copied().unwrap_or(0);
    let idle = counts.iter().filter(|&&n| n == 0).count();
    eprintln!("{what}: exact ({np} pairs, busiest expert {busiest}, {idle} experts idle)");
}

fn pairs_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("moe_pairs");
    for (ntok, n_used, n_expert, how) in [
        (1, 1, 1, Draw::AllOne),
        (1, 6, 64, Draw::Favoured),
        (7, 6, 64, Draw::Wild),
        (130, 6, 64, Draw::Favoured),
        (64, 1, 8, Draw::AllOne),
        (512, 6, 64, Draw::Favoured),
        (512, 8, 256, Draw::Wild),
        (33, MAX_EXPERTS_USED, 512, Draw::Wild),
        (40, 16, 512, Draw::Favoured),
    ] {
        let c = Pairs::draw(&mut rng, ntok, n_used, n_expert, how);
        check_pairs(b, &c, how);
    }
}

/// One `moe_swiglu_q8_1` launch: `n_pairs × ff` gate and up values.
struct Swiglu {
    gate: Vec<f32>,
    up: Vec<f32>,
    n_pairs: usize,
    ff: usize,
    merged: bool,
}

impl Swiglu {
    /// Gate in ±8 (silu far from linear) and up in ±2, non-zero; with `edges` (at least three
    /// blocks) block 0 is `quantize_q8_1`'s tie block (`h = k + 0.5` exactly: gate = 128, where
    /// `silu` is exactly the identity in f32, and up = h/128), block 1 has gate = 0 (`h = 0`:
    /// `amax = 0`), block 2 is the floats one ulp beside those ties.
    fn draw(rng: &mut StdRng, n_pairs: usize, ff: usize, edges: bool) -> Swiglu {
        let nz = |rng: &mut StdRng, r: f32| {
            let v = rng.random_range(0.01 * r..r);
            if rng.random() {
                v
            } else {
                -v
            }
        };
        let mut gate: Vec<f32> = (0..n_pairs * ff).map(|_| nz(rng, 8.0)).collect();
        let mut up: Vec<f32> = (0..n_pairs * ff).map(|_| nz(rng, 2.0)).collect();
        if edges {
            assert!(n_pairs * ff >= 3 * QK8_1);
            gate[..QK8_1].fill(128.0);
            gate[2 * QK8_1..3 * QK8_1].fill(128.0);
            up[0] = 127.0 / 128.0;
            up[2 * QK8_1] = -127.0 / 128.0;
            for i in 1..QK8_1 {
                let tie = (i as f32 - 16.0) + 0.5;
                up[i] = tie / 128.0;
                let bits = tie.to_bits();
                let near = f32::from_bits(if i % 2 == 1 { bits + 1 } else { bits - 1 });
                up[2 * QK8_1 + i] = near / 128.0;
            }
            gate[QK8_1..2 * QK8_1].fill(0.0);
        }
        Swiglu {
            gate,
            up,
            n_pairs,
            ff,
            merged: false,
        }
    }

    /// The kernel's `h` in f32 as the simulator computes it: `ex2.approx` correctly rounded
    /// (ptx-sim evaluates it in f64 and rounds once), every other step an IEEE f32 operation in
    /// the kernel's order (`silu(z) = z / (1 + 2^(−z·log2 e))`, then `·up`).
    fn h_sim(&self) -> Vec<f32> {
        self.gate
            .iter()
            .zip(&self.up)
            .map(|(&z, &u)| {
                let e = f64::from(-z * std::f32::consts::LOG2_E).exp2() as f32;
                z / (1.0 + e) * u
            })
            .collect()
    }
}

impl SameLaunch for Swiglu {
    fn run<B: Accelerator>(&self, b: &mut B) -> Vec<u8> {
        let blocks = self.n_pairs * self.ff / QK8_1;
        let act = poisoned(b, (blocks + 1) * std::mem::size_of::<BlockQ8_1>());
        if self.merged {
            let gu: Vec<f32> = (0..self.n_pairs)
                .flat_map(|p| {
                    let row = p * self.ff..(p + 1) * self.ff;
                    self.gate[row.clone()].iter().chain(&self.up[row]).copied()
                })
                .collect();
            let gu = upload(b, &f32_bytes(&gu));
            moe_prefill::moe_swiglu_q8_1(b, GateUp::Merged(&gu), &act, self.n_pairs, self.ff)
        } else {
            let g = upload(b, &f32_bytes(&self.gate));
            let u = upload(b, &f32_bytes(&self.up));
            moe_prefill::moe_swiglu_q8_1(
                b,
                GateUp::Separate { gate: &g, up: &u },
                &act,
                self.n_pairs,
                self.ff,
            )
        }
        .expect("launch");
        download(b, &act)
    }
}

fn silu(z: f64) -> f64 {
    z / (1.0 + (-z).exp())
}

/// Against the f64 SwiGLU within the quantizer's error; on the simulator, whose floats are
/// known exactly ([`Swiglu::h_sim`]), also byte for byte the CPU quantizer
/// (`ingot_quant::quantize_q8_1`, ggml-cuda's bits) of those floats: the same amax, `Σh`
/// butterfly, `d` and rounding as `quantize_q8_1`, ties included.
fn check_swiglu<B: Accelerator>(b: &mut B, c: &Swiglu) {
    let what = format!(
        "{}: moe_swiglu_q8_1 {} pairs x {} ({})",
        b.name(),
        c.n_pairs,
        c.ff,
        if c.merged { "merged" } else { "separate" }
    );
    let bytes = c.run(b);
    let sz = std::mem::size_of::<BlockQ8_1>();
    let blocks = c.n_pairs * c.ff / QK8_1;
    if b.name() == "ptx-sim" {
        let want = ingot_quant::quantize_q8_1(&c.h_sim());
        let want: &[u8] = bytemuck::cast_slice(&want);
        if let Some(i) = (0..want.len()).find(|&i| bytes[i] != want[i]) {
            panic!(
                "{what}: byte {i} (block {}) {:#04x}, the quantizer's {:#04x}",
                i / sz,
                bytes[i],
                want[i]
            );
        }
        eprintln!("{what}: the CPU quantizer's bytes");
    }
    assert!(
        bytes[blocks * sz..].iter().all(|&v| v == 0xFF),
        "{what}: written past its {blocks} blocks"
    );
    let act: Vec<BlockQ8_1> = read(&bytes[..blocks * sz]);
    let mut worst = 0.0f64;
    for (blk, got) in act.iter().enumerate() {
        let at = blk * QK8_1;
        let mut h = [0.0f64; QK8_1];
        let mut dh = [0.0f64; QK8_1];
        for i in 0..QK8_1 {
            let (g, u) = (f64::from(c.gate[at + i]), f64::from(c.up[at + i]));
            h[i] = silu(g) * u;
            // The kernel's silu: `−z·log2 e` rounded (an error of |z|·2^-24 in the exponent,
            // ≤ |z|·2^-24·ln 2 relative on e^−z), ex2.approx (2^-22.5 relative), the add and
            // the division (2^-24 each), then the product (2^-24): relative to h at most
            // (|z| + 8)·2^-24, bounded here by 1e-6·(1 + |z|) as in `moe_ffn.rs`.
            dh[i] = (1e-6 * (1.0 + g.abs()) + EPS) * h[i].abs();
        }
        let d16 = f64::from(f16::from_bits(got.d).to_f32());
        for i in 0..QK8_1 {
            // q = roundf(h'/d) is within d/2 of h'; storing d as f16 moves q·d by at most
            // 127·2^-11·d = 0.062·d: 0.57·d in all, plus the deviation dh of h' from h.
            let deq = d16 * f64::from(got.qs[i]);
            let err = (deq - h[i]).abs();
            let tol = 0.57 * d16.abs() + dh[i];
            assert!(
                err <= tol,
                "{what}: block {blk} element {i}: dequantized {deq}, reference {}, |err| {err:e} \
                 > tol {tol:e} (d {d16})",
                h[i]
            );
            worst = worst.max(err / d16.abs().max(f64::MIN_POSITIVE));
        }
        // s = Σh' rounded to f16: Σh' is within Σdh plus 32 f32 additions of Σh.
        let sum: f64 = h.iter().sum();
        let s16 = f64::from(f16::from_bits(got.s).to_f32());
        let abs_sum: f64 = h.iter().map(|v| v.abs()).sum();
        let dsum: f64 = dh.iter().sum();
        let tol = 2f64.powi(-11) * (sum.abs() + dsum)
            + dsum
            + 32.0 * EPS * abs_sum
            + f64::from(f16::MIN_POSITIVE_SUBNORMAL.to_f32());
        assert!(
            (s16 - sum).abs() <= tol,
            "{what}: block {blk}: s {s16}, reference Σh {sum}, tol {tol:e}"
        );
    }
    eprintln!("{what}: max |dequantized − h|/d = {worst:.3} (tolerance 0.57 + dh/d)");
}

fn swiglu_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("moe_swiglu_q8_1");
    for (n_pairs, ff, edges) in [(1, 32, false), (3, 64, true), (37, 96, true)] {
        let mut c = Swiglu::draw(&mut rng, n_pairs, ff, edges);
        for merged in [false, true] {
            c.merged = merged;
            check_swiglu(b, &c);
        }
    }
}

/// One `moe_combine` launch: a routing, its pair list (the CPU sort, the same as
/// `moe_pairs`'s), the sorted down rows, the shared output and the residual.
struct Combine {
    pairs: Pairs,
    n_embd: usize,
    down: Vec<f32>,
    shared: Vec<f32>,
    resid: Vec<f32>,
    /// Launch with `y` = `resid` (in place).
    in_place: bool,
}

impl Combine {
    fn draw(rng: &mut StdRng, ntok: usize, n_used: usize, n_embd: usize, how: Draw) -> Combine {
        let pairs = Pairs::draw(rng, ntok, n_used, 64, how);
        let mut f = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    let v = rng.random_range(0.01f32..2.0);
                    if rng.random() {
                        v
                    } else {
                        -v
                    }
                })
                .collect()
        };
        Combine {
            down: f(ntok * n_used * n_embd),
            shared: f(ntok * n_embd),
            resid: f(ntok * n_embd),
            pairs,
            n_embd,
            in_place: false,
        }
    }

    /// The CPU backend's sum (`host/model/src/cpu/prefill.rs`, `moe_chunk`), in f32 and in
    /// f64 with `Σ|term|` per output.
    fn reference(&self) -> (Vec<f32>, Vec<(f64, f64)>) {
        let (k, d) = (self.pairs.n_used, self.n_embd);
        let (_, _, pair_of) = self.pairs.reference();
        let mut f32s = Vec::new();
        let mut f64s = Vec::new();
        for t in 0..self.pairs.ntok {
            let w = &self.pairs.sel[t].weights;
            for i in 0..d {
                let (mut acc, mut exact, mut mag) = (0.0f32, 0.0f64, 0.0f64);
                for s in 0..k {
                    let v = self.down[pair_of[t * k + s] as usize * d + i];
                    acc += w[s] * v;
                    let term = f64::from(w[s]) * f64::from(v);
                    exact += term;
                    mag += term.abs();
                }
                let (sh, r) = (self.shared[t * d + i], self.resid[t * d + i]);
                f32s.push(r + (acc + sh));
                exact += f64::from(sh) + f64::from(r);
                mag += f64::from(sh).abs() + f64::from(r).abs();
                f64s.push((exact, mag));
            }
        }
        (f32s, f64s)
    }
}

impl SameLaunch for Combine {
    fn run<B: Accelerator>(&self, b: &mut B) -> Vec<u8> {
        let p = &self.pairs;
        let (_, _, pair_of) = p.reference();
        let sel = upload(b, bytemuck::cast_slice(&p.sel));
        let of = upload(b, bytemuck::cast_slice(&pair_of));
        let down = upload(b, &f32_bytes(&self.down));
        let shared = upload(b, &f32_bytes(&self.shared));
        let resid = upload(b, &f32_bytes(&self.resid));
        let n = p.ntok * self.n_embd;
        let y = if self.in_place {
            None
        } else {
            Some(poisoned(b, 4 * (n + GUARD)))
        };
        let out = y.as_ref().unwrap_or(&resid);
        moe_prefill::moe_combine(
            b,
            (&sel, &of, &down, &shared, &resid, out),
            self.n_embd,
            p.ntok,
            p.n_used,
        )
        .expect("launch");
        download(b, out)
    }
}

fn check_combine<B: Accelerator>(b: &mut B, c: &Combine) {
    let p = &c.pairs;
    let what = format!(
        "{}: moe_combine {} tokens x {} slots x {}{}",
        b.name(),
        p.ntok,
        p.n_used,
        c.n_embd,
        if c.in_place { " (y = resid)" } else { "" }
    );
    let n = p.ntok * c.n_embd;
    let got: Vec<f32> = read(&c.run(b));
    if !c.in_place {
        assert!(
            got[n..].iter().all(|v| v.to_bits() == u32::MAX),
            "{what}: written past its {n} floats"
        );
    }
    let (want32, want64) = c.reference();
    let mut worst = 0.0f64;
    for i in 0..n {
        // Only `.rn` f32 multiplies and adds, in the CPU backend's order: the same bits.
        assert_eq!(
            got[i].to_bits(),
            want32[i].to_bits(),
            "{what}: y[{i}] (token {}, dim {}) = {}, CPU order {}",
            i / c.n_embd,
            i % c.n_embd,
            got[i],
            want32[i]
        );
        // n_used products and n_used + 1 additions, each within 2^-24 of a running value
        // below Σ|term|: (2·n_used + 1)·2^-24·Σ|term|, doubled.
        let (exact, mag) = want64[i];
        let tol = 2.0 * (2 * p.n_used + 1) as f64 * EPS * mag;
        let err = (f64::from(got[i]) - exact).abs();
        assert!(
            err <= tol,
            "{what}: y[{i}] = {}, f64 {exact}, |err| {err:e} > tol {tol:e}",
            got[i]
        );
        worst = worst.max(err / mag);
    }
    eprintln!("{what}: CPU-order bits; max |err|/Σ|term| vs f64 {worst:.2e}");
}

fn combine_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("moe_combine");
    for (ntok, n_used, n_embd, how, in_place) in [
        (1, 1, 4, Draw::AllOne, false),
        (7, 6, 64, Draw::Favoured, false),
        (130, 6, 128, Draw::Favoured, true),
        (9, 16, 36, Draw::Wild, false),
    ] {
        let mut c = Combine::draw(&mut rng, ntok, n_used, n_embd, how);
        c.in_place = in_place;
        check_combine(b, &c);
    }
}

/// Down rows of the chained case: `n_embd`.
const CHAIN_EMBD: usize = 64;
/// Width of the chained case's expert FFN (the down product's `ncols`: one Q4_K super-block).
const CHAIN_FF: usize = 256;

/// The launches of a chunk after the gate/up products, each reading the previous one's device
/// output: `moe_pairs`, the down projection as `mmq_moe_q4k` over per-pair input rows with
/// `pair_self` as its `pair_token` and `pair_row` and `ntok = n_pairs`, then `moe_combine` with the
/// device's `pair_of`. The down rows are checked against the f64 reference of the weights of the
/// expert each pair belongs to (so the identity list made the unchanged `mmq_moe` read pair `p`'s
/// own row), the combine against the CPU order on those rows, bit for bit.
fn chained<B: Accelerator>(b: &mut B) {
    use support::mmq::Kind;
    let mut rng = support::rng("moe_pairs, mmq_moe down, moe_combine");
    let c = Combine::draw(&mut rng, 20, 6, CHAIN_EMBD, Draw::Favoured);
    let p = &c.pairs;
    let (np, ne, d) = (p.n_pairs(), p.n_expert, CHAIN_EMBD);
    let what = format!(
        "{}: moe_pairs -> mmq_moe_q4k down ({ne} experts x {d} rows x {CHAIN_FF}, pair_self) -> \
         moe_combine, {} tokens x {}",
        b.name(),
        p.ntok,
        p.n_used
    );
    let sel = upload(b, bytemuck::cast_slice(&p.sel));
    let [start, token, of, me] = [ne + 1, np, np, np].map(|n| poisoned(b, 4 * n));
    moe_prefill::moe_pairs(b, &sel, (&start, &token, &of, &me), p.ntok, p.n_used, ne)
        .expect("moe_pairs");

    // Per-pair q8_1 input rows (the SwiGLU output the down product reads) and stacked weights.
    let xf: Vec<f32> = (0..np * CHAIN_FF)
        .map(|_| rng.random_range(-2.0f32..2.0))
        .collect();
    let act = ingot_quant::quantize_q8_1(&xf);
    let w: Vec<u8> = (0..ne * d * CHAIN_FF / 256)
        .flat_map(|_| Kind::Q4K.random_block(&mut rng))
        .collect();
    let (wb, xb) = (upload(b, &w), upload(b, bytemuck::cast_slice(&act)));
    let down = poisoned(b, 4 * np * d);
    ingot_kernels::ops::mmq::mmq_moe(
        b,
        ingot_abi::weight_types::GemvType::Q4K,
        (&wb, &xb, &me, &start, &me, &down),
        d,
        CHAIN_FF,
        np,
        np,
        ne,
    )
    .expect("mmq_moe_q4k");
    let down_rows = download_f32(b, &down, np * d);
    let (want_start, _, _) = p.reference();
    // As `tests/mmq_moe.rs`: 8 sub-blocks of 3 roundings each, within 2^-24 of a running sum
    // below Σ|term|; twice that bound.
    let tol_rel = 2.0 * 8.0 * Kind::Q4K.roundings_per_sub_block() * EPS;
    let row_bytes = Kind::Q4K.block_bytes() * CHAIN_FF / 256;
    let per_row = CHAIN_FF / QK8_1;
    for e in 0..ne {
        for q in want_start[e] as usize..want_start[e + 1] as usize {
            for r in 0..d {
                let at = (e * d + r) * row_bytes;
                let (want, mag) = Kind::Q4K
                    .reference(&w[at..at + row_bytes], &act[q * per_row..(q + 1) * per_row]);
                let got = f64::from(down_rows[q * d + r]);
                assert!(
                    (got - want).abs() <= tol_rel * mag,
                    "{what}: pair {q} (expert {e}) row {r}: {got}, reference {want}"
                );
            }
        }
    }

    let shared = upload(b, &f32_bytes(&c.shared));
    let resid = upload(b, &f32_bytes(&c.resid));
    let y = poisoned(b, 4 * p.ntok * d);
    moe_prefill::moe_combine(
        b,
        (&sel, &of, &down, &shared, &resid, &y),
        d,
        p.ntok,
        p.n_used,
    )
    .expect("moe_combine");
    let got = download_f32(b, &y, p.ntok * d);
    let on_device = Combine {
        pairs: Pairs {
            sel: p.sel.clone(),
            ..*p
        },
        down: down_rows,
        shared: c.shared.clone(),
        resid: c.resid.clone(),
        n_embd: d,
        in_place: false,
    };
    let (want, _) = on_device.reference();
    if let Some(i) = (0..want.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!("{what}: y[{i}] = {}, CPU order {}", got[i], want[i]);
    }
    eprintln!("{what}: down within the mmq bound, combine in CPU-order bits");
}

/// Every kernel of the family against its reference, on one simulator (its PTX parsed once).
fn glue<B: Accelerator>(b: &mut B) {
    pairs_cases(b);
    swiglu_cases(b);
    combine_cases(b);
    chained(b);
}

#[test]
fn moe_glue_matches_reference() {
    on_every_backend!(glue);
}

/// The simulator against the GPU (skipped without a GPU): the pair lists are integers and the
/// combine uses `.rn` operations in a fixed order, so every byte must agree.
#[test]
fn moe_glue_sim_matches_gpu() {
    let mut rng = support::rng("moe glue sim vs GPU");
    let c = Pairs::draw(&mut rng, 512, 8, 256, Draw::Wild);
    support::sim_matches_gpu("moe_pairs 512 x 8 of 256", &c, Agree::Bits);
    let c = Combine::draw(&mut rng, 130, 6, 128, Draw::Favoured);
    support::sim_matches_gpu("moe_combine 130 x 6 x 128", &c, Agree::Bits);
}

/// Bad shapes and short buffers are typed errors that launch nothing.
#[test]
fn moe_glue_rejects_bad_arguments() {
    use ingot_kernels::KernelError;
    let mut r = support::recorder::Recorder::default();
    let sel = 128 * 3;
    let (np, ne) = (3 * 6 * 4, 65 * 4);
    moe_prefill::moe_pairs(&mut r, &sel, (&ne, &np, &np, &np), 3, 6, 64).expect("valid");
    for (ntok, n_used, n_expert) in [(0, 6, 64), (3, 0, 64), (3, 17, 64), (3, 6, 0), (3, 6, 513)] {
        let e = moe_prefill::moe_pairs(&mut r, &sel, (&ne, &np, &np, &np), ntok, n_used, n_expert)
            .unwrap_err();
        assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    }
    let e = moe_prefill::moe_pairs(&mut r, &sel, (&(ne - 4), &np, &np, &np), 3, 6, 64).unwrap_err();
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
    let e = moe_prefill::moe_pairs(&mut r, &sel, (&ne, &np, &np, &(np - 4)), 3, 6, 64).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::BufferTooSmall {
                param: "pair_self",
                ..
            }
        ),
        "{e}"
    );

    let (f, q) = (18 * 64 * 4, 18 * 2 * 36);
    let sep = GateUp::Separate { gate: &f, up: &f };
    moe_prefill::moe_swiglu_q8_1(&mut r, sep, &q, 18, 64).expect("valid");
    let e = moe_prefill::moe_swiglu_q8_1(&mut r, sep, &q, 18, 48).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let e = moe_prefill::moe_swiglu_q8_1(&mut r, GateUp::Merged(&f), &q, 18, 64).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "gate", .. }),
        "{e}"
    );
    let e = moe_prefill::moe_swiglu_q8_1(&mut r, sep, &(q - 1), 18, 64).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "act", .. }),
        "{e}"
    );

    let (of, down, tok) = (18 * 4, 18 * 64 * 4, 3 * 64 * 4);
    let ok = (&sel, &of, &down, &tok, &tok, &tok);
    moe_prefill::moe_combine(&mut r, ok, 64, 3, 6).expect("valid");
    let e = moe_prefill::moe_combine(&mut r, ok, 62, 3, 6).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let e = moe_prefill::moe_combine(&mut r, ok, 64, 3, 7).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::BufferTooSmall {
                param: "pair_of",
                ..
            }
        ),
        "{e}"
    );
    let short = (&sel, &of, &(down - 4), &tok, &tok, &tok);
    let e = moe_prefill::moe_combine(&mut r, short, 64, 3, 6).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "down", .. }),
        "{e}"
    );

    // The three valid launches: one block; 18·64/1024 → 2 blocks; 3·64/1024 → 1 block.
    assert_eq!(
        r.launches,
        vec![
            ("moe_pairs".into(), [1, 1, 1], [512, 1, 1]),
            ("moe_swiglu_q8_1".into(), [2, 1, 1], [256, 1, 1]),
            ("moe_combine".into(), [1, 1, 1], [256, 1, 1]),
        ]
    );
}
