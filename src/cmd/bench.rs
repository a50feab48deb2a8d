//! `ingot bench`: decode throughput at given cache depths, as a table shaped like llama-bench's.
//!
//! Depth `d` means `d` tokens are already in the cache when the `n` timed tokens are decoded.
//! The cache is filled by decoding a fixed token sequence (no backend offers a cheaper fill);
//! the timed tokens continue that sequence, so every repetition does the same work: it rewinds
//! to position `d` and decodes the same `n` tokens. No sampling happens in the timed loop
//! (llama-bench's `tg` feeds tokens too).
//!
//! The first line of the output is a witness of the machine that produced the numbers.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use ingot_gguf::GgufFile;
use ingot_model::{CpuBackend, Decoder, ModelConfig};

/// Which implementation decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The quantized CPU backend on all cores.
    Cpu,
    /// One CUDA graph per decode step (crate ingot-graph).
    Cuda,
}

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF model file.
    #[arg(short, long)]
    model: PathBuf,
    /// Cache depths, comma-separated: tokens already in the cache before the timed tokens.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    depths: Vec<usize>,
    /// Tokens decoded (and timed) per repetition.
    #[arg(short = 'n', long = "n-gen", default_value_t = 64)]
    n_gen: usize,
    /// Repetitions per depth; the table shows their mean and standard deviation.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    backend: Backend,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Most repetitions or timed tokens accepted: beyond this a typo, not a bench.
const MAX_COUNT: usize = 100_000;

/// The first token of the fill sequence; later ones step through the vocabulary.
const SEQ_START: u64 = 1000;
/// Stride of the fill sequence through the vocabulary (a prime, so the sequence does not
/// repeat before it has visited every id).
const SEQ_STRIDE: u64 = 7919;

/// The fixed token at position `pos`.
fn token_at(pos: usize, vocab: usize) -> u32 {
    ((SEQ_START + pos as u64 * SEQ_STRIDE) % vocab.max(1) as u64) as u32
}

/// Decode throughput of one depth.
#[derive(Clone, Debug, PartialEq)]
struct DepthResult {
    depth: usize,
    n_gen: usize,
    /// Tokens per second of each repetition.
    samples: Vec<f64>,
}

impl DepthResult {
    /// llama-bench's test name: `tg64`, or `tg64 @ d1024` with a filled cache.
    fn test(&self) -> String {
        if self.depth == 0 {
            format!("tg{}", self.n_gen)
        } else {
            format!("tg{} @ d{}", self.n_gen, self.depth)
        }
    }

    fn mean(&self) -> f64 {
        mean_sd(&self.samples).0
    }

    fn sd(&self) -> f64 {
        mean_sd(&self.samples).1
    }
}

/// Mean and sample standard deviation (n − 1 in the denominator, as llama-bench; 0 for one
/// sample). NaN mean for no samples.
fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// What the table says about the model and the machine.
struct Meta {
    witness: String,
    model: String,
    size_bytes: u64,
    params: u64,
    backend: &'static str,
    threads: usize,
}

/// The decoder for `backend`, with a cache of `max_ctx` positions.
fn open_decoder<'f>(
    file: &'f GgufFile,
    backend: Backend,
    max_ctx: usize,
) -> Result<Box<dyn Decoder + 'f>> {
    match backend {
        Backend::Cpu => Ok(Box::new(CpuBackend::load(file, max_ctx)?)),
        Backend::Cuda => {
            let opts = ingot_graph::PlanOptions::for_ctx(max_ctx);
            let (exec, info) = ingot_graph::exec::cuda::CudaExecutor::load(file, opts, true)?;
            eprintln!(
                "bench: {}: one graph of {} nodes, {:.1} MiB of VRAM, uploaded in {:.2} s",
                info.device,
                info.nodes,
                info.device_bytes as f64 / (1u64 << 20) as f64,
                info.upload_s
            );
            Ok(Box::new(exec))
        }
    }
}

/// The first output line: the GPU's state from NVML, or the CPU model and thread count.
fn witness(backend: Backend) -> String {
    match backend {
        Backend::Cpu => ingot_bench::witness::cpu(ingot_bench::witness::rayon_threads()),
        Backend::Cuda => ingot_bench::witness::gpu(0)
            .unwrap_or_else(|e| format!("gpu: state unknown (NVML: {e})")),
    }
}

fn check_args(a: &Args) -> Result<()> {
    ensure!(!a.depths.is_empty(), "--depths is empty");
    ensure!(
        (1..=MAX_COUNT).contains(&a.n_gen),
        "-n {} is out of range 1..={MAX_COUNT}",
        a.n_gen
    );
    ensure!(
        (1..=MAX_COUNT).contains(&a.reps),
        "--reps {} is out of range 1..={MAX_COUNT}",
        a.reps
    );
    Ok(())
}

