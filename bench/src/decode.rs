//! The end-to-end bench behind `ingot bench`: prompt processing (`ppP`: a `P`-token prompt fed at
//! once through [`Decoder::prefill_last`]) and generation (`tgN`: `N` tokens decoded one by one) at
//! given cache depths, reported as a table shaped like llama-bench's or as JSON.
//!
//! Depth `d` means `d` tokens are already in the cache when the timed tokens are fed.
//! The cache is filled by decoding a fixed token sequence (no backend offers a cheaper fill);
//! the timed tokens continue that sequence, so every repetition does the same work: it rewinds
//! to position `d` and decodes the same `n` tokens. No sampling happens in the timed loop
//! (llama-bench's `tg` feeds tokens too). A benchmark measures; nothing here asserts a time.

use std::fmt::Write as _;
use std::time::Instant;

use ingot_model::Decoder;
use serde::Serialize;

/// The first token of the fill sequence; later ones step through the vocabulary.
const SEQ_START: u64 = 1000;
/// Stride of the fill sequence through the vocabulary (a prime, so the sequence does not
/// repeat before it has visited every id).
const SEQ_STRIDE: u64 = 7919;

/// The fixed token at position `pos`.
pub fn token_at(pos: usize, vocab: usize) -> u32 {
    ((SEQ_START + pos as u64 * SEQ_STRIDE) % vocab.max(1) as u64) as u32
}

/// Throughput of one test at one depth.
#[derive(Clone, Debug, PartialEq)]
pub struct DepthResult {
    pub depth: usize,
    /// Prompt tokens fed at once (a `pp` test), 0 for a `tg` test.
    pub n_prompt: usize,
    /// Tokens generated one by one (a `tg` test), 0 for a `pp` test.
    pub n_gen: usize,
    /// Tokens per second of each repetition.
    pub samples: Vec<f64>,
}

impl DepthResult {
    /// llama-bench's test name: `pp512` or `tg64`, with ` @ d1024` over a filled cache.
    pub fn test(&self) -> String {
        let t = if self.n_prompt > 0 {
            format!("pp{}", self.n_prompt)
        } else {
            format!("tg{}", self.n_gen)
        };
        if self.depth == 0 {
            t
        } else {
            format!("{t} @ d{}", self.depth)
        }
    }

    pub fn mean(&self) -> f64 {
        mean_sd(&self.samples).0
    }

    pub fn sd(&self) -> f64 {
        mean_sd(&self.samples).1
    }
}

/// Mean and sample standard deviation (n − 1 in the denominator, as llama-bench; 0 for one
/// sample). NaN mean for no samples.
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// What the report says about the model and the machine.
#[derive(Clone, Debug, Serialize)]
pub struct Meta {
    /// The machine's state (GPU via NVML, or the CPU); the first line of every report.
    pub witness: String,
    pub model: String,
    pub size_bytes: u64,
    pub params: u64,
    pub backend: String,
    pub threads: usize,
    /// The latent cache's number format (`--cache-type`; llama-bench's `type_k`).
    pub type_k: String,
}

/// What one bench run measures.
#[derive(Clone, Debug)]
pub struct DecodeBench {
    /// Cache depths, in the order they are measured.
    pub depths: Vec<usize>,
    /// Prompt lengths of the `pp` tests at each depth (none: no `pp` test).
    pub n_prompt: Vec<usize>,
    /// Tokens per repetition of the `tg` test at each depth (0: no `tg` test).
    pub n_gen: usize,
    pub reps: usize,
}

impl DecodeBench {
    /// Measures every depth in order on `dec`; `log` receives progress lines (fill rate, each
    /// repetition's tokens/s).
    pub fn run(
        &self,
        dec: &mut dyn Decoder,
        mut log: impl FnMut(&str),
    ) -> Result<Vec<DepthResult>, ingot_model::ModelError> {
        let mut filled = 0usize;
        let mut results = Vec::with_capacity(self.depths.len());
        for &depth in &self.depths {
            for &p in self.n_prompt.iter().filter(|&&p| p > 0) {
                results.push(self.test(dec, &mut filled, depth, (p, 0), &mut log)?);
            }
            if self.n_gen > 0 {
                results.push(self.test(dec, &mut filled, depth, (0, self.n_gen), &mut log)?);
            }
        }
        Ok(results)
    }

