//! `ingot demo`: the README's main job. Makes the tiny synthetic model in the cache directory if it
//! is absent, then decodes from it. The weights are random, so the text is gibberish by design:
//! the point is to show the whole path (GGUF, tokenizer, decoder, sampler, streaming) working.

use std::path::PathBuf;

use anyhow::{Context, Result};
use ingot_engine::BackendKind;
use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};

use super::run;

#[derive(clap::Args)]
pub struct Args {
    /// Prompt to continue.
    #[arg(short, long, default_value = "The quick brown fox")]
    prompt: String,
    /// Tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 32)]
    n_predict: usize,
}

/// `$INGOT_CACHE_DIR`, else `$XDG_CACHE_HOME/ingot`, else `~/.cache/ingot`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("INGOT_CACHE_DIR") {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(d).join("ingot"));
    }
    let home = std::env::var_os("HOME")
        .context("neither INGOT_CACHE_DIR, XDG_CACHE_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache").join("ingot"))
}

pub fn run(a: Args) -> Result<()> {
    let opts = SynthOptions {
        preset: Preset::Tiny,
        layout: Layout::Mla,
        mix: QuantMix::Q4KM,
        seed: 42,
    };
    let dir = cache_dir()?;
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating cache directory {}", dir.display()))?;
    let model = dir.join(format!(
        "{}-r{}.gguf",
        opts.model_name(),
        ingot_synth::REVISION
    ));
    if !model.exists() {
        eprintln!("demo: making {} (first run only)", model.display());
        synthesize(&opts, &model, false).with_context(|| format!("writing {}", model.display()))?;
    }
    eprintln!(
        "demo: decoding {} (random weights: expect gibberish, greedy)",
        model.display()
    );
    run::run(run::Args {
        model,
        prompt: a.prompt,
        n_predict: a.n_predict,
        chat: false,
        system: None,
        ctx: 256,
        backend: BackendKind::Cpu,
        experts: super::experts::ExpertArgs {
            vram_budget: None,
            expert_policy: super::experts::PolicyArg::Lru,
            ema_decay: 0.9,
            expert_bonus: 0.0,
        },
        cache: super::cache::CacheArgs {
            cache_type: ingot_model::CacheType::F16,
        },
        mla: super::cache::MlaArgs {
            mla_form: ingot_model::MlaForm::Auto,
        },
        temp: 0.0,
        top_k: 40,
        top_p: 0.95,
        min_p: 0.05,
        repeat_penalty: 1.0,
        repeat_last_n: 64,
        seed: Some(42),
        verbose: false,
        trace_routing: None,
        force: false,
    })
}
