//! `ingot serve` as a process: it binds 127.0.0.1 (here on a free port), says where on stderr,
//! answers /health and a chat completion, and ends on SIGTERM. Every wait is bounded.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{http, Server, LIMIT};

#[cfg(unix)]
#[test]
fn serve_binds_localhost_and_answers() {
    let mut server = Server::start();
    let addr = server.addr.clone();

    let (status, body) = http(&addr, "GET", "/health", "");
    assert!(status.contains(" 200 "), "{status} {body}");
    let (status, body) = http(
        &addr,
        "POST",
        "/v1/chat/completions",
        r#"{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0}"#,
    );
    assert!(status.contains(" 200 "), "{status} {body}");
    assert!(body.contains("\"chat.completion\""), "{body}");

    // SIGTERM: a graceful stop.
    let child = &mut server.child;
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "serve exited with {status}");
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `ingot demo --serve` serves the trained demo model under its file name, at its own training
/// context (256, below serve's default 4096), and completes Rust.
#[cfg(unix)]
#[test]
fn demo_serves_the_trained_model() {
    let server = Server::demo();
    let (status, body) = http(&server.addr, "GET", "/v1/models", "");
    assert!(status.contains(" 200 "), "{status} {body}");
    assert!(body.contains("\"trained-rust-std-q8_0-r"), "{body}");
    let (status, body) = http(
        &server.addr,
        "POST",
        "/v1/completions",
        r#"{"prompt":"pub fn main() {","max_tokens":24,"temperature":0}"#,
    );
    assert!(status.contains(" 200 "), "{status} {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
    let text = v["choices"][0]["text"].as_str().expect("text");
    // Greedy text of a model trained on Rust: some of Rust's punctuation within 24 tokens.
    assert!(
        text.chars().any(|c| "{}();:&".contains(c)),
        "not Rust-like: {text:?}"
    );
    // A prompt that leaves no room in the 256-token context is refused: the context is the model's.
    let long = "fn f() {} ".repeat(200);
    let (status, body) = http(
        &server.addr,
        "POST",
        "/v1/completions",
        &serde_json::json!({ "prompt": long, "max_tokens": 4 }).to_string(),
    );
    assert!(status.contains(" 400 "), "{status} {body}");
    assert!(body.contains("256"), "{body}");
}
