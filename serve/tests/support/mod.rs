//! What the server's test binaries share: the tiny model, a server on 127.0.0.1, a client and the
//! OpenAI error and metric readers. Each binary uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use ingot_engine::BackendKind;
use ingot_serve::ServeOptions;
use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};
use serde_json::{json, Value};

pub const CTX: usize = 256;
/// No single request in these tests may take longer.
pub const LIMIT: Duration = Duration::from_secs(120);

/// The tiny synthetic model, made once per test binary.
pub fn model() -> &'static Path {
    static MODEL: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &MODEL
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("tiny.gguf");
            let opts = SynthOptions {
                preset: Preset::Tiny,
                layout: Layout::Mla,
                mix: QuantMix::Q4KM,
                seed: 42,
            };
            synthesize(&opts, &path, false).expect("synthesize the tiny model");
            (dir, path)
        })
        .1
}

pub fn options() -> ServeOptions {
    ServeOptions {
        backend: BackendKind::Cpu,
        ctx: Some(CTX),
        queue: 4,
        ..ServeOptions::new(model())
    }
}

/// The server's routes for `opts` and a listener on 127.0.0.1, port 0.
pub async fn load_and_bind(opts: ServeOptions) -> (axum::Router, tokio::net::TcpListener) {
    let max_body = opts.max_body;
    let service = tokio::task::spawn_blocking(move || ingot_serve::load(&opts))
        .await
        .expect("join")
        .expect("load the model");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    (service.router(max_body), listener)
}

/// Starts a server on 127.0.0.1, port 0; returns its base URL.
pub async fn start(opts: ServeOptions) -> String {
    let (router, listener) = load_and_bind(opts).await;
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    format!("http://{addr}")
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(LIMIT)
        .build()
        .expect("client")
}

pub async fn post(base: &str, path: &str, body: &Value) -> (u16, Value) {
    let resp = client()
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .await
        .expect("send");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, v)
}

pub async fn post_raw(base: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let resp = client()
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("send");
    let status = resp.status().as_u16();
    let v = resp.json().await.expect("JSON error body");
    (status, v)
}

pub fn chat_body(prompt: &str, max_tokens: usize) -> Value {
    json!({
        "model": "tiny",
        "messages": [{ "role": "user", "content": prompt }],
        "temperature": 0,
        "max_tokens": max_tokens,
        "seed": 0,
    })
}

/// Asserts an OpenAI-style error body and returns its code.
pub fn error_code(v: &Value) -> String {
    let e = &v["error"];
    assert!(e["message"].is_string(), "no error.message in {v}");
    assert!(e["type"].is_string(), "no error.type in {v}");
    e["code"].as_str().expect("error.code").to_string()
}

pub async fn metric(base: &str, name: &str) -> f64 {
    let text = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .parse()
        .expect("a number")
}