pub fn run(a: Args) -> Result<()> {
    check_args(&a)?;
    let file =
        GgufFile::open(&a.model).with_context(|| format!("reading {}", a.model.display()))?;
    let config = ModelConfig::from_gguf(file.header()).context("model config")?;
    let max_depth = a.depths.iter().copied().max().unwrap_or(0);
    let ctx = max_depth
        .checked_add(a.n_gen)
        .filter(|&c| c <= config.n_ctx_train)
        .with_context(|| {
            format!(
                "depth {max_depth} + {} tokens exceeds the model's training context {}",
                a.n_gen, config.n_ctx_train
            )
        })?;
    let meta = Meta {
        witness: witness(a.backend),
        model: config
            .name
            .clone()
            .unwrap_or_else(|| "deepseek2".to_string()),
        size_bytes: file.header().total_tensor_bytes(),
        params: file.header().tensors.iter().map(|t| t.n_elements()).sum(),
        backend: match a.backend {
            Backend::Cpu => "CPU",
            Backend::Cuda => "CUDA",
        },
        threads: match a.backend {
            Backend::Cpu => ingot_bench::witness::rayon_threads(),
            // The host thread only enqueues graph replays.
            Backend::Cuda => 1,
        },
    };
    // The witness goes first, before minutes of loading and filling.
    if !a.json {
        println!("{}", meta.witness);
        std::io::stdout().flush()?;
    }
    let load = Instant::now();
    let mut dec = open_decoder(&file, a.backend, ctx)?;
    eprintln!(
        "bench: loaded {} in {:.1} s; depths {:?}, {} tokens x {} reps each",
        meta.model,
        load.elapsed().as_secs_f64(),
        a.depths,
        a.n_gen,
        a.reps
    );
    let mut filled = 0usize;
    let mut results = Vec::with_capacity(a.depths.len());
    for &depth in &a.depths {
        results.push(bench_depth(dec.as_mut(), &mut filled, depth, &a)?);
    }
    if a.json {
        println!("{}", json(&meta, &results));
    } else {
        print!("{}", table(&meta, &results));
    }
    Ok(())
}

