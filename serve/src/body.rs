//! Request bodies at the edge: the declared length checked before reading, the body read within its
//! size and time limits, JSON required for POST bodies, and a refusal that drains what the client
//! is still sending so it reads the answer instead of a reset connection.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::service::AppState;
use crate::ApiError;

/// `response` with `Connection: close`: sent when the request's body was not read to its end, so
/// the connection cannot carry another request and a client must not reuse it from its pool.
pub(crate) fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// Most bytes of a refused request's body [`linger`] reads and discards.
pub(crate) const LINGER_BYTES: u64 = 64 << 20;
/// Longest [`linger`] reads a refused request's body.
pub(crate) const LINGER_TIME: Duration = Duration::from_secs(5);

/// `response` (closing the connection) to a request refused before its body was read, whose body is
/// then read and discarded in the background, up to [`LINGER_BYTES`] within [`LINGER_TIME`]. A
/// socket closed with unread input makes the kernel send a reset, and a client still writing its
/// body then loses the answer with the connection ("broken pipe" instead of the 413). Hyper keeps
/// the connection open while the body is being read, so the answer goes out first and the
/// connection closes when the body has ended. Not done for a client that sent `Expect:
/// 100-continue` (it sends no body after a final answer) or declared a body over the cap (that one
/// gets the reset).
pub(crate) fn refuse(response: Response, headers: &HeaderMap, body: axum::body::Body) -> Response {
    use http_body_util::BodyExt;
    let expects_continue = headers
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if !expects_continue && declared_length_of(headers).unwrap_or(0) <= LINGER_BYTES {
        tokio::spawn(async move {
            let mut body = body;
            let mut read = 0u64;
            let _ = tokio::time::timeout(LINGER_TIME, async {
                while read <= LINGER_BYTES {
                    match body.frame().await {
                        Some(Ok(frame)) => {
                            read += frame.data_ref().map_or(0, |d| d.len() as u64);
                        }
                        _ => break,
                    }
                }
            })
            .await;
        });
    }
    closing(response)
}

/// [`refuse`] for a whole request.
pub(crate) fn refuse_request(response: Response, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    refuse(response, &parts.headers, body)
}

/// The request's `Content-Length`, when it declares one that parses.
pub(crate) fn declared_length_of(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// 413 for a body over `max_body` bytes.
pub(crate) fn too_large(max_body: usize) -> Response {
    ApiError::new(
        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request_error",
        "request_too_large",
        format!("the request body is over the size limit of {max_body} bytes"),
    )
    .into_response()
}

/// 413 for a declared `Content-Length` over the limit, before any of the body is used (the body
/// limit alone would read up to the limit first, and wait for a body the client may never send).
pub(crate) async fn declared_length(
    State(max_body): State<usize>,
    req: Request,
    next: Next,
) -> Response {
    if declared_length_of(req.headers()).is_some_and(|n| n > max_body as u64) {
        return refuse_request(too_large(max_body), req);
    }
    next.run(req).await
}

/// The whole of `body` when it is at most `max` bytes; `None` as soon as it is over (what is left
/// stays in `body`, for [`refuse`]).
pub(crate) async fn read_at_most(
    body: &mut axum::body::Body,
    max: usize,
) -> Result<Option<Bytes>, axum::Error> {
    use http_body_util::BodyExt;
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            if bytes.len() + data.len() > max {
                return Ok(None);
            }
            bytes.extend_from_slice(data);
        }
    }
    Ok(Some(Bytes::from(bytes)))
}

/// Reads the whole body within the body timeout (408 after it, 413 over `max_body`) before the
/// handler runs, so that a client that stops sending mid-body gives its connection back.
pub(crate) async fn read_body(
    State((s, max_body)): State<(Arc<AppState>, usize)>,
    req: Request,
    next: Next,
) -> Response {
    let (parts, mut body) = req.into_parts();
    let bytes = match tokio::time::timeout(s.body_timeout, read_at_most(&mut body, max_body)).await
    {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => return refuse(too_large(max_body), &parts.headers, body),
        Ok(Err(e)) => {
            return ApiError::bad_request("invalid_body", format!("reading the body: {e}"))
                .into_response()
        }
        Err(_) => {
            return closing(
                ApiError::new(
                    axum::http::StatusCode::REQUEST_TIMEOUT,
                    "invalid_request_error",
                    "request_timeout",
                    format!(
                        "the request body did not arrive within {} s",
                        s.body_timeout.as_secs_f64()
                    ),
                )
                .into_response(),
            )
        }
    };
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// POST bodies must be JSON (`application/json`, parameters allowed): any other type is 415. A form
/// or text/plain POST is one a web page may send without a CORS preflight; refusing them keeps
/// pages of other origins from driving the API.
pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let mime = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim());
    if mime.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
        return Ok(());
    }
    Err(ApiError::new(
        axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "invalid_request_error",
        "unsupported_media_type",
        format!(
            "the body must be JSON with `Content-Type: application/json` (got {})",
            mime.map_or_else(|| "no Content-Type".to_string(), |m| format!("{m:?}"))
        ),
    ))
}
