//! `ingot serve`: the OpenAI-compatible server of `ingot-serve`, bound to 127.0.0.1 unless told
//! otherwise.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use anyhow::{Context, Result};
use ingot_engine::BackendKind;
use ingot_serve::ServeOptions;

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF model file.
    #[arg(short, long)]
    pub model: PathBuf,
    /// Address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to listen on (0: any free port, printed).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Context size in tokens (prompt + completion): default 4096 or the model's training context
    /// when that is smaller; 0 takes the training context; more than it is refused.
    #[arg(short = 'c', long = "ctx")]
    pub ctx: Option<usize>,
    #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
    pub backend: BackendKind,
    /// Require `Authorization: Bearer KEY` on every route but /health. An empty key is an error.
    #[arg(long, env = "INGOT_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Requests that may wait while one runs (1 to 4096); more are answered 429.
    #[arg(long, default_value_t = 16)]
    pub queue: usize,
    /// Model id for /v1/models and the `model` field (default: the file name without .gguf).
    #[arg(long)]
    pub alias: Option<String>,
    /// Largest request body in bytes (larger: 413).
    #[arg(long, default_value_t = ingot_serve::DEFAULT_MAX_BODY)]
    pub max_body: usize,
    /// Also answer requests whose Host header names NAME (any port); repeatable; `*` allows every
    /// name. By default only loopback names (localhost, 127.0.0.1, `[::1]`) and --host's own
    /// address are answered: others get 403, which keeps DNS-rebinding pages out. Behind a proxy or
    /// on 0.0.0.0, name the host clients use.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// Start every request from an empty KV cache instead of reusing the previous conversation's
    /// prefix (slower follow-up turns). With the prompt cache on, the cpu backend prefills in the
    /// absorbed form so a request gives the same logits cold and warm; the sim and cuda backends
    /// prefill on other kernels than they decode with, so there this flag is what makes a reply
    /// independent of earlier requests.
    #[arg(long)]
    pub no_prompt_cache: bool,
    /// Print nothing per request.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub experts: super::experts::ExpertArgs,
    #[command(flatten)]
    pub cache: super::cache::CacheArgs,
    #[command(flatten)]
    pub draft: super::draft::DraftArgs,
}

pub fn run(a: Args) -> Result<()> {
    let mut allowed_hosts = a.allowed_hosts.clone();
    // The address the server is bound to is its own name (an unspecified address such as 0.0.0.0
    // names no host a client connects to).
    if !a.host.is_unspecified() {
        allowed_hosts.push(match a.host {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        });
    }
    let opts = ServeOptions {
        model: a.model.clone(),
        backend: a.backend,
        ctx: a.ctx,
        api_key: a.api_key,
        queue: a.queue,
        max_body: a.max_body,
        model_id: a.alias,
        log: !a.quiet,
        vram_budget: a.experts.budget()?,
        cache_type: a.cache.cache_type,
        allowed_hosts,
        body_timeout: ingot_serve::DEFAULT_BODY_TIMEOUT,
        prompt_cache: !a.no_prompt_cache,
        draft: a.draft.drafts()?,
    };
    ingot_serve::serve_blocking(&opts, SocketAddr::new(a.host, a.port))
        .map_err(|e| match e {
            ingot_serve::ServeError::Engine(e) => super::engine_error(*e),
            e => e.into(),
        })
        .with_context(|| format!("serving {}", a.model.display()))
}
