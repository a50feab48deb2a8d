//! `ingot demo`: the README's main job. Unpacks the trained demo model (a 1 M-parameter deepseek2
//! trained on the Rust standard library's sources by `scripts/train/train.py`, committed
//! xz-compressed and compiled into the binary) into the cache directory if it is absent, then
//! decodes from it: the whole path (GGUF, tokenizer, MLA, MoE routing, sampler, streaming) on real
//! weights, so the text it writes reads as Rust. `--synthetic` decodes the tiny random-weight model
//! instead (gibberish by design).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use ingot_engine::BackendKind;
use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};

use super::run;

/// The trained model, Q8_0, xz-compressed (testdata/golden/trained-rust-std; docs/perf.md has its
/// recipe).
const TRAINED_XZ: &[u8] = include_bytes!("../../testdata/golden/trained-rust-std/model.gguf.xz");
/// Bumped whenever the committed model changes, so a cached copy of an older one is not reused.
const TRAINED_REVISION: u32 = 2;

#[derive(clap::Args)]
pub struct Args {
    /// Prompt to continue.
    #[arg(short, long, default_value = DEFAULT_PROMPT)]
    prompt: String,
    /// Tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 96)]
    n_predict: usize,
    /// Decode the tiny random-weight synthetic model instead of the trained one.
    #[arg(long)]
    synthetic: bool,
    /// Serve the model (`ingot serve` with its defaults: 127.0.0.1, the chat page at /) instead of
    /// decoding once.
    #[arg(long)]
    serve: bool,
    /// The port for --serve.
    #[arg(long, default_value_t = 8080, requires = "serve")]
    port: u16,
}

const DEFAULT_PROMPT: &str = "impl<T: Clone> Clone for Box<T> {";

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

/// Writes the trained model into `dir` (first use only) and returns its path.
fn trained_model(dir: &Path) -> Result<PathBuf> {
    use std::io::Read;
    let model = dir.join(format!("trained-rust-std-q8_0-r{TRAINED_REVISION}.gguf"));
    if !model.exists() {
        eprintln!("demo: unpacking {} (first run only)", model.display());
        let mut bytes = Vec::new();
        xz2::read::XzDecoder::new(TRAINED_XZ)
            .read_to_end(&mut bytes)
            .context("the compiled-in model is not a whole xz stream")?;
        // Write beside and rename, so an interrupted first run never leaves a truncated model
        // behind.
        let tmp = model.with_extension(format!("gguf.{}.tmp", std::process::id()));
        std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &model).with_context(|| format!("writing {}", model.display()))?;
    }
    Ok(model)
}

/// Writes the tiny synthetic model into `dir` (first use only) and returns its path.
fn synthetic_model(dir: &Path) -> Result<PathBuf> {
    let opts = SynthOptions {
        preset: Preset::Tiny,
        layout: Layout::Mla,
        mix: QuantMix::Q4KM,
        seed: 42,
    };
    let model = dir.join(format!(
        "{}-r{}.gguf",
        opts.model_name(),
        ingot_synth::REVISION
    ));
    if !model.exists() {
        eprintln!("demo: making {} (first run only)", model.display());
        synthesize(&opts, &model, false).with_context(|| format!("writing {}", model.display()))?;
    }
    Ok(model)
}

pub fn run(a: Args) -> Result<()> {
    let dir = cache_dir()?;
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating cache directory {}", dir.display()))?;
    let model = if a.synthetic {
        synthetic_model(&dir)?
    } else {
        trained_model(&dir)?
    };
    if a.serve {
        eprintln!("demo: serving {}", model.display());
        return serve(&model, a.port);
    }
    let temp = if a.synthetic {
        eprintln!(
            "demo: decoding {} (random weights: expect gibberish, greedy)",
            model.display()
        );
        0.0
    } else {
        eprintln!(
            "demo: decoding {} (1 M parameters trained on the Rust standard library's sources; \
             sampled at temperature 0.5, seed 42)",
            model.display()
        );
        0.5
    };
    // The prompt first, so the continuation reads in place (`ingot run` prints the continuation
    // only).
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        write!(out, "{}", a.prompt)?;
        out.flush()?;
    }
    run::run(run::Args {
        model,
        prompt: a.prompt,
        n_predict: a.n_predict,
        chat: false,
        system: None,
        ctx: None,
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
        draft: super::draft::DraftArgs {
            draft: None,
            draft_max: 1,
            draft_vocab: None,
        },
        ignore_eos: false,
        temp,
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

/// `ingot serve -m MODEL --port PORT` with every other option at its default, parsed by serve's own
/// arguments so the defaults live in one place.
fn serve(model: &Path, port: u16) -> Result<()> {
    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        args: super::serve::Args,
    }
    let model = model
        .to_str()
        .context("the cache directory's path is not UTF-8")?;
    let port = port.to_string();
    let parsed = <Serve as clap::Parser>::try_parse_from(["serve", "-m", model, "--port", &port])
        .context("serve's default arguments")?;
    super::serve::run(parsed.args)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model compiled into the binary is the one the trained-model tests check (same SHA-256
    /// as `ingot_testdata`'s derived `trained-rust-std/model.gguf`), and it unpacks where asked.
    #[test]
    fn compiled_in_model_is_the_tested_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = trained_model(dir.path()).expect("unpack");
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(
            ingot_testdata::derive::sha256_hex(&bytes),
            ingot_testdata::TRAINED_SHA256
        );
        // A second call reuses the file instead of writing it again.
        assert_eq!(trained_model(dir.path()).expect("cached"), path);
    }
}
