//! [`super::attend::attend_tokens`] against a plain single-token form of its order, bit for bit.

use super::attend::{attend_tokens, token_groups, Attend};
use super::latent::{LatentCache, Latents};
use super::tests::{bits, open_tiny, pool, uniform};
use super::CpuBackend;
use crate::cache_type::{round_row, CacheType};
use crate::config::{AttnTemperature, ModelConfig};
use crate::math::{gemm_nt_split_fused, weighted_rows_add_fused};

/// One token's attention at `pos` over f32 rows `cache`, heads' queries `q` (`n_head × [q_abs |
/// q_pe]`), serially in the order `attend_tokens` documents: spans of `span_len(pos + 1)` rows,
/// blocks of `block` rows from each span's start, a running maximum, each head's weighted sum by
/// [`weighted_rows_add_fused`], the spans merged in order.
fn reference(c: &ModelConfig, cache: &[f32], pos: usize, q: &[f32], block: usize) -> Vec<f32> {
    let (heads, lora, row) = (c.n_head, c.kv_lora, c.cache_row());
    let rows = pos + 1;
    let span = rows.div_ceil(64).max(128);
    let spans = rows.div_ceil(span);
    let kq_scale = c.kq_scale_at(pos);
    let (mut part, mut max, mut sum) = (
        vec![0.0f32; spans * heads * lora],
        vec![f32::NEG_INFINITY; spans * heads],
        vec![0.0f32; spans * heads],
    );
    for si in 0..spans {
        let t0 = si * span;
        let len = span.min(rows - t0);
        for rows_b in cache[t0 * row..(t0 + len) * row].chunks(block * row) {
            let nb = rows_b.len() / row;
            let mut sc = vec![0.0f32; heads * nb];
            gemm_nt_split_fused((q, row, heads), (rows_b, row, nb), (lora, row), &mut sc, nb);
            for (h, p) in sc.chunks_exact_mut(nb).enumerate() {
                let k = si * heads + h;
                let acc = &mut part[k * lora..(k + 1) * lora];
                p.iter_mut().for_each(|s| *s *= kq_scale);
                let top = p.iter().fold(f32::NEG_INFINITY, |t, &s| t.max(s));
                if top > max[k] {
                    if max[k] > f32::NEG_INFINITY {
                        let f = (max[k] - top).exp();
                        acc.iter_mut().for_each(|a| *a *= f);
                        sum[k] *= f;
                    }
                    max[k] = top;
                }
                for s in p.iter_mut() {
                    *s = (*s - max[k]).exp();
                    sum[k] += *s;
                }
                weighted_rows_add_fused(p, rows_b, row, acc);
            }
        }
    }
    let mut out = vec![0.0f32; heads * lora];
    for (h, o) in out.chunks_exact_mut(lora).enumerate() {
        let top = (0..spans).fold(f32::NEG_INFINITY, |t, s| t.max(max[s * heads + h]));
        let total: f32 = (0..spans)
            .map(|s| (max[s * heads + h] - top).exp() * sum[s * heads + h])
            .sum();
        for s in 0..spans {
            let w = (max[s * heads + h] - top).exp() / total;
            let acc = &part[(s * heads + h) * lora..][..lora];
            o.iter_mut().zip(acc).for_each(|(o, a)| *o += w * a);
        }
    }
    out
}

/// Runs of a chunk's tokens attending together give each token the reference's bits: runs starting
/// inside a span, across a span boundary, where the span length changes (8,192 rows and past it),
/// on f32 rows and a q8_0 cache, with a position-dependent query scale, on 1 and 2 threads, at the
/// tiny model's widths and lite-4l's (576: 14 rows a block).
#[test]
fn tokens_attending_together_give_each_token_its_own_bits() {
    let file = open_tiny();
    let cpu = CpuBackend::load(&file, 64).unwrap();
    let mut tiny = cpu.config.clone();
    tiny.attn_temperature = Some(AttnTemperature {
        scale: 0.1,
        length: 7,
    });
    let mut lite = cpu.config.clone();
    (
        lite.n_head,
        lite.kv_lora,
        lite.d_rope,
        lite.d_nope,
        lite.d_v,
    ) = (16, 512, 64, 128, 128);
    let mut rnd = uniform(0x6a09_e667_f3bc_c908_u64);
    let cases: &[(usize, usize, usize)] = &[
        // (first position, tokens, most tokens a run)
        (0, 1, 8),
        (0, 23, 8),
        (120, 20, 8),
        (250, 9, 3),
        (8_185, 19, 8),
        (9_000, 17, 5),
    ];
    for (name, c) in [("tiny", &tiny), ("lite", &lite)] {
        let (heads, lora, row) = (c.n_head, c.kv_lora, c.cache_row());
        let block = (8192 / row).max(1);
        let max_ctx = 9_017;
        let mut rows: Vec<f32> = (0..max_ctx * row).map(|_| 2.0 * rnd()).collect();
        let mut q8 = LatentCache::new(CacheType::Q8_0, max_ctx, row);
        for (t, r) in rows.chunks_exact_mut(row).enumerate() {
            q8.write_row(t, r);
            round_row(CacheType::Q8_0, r);
        }
        for &(pos0, n, most) in cases {
            let q: Vec<f32> = (0..n * heads * row).map(|_| 3.0 * rnd()).collect();
            let want: Vec<Vec<u32>> = (0..n)
                .map(|i| {
                    let qi = &q[i * heads * row..(i + 1) * heads * row];
                    bits(&reference(c, &rows, pos0 + i, qi, block))
                })
                .collect();
            let groups = token_groups(pos0, n, most);
            assert!(groups.iter().all(|g| g.len() <= most));
            assert_eq!(groups.iter().map(|g| g.len()).sum::<usize>(), n);
            for (cache_name, cache) in [("f32", Latents::f32(&rows, row)), ("q8_0", q8.latents())] {
                for threads in [1, 2] {
                    let mut att = Attend::for_tokens(c, most);
                    for g in &groups {
                        for i in g.clone() {
                            for h in 0..heads {
                                let qh = &q[(i * heads + h) * row..][..row];
                                att.set_token_query(c, i - g.start, h, &qh[..lora], &qh[lora..]);
                            }
                        }
                        att.o_lat.fill(f32::NAN);
                        pool(threads)
                            .install(|| attend_tokens(c, cache, pos0 + g.start, g.len(), &mut att));
                        for i in g.clone() {
                            let k = i - g.start;
                            assert!(
                                bits(&att.o_lat[k * heads * lora..(k + 1) * heads * lora])
                                    == want[i],
                                "{name} {cache_name} pos {} (run of {} from {}), {threads} threads",
                                pos0 + i,
                                g.len(),
                                pos0 + g.start
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The runs of a chunk: consecutive, at most `most` tokens, one span length each, cut where it
/// changes.
#[test]
fn token_groups_cut_where_the_span_length_changes() {
    let g = token_groups(8_180, 30, 8);
    let ranges: Vec<(usize, usize)> = g.iter().map(|r| (r.start, r.end)).collect();
    // Span length 128 up to 8,192 rows (index 11), then 129 from 8,193 rows (index 12) to 8,256.
    assert_eq!(ranges, [(0, 8), (8, 12), (12, 20), (20, 28), (28, 30)]);
    assert_eq!(token_groups(0, 5, 0).len(), 5);
}
