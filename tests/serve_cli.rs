//! `ingot serve` as a process: it binds 127.0.0.1 (here on a free port), says where on stderr, answers
//! /health and a chat completion, and ends on SIGTERM. Every wait is bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_ingot");
const LIMIT: Duration = Duration::from_secs(60);

/// One HTTP/1.0 request; returns the status line and the body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(LIMIT)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("response");
    let (head, body) = out.split_once("\r\n\r\n").expect("headers end");
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[cfg(unix)]
#[test]
fn serve_binds_localhost_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    let synth = Command::new(EXE)
        .args([
            "synth", "--preset", "tiny", "--layout", "mla", "--quant", "q4_k_m", "--seed", "42",
            "-o",
        ])
        .arg(&model)
        .output()
        .expect("ingot synth");
    assert!(
        synth.status.success(),
        "{}",
        String::from_utf8_lossy(&synth.stderr)
    );

    let mut child = Command::new(EXE)
        .args([
            "serve",
            "--port",
            "0",
            "--ctx",
            "128",
            "--backend",
            "cpu",
            "-q",
            "-m",
        ])
        .arg(&model)
        .stderr(Stdio::piped())
        .spawn()
        .expect("ingot serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("listening on http://") {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    let addr = match rx.recv_timeout(LIMIT) {
        Ok(a) => a,
        Err(e) => {
            let _ = child.kill();
            panic!("no 'listening on' line: {e}");
        }
    };
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

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