/// Decodes the fixed sequence from position `*filled` up to `depth` (or rewinds to it), with
/// progress on stderr. Afterwards the cache holds exactly the sequence's first `depth` tokens.
fn fill(dec: &mut dyn Decoder, filled: &mut usize, depth: usize) -> Result<()> {
    if *filled >= depth {
        // Decoding at `depth` next forgets the later positions.
        *filled = depth;
        return Ok(());
    }
    let vocab = dec.config().vocab;
    let start = Instant::now();
    let mut last_report = start;
    let from = *filled;
    for pos in from..depth {
        dec.decode(token_at(pos, vocab), pos)?;
        *filled = pos + 1;
        if last_report.elapsed().as_secs_f64() >= 5.0 || pos + 1 == depth {
            last_report = Instant::now();
            let done = pos + 1 - from;
            eprintln!(
                "bench: filling cache to d{depth}: {}/{depth} ({:.1} tok/s)",
                pos + 1,
                done as f64 / start.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}

fn bench_depth(
    dec: &mut dyn Decoder,
    filled: &mut usize,
    depth: usize,
    a: &Args,
) -> Result<DepthResult> {
    let vocab = dec.config().vocab;
    fill(dec, filled, depth)?;
    // Warm-up: one untimed token (first touch of pages and caches), then rewound.
    dec.decode(token_at(depth, vocab), depth)?;
    let mut samples = Vec::with_capacity(a.reps);
    for rep in 0..a.reps {
        let start = Instant::now();
        for pos in depth..depth + a.n_gen {
            dec.decode(token_at(pos, vocab), pos)?;
        }
        let secs = start.elapsed().as_secs_f64();
        let tps = a.n_gen as f64 / secs;
        eprintln!("bench: d{depth} rep {}/{}: {:.2} t/s", rep + 1, a.reps, tps);
        samples.push(tps);
    }
    *filled = depth + a.n_gen;
    Ok(DepthResult {
        depth,
        n_gen: a.n_gen,
        samples,
    })
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn billions(n: u64) -> String {
    format!("{:.2} B", n as f64 / 1e9)
}

/// The llama-bench markdown table; the model column widens to fit the name.
fn table(m: &Meta, results: &[DepthResult]) -> String {
    let w = m.model.chars().count().max(30);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| {:<w$} | {:>10} | {:>10} | {:<10} | {:>7} | {:>15} | {:>20} |",
        "model", "size", "params", "backend", "threads", "test", "t/s"
    );
    let _ = writeln!(
        s,
        "| {:-<w$} | {:->9}: | {:->9}: | {:-<10} | {:->6}: | {:->14}: | {:->19}: |",
        "", "", "", "", "", "", ""
    );
    for r in results {
        let _ = writeln!(
            s,
            "| {:<w$} | {:>10} | {:>10} | {:<10} | {:>7} | {:>15} | {:>20} |",
            m.model,
            gib(m.size_bytes),
            billions(m.params),
            m.backend,
            m.threads,
            r.test(),
            format!("{:.2} ± {:.2}", r.mean(), r.sd()),
        );
    }
    s
}

/// `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A finite number as JSON (non-finite values have no JSON form: `null`).
fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

/// One JSON object, witness first; field names follow llama-bench's JSON output where one
/// exists (`n_gen`, `n_depth`, `avg_ts`, `stddev_ts`, `samples_ts`).
fn json(m: &Meta, results: &[DepthResult]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{{\"witness\":{},\"model\":{},\"size_bytes\":{},\"params\":{},\"backend\":{},\"threads\":{},\"results\":[",
        json_str(&m.witness),
        json_str(&m.model),
        m.size_bytes,
        m.params,
        json_str(m.backend),
        m.threads
    );
    for (i, r) in results.iter().enumerate() {
        let samples: Vec<String> = r.samples.iter().map(|&v| json_num(v)).collect();
        let _ = write!(
            s,
            "{}{{\"test\":{},\"n_gen\":{},\"n_depth\":{},\"avg_ts\":{},\"stddev_ts\":{},\"samples_ts\":[{}]}}",
            if i > 0 { "," } else { "" },
            json_str(&r.test()),
            r.n_gen,
            r.depth,
            json_num(r.mean()),
            json_num(r.sd()),
            samples.join(",")
        );
    }
    s.push_str("]}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_sd() {
        let (m, sd) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m, 5.0);
        // Σ(x−5)² = 32 over n−1 = 7.
        assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12, "{sd}");
        assert_eq!(mean_sd(&[3.0]), (3.0, 0.0));
        assert!(mean_sd(&[]).0.is_nan());
    }

    #[test]
    fn test_names_follow_llama_bench() {
        let r = |depth| DepthResult {
            depth,
            n_gen: 64,
            samples: vec![1.0],
        };
        assert_eq!(r(0).test(), "tg64");
        assert_eq!(r(1024).test(), "tg64 @ d1024");
    }

    #[test]
    fn fixed_sequence_stays_in_vocab_and_varies() {
        let toks: Vec<u32> = (0..1000).map(|p| token_at(p, 102_400)).collect();
        assert!(toks.iter().all(|&t| t < 102_400));
        let distinct: std::collections::HashSet<_> = toks.iter().collect();
        assert_eq!(distinct.len(), toks.len());
        assert!(token_at(5, 7) < 7);
    }

    fn meta() -> Meta {
        Meta {
            witness: "cpu: \"Q\" \\ x | 2 threads".into(),
            model: "a-model-name-longer-than-thirty-chars".into(),
            size_bytes: 3 << 30,
            params: 2_500_000_000,
            backend: "CPU",
            threads: 2,
        }
    }

    #[test]
    fn table_rows_show_mean_and_sd() {
        let results = [DepthResult {
            depth: 256,
            n_gen: 16,
            samples: vec![10.0, 12.0],
        }];
        let t = table(&meta(), &results);
        let row = t.lines().nth(2).expect("a result row");
        assert!(row.contains("tg16 @ d256"), "{row}");
        assert!(row.contains("11.00 ± 1.41"), "{row}");
        assert!(row.contains("3.00 GiB") && row.contains("2.50 B"), "{row}");
        assert_eq!(t.lines().count(), 3);
        // Columns line up: every line has its `|` at the same character offsets.
        let bars = |l: &str| -> Vec<usize> {
            l.chars()
                .enumerate()
                .filter(|&(_, c)| c == '|')
                .map(|(i, _)| i)
                .collect()
        };
        let first = bars(t.lines().next().unwrap());
        assert!(t.lines().all(|l| bars(l) == first), "{t}");
    }

    #[test]
    fn json_escapes_and_keeps_numbers() {
        let results = [DepthResult {
            depth: 0,
            n_gen: 4,
            samples: vec![1.5, f64::INFINITY],
        }];
        let j = json(&meta(), &results);
        assert!(
            j.starts_with(r#"{"witness":"cpu: \"Q\" \\ x | 2 threads""#),
            "{j}"
        );
        assert!(j.contains(r#""samples_ts":[1.5,null]"#), "{j}");
        assert!(j.contains(r#""test":"tg4""#), "{j}");
        assert_eq!(json_str("a\nb\u{1}"), r#""a\nb\u0001""#);
    }
}
