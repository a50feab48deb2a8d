//! Throughput of the quantizers and CPU dot products on this machine.
//!
//! `cargo run -p ingot-quant --release --example throughput`

use ingot_gguf::GgmlType;
use ingot_quant::{
    dequantize_tensor, quantize_q8_1, quantize_q8_k, quantize_tensor, vec_dot_q8_1, vec_dot_q8_k,
};
use std::time::Instant;

fn main() {
    let n = 16 << 20; // 16 Mi weights = 64 MiB of f32
    let x: Vec<f32> = (0..n as u64)
        .map(|i| {
            // xorshift noise, roughly uniform in [−1, 1)
            let mut s = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            s ^= s >> 33;
            s = s.wrapping_mul(0xff51_afd7_ed55_8ccd);
            s ^= s >> 33;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("{n} weights, {threads} threads");
    for ty in [
        GgmlType::Q4K,
        GgmlType::Q5_0,
        GgmlType::Q6K,
        GgmlType::Q8_0,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q5K,
        GgmlType::Iq4Xs,
    ] {
        let bytes = n / ty.block_size() as usize * ty.type_size() as usize;
        let mut q = vec![0u8; bytes];
        let t = Instant::now();
        quantize_tensor(ty, &x, &mut q).expect("quantize");
        let secs = t.elapsed().as_secs_f64();
        let mut y = vec![0.0f32; n];
        let t = Instant::now();
        dequantize_tensor(ty, &q, &mut y).expect("dequantize");
        let dsecs = t.elapsed().as_secs_f64();
        println!(
            "{ty:>6}: quantize {:7.1} M weights/s ({:5.1} s per 1e9 weights), dequantize {:7.1} M/s",
            n as f64 / secs / 1e6,
            1e9 / (n as f64 / secs),
            n as f64 / dsecs / 1e6
        );
    }

    // One-thread dot products over a 2816 × 2048 matrix (V2-Lite shared-expert shape).
    let (rows, cols) = (2816usize, 2048usize);
    let act = &x[..cols];
    let a8k = quantize_q8_k(act);
    let a81 = quantize_q8_1(act);
    for ty in [
        GgmlType::Q4K,
        GgmlType::Q6K,
        GgmlType::Q5K,
        GgmlType::Q3K,
        GgmlType::Q2K,
    ] {
        let row_bytes = cols / 256 * ty.type_size() as usize;
        let mut w = vec![0u8; rows * row_bytes];
        quantize_tensor(ty, &x[..rows * cols], &mut w).expect("quantize");
        let t = Instant::now();
        let mut sink = 0.0f32;
        for r in w.chunks_exact(row_bytes) {
            sink += vec_dot_q8_k(ty, r, &a8k).expect("dot");
        }
        let s8k = t.elapsed().as_secs_f64();
        let t = Instant::now();
        for r in w.chunks_exact(row_bytes) {
            sink += vec_dot_q8_1(ty, r, &a81).expect("dot");
        }
        let s81 = t.elapsed().as_secs_f64();
        println!(
            "{ty:>6}: vec_dot_q8_k {:6.2} GB/s of weights ({:5.2} ms/matrix), q8_1 oracle {:6.2} GB/s  [{sink:.1}]",
            w.len() as f64 / s8k / 1e9,
            s8k * 1e3,
            w.len() as f64 / s81 / 1e9
        );
    }
}
