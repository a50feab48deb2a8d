//! Absorbed against decompressed attention in the CPU backend's prefill chunks: the time of one
//! chunk of `n` tokens at depth `d`, both forms alternating on the same backend, to place
//! `ingot_model::cpu::DECOMPRESS_FROM`.
//!
//! `cargo bench -p ingot-model --bench mla_form [-- MODEL.gguf]`: without a model, a lite-4l q4_k_m
//! file (V2-Lite's attention shapes, 4 layers) is synthesized into a temporary folder. Each row is
//! the best of `REPS` runs of the whole chunk (everything but the attention is the same work in
//! both forms), in CPU seconds of this process (all its threads, from `/proc/self/stat`, so another
//! program's load on the machine does not count) and in wall seconds.

use std::time::Instant;

use ingot_gguf::GgufFile;
use ingot_model::{CpuBackend, MlaForm};

const REPS: usize = 3;
/// Chunk lengths and depths, unless `CHUNKS` and `DEPTHS` (comma-separated) name others.
const CHUNKS: &str = "32,48,64,96,128,192,256,512";
const DEPTHS: &str = "0,1024";

fn list(var: &str, default: &str) -> Vec<usize> {
    let v = std::env::var(var).unwrap_or(default.into());
    v.split(',').map(|s| s.parse().expect(var)).collect()
}

/// User + system CPU time of this process, seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the parenthesized command name: utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn main() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = match std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        Some(p) => p.into(),
        None => {
            use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};
            let opts = SynthOptions {
                preset: Preset::Lite4l,
                layout: Layout::Mla,
                mix: QuantMix::Q4KM,
                seed: 42,
            };
            let p = dir.path().join("lite-4l.gguf");
            eprintln!("mla_form: synthesizing {}", p.display());
            synthesize(&opts, &p, false).expect("synthesize lite-4l");
            p
        }
    };
    let file = GgufFile::open(&path).expect("open the model");
    let (chunks, depths) = (list("CHUNKS", CHUNKS), list("DEPTHS", DEPTHS));
    let ctx = depths.iter().max().unwrap() + chunks.iter().max().unwrap();
    let mut cpu = CpuBackend::load(&file, ctx).expect("load");
    let vocab = cpu.config().vocab as u32;
    let tokens: Vec<u32> = (0..ctx as u32).map(|i| (i * 7919 + 13) % vocab).collect();
    println!("| depth | chunk | absorbed cpu s | decompressed cpu s | ratio | absorbed wall s | decompressed wall s |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut filled = 0;
    for &depth in &depths {
        // Absorbed: the faster fill at depth.
        cpu.set_mla_form(MlaForm::Absorbed);
        if depth > filled {
            cpu.prefill_chunked(&tokens[filled..depth], filled, 512)
                .expect("fill");
            filled = depth;
        }
        for &n in &chunks {
            let mut best = [(f64::MAX, f64::MAX); 2];
            for _ in 0..list("REPS", &REPS.to_string())[0] {
                for (k, form) in [MlaForm::Absorbed, MlaForm::Decompressed]
                    .into_iter()
                    .enumerate()
                {
                    cpu.set_mla_form(form);
                    let (c0, w0) = (cpu_seconds(), Instant::now());
                    // Rewinds to `depth`: the chunk overwrites the rows of the previous run.
                    cpu.prefill_chunked(&tokens[depth..depth + n], depth, 512)
                        .expect("chunk");
                    let (c, w) = (cpu_seconds() - c0, w0.elapsed().as_secs_f64());
                    best[k] = (best[k].0.min(c), best[k].1.min(w));
                }
            }
            let [(ca, wa), (cd, wd)] = best;
            println!(
                "| {depth} | {n} | {ca:.2} | {cd:.2} | {:.2} | {wa:.3} | {wd:.3} |",
                cd / ca
            );
        }
    }
}
