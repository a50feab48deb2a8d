//! Server-sent events: OpenAI chunks ending with `[DONE]`, stop strings cut alike streamed or not,
//! and clients that leave mid-stream or mid-request (their generation stops; the next request is
//! served).
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;
use crate::{cli_greedy, sse_data};

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
    // `ignore_eos`: the answer runs to the context (2048 tokens), past 300 ms, whatever the model's
    // text.
    let body = json!({
        "messages": [{ "role": "user", "content": "Tell me everything" }],
        "temperature": 0,
        "ignore_eos": true,
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
    // At most one chunk per token (a token that ends inside a UTF-8 character sends nothing yet),
    // the finish chunk and [DONE].
    assert!((3..=6 + 2).contains(&data.len()), "{data:?}");
}
