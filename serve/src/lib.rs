//! `ingot serve`: an OpenAI-compatible HTTP server over one decoder.
//!
//! Endpoints: `POST /v1/chat/completions` and `POST /v1/completions` (JSON, or server-sent events
//! with `"stream": true`, OpenAI's chunk format ending with `data: [DONE]`), `GET /v1/models`, `GET
//! /health`, `GET /metrics` (Prometheus text), and a chat page at `GET /` (`chat.html`, streaming
//! from `/v1/chat/completions`; `/?prompt=TEXT` sends TEXT on load). The `/v1` routes also answer
//! without the prefix, as llama-server's do.
//!
//! One thread owns the decoder ([`worker`]); requests wait in a bounded FIFO queue and get 429
//! beyond it. A client that disconnects stops its generation at the next token. Errors are
//! OpenAI-style JSON bodies ([`ApiError`]). The server never reads a path from a request: the model
//! is fixed at start.
//!
//! Hostile clients and pages: requests must carry a loopback `Host` (or one of `allowed_hosts`),
//! POST bodies must be JSON, the key (when set) is checked before routing, headers and bodies must
//! arrive within their timeouts, and shutdown waits [`SHUTDOWN_GRACE`] at most (see
//! [`Service::router`] and [`serve_connections`]).
//!
//! Files by concern: `options` (what to serve, bounds), `service` (loading the model, the shared
//! state), `server` (sockets, timeouts, shutdown), `routes` (the router and the small handlers),
//! `completions` (the two completion endpoints), `reply` (whole and streamed answers), [`response`]
//! (every JSON body as a type), `guard` and `body` (what a request must pass first), [`worker`]
//! (the decoder thread).

pub mod api;
mod body;
mod completions;
pub mod error;
mod guard;
pub mod metrics;
mod options;
mod reply;
pub mod response;
mod routes;
mod server;
mod service;
mod tokenize;
pub mod worker;

pub use error::{ApiError, ServeError};
pub use options::{
    ServeOptions, DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY, MAX_QUEUE, PROMPT_CACHE_MLA_FORM,
};
pub use server::{serve_blocking, serve_connections, DEFAULT_HEADER_TIMEOUT, SHUTDOWN_GRACE};
pub use service::{load, Service};
