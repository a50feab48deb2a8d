//! `ingot serve`: an OpenAI-compatible HTTP server over one decoder.
//!
//! Endpoints: `POST /v1/chat/completions` and `POST /v1/completions` (JSON, or server-sent events with
//! `"stream": true`, OpenAI's chunk format ending with `data: [DONE]`), `GET /v1/models`, `GET /health`,
//! `GET /metrics` (Prometheus text), and a chat page at `GET /` (`chat.html`, streaming from
//! `/v1/chat/completions`; `/?prompt=TEXT` sends TEXT on load). The `/v1` routes also answer without the prefix, as llama-server's do.
//!
//! One thread owns the decoder ([`worker`]); requests wait in a bounded FIFO queue and get 429 beyond it. A
//! client that disconnects stops its generation at the next token. Errors are OpenAI-style JSON bodies
//! ([`ApiError`]). The server never reads a path from a request: the model is fixed at start.
//!
//! Hostile clients and pages: requests must carry a loopback `Host` (or one of `allowed_hosts`), POST
//! bodies must be JSON, the key (when set) is checked before routing, headers and bodies must arrive within
//! their timeouts, and shutdown waits [`SHUTDOWN_GRACE`] at most (see [`Service::router`] and
//! [`serve_connections`]).

pub mod api;
mod body;
pub mod error;
mod guard;
pub mod metrics;
pub mod worker;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ingot_engine::BackendKind;
use ingot_gguf::GgufFile;
use ingot_model::ModelConfig;
use ingot_tokenizer::{ChatRequest, ChatTemplate, Role, Tokenizer};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use body::{declared_length, read_body, require_json};
pub use error::{ApiError, ServeError};
use guard::{check_host, require_key};
use metrics::Metrics;
use worker::{Event, Finish, Job};

/// Default request body limit: 1 MiB.
pub const DEFAULT_MAX_BODY: usize = 1 << 20;

/// How long `serve_blocking` gives a connection to send its request headers (see [`serve_connections`]).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Default [`ServeOptions::body_timeout`].
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long requests in flight may still finish after SIGINT or SIGTERM; connections still open then are
/// dropped, so no client (a half-sent request, a long stream) keeps the server alive.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Most requests `--queue` lets wait. Each waiting request holds a connection and its body (up to
/// `--max-body`), so the bound keeps a full queue's memory in the gigabytes at most; tokio's channel panics
/// beyond `usize::MAX >> 3` permits.
pub const MAX_QUEUE: usize = 4096;

/// What to serve and how.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub model: PathBuf,
    pub backend: BackendKind,
    /// Context size in tokens (prompt + generated), as `ModelConfig::context_size` resolves it: `None` is
    /// 4096 or the training context when smaller, `Some(0)` the training context.
    pub ctx: Option<usize>,
    /// When set, every route but `/health` and the chat page needs `Authorization: Bearer <key>`; must not be
    /// empty.
    pub api_key: Option<String>,
    /// Requests that may wait while one runs; more get 429.
    pub queue: usize,
    /// Largest request body in bytes; larger gets 413.
    pub max_body: usize,
    /// The model's id in `/v1/models` and the `model` a request may name; default: the file name without `.gguf`.
    pub model_id: Option<String>,
    /// One line per request on stderr.
    pub log: bool,
    /// VRAM budget of the GPU plan (`--vram-budget`): routed experts beyond it stay in host memory.
    pub vram_budget: Option<ingot_engine::VramBudget>,
    /// The latent cache's number format (`--cache-type`).
    pub cache_type: ingot_engine::CacheType,
    /// Host names a request's `Host` header may carry besides the loopback ones (`localhost`, `127.0.0.1`,
    /// `[::1]`), any port; `*` allows every name. See [`guard::host_allowed`].
    pub allowed_hosts: Vec<String>,
    /// How long a client may take to send a request body once its headers are in; slower gets 408 and the
    /// connection back. Keeps half-sent requests from holding connections (and shutdown) indefinitely.
    pub body_timeout: Duration,
    /// Keep the KV cache's tokens between requests and prefill only what a prompt adds to their longest
    /// common prefix (default). The cpu backend then prefills in the absorbed attention form
    /// ([`PROMPT_CACHE_MLA_FORM`]), whose chunked prefill is bit-identical to one-token steps, so a request
    /// gives the same logits cold and warm; long cold prompts pay for it (the decompressed form took 0.65x the
    /// time of a 512-token chunk, docs/perf.md). The sim and cuda backends prefill on other kernels than they
    /// decode with, so there a reused prefix can change a near-tie; `false` (`--no-prompt-cache`) starts every
    /// request from an empty cache and decides nothing by what came before.
    pub prompt_cache: bool,
}

