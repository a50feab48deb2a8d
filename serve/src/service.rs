//! The loaded model: [`load`] opens it on the decoder thread and returns a [`Service`], whose
//! shared [`AppState`] every request reads. The model is fixed here, at start; nothing a request
//! says chooses another.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ingot_engine::BackendKind;
use ingot_gguf::GgufFile;
use ingot_model::ModelConfig;
use ingot_tokenizer::{ChatRequest, ChatTemplate, Role, Tokenizer};
use tokio::sync::mpsc;

use crate::metrics::Metrics;
use crate::options::check_options;
use crate::tokenize::TokenizeThreads;
use crate::worker::{self, Job};
use crate::{ServeError, ServeOptions, PROMPT_CACHE_MLA_FORM};

/// A loaded model with its decoder thread running: make a [`axum::Router`] of it
/// ([`Service::router`]) and serve.
pub struct Service {
    pub(crate) state: Arc<AppState>,
}

/// What every request shares; the decoder itself lives on its thread, reached through `jobs`.
pub(crate) struct AppState {
    pub(crate) model_id: String,
    pub(crate) file_name: String,
    /// Seconds since the Unix epoch when the model was loaded.
    pub(crate) created: u64,
    /// Context size in tokens, prompt and completion together.
    pub(crate) ctx: usize,
    pub(crate) backend: BackendKind,
    pub(crate) description: String,
    pub(crate) api_key: Option<String>,
    pub(crate) body_timeout: Duration,
    /// Lower-case host names beyond the loopback ones; see [`crate::guard::host_allowed`].
    pub(crate) allowed_hosts: Vec<String>,
    pub(crate) queue_bound: usize,
    pub(crate) tok: Arc<Tokenizer>,
    /// Where prompts are templated and tokenized (`completions::off_runtime`).
    pub(crate) tokenizing: TokenizeThreads,
    pub(crate) template: ChatTemplate,
    pub(crate) jobs: mpsc::Sender<Job>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) next_id: AtomicU64,
}

/// Seconds since the Unix epoch (0 on a clock before it).
pub(crate) fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What the decoder thread reports once the model is open.
struct Loaded {
    tok: Arc<Tokenizer>,
    template: ChatTemplate,
    kind: BackendKind,
    description: String,
    /// The resolved context size.
    ctx: usize,
}

