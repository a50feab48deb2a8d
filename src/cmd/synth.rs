use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use ingot_gguf::OutputPolicy;
use ingot_synth::{planned_bytes, synthesize_to, Layout, Preset, QuantMix, SynthOptions};

#[derive(clap::Args)]
pub struct Args {
    /// Model shape: tiny, lite-4l (V2-Lite dims, 4 layers), v2-lite (27 layers); family members at
    /// tiny dims: tiny-v3, tiny-moonlight, tiny-k2, tiny-glm (with an MTP block). v3, k2 and
    /// glm-4.7-flash are header-only (for planning) and cannot be written.
    #[arg(long, default_value = "tiny")]
    preset: Preset,
    /// Attention tensors: mla (attn_k_b/attn_v_b) or legacy (attn_kv_b).
    #[arg(long, default_value = "mla")]
    layout: Layout,
    /// Quant mix: f32, q8_0, q4_k_m, q3_k_m, q2_k or iq4_xs (llama-quantize's per-tensor rules,
    /// without an importance matrix); iq2_xxs, iq1_s or iq3_xxs (unsloth-style dynamic mixes:
    /// grid types in the routed experts; IQ2_XXS, IQ2_XS and IQ1_S as stand-in blocks, which need
    /// an importance matrix to quantize).
    #[arg(long, default_value = "q4_k_m")]
    quant: QuantMix,
    /// Random seed: the same seed gives the same file.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Output file (written beside and renamed into place).
    #[arg(short, long)]
    output: PathBuf,
    /// Replace the output file if it exists (a regular file only: never a directory, FIFO or
    /// device).
    #[arg(long)]
    force: bool,
}

pub fn run(a: Args) -> Result<()> {
    let policy = OutputPolicy {
        force: a.force,
        inputs: &[],
    };
    // Refused paths fail here, before the line announcing the work.
    ingot_gguf::output::check_output(&a.output, &policy)?;
    let opts = SynthOptions {
        preset: a.preset,
        layout: a.layout,
        mix: a.quant,
        seed: a.seed,
    };
    let start = Instant::now();
    eprintln!(
        "synth: {} ({:.1} MB of tensor data) -> {}",
        opts.model_name(),
        planned_bytes(&opts) as f64 / 1e6,
        a.output.display()
    );
    let s = synthesize_to(&opts, &a.output, &policy, std::io::stderr().is_terminal())
        .with_context(|| format!("writing {}", a.output.display()))?;
    eprintln!(
        "synth: wrote {} tensors, {} parameters, {:.1} MB in {:.1} s",
        s.n_tensors,
        s.n_params,
        s.tensor_bytes as f64 / 1e6,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
