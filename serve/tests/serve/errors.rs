//! OpenAI-style error bodies for bad requests (the server keeps serving), 429 from a full queue,
//! and parameters refused rather than ignored.
use serde_json::{json, Value};

use crate::support::*;

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
