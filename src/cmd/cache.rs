//! `--cache-type`, shared by the commands that decode or plan.

use ingot_model::CacheType;

#[derive(clap::Args, Clone)]
pub struct CacheArgs {
    /// The latent cache's number format: `f16`, or `q8_0` (ggml's q8_0 per 32 values, as
    /// llama.cpp's `-ctk q8_0`: 624 instead of 1152 bytes per cached token and layer at
    /// DeepSeek-V2 shapes). The oracle keeps full precision only.
    #[arg(long, default_value = "f16", value_parser = ingot_model::cache_type::parse)]
    pub cache_type: CacheType,
}
