//! Throughput of the multi-activation row products ([`RowDot::q8_k_multi`] /
//! [`RowDot::q8_0_multi`]) at a prefill's shapes: `ROWS` rows (the CPU matmul's work item is 16) of
//! Q4_K/Q6_K (2048 wide) or Q5_0/Q8_0 (1408 wide, lite-4l's expert down rows) against `ACTS`
//! activations (a routed expert sees about 6 of a 64-token chunk; dense products all 64).
//!
//! Usage: `cargo run --release -p ingot-quant --example multi_dot_bench -- TYPE ACTS [ROWS [ISA]]`
//! with TYPE one of q4k, q4k-x8 (packed rows), q6k, q50, q80, and ISA one of scalar, avx2, vnni,
//! avx512 (default: the fastest this CPU runs), as in `multi_dot_bench q50 6 16 avx2`. Prints the
//! multiply-adds done and a checksum of the outputs; divide the first by the process's CPU time
//! (`perf stat -e task-clock`) for a rate that a machine shared with other work disturbs less than
//! wall time.

use ingot_gguf::GgmlType;
use ingot_quant::cpu_dot::{Isa, RowDot};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ty = match args.get(1).map(String::as_str) {
        Some("q6k") => GgmlType::Q6K,
        Some("q50") => GgmlType::Q5_0,
        Some("q80") => GgmlType::Q8_0,
        _ => GgmlType::Q4K,
    };
    // `q4k-x8`: the Q4_K rows packed once ([`ingot_quant::cpu_dot::packed`]), then multiplied.
    let packed = args.get(1).map(String::as_str) == Some("q4k-x8");
    let acts: usize = args.get(2).map_or(64, |s| s.parse().expect("ACTS"));
    let rows: usize = args.get(3).map_or(16, |s| s.parse().expect("ROWS"));
    let cols = match ty {
        GgmlType::Q5_0 | GgmlType::Q8_0 => 1408,
        _ => 2048,
    };
    // A fixed linear congruential sequence in [-0.5, 0.5): the same data on every run.
    let mut lcg = ingot_testdata::Lcg(1);
    let mut next = || lcg.unit_f32() - 0.5;
    // At most 64 distinct rows quantized, repeated to `rows` (a large ROWS streams its bytes from
    // memory, as decode does, without quantizing them all first).
    let distinct = rows.min(64);
    let w: Vec<f32> = (0..distinct * cols).map(|_| next()).collect();
    let bytes = distinct * cols / ty.block_size() as usize * ty.type_size() as usize;
    let mut q = vec![0u8; bytes];
    ingot_quant::quantize_row(ty, &w, &mut q).expect("quantize");
    let q: Vec<u8> = q
        .iter()
        .copied()
        .cycle()
        .take(bytes / distinct * rows)
        .collect();
    let isa = match args.get(4).map(String::as_str) {
        Some("scalar") => Isa::Scalar,
        Some("avx2") => Isa::Avx2,
        Some("vnni") => Isa::AvxVnni,
        Some("avx512") => Isa::Avx512,
        _ => Isa::detect(),
    };
    let dot = RowDot::with_isa(ty, isa).expect("a CPU dot product on this instruction set");
    let xs: Vec<Vec<f32>> = (0..acts)
        .map(|_| (0..cols).map(|_| next()).collect())
        .collect();
    let mut out = vec![0.0f32; rows * acts];
    // About 20 G multiply-adds whatever the shape (a second or so: start-up and quantization are
    // noise).
    let iters = (20_000_000_000 / (rows * cols * acts)).max(1);
    if dot.act_type() == GgmlType::Q8K {
        let a: Vec<_> = xs.iter().map(|x| ingot_quant::quantize_q8_k(x)).collect();
        let v: Vec<&[_]> = a.iter().map(Vec::as_slice).collect();
        if packed {
            let p = ingot_quant::cpu_dot::packed::pack_q4k(&q, rows).expect("whole groups");
            for _ in 0..iters {
                dot.q8_k_x8(&p, &v, &mut out).expect("packed product");
            }
        } else {
            for _ in 0..iters {
                dot.q8_k_multi(&q, &v, &mut out).expect("q8_K product");
            }
        }
    } else {
        let a: Vec<_> = xs.iter().map(|x| ingot_quant::quantize_q8_0(x)).collect();
        let v: Vec<&[_]> = a.iter().map(Vec::as_slice).collect();
        for _ in 0..iters {
            dot.q8_0_multi(&q, &v, &mut out).expect("q8_0 product");
        }
    }
    let macs = rows * cols * acts * iters;
    println!("{macs} {} {isa:?}", out.iter().sum::<f32>());
}