    /// One test at `depth`: `ppN` (`n_prompt` = N) feeds an N-token prompt at once through
    /// [`Decoder::prefill_last`], `tgN` (`n_gen` = N) decodes N tokens one by one. Every repetition
    /// rewinds to `depth` and does the same work, after an untimed warm-up (the whole prompt, or
    /// one token: first touch of pages and caches).
    fn test(
        &self,
        dec: &mut dyn Decoder,
        filled: &mut usize,
        depth: usize,
        (n_prompt, n_gen): (usize, usize),
        log: &mut impl FnMut(&str),
    ) -> Result<DepthResult, ingot_model::ModelError> {
        let vocab = dec.config().vocab;
        fill(dec, filled, depth, log)?;
        let tokens: Vec<u32> = (depth..depth + n_prompt.max(n_gen))
            .map(|pos| token_at(pos, vocab))
            .collect();
        let run = |dec: &mut dyn Decoder| -> Result<(), ingot_model::ModelError> {
            if n_prompt > 0 {
                dec.prefill_last(&tokens, depth)?;
            } else {
                for (i, &t) in tokens.iter().enumerate() {
                    dec.decode(t, depth + i)?;
                }
            }
            Ok(())
        };
        if n_prompt > 0 {
            run(dec)?;
        } else {
            dec.decode(tokens[0], depth)?;
        }
        let mut result = DepthResult {
            depth,
            n_prompt,
            n_gen,
            samples: Vec::with_capacity(self.reps),
        };
        for rep in 0..self.reps {
            let start = Instant::now();
            run(dec)?;
            let tps = tokens.len() as f64 / start.elapsed().as_secs_f64();
            log(&format!(
                "{} rep {}/{}: {tps:.2} t/s",
                result.test(),
                rep + 1,
                self.reps
            ));
            result.samples.push(tps);
        }
        *filled = depth + tokens.len();
        Ok(result)
    }
}

/// Tokens per prefill call of [`fill`]: the batched prefill's chunk, small enough that progress
/// shows.
const FILL_CHUNK: usize = 256;

