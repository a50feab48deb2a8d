//! `ingot serve --draft mtp` as a user runs it: the trained model (whose NextN/MTP block drafts
//! well) served with drafts answers a greedy completion with the text it gives without them, plain
//! and streamed, and counts its drafts in `/metrics`; a model without a NextN/MTP block is refused
//! before the server listens, naming the flag and the reason. Every wait is bounded.

mod support;

use std::process::Command;

use support::{http, Server, EXE, LIMIT};

const REQUEST: &str = r#"{"prompt":"pub fn main() {","max_tokens":40,"temperature":0}"#;

/// The completion's text of a greedy `/v1/completions` request.
fn completion(addr: &str) -> String {
    let (status, body) = http(addr, "POST", "/v1/completions", REQUEST);
    assert!(status.contains(" 200 "), "{status} {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
    v["choices"][0]["text"].as_str().expect("text").to_string()
}

/// The concatenated `text` deltas of the same request streamed (server-sent events).
fn streamed(addr: &str) -> String {
    let body = REQUEST.replace("\"temperature\":0", "\"temperature\":0,\"stream\":true");
    let (status, body) = http(addr, "POST", "/v1/completions", &body);
    assert!(status.contains(" 200 "), "{status} {body}");
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| {
            let v: serde_json::Value = serde_json::from_str(d).expect("JSON event");
            v["choices"][0]["text"].as_str().unwrap_or("").to_string()
        })
        .collect()
}

#[cfg(unix)]
#[test]
fn served_drafts_change_no_greedy_text() {
    let model = ingot_testdata::golden_model("trained-rust-std");
    let common = ["--backend", "cpu", "--ctx", "256"];
    let plain = Server::serve(&model, &common);
    let want = completion(&plain.addr);
    assert!(!want.is_empty());
    for k in ["1", "3"] {
        let args = [&common[..], &["--draft", "mtp", "--draft-max", k]].concat();
        let drafted = Server::serve(&model, &args);
        assert_eq!(completion(&drafted.addr), want, "--draft-max {k}");
        assert_eq!(streamed(&drafted.addr), want, "--draft-max {k}, streamed");
        let (drafts, accepted) = (
            metric(&drafted.addr, "ingot_drafts_total"),
            metric(&drafted.addr, "ingot_drafts_accepted_total"),
        );
        assert!(drafts > 0 && accepted <= drafts, "{accepted} of {drafts}");
    }
    assert_eq!(metric(&plain.addr, "ingot_drafts_total"), 0);
}

/// A counter of `GET /metrics`.
fn metric(addr: &str, name: &str) -> u64 {
    let (status, body) = http(addr, "GET", "/metrics", "");
    assert!(status.contains(" 200 "), "{status} {body}");
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in {body}"))
        .parse()
        .expect("an integer counter")
}

#[cfg(unix)]
#[test]
fn serve_refuses_drafts_without_an_mtp_block() {
    let model = ingot_testdata::golden_model("tiny-mla-f32");
    let mut child = Command::new(EXE)
        .args([
            "serve",
            "--port",
            "0",
            "--backend",
            "cpu",
            "--draft",
            "mtp",
            "-m",
        ])
        .arg(&model)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start ingot serve");
    let deadline = std::time::Instant::now() + LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve --draft mtp on a model without the block did not exit");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(err.contains("--draft mtp"), "{err}");
    assert!(err.contains("no NextN/MTP block"), "{err}");
    assert!(!err.contains("listening on"), "{err}");
}