/// Opens the model on its decoder thread (blocking until loaded) and checks the options.
pub fn load(opts: &ServeOptions) -> Result<Service, ServeError> {
    check_options(opts)?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<Loaded, ServeError>>();
    let (jobs_tx, jobs_rx) = mpsc::channel::<Job>(opts.queue);
    let metrics = Arc::new(Metrics::default());
    let path = opts.model.clone();
    let (backend, ctx, log, budget) = (opts.backend, opts.ctx, opts.log, opts.vram_budget);
    let (cache_type, prompt_cache, draft) = (opts.cache_type, opts.prompt_cache, opts.draft);
    let worker_metrics = metrics.clone();
    std::thread::Builder::new()
        .name("ingot-decoder".into())
        .spawn(move || {
            let file = match GgufFile::open(&path) {
                Ok(f) => f,
                Err(source) => {
                    let _ = ready_tx.send(Err(ServeError::Gguf {
                        path: path.display().to_string(),
                        source: Box::new(source),
                    }));
                    return;
                }
            };
            let opened = (|| {
                let config = ModelConfig::from_gguf(file.header())
                    .map_err(|e| ServeError::Config(Box::new(e)))?;
                let ctx = config
                    .context_size(ctx)
                    .map_err(|e| ServeError::Options(format!("--ctx: {e}")))?;
                let tok = Tokenizer::from_gguf(file.header())
                    .map_err(|e| ServeError::Tokenizer(Box::new(e)))?;
                let template = ChatTemplate::from_gguf(file.header());
                let form = match backend.resolve().0 {
                    BackendKind::Cpu if prompt_cache => PROMPT_CACHE_MLA_FORM,
                    _ => ingot_engine::MlaForm::Auto,
                };
                let engine = ingot_engine::OpenOptions {
                    backend,
                    ctx,
                    progress: log,
                    vram_budget: budget,
                    cache_type,
                    mla_form: form,
                    mtp_head_rows: draft.and_then(|d| d.vocab),
                }
                .open(&file)?;
                if let Some(d) = draft {
                    // Refused before the server listens, as `ingot run` refuses.
                    let refused =
                        |e| ServeError::Options(format!("--draft mtp on backend {backend}: {e}"));
                    engine.decoder.mtp_ready().map_err(refused)?;
                    d.check_vocab(engine.decoder.config().vocab)
                        .map_err(refused)?;
                }
                Ok((tok, template, engine, ctx))
            })();
            match opened {
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
                Ok((tok, template, engine, ctx)) => {
                    let tok = Arc::new(tok);
                    let _ = ready_tx.send(Ok(Loaded {
                        tok: tok.clone(),
                        template,
                        kind: engine.kind,
                        description: engine.description,
                        ctx,
                    }));
                    worker::run(
                        engine.decoder,
                        tok,
                        ctx,
                        jobs_rx,
                        worker_metrics,
                        log,
                        prompt_cache,
                        draft,
                    );
                }
            }
        })
        .map_err(|source| ServeError::Io {
            what: "starting the decoder thread".into(),
            source,
        })?;
    let loaded = ready_rx
        .recv()
        .map_err(|_| ServeError::Worker("it ended while loading the model".into()))??;
    let file_name = opts
        .model
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let model_id = opts.model_id.clone().unwrap_or_else(|| {
        file_name
            .strip_suffix(".gguf")
            .unwrap_or(&file_name)
            .to_string()
    });
    let template = usable_template(loaded.template, &loaded.tok, log);
    let tokenizing =
        TokenizeThreads::new(tokenizing_threads()).map_err(|source| ServeError::Io {
            what: "starting the tokenizer threads".into(),
            source,
        })?;
    Ok(Service {
        state: Arc::new(AppState {
            model_id,
            file_name,
            created: now_s(),
            ctx: loaded.ctx,
            backend: loaded.kind,
            description: loaded.description,
            api_key: opts.api_key.clone(),
            body_timeout: opts.body_timeout,
            allowed_hosts: opts
                .allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            queue_bound: opts.queue,
            tok: loaded.tok,
            tokenizing,
            template,
            jobs: jobs_tx,
            metrics,
            next_id: AtomicU64::new(1),
        }),
    })
}

/// Tokenizer threads: the machine's cores, at most 8 (more would only take cores from the decoder
/// and keep more regex caches).
fn tokenizing_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(8))
}

/// The file's template if it renders a plain conversation; the built-in format otherwise (said
/// once).
fn usable_template(t: ChatTemplate, tok: &Tokenizer, log: bool) -> ChatTemplate {
    if t.source().is_none() {
        return t;
    }
    let (bos, eos) = tok.chat_specials();
    let probe = ChatRequest {
        bos,
        eos: &eos,
        system: Some("s"),
        turns: &[(Role::User, "u")],
        add_generation_prompt: true,
    };
    match t.try_render(&probe) {
        Ok(_) => t,
        Err(e) => {
            if log {
                eprintln!("chat template: {e}; using the built-in DeepSeek-V2 template");
            }
            ChatTemplate::builtin()
        }
    }
}

impl Service {
    pub fn model_id(&self) -> &str {
        &self.state.model_id
    }

    /// The context size in tokens every request shares (prompt + completion).
    pub fn ctx(&self) -> usize {
        self.state.ctx
    }

    /// The backend that was opened and what it loaded.
    pub fn backend(&self) -> (BackendKind, &str) {
        (self.state.backend, &self.state.description)
    }
}