/// The cpu backend's prefill attention form while the prompt cache is on: the one form whose chunked prefill
/// equals one-token decoding bit for bit (`ingot_model::MlaForm`), so a cached prefix changes no logit.
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
        }
    }
}

/// A loaded model with its decoder thread running: make a [`Router`] of it and serve.
pub struct Service {
    state: Arc<AppState>,
}

struct AppState {
    model_id: String,
    file_name: String,
    created: u64,
    ctx: usize,
    backend: BackendKind,
    description: String,
    api_key: Option<String>,
    body_timeout: Duration,
    /// Lower-case host names beyond the loopback ones; see [`guard::host_allowed`].
    allowed_hosts: Vec<String>,
    queue_bound: usize,
    tok: Arc<Tokenizer>,
    /// Permits to template and tokenize a prompt; see [`off_runtime`].
    tokenizing: Arc<tokio::sync::Semaphore>,
    template: ChatTemplate,
    jobs: mpsc::Sender<Job>,
    metrics: Arc<Metrics>,
    next_id: AtomicU64,
}

fn now_s() -> u64 {
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

/// The options that need no model: `--queue` within `1..=MAX_QUEUE`, an `--api-key` that is not empty (an
/// empty key, typically an unset variable expanded into the command line, would otherwise turn
/// authentication off without a word).
fn check_options(opts: &ServeOptions) -> Result<(), ServeError> {
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

/// Opens the model on its decoder thread (blocking until loaded) and checks the options.
pub fn load(opts: &ServeOptions) -> Result<Service, ServeError> {
    check_options(opts)?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<Loaded, ServeError>>();
    let (jobs_tx, jobs_rx) = mpsc::channel::<Job>(opts.queue);
    let metrics = Arc::new(Metrics::default());
    let path = opts.model.clone();
    let (backend, ctx, log, budget) = (opts.backend, opts.ctx, opts.log, opts.vram_budget);
    let (cache_type, prompt_cache) = (opts.cache_type, opts.prompt_cache);
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
                }
                .open(&file)?;
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
            tokenizing: Arc::new(tokio::sync::Semaphore::new(tokenizing_threads())),
            template,
            jobs: jobs_tx,
            metrics,
            next_id: AtomicU64::new(1),
        }),
    })
}

/// The file's template if it renders a plain conversation; the built-in format otherwise (said once).
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

    /// Every route, with (outermost first) the per-status counter, the `Host` allow-list, the declared
    /// body length check, the API key check, the body read (bounded in time and size) and the body limit. The key is checked before routing, so
    /// without it every path but the chat page and `/health` is 401, never a 404 or 405 that maps the routes.
    pub fn router(&self, max_body: usize) -> Router {
        let s = self.state.clone();
        Router::new()
            .route("/", get(chat_page))
            .route("/health", get(health))
            .route("/v1/chat/completions", post(chat_completions))
            .route("/chat/completions", post(chat_completions))
            .route("/v1/completions", post(completions))
            .route("/completions", post(completions))
            .route("/v1/models", get(models))
            .route("/models", get(models))
            .route("/metrics", get(metrics_text))
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed)
            .layer(DefaultBodyLimit::max(max_body))
            .layer(middleware::from_fn_with_state(
                (s.clone(), max_body),
                read_body,
            ))
            .layer(middleware::from_fn_with_state(s.clone(), require_key))
            .layer(middleware::from_fn_with_state(max_body, declared_length))
            .layer(middleware::from_fn_with_state(s.clone(), check_host))
            .layer(middleware::from_fn_with_state(s.clone(), count_status))
            .with_state(s)
    }
}

/// Loads the model, binds `addr` and serves until Ctrl-C. Prints where it listens on stderr.
pub fn serve_blocking(opts: &ServeOptions, addr: SocketAddr) -> Result<(), ServeError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| ServeError::Io { what, source }
    };
    let service = load(opts)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(io("starting the runtime"))?;
    let result = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(io(&format!("binding {addr}")))?;
        let local = listener.local_addr().map_err(io("local address"))?;
        let (kind, description) = service.backend();
        eprintln!(
            "ingot serve: model {:?} on backend {kind} ({description}), ctx {}, queue {}",
            service.model_id(),
            service.ctx(),
            opts.queue
        );
        eprintln!("listening on http://{local} (OpenAI API at http://{local}/v1)");
        serve_connections(
            listener,
            service.router(opts.max_body),
            DEFAULT_HEADER_TIMEOUT,
            shutdown_signal(),
        )
        .await;
        Ok(())
    });
    // Tasks still holding connections are dropped, not waited for.
    rt.shutdown_timeout(Duration::from_millis(100));
    result
}

