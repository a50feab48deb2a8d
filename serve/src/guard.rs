//! The gates every request passes before its route: the API key (when the server has one) and the
//! `Host` allow-list. Both refuse with an OpenAI-style error body and drop the rest of the request.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::body::refuse_request;
use crate::error::ApiError;
use crate::service::AppState;

/// Compares in time independent of where the strings differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The credentials of `Authorization: Bearer <token>`; the scheme is case-insensitive
/// (RFC 7235 §2.1).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Routes served without the key: the chat page (it carries no secret; its requests send the key
/// the user types) and the health check.
fn is_public(req: &Request) -> bool {
    let read = matches!(
        *req.method(),
        axum::http::Method::GET | axum::http::Method::HEAD
    );
    read && matches!(req.uri().path(), "/" | "/health")
}

pub(crate) async fn require_key(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    req: Request,
    next: Next,
) -> Response {
    if let Some(key) = &s.api_key {
        if !is_public(&req)
            && !bearer_token(&headers).is_some_and(|g| same_secret(g.as_bytes(), key.as_bytes()))
        {
            let mut resp = ApiError::unauthorized().into_response();
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return refuse_request(resp, req);
        }
    }
    next.run(req).await
}

/// The name of a `Host` header value, without its port, lower-cased: `[::1]:8080` -> `[::1]`,
/// `LocalHost:80` -> `localhost`.
fn host_name(value: &str) -> String {
    let value = value.trim();
    let name = if value.starts_with('[') {
        value.find(']').map_or(value, |end| &value[..=end])
    } else {
        match value.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => value,
        }
    };
    name.to_ascii_lowercase()
}

/// Whether a request's `Host` may reach this server: a loopback name, one of `--allowed-host` (or
/// `*`), or no `Host` at all. The list defeats DNS rebinding, where a web page's own name resolves
/// to 127.0.0.1 and the browser sends that name; browsers always send `Host`, so a request without
/// one is not a page's.
pub(crate) fn host_allowed(s: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::HOST) else {
        return Ok(());
    };
    let name = value.to_str().map(host_name).unwrap_or_default();
    let loopback = matches!(name.as_str(), "localhost" | "127.0.0.1" | "[::1]");
    if loopback || s.allowed_hosts.iter().any(|h| h == "*" || *h == name) {
        return Ok(());
    }
    Err(ApiError::new(
        axum::http::StatusCode::FORBIDDEN,
        "invalid_request_error",
        "host_not_allowed",
        format!(
            "Host {name:?} is not a name of this server (loopback names only by default); \
             start it with --allowed-host {name} to allow it"
        ),
    ))
}

pub(crate) async fn check_host(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    req: Request,
    next: Next,
) -> Response {
    match host_allowed(&s, &headers) {
        Ok(()) => next.run(req).await,
        Err(e) => refuse_request(e.into_response(), req),
    }
}
