//! Whole completions: chat output equal to the CLI's greedy decode, text completions, the model
//! list, health and metrics, and the prompt cache (a follow-up turn reuses the conversation; a
//! reused prefix changes no logit).
use serde_json::{json, Value};

use crate::cli_greedy;
use crate::support::*;

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

    // A second conversation sharing the template's prefix: the cache's common prefix is reused, and
    // the output is still exactly a fresh decoder's.
    let (status, v) = post(&base, "/v1/chat/completions", &chat_body("Hello world", 12)).await;
    assert_eq!(status, 200, "{v}");
    let (want, _) = cli_greedy("Hello world", 12);
    assert_eq!(v["choices"][0]["message"]["content"], want.as_str());
    assert!(metric(&base, "ingot_prompt_tokens_reused_total").await > 0.0);
    assert!(metric(&base, "ingot_tokens_generated_total").await > 0.0);
}

/// A follow-up turn (the first turn, its reply, a new message) prefills only what is new: the
/// tokens reused from the cache are at least the whole first prompt.
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

/// The prompt cache changes no logit on the cpu backend: in the form the server prefills with while
/// it reuses prefixes, a prompt's last logits are the same bits whether it arrives whole on an
/// empty cache or after a prefix already in the cache, split anywhere. The default form
/// (decompressed attention for long chunks) would not keep that, which the last assertion shows, so
/// the check can fail.
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
