//! The server end to end over HTTP on 127.0.0.1, with the tiny synthetic model on the CPU backend: responses,
//! streaming, greedy output equal to `ingot run --temp 0`'s decode path, every error status, a full queue,
//! and a client that leaves mid-stream. Every wait is bounded by a timeout.

mod support;

use std::time::Duration;

use ingot_engine::BackendKind;
use ingot_gguf::GgufFile;
use ingot_model::{Sampler, SamplerConfig};
use ingot_tokenizer::{ChatRequest, ChatTemplate, Role, Tokenizer};
use serde_json::{json, Value};
use support::*;

/// What `ingot run --chat --temp 0 -n N -p PROMPT --backend cpu` prints, from the same library calls as
/// src/cmd/run.rs: the chat template, the tokenizer, `ingot_engine::OpenOptions`, prefill, greedy sampling, the
/// streaming detokenizer.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completion_has_usage_and_equals_the_cli_greedy_output() {
    let base = start(options()).await;
    let (status, v) = post(&base, "/v1/chat/completions", &chat_body("Hello there", 12)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "tiny");
    let choice = &v["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    let text = choice["message"]["content"].as_str().expect("content");
    let (want, generated) = cli_greedy("Hello there", 12);
    assert_eq!(text, want, "server and `ingot run --temp 0` disagree");
    let usage = &v["usage"];
    assert_eq!(usage["completion_tokens"], generated);
    let p = usage["prompt_tokens"].as_u64().expect("prompt_tokens");
    assert!(p > 0);
    assert_eq!(usage["total_tokens"].as_u64(), Some(p + generated as u64));
    let finish = choice["finish_reason"].as_str().expect("finish_reason");
    assert!(finish == "length" || finish == "stop", "{finish}");

    // A second conversation sharing the template's prefix: the cache's common prefix is reused, and the
    // output is still exactly a fresh decoder's.
    let (status, v) = post(&base, "/v1/chat/completions", &chat_body("Hello world", 12)).await;
    assert_eq!(status, 200, "{v}");
    let (want, _) = cli_greedy("Hello world", 12);
    assert_eq!(v["choices"][0]["message"]["content"], want.as_str());
    assert!(metric(&base, "ingot_prompt_tokens_reused_total").await > 0.0);
    assert!(metric(&base, "ingot_tokens_generated_total").await > 0.0);
}

