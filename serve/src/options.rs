//! What to serve and how ([`ServeOptions`]), its defaults and bounds, and the checks that need no
//! model. Sizes are in bytes, context and queue lengths in tokens and requests.

use std::path::PathBuf;
use std::time::Duration;

use ingot_engine::BackendKind;

use crate::ServeError;

/// Default request body limit: 1 MiB.
pub const DEFAULT_MAX_BODY: usize = 1 << 20;

/// Default [`ServeOptions::body_timeout`].
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Most requests `--queue` lets wait. Each waiting request holds a connection and its body (up to
/// `--max-body`), so the bound keeps a full queue's memory in the gigabytes at most; tokio's
/// channel panics beyond `usize::MAX >> 3` permits.
pub const MAX_QUEUE: usize = 4096;

/// What to serve and how.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub model: PathBuf,
    pub backend: BackendKind,
    /// Context size in tokens (prompt + generated), as `ModelConfig::context_size` resolves it:
    /// `None` is 4096 or the training context when smaller, `Some(0)` the training context.
    pub ctx: Option<usize>,
    /// When set, every route but `/health` and the chat page needs `Authorization: Bearer <key>`;
    /// must not be empty.
    pub api_key: Option<String>,
    /// Requests that may wait while one runs; more get 429.
    pub queue: usize,
    /// Largest request body in bytes; larger gets 413.
    pub max_body: usize,
    /// The model's id in `/v1/models` and the `model` a request may name; default: the file name
    /// without `.gguf`.
    pub model_id: Option<String>,
    /// One line per request on stderr.
    pub log: bool,
    /// VRAM budget of the GPU plan (`--vram-budget`): routed experts beyond it stay in host memory.
    pub vram_budget: Option<ingot_engine::VramBudget>,
    /// The latent cache's number format (`--cache-type`).
    pub cache_type: ingot_engine::CacheType,
    /// Host names a request's `Host` header may carry besides the loopback ones (`localhost`,
    /// `127.0.0.1`, `[::1]`), any port; `*` allows every name. See `guard::host_allowed`.
    pub allowed_hosts: Vec<String>,
    /// How long a client may take to send a request body once its headers are in; slower gets 408
    /// and the connection back. Keeps half-sent requests from holding connections (and shutdown)
    /// indefinitely.
    pub body_timeout: Duration,
    /// Keep the KV cache's tokens between requests and prefill only what a prompt adds to their
    /// longest common prefix (default). The cpu backend then prefills in the absorbed attention
    /// form ([`PROMPT_CACHE_MLA_FORM`]), whose chunked prefill is bit-identical to one-token steps,
    /// so a request gives the same logits cold and warm; long cold prompts pay for it (the
    /// decompressed form took 0.65x the time of a 512-token chunk, docs/perf.md). The sim and cuda
    /// backends prefill on other kernels than they decode with, so there a reused prefix can change
    /// a near-tie; `false` (`--no-prompt-cache`) starts every request from an empty cache and
    /// decides nothing by what came before.
    pub prompt_cache: bool,
    /// Drafts per step of speculative decoding with the model's NextN/MTP block (`--draft mtp
    /// --draft-max K`); `None` decodes without. A request with `ignore_eos` decodes without (the
    /// drafter cannot ban a token). Greedy requests get the text they get without drafts.
    pub draft: Option<ingot_model::speculative::Drafts>,
}

/// The cpu backend's prefill attention form while the prompt cache is on: the one form whose
/// chunked prefill equals one-token decoding bit for bit (`ingot_model::MlaForm`), so a cached
/// prefix changes no logit.
pub const PROMPT_CACHE_MLA_FORM: ingot_engine::MlaForm = ingot_engine::MlaForm::Absorbed;

impl ServeOptions {
    pub fn new(model: impl Into<PathBuf>) -> Self {
        ServeOptions {
            model: model.into(),
            backend: BackendKind::Auto,
            ctx: None,
            api_key: None,
            queue: 16,
            max_body: DEFAULT_MAX_BODY,
            model_id: None,
            log: false,
            vram_budget: None,
            cache_type: ingot_engine::CacheType::F16,
            allowed_hosts: Vec::new(),
            body_timeout: DEFAULT_BODY_TIMEOUT,
            prompt_cache: true,
            draft: None,
        }
    }
}

/// The options that need no model: `--queue` within `1..=MAX_QUEUE`, an `--api-key` that is not
/// empty (an empty key, typically an unset variable expanded into the command line, would otherwise
/// turn authentication off without a word).
pub(crate) fn check_options(opts: &ServeOptions) -> Result<(), ServeError> {
    if !(1..=MAX_QUEUE).contains(&opts.queue) {
        return Err(ServeError::Options(format!(
            "--queue {} is out of range 1..={MAX_QUEUE} (requests that may wait while one runs)",
            opts.queue
        )));
    }
    if opts.api_key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        return Err(ServeError::Options(
            "--api-key (or INGOT_API_KEY) is empty: give a key, or leave both unset to serve without one"
                .into(),
        ));
    }
    Ok(())
}
