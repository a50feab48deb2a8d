//! Benchmarks of the CPU backend's parts, run by hand (`#[ignore]`): not checks, they print rates.

use std::path::Path;
use std::time::Instant;

use ingot_gguf::GgufFile;
use ingot_quant::cpu_dot::Isa;

use super::batch;
use super::latent::Latents;
use super::matmul::{Activation, QMatrix};
use super::tests::{open_tiny, per_head_attention, pool, uniform};
use super::CpuBackend;

/// Not a check: one layer's softmax attention at depth on lite-4l's shapes (16 heads, kv_lora 512,
/// rope 64, random cache), the per-head form (heads in parallel) against
/// [`super::attend::attend_heads`], wall time, best of `REPS` (8), on `THREADS` (2) threads at
/// `DEPTHS` (4096,16384); then the same on a q8_0 cache. docs/perf.md has the figures: `cargo test
/// -p ingot-model --release --lib -- --ignored attn_depth_bench --nocapture`.
#[test]
#[ignore]
fn attn_depth_bench() {
    use super::attend::{attend_heads, Attend};
    use rayon::prelude::*;
    let file = open_tiny();
    let cpu = CpuBackend::load(&file, 64).unwrap();
    let mut c = cpu.config.clone();
    c.n_head = 16;
    c.kv_lora = 512;
    c.d_rope = 64;
    c.d_nope = 128;
    c.d_v = 128;
    let c = &c;
    let (heads, lora, rope, row) = (c.n_head, c.kv_lora, c.d_rope, c.cache_row());
    let depths: Vec<usize> = std::env::var("DEPTHS")
        .unwrap_or("4096,16384".into())
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    let threads: usize = std::env::var("THREADS").map_or(2, |s| s.parse().unwrap());
    let reps: usize = std::env::var("REPS").map_or(8, |s| s.parse().unwrap());
    let max_ctx = *depths.iter().max().unwrap();
    let mut rnd = uniform(0x2545_f491_4f6c_dd1d_u64);
    let cache: Vec<f32> = (0..max_ctx * row).map(|_| rnd()).collect();
    let mut q8 = super::latent::LatentCache::new(crate::cache_type::CacheType::Q8_0, max_ctx, row);
    for (t, r) in cache.chunks_exact(row).enumerate() {
        q8.write_row(t, r);
    }
    let q_abs: Vec<f32> = (0..heads * lora).map(|_| rnd()).collect();
    let q_pe: Vec<f32> = (0..heads * rope).map(|_| rnd()).collect();
    let p = pool(threads);
    for &depth in &depths {
        let pos = depth - 1;
        let mut att = Attend::new(c);
        for h in 0..heads {
            att.set_query(c, h, &q_abs[h * lora..][..lora], &q_pe[h * rope..][..rope]);
        }
        let mut best_new = f64::MAX;
        let mut best_old = f64::MAX;
        let mut outs = vec![vec![0.0f32; lora]; heads];
        for _ in 0..reps {
            let t = Instant::now();
            p.install(|| attend_heads(c, Latents::f32(&cache, row), pos, &mut att));
            best_new = best_new.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            p.install(|| {
                outs.par_iter_mut().enumerate().for_each(|(h, o)| {
                    *o = per_head_attention(
                        c,
                        &cache,
                        pos,
                        &q_abs[h * lora..][..lora],
                        &q_pe[h * rope..][..rope],
                    )
                })
            });
            best_old = best_old.min(t.elapsed().as_secs_f64());
        }
        let diff = outs
            .concat()
            .iter()
            .zip(&att.o_lat)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        eprintln!(
            "depth {depth}, {threads} threads, best of {reps}: per-head {:.3} ms, all-heads {:.3} ms, ratio {:.2}x \
             (max |diff| {diff:.1e})",
            best_old * 1e3,
            best_new * 1e3,
            best_old / best_new
        );
        let mut best_q8 = f64::MAX;
        for _ in 0..reps {
            let t = Instant::now();
            p.install(|| attend_heads(c, q8.latents(), pos, &mut att));
            best_q8 = best_q8.min(t.elapsed().as_secs_f64());
        }
        eprintln!(
            "depth {depth}: all-heads on a q8_0 cache {:.3} ms",
            best_q8 * 1e3
        );
    }
}