/// Feeds the fixed sequence from position `*filled` up to `depth` as prompts of `FILL_CHUNK`
/// tokens ([`Decoder::prefill_last`]: batched where the backend has a batched prefill, as
/// llama-bench fills its depth), or rewinds to it, with progress about every 5 s. Afterwards the
/// cache holds exactly the sequence's first `depth` tokens. (Also the cache fill of `ingot plan
/// --measure`.)
pub fn fill(
    dec: &mut dyn Decoder,
    filled: &mut usize,
    depth: usize,
    log: &mut impl FnMut(&str),
) -> Result<(), ingot_model::ModelError> {
    if *filled >= depth {
        // Decoding at `depth` next forgets the later positions.
        *filled = depth;
        return Ok(());
    }
    let vocab = dec.config().vocab;
    let start = Instant::now();
    let mut last_report = start;
    let from = *filled;
    let mut pos = from;
    while pos < depth {
        let end = (pos + FILL_CHUNK).min(depth);
        let tokens: Vec<u32> = (pos..end).map(|p| token_at(p, vocab)).collect();
        dec.prefill_last(&tokens, pos)?;
        pos = end;
        *filled = pos;
        if last_report.elapsed().as_secs_f64() >= 5.0 || pos == depth {
            last_report = Instant::now();
            log(&format!(
                "filling cache to d{depth}: {pos}/{depth} ({:.1} tok/s)",
                (pos - from) as f64 / start.elapsed().as_secs_f64()
            ));
        }
    }
    Ok(())
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn billions(n: u64) -> String {
    format!("{:.2} B", n as f64 / 1e9)
}

/// The llama-bench markdown table; the model column widens to fit the name. As llama-bench, a
/// `type_k` column appears only for a cache other than the default f16.
pub fn table(m: &Meta, results: &[DepthResult]) -> String {
    let w = m.model.chars().count().max(30);
    let type_k = m.type_k != "f16";
    let (k_head, k_rule) = if type_k {
        (format!(" {:>6} |", "type_k"), format!(" {:->5}: |", ""))
    } else {
        (String::new(), String::new())
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| {:<w$} | {:>10} | {:>10} | {:<10} | {:>7} |{k_head} {:>15} | {:>20} |",
        "model", "size", "params", "backend", "threads", "test", "t/s"
    );
    let _ = writeln!(
        s,
        "| {:-<w$} | {:->9}: | {:->9}: | {:-<10} | {:->6}: |{k_rule} {:->14}: | {:->19}: |",
        "", "", "", "", "", "", ""
    );
    let k_cell = if type_k {
        format!(" {:>6} |", m.type_k)
    } else {
        String::new()
    };
    for r in results {
        let _ = writeln!(
            s,
            "| {:<w$} | {:>10} | {:>10} | {:<10} | {:>7} |{k_cell} {:>15} | {:>20} |",
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

/// One result row of the JSON report; names follow llama-bench's JSON output where one exists.
#[derive(Serialize)]
struct JsonRow<'a> {
    test: String,
    n_prompt: usize,
    n_gen: usize,
    n_depth: usize,
    avg_ts: f64,
    stddev_ts: f64,
    samples_ts: &'a [f64],
}

#[derive(Serialize)]
struct JsonReport<'a> {
    #[serde(flatten)]
    meta: &'a Meta,
    results: Vec<JsonRow<'a>>,
}

/// One JSON object, witness first. Non-finite numbers have no JSON form and are written `null`.
pub fn json(m: &Meta, results: &[DepthResult]) -> String {
    let report = JsonReport {
        meta: m,
        results: results
            .iter()
            .map(|r| JsonRow {
                test: r.test(),
                n_prompt: r.n_prompt,
                n_gen: r.n_gen,
                n_depth: r.depth,
                avg_ts: r.mean(),
                stddev_ts: r.sd(),
                samples_ts: &r.samples,
            })
            .collect(),
    };
    serde_json::to_string(&report).expect("a report of strings and numbers always serializes")
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
        let r = |depth, n_prompt, n_gen| DepthResult {
            depth,
            n_prompt,
            n_gen,
            samples: vec![1.0],
        };
        assert_eq!(r(0, 0, 64).test(), "tg64");
        assert_eq!(r(1024, 0, 64).test(), "tg64 @ d1024");
        assert_eq!(r(0, 512, 0).test(), "pp512");
        assert_eq!(r(4096, 64, 0).test(), "pp64 @ d4096");
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
            backend: "CPU".into(),
            threads: 2,
            type_k: "f16".into(),
        }
    }

    #[test]
    fn table_rows_show_mean_and_sd() {
        let results = [DepthResult {
            depth: 256,
            n_prompt: 0,
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
        assert!(
            !t.contains("type_k"),
            "the default cache has no column: {t}"
        );
        // A q8_0 cache: llama-bench's type_k column, still aligned.
        let q8 = Meta {
            type_k: "q8_0".into(),
            ..meta()
        };
        let t = table(&q8, &results);
        assert!(t.lines().next().unwrap().contains("type_k"), "{t}");
        assert!(t.lines().nth(2).unwrap().contains("q8_0"), "{t}");
        let first = bars(t.lines().next().unwrap());
        assert!(t.lines().all(|l| bars(l) == first), "{t}");
    }

    #[test]
    fn json_parses_back_with_every_field() {
        let results = [DepthResult {
            depth: 1024,
            n_prompt: 0,
            n_gen: 4,
            samples: vec![1.5, f64::INFINITY],
        }];
        let j = json(&meta(), &results);
        assert!(
            j.starts_with(r#"{"witness":"cpu: \"Q\" \\ x | 2 threads""#),
            "{j}"
        );
        let v: serde_json::Value = serde_json::from_str(&j).expect("valid JSON");
        assert_eq!(v["witness"], "cpu: \"Q\" \\ x | 2 threads");
        assert_eq!(v["size_bytes"], 3u64 << 30);
        assert_eq!(v["threads"], 2);
        assert_eq!(v["type_k"], "f16");
        let row = &v["results"][0];
        assert_eq!(row["test"], "tg4 @ d1024");
        assert_eq!(row["n_depth"], 1024);
        assert_eq!(row["samples_ts"], serde_json::json!([1.5, null]));
        assert!(
            row["avg_ts"].is_null(),
            "an infinite mean has no JSON number: {row}"
        );
    }
}
