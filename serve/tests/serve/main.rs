//! The server end to end over HTTP on 127.0.0.1, with the tiny synthetic model on the CPU backend:
//! responses, streaming, greedy output equal to `ingot run --temp 0`'s decode path, every error
//! status, a full queue, and a client that leaves mid-stream. Every wait is bounded by a timeout.
//!
//! By concern: `completions` (whole answers, the prompt cache), `streaming` (server-sent events,
//! stop strings, clients that leave), `errors` (OpenAI error bodies, a full queue), `guards` (key,
//! `Host`, content type, the chat page), `transport` (body size and time limits, header timeout,
//! refused bodies). This file holds what they share.

#[path = "../support/mod.rs"]
mod support;

mod completions;
mod errors;
mod guards;
mod streaming;
mod transport;

use std::time::Duration;

use ingot_engine::BackendKind;
use ingot_gguf::GgufFile;
use ingot_model::{Sampler, SamplerConfig};
use ingot_tokenizer::{ChatRequest, ChatTemplate, Role, Tokenizer};
use support::*;

/// What `ingot run --chat --temp 0 -n N -p PROMPT --backend cpu` prints, from the same library
/// calls as src/cmd/run.rs: the chat template, the tokenizer, `ingot_engine::OpenOptions`, prefill,
/// greedy sampling, the streaming detokenizer.
fn cli_greedy(prompt: &str, n_predict: usize) -> (String, usize) {
    let file = GgufFile::open(model()).expect("open");
    let tok = Tokenizer::from_gguf(file.header()).expect("tokenizer");
    let template = ChatTemplate::from_gguf(file.header());
    let (bos, eos) = tok.chat_specials();
    let text = template.render(&ChatRequest {
        bos,
        eos: &eos,
        system: None,
        turns: &[(Role::User, prompt)],
        add_generation_prompt: true,
    });
    let prompt = tok.encode(&text, true, true);
    let mut dec = ingot_engine::OpenOptions::new(BackendKind::Cpu, CTX)
        .open(&file)
        .expect("engine")
        .decoder;
    // Temperature 0: the seed plays no part.
    let mut sampler = Sampler::new(SamplerConfig::greedy());
    let mut history = prompt.clone();
    let mut stream = tok.stream_decoder();
    let mut out = String::new();
    let logits = dec.prefill(&prompt, 0).expect("prefill");
    let mut next = sampler.sample(logits.last().expect("logits"), &history);
    let budget = n_predict.min(CTX - prompt.len());
    let mut generated = 0;
    while generated < budget {
        generated += 1;
        history.push(next);
        if tok.is_eog(next) {
            break;
        }
        if let Some(t) = stream.push(next) {
            out.push_str(&t);
        }
        if generated == budget {
            break;
        }
        let logits = dec
            .decode(next, prompt.len() + generated - 1)
            .expect("decode");
        next = sampler.sample(logits, &history);
    }
    out.push_str(&stream.flush());
    (out, generated)
}

/// The `data:` payloads of a server-sent event stream.
fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            e.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|l| l.strip_prefix(' ').unwrap_or(l))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// Bound of a raw exchange: each one is answered before any generation (an error status, or a 404).
const RAW_LIMIT: Duration = Duration::from_secs(30);

/// One raw HTTP/1.1 exchange on a fresh connection: `head` is the request line and headers (without
/// the blank line), `body` what follows. Returns the status, the response headers (lower-cased) and
/// the body. Bounded by [`RAW_LIMIT`]; the connection is closed by the request's `Connection:
/// close`.
async fn raw(base: &str, head: &str, body: &[u8]) -> (u16, String, String) {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://").to_string();
    let mut req = format!("{head}\r\nConnection: close\r\n\r\n").into_bytes();
    req.extend_from_slice(body);
    let what = head.to_string();
    let text = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(RAW_LIMIT)).unwrap();
        s.write_all(&req).expect("send");
        let mut out = Vec::new();
        s.read_to_end(&mut out)
            .unwrap_or_else(|e| panic!("no answer within {RAW_LIMIT:?} to {what:?}: {e}"));
        String::from_utf8_lossy(&out).into_owned()
    })
    .await
    .expect("join");
    let (status, head, body) = split_response(&text);
    (status, head.to_ascii_lowercase(), body.to_string())
}

/// A raw HTTP/1.1 response's status, headers and body.
fn split_response(text: &str) -> (u16, &str, &str) {
    let (head, body) = text.split_once("\r\n\r\n").expect("headers end");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    (status, head, body)
}

/// A JSON chat request the server refuses with 400 before it reaches the decoder (no messages):
/// what the header checks are tested with, so that a passing check shows as 400 and costs no
/// generation.
const EMPTY_CHAT: &str = r#"{"messages": []}"#;

/// Sends `head` and then `body` in two parts, pausing between them so the server answers before the
/// body has ended, and reads the answer. Panics when a write fails: the server must read a refused
/// body to its end (up to its linger cap) rather than reset a connection the client is still
/// writing to.
async fn send_while_refused(base: &str, head: &str, body: Vec<u8>) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://").to_string();
    let head = format!("{head}\r\nConnection: close\r\n\r\n");
    let what = head.clone();
    let text = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(RAW_LIMIT)).unwrap();
        s.write_all(head.as_bytes()).expect("send the headers");
        let (first, rest) = body.split_at(body.len().min(16 << 10));
        s.write_all(first).expect("send the first part");
        std::thread::sleep(Duration::from_millis(300));
        for part in rest.chunks(64 << 10) {
            s.write_all(part)
                .unwrap_or_else(|e| panic!("the rest of the body of {what:?}: {e}"));
        }
        let mut out = Vec::new();
        s.read_to_end(&mut out)
            .unwrap_or_else(|e| panic!("no answer to {what:?}: {e}"));
        String::from_utf8_lossy(&out).into_owned()
    })
    .await
    .expect("join");
    let (status, _, body) = split_response(&text);
    (status, body.to_string())
}