/// The matrix-vector kernels' rates on a real file (`MODEL`, a GGUF path; `TENSORS`,
/// comma-separated names, default `output.weight`): per tensor, GB/s of weights from a
/// cache-resident slice of 64 rows on one thread (the kernel's compute rate), and from the whole
/// matrix on 1 and `THREADS` (2) threads (memory rate), best of `REPS` (5). With `INGOT_CPU_ISA` as
/// the backend takes it. `MODEL=... cargo test -p ingot-model --release --lib -- --ignored
/// kernel_rate_bench --nocapture`.
#[test]
#[ignore]
fn kernel_rate_bench() {
    let path = std::env::var("MODEL").expect("MODEL: a GGUF file");
    let file = GgufFile::open(Path::new(&path)).unwrap();
    let isa = Isa::choose(std::env::var("INGOT_CPU_ISA").ok().as_deref()).0;
    let threads: usize = std::env::var("THREADS").map_or(2, |s| s.parse().unwrap());
    let reps: usize = std::env::var("REPS").map_or(5, |s| s.parse().unwrap());
    let names = std::env::var("TENSORS").unwrap_or("output.weight".into());
    let mut rnd = uniform(0x9e37_79b9_7f4a_7c15);
    for name in names.split(',') {
        let m = QMatrix::from_tensor(&file, name, isa).unwrap();
        let x: Vec<f32> = (0..m.cols()).map(|_| rnd()).collect();
        let mut act = Activation::new(m.cols());
        act.load(&x);
        act.prepare(&m).unwrap();
        let row_bytes = file.header().tensor(name).unwrap().row_bytes() as f64;
        let mut out = vec![0.0f32; m.rows()];
        let best = |f: &mut dyn FnMut()| {
            (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::MAX, f64::min)
        };
        let resident = best(&mut || {
            for _ in 0..200 {
                m.dot_rows(0, &act, &mut out[..64]).unwrap();
            }
        });
        let one = pool(1);
        let all_1 = best(&mut || one.install(|| batch::matvec(&m, &mut act, &mut out).unwrap()));
        let many = pool(threads);
        let all_n = best(&mut || many.install(|| batch::matvec(&m, &mut act, &mut out).unwrap()));
        let gb = |rows: f64, s: f64| rows * row_bytes / s / 1e9;
        eprintln!(
            "{name} ({}, {} x {}, {isa:?}): resident 1 thread {:.1} GB/s; whole 1 thread {:.1} GB/s, {threads} threads {:.1} GB/s",
            file.header().tensor(name).unwrap().ty.name(),
            m.rows(),
            m.cols(),
            gb(64.0 * 200.0, resident),
            gb(m.rows() as f64, all_1),
            gb(m.rows() as f64, all_n),
        );
    }
}

/// Not a check: a prefill chunk's attention at depth on lite-4l's shapes (random f32 cache): `N`
/// (64) tokens after `DEPTHS` (4096,8192) rows, in runs of 1 (each token alone, as the decode step)
/// and of `RUNS` (4,8,16) tokens ([`super::attend::attend_tokens`]), runs in parallel; wall time,
/// best of `REPS` (3), on `THREADS` (2) threads. `cargo test -p ingot-model --release --lib --
/// --ignored chunk_attn_bench --nocapture`.
#[test]
#[ignore]
fn chunk_attn_bench() {
    use super::attend::{attend_tokens, token_groups, Attend};
    use rayon::prelude::*;
    let file = open_tiny();
    let cpu = CpuBackend::load(&file, 64).unwrap();
    let mut c = cpu.config.clone();
    (c.n_head, c.kv_lora, c.d_rope, c.d_nope, c.d_v) = (16, 512, 64, 128, 128);
    let c = &c;
    let (heads, lora, row) = (c.n_head, c.kv_lora, c.cache_row());
    let env = |k: &str, d: &str| -> Vec<usize> {
        let v = std::env::var(k).unwrap_or(d.into());
        v.split(',').map(|s| s.parse().unwrap()).collect()
    };
    let (depths, groups) = (env("DEPTHS", "4096,8192"), env("RUNS", "1,4,8,16"));
    let (n, threads, reps) = (
        env("N", "64")[0],
        env("THREADS", "2")[0],
        env("REPS", "3")[0],
    );
    let mut rnd = uniform(0x3c6e_f372_fe94_f82b_u64);
    let max_ctx = depths.iter().max().unwrap() + n;
    let cache: Vec<f32> = (0..max_ctx * row).map(|_| rnd()).collect();
    let q: Vec<f32> = (0..n * heads * row).map(|_| rnd()).collect();
    let p = pool(threads);
    for &depth in &depths {
        for &most in &groups {
            let runs = token_groups(depth, n, most);
            let mut best = f64::MAX;
            for _ in 0..reps {
                let t = Instant::now();
                p.install(|| {
                    runs.par_iter().for_each_init(
                        || Attend::for_tokens(c, most),
                        |att, g| {
                            for i in g.clone() {
                                for h in 0..heads {
                                    let qh = &q[(i * heads + h) * row..][..row];
                                    att.set_token_query(
                                        c,
                                        i - g.start,
                                        h,
                                        &qh[..lora],
                                        &qh[lora..],
                                    );
                                }
                            }
                            attend_tokens(
                                c,
                                Latents::f32(&cache, row),
                                depth + g.start,
                                g.len(),
                                att,
                            );
                        },
                    )
                });
                best = best.min(t.elapsed().as_secs_f64());
            }
            eprintln!(
                "depth {depth}, {n} tokens in runs of {most}, {threads} threads: {:.1} ms ({:.2} ms a token)",
                best * 1e3,
                best * 1e3 / n as f64
            );
        }
    }
}
