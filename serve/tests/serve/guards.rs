//! What a request must pass before its route: the API key (checked before routing, any case of
//! `Bearer`), the `Host` allow-list, JSON-only POST bodies; and the chat page, served without the
//! key.
use serde_json::Value;

use crate::support::*;
use crate::{raw, EMPTY_CHAT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_is_required_when_set() {
    let mut opts = options();
    opts.api_key = Some("sekret".into());
    let base = start(opts).await;
    let url = format!("{base}/v1/chat/completions");
    let body = chat_body("hi", 2);

    let resp = client().post(&url).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(error_code(&resp.json().await.unwrap()), "invalid_api_key");
    let resp = client()
        .post(&url)
        .bearer_auth("wrong")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let resp = client()
        .get(format!("{base}/v1/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);

    let resp = client()
        .post(&url)
        .bearer_auth("sekret")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = client().get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_page_is_html_that_streams_from_chat_completions() {
    // Served without the key even when one is set: the page holds no secret, its requests send the
    // key.
    let mut opts = options();
    opts.api_key = Some("sekret".into());
    let base = start(opts).await;
    let resp = client().get(format!("{base}/")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        header("content-type").starts_with("text/html"),
        "{:?}",
        resp.headers()
    );
    // No external assets: the policy allows requests to this server only.
    let csp = header("content-security-policy");
    assert!(
        csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    // The page may not be framed by another (clickjacking).
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(header("x-frame-options"), "DENY");
    let page = resp.text().await.unwrap();
    assert!(page.contains("/v1/chat/completions"), "{page}");
    assert!(page.contains("stream: true"), "the page asks for a stream");
    assert!(page.contains("get(\"prompt\")"), "the page reads ?prompt=");
    for external in [
        "src=\"http",
        "href=\"http",
        "src=\"//",
        "href=\"//",
        "@import",
    ] {
        assert!(!page.contains(external), "external asset {external:?}");
    }
    // Another path is still a JSON 404, once the key is given.
    let resp = client()
        .get(format!("{base}/nope"))
        .bearer_auth("sekret")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_headers_outside_the_allow_list_are_refused() {
    let mut opts = options();
    opts.allowed_hosts = vec!["Ingot.Example".into()];
    let base = start(opts).await;
    let port = base.rsplit(':').next().unwrap().to_string();
    let post = |host: String| {
        let base = base.clone();
        async move {
            let head = format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}",
                EMPTY_CHAT.len()
            );
            raw(&base, &head, EMPTY_CHAT.as_bytes()).await
        }
    };
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "LOCALHOST".into(),
        format!("[::1]:{port}"),
        "ingot.example:443".into(),
    ] {
        let (status, _, body) = post(host.clone()).await;
        assert_eq!(status, 400, "{host}: {body}");
    }
    // A DNS-rebinding page's own name, and names that only look like loopback ones.
    for host in [
        "attacker.example".to_string(),
        format!("attacker.example:{port}"),
        "localhost.attacker.example".into(),
        "127.0.0.1.nip.io".into(),
    ] {
        let (status, _, body) = post(host.clone()).await;
        assert_eq!(status, 403, "{host}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error_code(&v), "host_not_allowed");
        assert!(body.contains("--allowed-host"), "{body}");
    }
    // The health check too: a rebinding page learns nothing.
    let (status, _, _) = raw(&base, "GET /health HTTP/1.1\r\nHost: attacker.example", b"").await;
    assert_eq!(status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_bodies_must_be_declared_json() {
    let base = start(options()).await;
    let addr = base.trim_start_matches("http://").to_string();
    for (path, content_type) in [
        ("/v1/chat/completions", Some("text/plain")),
        (
            "/v1/chat/completions",
            Some("application/x-www-form-urlencoded"),
        ),
        (
            "/v1/chat/completions",
            Some("multipart/form-data; boundary=x"),
        ),
        ("/v1/completions", Some("text/plain;charset=UTF-8")),
        ("/v1/chat/completions", None),
    ] {
        let ct = content_type.map_or(String::new(), |c| format!("\r\nContent-Type: {c}"));
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}{ct}\r\nContent-Length: {}",
            EMPTY_CHAT.len()
        );
        let (status, _, body) = raw(&base, &head, EMPTY_CHAT.as_bytes()).await;
        assert_eq!(status, 415, "{content_type:?}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error_code(&v), "unsupported_media_type");
    }
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: Application/JSON; charset=utf-8\r\nContent-Length: {}",
        EMPTY_CHAT.len()
    );
    let (status, _, body) = raw(&base, &head, EMPTY_CHAT.as_bytes()).await;
    assert_eq!(status, 400, "JSON with a charset is JSON: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_checked_before_routing_with_any_case_of_bearer() {
    let mut opts = options();
    opts.api_key = Some("sekret".into());
    let base = start(opts).await;
    let addr = base.trim_start_matches("http://").to_string();
    // Without the key: 401 with the scheme to use, whatever the path or method (no 404/405 route
    // map).
    for (method, path) in [
        ("GET", "/nope"),
        ("GET", "/v1/chat/completions"),
        ("POST", "/v1/models"),
        ("POST", "/"),
        ("DELETE", "/health"),
    ] {
        let head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0");
        let (status, headers, body) = raw(&base, &head, b"").await;
        assert_eq!(status, 401, "{method} {path}: {body}");
        assert!(
            headers.contains("\r\nwww-authenticate: bearer"),
            "{method} {path}: {headers}"
        );
    }
    // The scheme is case-insensitive (RFC 7235); the key itself is not.
    for (auth, want) in [
        ("bearer sekret", 404),
        ("BEARER sekret", 404),
        ("Bearer  sekret", 404),
        ("Bearer SEKRET", 401),
        ("Basic sekret", 401),
    ] {
        let head = format!("GET /nope HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {auth}");
        let (status, _, body) = raw(&base, &head, b"").await;
        assert_eq!(status, want, "{auth:?}: {body}");
    }
    let head = format!(
        "GET /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: bearer sekret"
    );
    let (status, _, body) = raw(&base, &head, b"").await;
    assert_eq!(status, 405, "{body}");
}