/// Serves `router` on `listener` until `signal`, then stops accepting, lets the open connections finish
/// their requests for [`SHUTDOWN_GRACE`] and drops the ones still open. A connection must send its request
/// headers within `header_timeout` of being opened or of its previous response (idle keep-alive included):
/// a slow or silent client gets its connection closed rather than holding it.
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    router: Router,
    header_timeout: Duration,
    signal: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut signal = std::pin::pin!(signal);
    loop {
        tokio::select! {
            () = &mut signal => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let tcp = match accepted {
                    Ok((tcp, _)) => tcp,
                    // Out of descriptors, or a connection reset before it was accepted: as axum::serve does,
                    // pause briefly rather than spin, and keep serving.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let service = TowerToHyperService::new(router.clone());
                let mut stop = stop_rx.clone();
                connections.spawn(async move {
                    // HTTP/1 only (the server's protocol): hyper-util's version-detecting builder waits for
                    // a first byte without any timeout, so a silent connection would never be closed.
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(header_timeout)
                        .serve_connection(TokioIo::new(tcp), service);
                    let mut conn = std::pin::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = stop.changed() => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        eprintln!(
            "ingot serve: {} connection(s) still open {} s after the signal: closing them",
            connections.len(),
            SHUTDOWN_GRACE.as_secs()
        );
        connections.abort_all();
    }
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = ctrl_c => {}
            () = term => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}

async fn count_status(State(s): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    s.metrics.count_status(resp.status().as_u16());
    resp
}

async fn not_found() -> ApiError {
    ApiError::not_found("not_found", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request_error",
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// The chat page: one static file with its script inline, no external assets. It carries no secret, so it
/// is served without the API key (its requests send the key the user types in). The CSP lets it talk only
/// to this server.
const CHAT_PAGE: &str = include_str!("chat.html");

async fn chat_page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            // Not framed by another page (clickjacking); frame-ancestors says the same to newer browsers.
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        CHAT_PAGE,
    )
        .into_response()
}

/// 200 while the decoder thread runs; 503 once it has stopped (it panicked).
async fn health(State(s): State<Arc<AppState>>) -> Response {
    if s.jobs.is_closed() {
        return ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "decoder_stopped",
            "the decoder thread has stopped",
        )
        .into_response();
    }
    Json(json!({ "status": "ok" })).into_response()
}

async fn metrics_text(State(s): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
        .into_response()
}

async fn models(State(s): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": s.model_id,
            "object": "model",
            "created": s.created,
            "owned_by": "ingot",
            "meta": { "n_ctx": s.ctx, "backend": s.backend.name() },
        }],
    }))
}

impl AppState {
    fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        match model {
            None => Ok(()),
            Some(m) if m == self.model_id || m == self.file_name => Ok(()),
            Some(m) => Err(ApiError::not_found(
                "model_not_found",
                format!(
                    "the model {m:?} does not exist; this server has {:?}",
                    self.model_id
                ),
            )),
        }
    }

    fn check_length(&self, prompt: &[u32]) -> Result<(), ApiError> {
        if prompt.is_empty() {
            return Err(ApiError::bad_request(
                "empty_prompt",
                "the prompt is empty and the model adds no BOS token",
            ));
        }
        if prompt.len() >= self.ctx {
            return Err(ApiError::bad_request(
                "context_length_exceeded",
                format!(
                    "the prompt is {} tokens; this server's context is {} tokens (prompt + completion)",
                    prompt.len(),
                    self.ctx
                ),
            ));
        }
        Ok(())
    }

    /// The conversation through the model's chat template, tokenized as `ingot run --chat` does.
    fn chat_prompt(&self, messages: &[api::Message]) -> Result<Vec<u32>, ApiError> {
        if messages.is_empty() {
            return Err(ApiError::bad_request(
                "invalid_messages",
                "`messages` must not be empty",
            ));
        }
        let mut system: Option<String> = None;
        let mut turns: Vec<(Role, String)> = Vec::new();
        for m in messages {
            let text = m.content.text()?;
            match m.role.as_str() {
                "system" | "developer" => match &mut system {
                    Some(s) => {
                        s.push_str("\n\n");
                        s.push_str(&text);
                    }
                    None => system = Some(text),
                },
                "user" => turns.push((Role::User, text)),
                "assistant" => turns.push((Role::Assistant, text)),
                other => {
                    return Err(ApiError::bad_request(
                        "invalid_role",
                        format!("unsupported message role {other:?} (system, user, assistant)"),
                    ))
                }
            }
        }
        let turns: Vec<(Role, &str)> = turns.iter().map(|(r, t)| (*r, t.as_str())).collect();
        let (bos, eos) = self.tok.chat_specials();
        let request = ChatRequest {
            bos,
            eos: &eos,
            system: system.as_deref(),
            turns: &turns,
            add_generation_prompt: true,
        };
        let text = self
            .template
            .render_or_builtin(&request)
            .map_err(|e| ApiError::bad_request("invalid_messages", e.to_string()))?;
        Ok(self.tok.encode(&text, true, true))
    }

    /// Queues a job; 429 when the queue is full.
    fn submit(
        &self,
        prompt: Vec<u32>,
        generation: api::Generation,
    ) -> Result<mpsc::UnboundedReceiver<Event>, ApiError> {
        let (events, rx) = mpsc::unbounded_channel();
        // Counted before the send so the worker's decrement never underflows.
        self.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
        let job = Job {
            prompt,
            generation,
            events,
        };
        match self.jobs.try_send(job) {
            Ok(()) => Ok(rx),
            Err(e) => {
                self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                Err(match e {
                    mpsc::error::TrySendError::Full(_) => ApiError::queue_full(self.queue_bound),
                    mpsc::error::TrySendError::Closed(_) => {
                        ApiError::internal("the decoder thread has stopped")
                    }
                })
            }
        }
    }

    fn new_id(&self, prefix: &str) -> String {
        format!(
            "{prefix}-{}-{}",
            self.created,
            self.next_id.fetch_add(1, Ordering::Relaxed)
        )
    }
}

