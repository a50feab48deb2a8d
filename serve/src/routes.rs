//! The routes and their layers, and the small handlers: the chat page, health, metrics, the model
//! list and the 404/405 answers. The completion handlers are in [`crate::completions`].

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::body::{declared_length, read_body};
use crate::completions::{chat_completions, completions};
use crate::guard::{check_host, require_key};
use crate::response::{Health, HealthStatus, ModelCard, ModelList, ModelMeta, Object};
use crate::service::{AppState, Service};
use crate::ApiError;

impl Service {
    /// Every route, with (outermost first) the per-status counter, the `Host` allow-list, the
    /// declared body length check, the API key check, the body read (bounded in time and size) and
    /// the body limit. The key is checked before routing, so without it every path but the chat
    /// page and `/health` is 401, never a 404 or 405 that maps the routes.
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

/// The chat page: one static file with its script inline, no external assets. It carries no secret,
/// so it is served without the API key (its requests send the key the user types in). The CSP lets
/// it talk only to this server.
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
            // Not framed by another page (clickjacking); frame-ancestors says the same to newer
            // browsers.
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
    Json(Health {
        status: HealthStatus::Ok,
    })
    .into_response()
}

async fn metrics_text(State(s): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
        .into_response()
}

async fn models(State(s): State<Arc<AppState>>) -> Json<ModelList> {
    Json(ModelList {
        object: Object::List,
        data: vec![ModelCard {
            id: s.model_id.clone(),
            object: Object::Model,
            created: s.created,
            owned_by: "ingot",
            meta: ModelMeta {
                n_ctx: s.ctx,
                backend: s.backend.name(),
            },
        }],
    })
}
