//! `ingot gate`: a device backend decoded beside the CPU oracle (beside the CPU backend with the
//! same cache when `--cache-type` is not f16), or (`--cache-type q8_0` alone) the CPU backend
//! with a q8_0 latent cache beside the same backend with the full-precision cache;
//! fails (non-zero exit) when a step disagrees outside the band.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use ingot_engine::BackendKind;
use ingot_gates::{run_cache_gate, run_gate, Band, GateBackend, GateOptions};
use ingot_gguf::GgufFile;
use ingot_model::CacheType;
use ingot_tokenizer::Tokenizer;

#[derive(clap::Args, Clone)]
pub struct Args {
    /// The GGUF model file.
    #[arg(short, long)]
    pub model: PathBuf,
    /// The backend judged against the oracle: `sim` (the decode plan in the PTX simulator, every
    /// layer's hidden state compared too) or `cuda` (the plan as one CUDA graph on GPU 0).
    /// Required unless `--cache-type` names a narrower cache.
    #[arg(long, value_parser = device_backend)]
    pub backend: Option<GateBackend>,
    /// The latent cache's number format: `f16` (default) or `q8_0`. With `q8_0` and no
    /// `--backend`, the gate measures what the q8_0 cache costs: the CPU backend with a q8_0
    /// cache judged against the same backend with the full-precision cache, on the same tokens.
    /// With a backend, its q8_0 plan is judged against the CPU backend with a q8_0 cache.
    #[arg(long, default_value = "f16", value_parser = ingot_model::cache_type::parse)]
    pub cache_type: CacheType,
    /// Greedy steps after the prompt.
    #[arg(short = 'n', long = "n-predict", default_value_t = 16)]
    pub steps: usize,
    /// The prompt (BOS is added when the model asks for it).
    #[arg(short, long, default_value = "The quick brown fox")]
    pub prompt: String,
    #[command(flatten)]
    pub experts: super::experts::ExpertArgs,
}

/// `--backend`: a [`BackendKind`] name, of the two kinds a gate can judge layer by layer.
fn device_backend(name: &str) -> Result<GateBackend, String> {
    match name.parse::<BackendKind>().map_err(|e| e.to_string())? {
        BackendKind::Sim => Ok(GateBackend::Sim),
        BackendKind::Cuda => Ok(GateBackend::Cuda),
        other => Err(format!(
            "the gate judges a device backend (sim or cuda) against the oracle; {other} is not one"
        )),
    }
}

pub fn run(a: Args) -> Result<()> {
    let file =
        GgufFile::open(&a.model).with_context(|| format!("reading {}", a.model.display()))?;
    let tok = Tokenizer::from_gguf(file.header()).context("tokenizer")?;
    let prompt = tok.encode(&a.prompt, true, false);
    if prompt.is_empty() {
        bail!("the prompt is empty and the model adds no BOS token: give a prompt with -p");
    }
    let backend = match (a.backend, a.cache_type) {
        (None, CacheType::F16) => {
            bail!("give the backend to judge with --backend sim|cuda (or a narrower cache with --cache-type q8_0)")
        }
        (None, ty) => {
            let report = run_cache_gate(&file, &prompt, a.steps, &Band::default(), ty)?;
            println!("{report}");
            let mismatches = report.count(ingot_gates::Verdict::Mismatch);
            return verdict("cache gate", mismatches, report.steps.len());
        }
        (Some(b), _) => b,
    };
    let opts = GateOptions {
        backend,
        prompt,
        steps: a.steps,
        band: Band::default(),
        vram: a.experts.budget()?,
        cache_type: a.cache_type,
    };
    let report = run_gate(&file, &opts)?;
    println!("{report}");
    verdict(
        "gate",
        report.count(ingot_gates::Verdict::Mismatch),
        report.steps.len(),
    )
}

/// A non-zero exit when any step of `steps` was a mismatch.
fn verdict(what: &str, mismatches: usize, steps: usize) -> Result<()> {
    if mismatches > 0 {
        bail!("{what} failed: {mismatches} of {steps} steps outside the band");
    }
    Ok(())
}