/// Which OpenAI response shape to build.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Chat,
    Text,
}

struct Reply {
    shape: Shape,
    id: String,
    model: String,
    created: u64,
    include_usage: bool,
}

fn usage(prompt_tokens: usize, completion_tokens: usize) -> Value {
    json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    })
}

impl Reply {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.shape, chunk) {
            (Shape::Chat, false) => "chat.completion",
            (Shape::Chat, true) => "chat.completion.chunk",
            (Shape::Text, _) => "text_completion",
        }
    }

    fn whole(&self, text: String, finish: Finish, prompt: usize, completion: usize) -> Value {
        let choice = match self.shape {
            Shape::Chat => json!({
                "index": 0,
                "message": { "role": "assistant", "content": text },
                "logprobs": null,
                "finish_reason": finish.as_str(),
            }),
            Shape::Text => json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": finish.as_str(),
            }),
        };
        json!({
            "id": self.id,
            "object": self.object(false),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage(prompt, completion),
        })
    }

    /// One streamed chunk: `delta` is the chat delta (or, for text completions, the text).
    fn chunk(&self, text: Option<&str>, first: bool, finish: Option<Finish>) -> Value {
        let finish = finish.map(Finish::as_str);
        let choice = match self.shape {
            Shape::Chat => {
                let mut delta = serde_json::Map::new();
                if first {
                    delta.insert("role".into(), json!("assistant"));
                }
                if let Some(t) = text {
                    delta.insert("content".into(), json!(t));
                }
                json!({ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish })
            }
            Shape::Text => json!({
                "index": 0,
                "text": text.unwrap_or(""),
                "logprobs": null,
                "finish_reason": finish,
            }),
        };
        let mut v = json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        });
        if self.include_usage {
            v["usage"] = Value::Null;
        }
        v
    }

    fn usage_chunk(&self, prompt: usize, completion: usize) -> Value {
        json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage(prompt, completion),
        })
    }
}

/// Waits for the whole completion.
async fn collect(reply: Reply, mut rx: mpsc::UnboundedReceiver<Event>) -> Response {
    let mut text = String::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Text(t) => text.push_str(&t),
            Event::Done {
                finish,
                prompt_tokens,
                completion_tokens,
            } => {
                return Json(reply.whole(text, finish, prompt_tokens, completion_tokens))
                    .into_response()
            }
            Event::Error(e) => return ApiError::internal(e).into_response(),
        }
    }
    ApiError::internal("the decoder thread stopped during the request").into_response()
}

