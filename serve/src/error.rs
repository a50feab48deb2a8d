//! Errors: [`ServeError`] for starting the server, [`ApiError`] for one request (an OpenAI-style
//! JSON body `{"error":{"message","type","code"}}` with its HTTP status).

use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::response::{ErrorBody, ErrorDetail};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("reading {path}: {source}")]
    Gguf {
        path: String,
        #[source]
        source: Box<ingot_gguf::GgufError>,
    },
    #[error("model config: {0}")]
    Config(#[source] Box<ingot_model::ModelError>),
    #[error("tokenizer: {0}")]
    Tokenizer(#[source] Box<ingot_tokenizer::TokenizerError>),
    #[error(transparent)]
    Engine(Box<ingot_engine::EngineError>),
    #[error("{0}")]
    Options(String),
    #[error("the decoder thread: {0}")]
    Worker(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<ingot_engine::EngineError> for ServeError {
    fn from(e: ingot_engine::EngineError) -> Self {
        ServeError::Engine(Box::new(e))
    }
}

/// A failed request: the status and the OpenAI-style error body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub code: &'static str,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            message: message.into(),
            kind,
            code,
        }
    }

    /// 400: the request is malformed or asks for something impossible.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            code,
            message,
        )
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            code,
            message,
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            "missing or invalid API key: send `Authorization: Bearer <key>`",
        )
    }

    pub fn queue_full(bound: usize) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "queue_full",
            format!("the server is busy: {bound} requests are already waiting; retry later"),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            message,
        )
    }

    /// The JSON body (also what a stream sends as its last event when generation fails midway).
    pub fn body(&self) -> ErrorBody<'_> {
        ErrorBody {
            error: ErrorDetail {
                message: &self.message,
                kind: self.kind,
                code: self.code,
            },
        }
    }

    /// A body that could not be read: over the size limit (413) or broken (400).
    pub fn from_body_rejection(r: BytesRejection) -> Self {
        let status = r.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            Self::new(
                status,
                "invalid_request_error",
                "request_too_large",
                "the request body is over the size limit",
            )
        } else {
            Self::new(
                status,
                "invalid_request_error",
                "invalid_body",
                r.body_text(),
            )
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}
