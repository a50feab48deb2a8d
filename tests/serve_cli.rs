//! `ingot serve` as a process: it binds 127.0.0.1 (here on a free port), says where on stderr, answers
//! /health and a chat completion, and ends on SIGTERM. Every wait is bounded.

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