/// A follow-up turn (the first turn, its reply, a new message) prefills only what is new: the tokens reused
/// from the cache are at least the whole first prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_turn_reuses_the_previous_conversation() {
    let base = start(options()).await;
    let (status, v) = post(&base, "/v1/chat/completions", &chat_body("Hello there", 6)).await;
    assert_eq!(status, 200, "{v}");
    let first_prompt = v["usage"]["prompt_tokens"].as_u64().expect("prompt_tokens");
    let reply = v["choices"][0]["message"]["content"]
        .as_str()
        .expect("content")
        .to_string();
    let before = metric(&base, "ingot_prompt_tokens_reused_total").await;
    let body = json!({
        "model": "tiny",
        "messages": [
            { "role": "user", "content": "Hello there" },
            { "role": "assistant", "content": reply },
            { "role": "user", "content": "And then?" },
        ],
        "temperature": 0,
        "max_tokens": 6,
    });
    let (status, v) = post(&base, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{v}");
    let second_prompt = v["usage"]["prompt_tokens"].as_u64().expect("prompt_tokens");
    let reused = metric(&base, "ingot_prompt_tokens_reused_total").await - before;
    assert!(
        reused >= first_prompt as f64 && reused < second_prompt as f64,
        "turn 2 reused {reused} of its {second_prompt} prompt tokens; turn 1 had {first_prompt}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_chat_is_openai_chunks_ending_with_done() {
    let base = start(options()).await;
    let mut body = chat_body("Stream me", 10);
    body["stream"] = json!(true);
    body["stream_options"] = json!({ "include_usage": true });
    let resp = client()
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    let text = resp.text().await.expect("body");
    let data = sse_data(&text);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{text}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let mut content = String::new();
    let mut finish = None;
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        if let Some(choice) = c["choices"].get(0) {
            if let Some(t) = choice["delta"]["content"].as_str() {
                content.push_str(t);
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                finish = Some(f.to_string());
            }
        }
    }
    assert!(finish.is_some(), "no finish_reason in {text}");
    let usage = &chunks.last().unwrap()["usage"];
    let (want, generated) = cli_greedy("Stream me", 10);
    assert_eq!(content, want);
    assert_eq!(usage["completion_tokens"], generated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_models_health_and_metrics() {
    let base = start(options()).await;
    let (status, v) = post(
        &base,
        "/v1/completions",
        &json!({ "prompt": "The quick brown fox", "max_tokens": 5, "temperature": 0, "stop": ["\n\n"] }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["object"], "text_completion");
    assert!(v["choices"][0]["text"].is_string());
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() <= 5);

    let models: Value = client()
        .get(format!("{base}/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "tiny");
    let health = client().get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(metric(&base, "ingot_queue_depth").await, 0.0);
    assert!(metric(&base, "ingot_tokens_generated_total").await >= 1.0);
    assert!(metric(&base, "ingot_requests_total{status=\"200\"}").await >= 3.0);
    // A rate, never NaN or infinite (0 is possible: a job whose only token came from the prefill
    // decodes none).
    let rate = metric(&base, "ingot_tokens_per_second").await;
    assert!(rate.is_finite() && rate >= 0.0, "tokens/s {rate}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_openai_errors_and_the_server_keeps_serving() {
    let mut opts = options();
    opts.max_body = 1 << 20;
    let base = start(opts).await;

    let (status, v) = post_raw(&base, "{\"messages\": [").await;
    assert_eq!((status, error_code(&v).as_str()), (400, "invalid_json"));
    let (status, v) = post_raw(&base, r#"{"messages": "hi"}"#).await;
    assert_eq!((status, error_code(&v).as_str()), (400, "invalid_json"));
    let (status, v) = post_raw(
        &base,
        r#"{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}"#,
    )
    .await;
    assert_eq!((status, error_code(&v).as_str()), (400, "invalid_json"));
    let (status, v) = post_raw(
        &base,
        r#"{"messages": [{"role": "user", "content": "hi"}], "top_p": 7}"#,
    )
    .await;
    assert_eq!((status, error_code(&v).as_str()), (400, "invalid_value"));

    let long = "many words ".repeat(CTX);
    let (status, v) = post(&base, "/v1/chat/completions", &chat_body(&long, 4)).await;
    assert_eq!(
        (status, error_code(&v).as_str()),
        (400, "context_length_exceeded")
    );

    let mut body = chat_body("hi", 4);
    body["model"] = json!("gpt-4o");
    let (status, v) = post(&base, "/v1/chat/completions", &body).await;
    assert_eq!((status, error_code(&v).as_str()), (404, "model_not_found"));

    let huge = format!(
        r#"{{"messages": [{{"role": "user", "content": "{}"}}]}}"#,
        "a".repeat(2 << 20)
    );
    let (status, v) = post_raw(&base, huge).await;
    assert_eq!(
        (status, error_code(&v).as_str()),
        (413, "request_too_large")
    );

    let resp = client()
        .get(format!("{base}/nowhere"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(error_code(&resp.json().await.unwrap()), "not_found");
    let resp = client()
        .get(format!("{base}/v1/chat/completions"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(
        error_code(&resp.json().await.unwrap()),
        "method_not_allowed"
    );

    // Still serving.
    let (status, v) = post(&base, "/v1/chat/completions", &chat_body("hi", 3)).await;
    assert_eq!(status, 200, "{v}");
    assert!(metric(&base, "ingot_requests_total{status=\"400\"}").await >= 5.0);
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_clients_with_a_small_queue_are_all_answered() {
    let mut opts = options();
    opts.queue = 2;
    let base = start(opts).await;
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let base = base.clone();
            tokio::spawn(async move {
                let resp = client()
                    .post(format!("{base}/v1/chat/completions"))
                    .json(&chat_body(&format!("client {i}"), 8))
                    .send()
                    .await
                    .expect("send");
                let status = resp.status().as_u16();
                let v: Value = resp.json().await.expect("JSON");
                (status, v)
            })
        })
        .collect();
    let all = tokio::time::timeout(LIMIT, futures_util::future::join_all(tasks))
        .await
        .expect("every client is answered in time");
    let (mut ok, mut busy) = (0, 0);
    for r in all {
        let (status, v) = r.expect("client task");
        match status {
            200 => {
                assert!(v["choices"][0]["message"]["content"].is_string());
                ok += 1;
            }
            429 => {
                assert_eq!(error_code(&v), "queue_full");
                busy += 1;
            }
            other => panic!("status {other}: {v}"),
        }
    }
    assert_eq!(ok + busy, 32);
    assert!(ok >= 1, "nothing was served");
    eprintln!("32 clients, queue 2: {ok} served, {busy} told 429");
    assert_eq!(metric(&base, "ingot_queue_depth").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_stream_does_not_stall_the_next() {
    let mut opts = options();
    opts.ctx = Some(2048);
    let base = start(opts).await;
    let body = json!({
        "messages": [{ "role": "user", "content": "Tell me everything" }],
        "stream": true,
        "temperature": 1.0,
        "seed": 7,
    });
    let mut resp = client()
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 200);
    let first = tokio::time::timeout(LIMIT, resp.chunk())
        .await
        .expect("a first chunk in time")
        .expect("chunk");
    assert!(first.is_some());
    drop(resp);

    let next = tokio::time::timeout(
        LIMIT,
        post(&base, "/v1/chat/completions", &chat_body("next", 4)),
    )
    .await
    .expect("the next request is answered in time");
    assert_eq!(next.0, 200, "{}", next.1);
    // The abandoned generation was stopped, not run to the end of the context.
    let generated = metric(&base, "ingot_tokens_generated_total").await;
    assert_eq!(metric(&base, "ingot_requests_cancelled_total").await, 1.0);
    assert!(
        generated < 1000.0,
        "{generated} tokens generated: the abandoned stream ran on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_a_plain_request_cancels_it() {
    let mut opts = options();
    opts.ctx = Some(2048);
    let base = start(opts).await;
    let body = json!({
        "messages": [{ "role": "user", "content": "Tell me everything" }],
        "temperature": 0,
    });
    let gone = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap()
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await;
    assert!(gone.is_err(), "the whole context was generated in 300 ms");
    let next = tokio::time::timeout(
        LIMIT,
        post(&base, "/v1/chat/completions", &chat_body("next", 4)),
    )
    .await
    .expect("the next request is answered in time");
    assert_eq!(next.0, 200, "{}", next.1);
    assert_eq!(metric(&base, "ingot_requests_cancelled_total").await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_strings_cut_the_text_streamed_or_not() {
    let base = start(options()).await;
    let (want, _) = cli_greedy("Stop here", 16);
    let chars: Vec<char> = want.chars().collect();
    assert!(chars.len() >= 6, "too short a greedy text: {want:?}");
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let cut = &want[..want.find(&stop).unwrap()];

    let mut body = chat_body("Stop here", 16);
    body["stop"] = json!([stop, "never appears \u{1F600}"]);
    let (status, v) = post(&base, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], cut);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");

    body["stream"] = json!(true);
    let text = client()
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let data = sse_data(&text);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let mut content = String::new();
    for d in &data[..data.len() - 1] {
        let c: Value = serde_json::from_str(d).unwrap();
        if let Some(t) = c["choices"][0]["delta"]["content"].as_str() {
            content.push_str(t);
        }
    }
    assert_eq!(content, cut);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_text_completion_ends_with_done() {
    let base = start(options()).await;
    let resp = client()
        .post(format!("{base}/v1/completions"))
        .json(&json!({ "prompt": ["Once upon"], "max_tokens": 6, "stream": true, "seed": 1 }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let data = sse_data(&resp.text().await.unwrap());
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let last: Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
    assert_eq!(last["object"], "text_completion");
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    // At most one chunk per token (a token that ends inside a UTF-8 character sends nothing yet), the finish
    // chunk and [DONE].
    assert!((3..=6 + 2).contains(&data.len()), "{data:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_page_is_html_that_streams_from_chat_completions() {
    // Served without the key even when one is set: the page holds no secret, its requests send the key.
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

/// Bound of a raw exchange: each one is answered before any generation (an error status, or a 404).
const RAW_LIMIT: Duration = Duration::from_secs(30);

/// One raw HTTP/1.1 exchange on a fresh connection: `head` is the request line and headers (without the
/// blank line), `body` what follows. Returns the status, the response headers (lower-cased) and the body.
/// Bounded by [`RAW_LIMIT`]; the connection is closed by the request's `Connection: close`.
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

/// A JSON chat request the server refuses with 400 before it reaches the decoder (no messages): what the
/// header checks are tested with, so that a passing check shows as 400 and costs no generation.
const EMPTY_CHAT: &str = r#"{"messages": []}"#;

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
    // Without the key: 401 with the scheme to use, whatever the path or method (no 404/405 route map).
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logprobs_are_refused_until_supported() {
    let base = start(options()).await;
    for extra in [
        json!({ "logprobs": true }),
        json!({ "logprobs": true, "top_logprobs": 3 }),
        json!({ "top_logprobs": 2 }),
        json!({ "logprobs": 5 }),
    ] {
        let mut body = chat_body("hi", 2);
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, v) = post(&base, "/v1/chat/completions", &body).await;
        assert_eq!(
            (status, error_code(&v).as_str()),
            (400, "unsupported_parameter"),
            "{extra}"
        );
    }
    // `false` and 0 ask for nothing.
    let mut body = chat_body("hi", 2);
    body["logprobs"] = json!(false);
    let (status, v) = post(&base, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{v}");
}

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
    // Headers never finished, or never started (an idle connection): the server closes the connection
    // instead of waiting for the rest; many such clients cannot hold connections indefinitely.
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

/// The prompt cache changes no logit on the cpu backend: in the form the server prefills with while it reuses
/// prefixes, a prompt's last logits are the same bits whether it arrives whole on an empty cache or after a
/// prefix already in the cache, split anywhere. The default form (decompressed attention for long chunks)
/// would not keep that, which the last assertion shows, so the check can fail.
#[test]
fn a_reused_prefix_changes_no_logit() {
    use ingot_model::{CpuBackend, Decoder, MlaForm};
    let file = ingot_gguf::GgufFile::open(model()).expect("open");
    let vocab = file
        .header()
        .tensor("token_embd.weight")
        .expect("embedding")
        .ne[1] as u32;
    let prompt: Vec<u32> = (0..64u32).map(|i| (i * 37 + 11) % vocab).collect();
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    let last_logits = |form: MlaForm, split: usize| {
        let mut cpu = CpuBackend::load(&file, CTX).expect("load");
        cpu.set_mla_form(form);
        if split > 0 {
            cpu.prefill_last(&prompt[..split], 0).expect("prefix");
        }
        bits(cpu.prefill_last(&prompt[split..], split).expect("rest"))
    };
    let cold = last_logits(ingot_serve::PROMPT_CACHE_MLA_FORM, 0);
    for split in [1, 17, 48, 63] {
        assert!(
            cold == last_logits(ingot_serve::PROMPT_CACHE_MLA_FORM, split),
            "a prefix of {split} tokens in the cache changed the last logits"
        );
    }
    assert!(
        last_logits(MlaForm::Auto, 0) != last_logits(MlaForm::Auto, 63),
        "the default form agreed cold and warm too: this test no longer shows what the prompt-cache form buys"
    );
}

/// Sends `head` and then `body` in two parts, pausing between them so the server answers before the body
/// has ended, and reads the answer. Panics when a write fails: the server must read a refused body to its
/// end (up to its linger cap) rather than reset a connection the client is still writing to.
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
