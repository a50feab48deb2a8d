//! Decode throughput of the CPU backend: `cargo run --release -p ingot-model --example decode_bench -- MODEL.gguf [TOKENS]`.
//! Feeds token ids 1, 2, 3, … one at a time (greedy content does not matter for speed) and reports tokens/s.

use std::time::Instant;

use ingot_gguf::GgufFile;
use ingot_model::CpuBackend;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: decode_bench MODEL.gguf [TOKENS]")?;
    let tokens: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(64);
    let file = GgufFile::open(path.as_ref())?;
    let mut cpu = CpuBackend::load(&file, tokens.max(1))?;
    let vocab = cpu.config().vocab as u32;
    let mib = cpu.config().bytes_per_token() as f64 / (1 << 20) as f64;
    // One warm-up token fills caches and rayon's pool.
    cpu.decode(1, 0)?;
    cpu.reset();
    let start = Instant::now();
    for pos in 0..tokens {
        cpu.decode((pos as u32 + 1) % vocab, pos)?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{tokens} tokens in {secs:.3} s: {:.1} tok/s, {mib:.2} MiB weights/token, {:.2} GB/s, {} rayon threads",
        tokens as f64 / secs,
        tokens as f64 * mib * (1 << 20) as f64 / secs / 1e9,
        rayon::current_num_threads()
    );
    Ok(())
}
