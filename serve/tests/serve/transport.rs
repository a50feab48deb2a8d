//! The connection's limits: a declared length over the body limit refused before the body, a
//! half-sent body answered 408, half-sent headers closed after the header timeout, and a client
//! still sending a refused body still reading the answer.
use std::time::Duration;

use serde_json::Value;

use crate::support::*;
use crate::{raw, send_while_refused, RAW_LIMIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_length_over_the_limit_is_refused_before_the_body() {
    let mut opts = options();
    opts.max_body = 4096;
    let base = start(opts).await;
    let addr = base.trim_start_matches("http://").to_string();
    // Headers only: the answer must come without any of the declared gigabyte being sent.
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/json\r\nContent-Length: 1000000000"
    );
    let (status, _, body) = raw(&base, &head, b"").await;
    assert_eq!(status, 413, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error_code(&v), "request_too_large");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_body_is_answered_408_and_its_connection_given_back() {
    let mut opts = options();
    opts.body_timeout = Duration::from_secs(1);
    let base = start(opts).await;
    let addr = base.trim_start_matches("http://").to_string();
    // 100 bytes declared, 1 sent; the connection stays open on the client's side.
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/json\r\nContent-Length: 100"
    );
    let (status, _, body) = raw(&base, &head, b"{").await;
    assert_eq!(status, 408, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error_code(&v), "request_timeout");
    // Still serving.
    let (status, v) = post(&base, "/v1/chat/completions", &chat_body("hi", 2)).await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_headers_lose_their_connection_after_the_header_timeout() {
    let (router, listener) = load_and_bind(options()).await;
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(ingot_serve::serve_connections(
        listener,
        router,
        Duration::from_secs(1),
        async move {
            let _ = stop_rx.await;
        },
    ));
    // Headers never finished, or never started (an idle connection): the server closes the
    // connection instead of waiting for the rest; many such clients cannot hold connections
    // indefinitely.
    let clients: Vec<_> = (0..50)
        .map(|i| {
            let base = base.clone();
            tokio::spawn(async move {
                let addr = base.trim_start_matches("http://").to_string();
                tokio::task::spawn_blocking(move || {
                    use std::io::{Read, Write};
                    let mut s = std::net::TcpStream::connect(&addr).expect("connect");
                    s.set_read_timeout(Some(RAW_LIMIT)).unwrap();
                    if i % 2 == 0 {
                        s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1")
                            .unwrap();
                    }
                    let mut out = Vec::new();
                    s.read_to_end(&mut out)
                        .map(|_| ())
                        .map_err(|e| format!("still open after {RAW_LIMIT:?}: {e}"))
                })
                .await
                .expect("join")
            })
        })
        .collect();
    for c in clients {
        c.await.expect("join").expect("the connection was closed");
    }
    // Still serving, and it stops when told, within its grace.
    let (status, v) = post(&base, "/v1/chat/completions", &chat_body("hi", 2)).await;
    assert_eq!(status, 200, "{v}");
    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect("stopped within its grace")
        .expect("join");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_still_sending_a_refused_body_gets_the_answer() {
    let mut opts = options();
    opts.max_body = 64 << 10;
    opts.api_key = Some("sekret".into());
    let base = start(opts).await;
    let addr = base.trim_start_matches("http://").to_string();
    let big = format!(
        r#"{{"messages": [{{"role": "user", "content": "{}"}}]}}"#,
        "a".repeat(2 << 20)
    )
    .into_bytes();
    let post = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer sekret"
    );

    // Declared over the limit: refused on the headers.
    let head = format!("{post}\r\nContent-Length: {}", big.len());
    let (status, body) = send_while_refused(&base, &head, big.clone()).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(
        error_code(&serde_json::from_str(&body).unwrap()),
        "request_too_large"
    );

    // Chunked, so over the limit only once read.
    let mut chunked = Vec::new();
    for part in big.chunks(32 << 10) {
        chunked.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        chunked.extend_from_slice(part);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let head = format!("{post}\r\nTransfer-Encoding: chunked");
    let (status, body) = send_while_refused(&base, &head, chunked).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(
        error_code(&serde_json::from_str(&body).unwrap()),
        "request_too_large"
    );

    // Without the key, a body within the limit.
    let small = vec![b' '; 60 << 10];
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}",
        small.len()
    );
    let (status, body) = send_while_refused(&base, &head, small).await;
    assert_eq!(status, 401, "{body}");
}