/// Server-sent events: a role chunk (chat), a chunk per piece of text, a chunk with the finish reason, the usage
/// chunk when `stream_options.include_usage`, then `[DONE]`. Dropping the stream (the client left) drops the
/// receiver, which stops the generation at its next token.
fn stream(reply: Reply, rx: mpsc::UnboundedReceiver<Event>) -> Response {
    enum Phase {
        Start,
        Body,
        Usage(usize, usize),
        Done,
        End,
    }
    let data = |v: Value| Ok::<_, Infallible>(SseEvent::default().data(v.to_string()));
    let events = futures_util::stream::unfold(
        (reply, rx, Phase::Start),
        move |(reply, mut rx, phase)| async move {
            match phase {
                Phase::Start if reply.shape == Shape::Chat => {
                    let ev = data(reply.chunk(Some(""), true, None));
                    Some((ev, (reply, rx, Phase::Body)))
                }
                Phase::Start | Phase::Body => match rx.recv().await {
                    Some(Event::Text(t)) => {
                        let ev = data(reply.chunk(Some(&t), false, None));
                        Some((ev, (reply, rx, Phase::Body)))
                    }
                    Some(Event::Done {
                        finish,
                        prompt_tokens,
                        completion_tokens,
                    }) => {
                        let text = (reply.shape == Shape::Text).then_some("");
                        let ev = data(reply.chunk(text, false, Some(finish)));
                        let next = if reply.include_usage {
                            Phase::Usage(prompt_tokens, completion_tokens)
                        } else {
                            Phase::Done
                        };
                        Some((ev, (reply, rx, next)))
                    }
                    Some(Event::Error(e)) => {
                        let ev = data(ApiError::internal(e).body());
                        Some((ev, (reply, rx, Phase::Done)))
                    }
                    None => {
                        let ev = data(
                            ApiError::internal("the decoder thread stopped during the request")
                                .body(),
                        );
                        Some((ev, (reply, rx, Phase::Done)))
                    }
                },
                Phase::Usage(p, c) => {
                    let ev = data(reply.usage_chunk(p, c));
                    Some((ev, (reply, rx, Phase::Done)))
                }
                Phase::Done => {
                    let ev = Ok(SseEvent::default().data("[DONE]"));
                    Some((ev, (reply, rx, Phase::End)))
                }
                Phase::End => None,
            }
        },
    );
    Sse::new(events).into_response()
}

/// Templating and tokenizing a prompt of up to `max_body` bytes takes a while: not on the runtime's threads,
/// and at most [`tokenizing_threads`] at once. The bound is what keeps the server's memory flat: the
/// tokenizer's regexes keep one search cache (a lazy DFA that grows up to the regex's size limit) for each
/// search running at once, kept for reuse, so without it every new peak of concurrent requests (up to
/// tokio's 512 blocking threads) would leave more caches behind.
async fn off_runtime<T: Send + 'static>(
    s: &Arc<AppState>,
    f: impl FnOnce(&AppState) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let permit = s
        .tokenizing
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| ApiError::internal(format!("tokenizing the prompt: {e}")))?;
    let s = s.clone();
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        f(&s)
    })
    .await
    .map_err(|e| ApiError::internal(format!("tokenizing the prompt: {e}")))?
}

/// Prompts templated and tokenized at once: the machine's cores, at most 8 (more would only take cores from
/// the decoder and keep more regex caches).
fn tokenizing_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(8))
}

async fn chat_completions(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    require_json(&headers)?;
    let body = body.map_err(ApiError::from_body_rejection)?;
    let req: api::ChatCompletionRequest = api::parse(&body)?;
    s.check_model(req.model.as_deref())?;
    let generation = req.sampling.generation()?;
    let messages = req.messages;
    let prompt = off_runtime(&s, move |s| s.chat_prompt(&messages)).await?;
    s.check_length(&prompt)?;
    let reply = Reply {
        shape: Shape::Chat,
        id: s.new_id("chatcmpl"),
        model: s.model_id.clone(),
        created: now_s(),
        include_usage: req.stream_options.is_some_and(|o| o.include_usage),
    };
    let rx = s.submit(prompt, generation)?;
    Ok(if req.stream {
        stream(reply, rx)
    } else {
        collect(reply, rx).await
    })
}

async fn completions(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    require_json(&headers)?;
    let body = body.map_err(ApiError::from_body_rejection)?;
    let req: api::CompletionRequest = api::parse(&body)?;
    s.check_model(req.model.as_deref())?;
    let generation = req.sampling.generation()?;
    let text = req.prompt.text()?.to_string();
    let prompt = off_runtime(&s, move |s| Ok(s.tok.encode(&text, true, false))).await?;
    s.check_length(&prompt)?;
    let reply = Reply {
        shape: Shape::Text,
        id: s.new_id("cmpl"),
        model: s.model_id.clone(),
        created: now_s(),
        include_usage: req.stream_options.is_some_and(|o| o.include_usage),
    };
    let rx = s.submit(prompt, generation)?;
    Ok(if req.stream {
        stream(reply, rx)
    } else {
        collect(reply, rx).await
    })
}
