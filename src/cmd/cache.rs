//! `--cache-type`, shared by the commands that decode or plan, and `--mla-form`, by those that
//! prefill.

use ingot_model::{CacheType, MlaForm};

#[derive(clap::Args, Clone)]
pub struct CacheArgs {
    /// The latent cache's number format: `f16`, or `q8_0` (ggml's q8_0 per 32 values, as
    /// llama.cpp's `-ctk q8_0`: 624 instead of 1152 bytes per cached token and layer at
    /// DeepSeek-V2 shapes). The oracle keeps full precision only.
    #[arg(long, default_value = "f16", value_parser = ingot_model::cache_type::parse)]
    pub cache_type: CacheType,
}

#[derive(clap::Args, Clone)]
pub struct MlaArgs {
    /// How the cpu backend's prefill chunks compute attention: `absorbed` (queries absorbed into
    /// the latent space, as the decode step), `decompressed` (keys and values decompressed per
    /// cached position, cheaper for long chunks), or `auto` (decompressed from a measured chunk
    /// length on, unless the cache is deep for the chunk's length). The sim and cuda backends have
    /// their own prefill plan.
    #[arg(long, default_value = "auto", value_parser = parse_mla_form)]
    pub mla_form: MlaForm,
}

fn parse_mla_form(s: &str) -> Result<MlaForm, String> {
    match s {
        "auto" => Ok(MlaForm::Auto),
        "absorbed" => Ok(MlaForm::Absorbed),
        "decompressed" => Ok(MlaForm::Decompressed),
        _ => Err(format!("{s:?}: expected auto, absorbed or decompressed")),
    }
}
