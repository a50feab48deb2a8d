//! Every JSON body the server sends, as a type: OpenAI's completion, chat completion, streamed
//! chunk, model list and error shapes, and the health check. Fields are in OpenAI's order; token
//! counts are tokens of the model's vocabulary, `created` is seconds since the Unix epoch.
//!
//! `logprobs` is always `null`: a request asking for log-probabilities is refused before it runs
//! (`unsupported_parameter`), so no response carries any.

use serde::Serialize;

/// The `object` field: which OpenAI shape a body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Object {
    #[serde(rename = "chat.completion")]
    ChatCompletion,
    #[serde(rename = "chat.completion.chunk")]
    ChatCompletionChunk,
    /// A text completion, whole or streamed (OpenAI names both alike).
    #[serde(rename = "text_completion")]
    TextCompletion,
    #[serde(rename = "list")]
    List,
    #[serde(rename = "model")]
    Model,
}

/// Token counts of one request: `total_tokens` is always `prompt_tokens + completion_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub total_tokens: usize,
}

impl Usage {
    pub fn new(prompt_tokens: usize, completion_tokens: usize) -> Self {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
        }
    }
}

/// A whole (non-streamed) completion: `C` is [`ChatChoice`] or [`TextChoice`]. There is always one
/// choice (a request asking for more is refused).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Completion<C> {
    pub id: String,
    pub object: Object,
    pub created: u64,
    pub model: String,
    pub choices: Vec<C>,
    pub usage: Usage,
}

/// `POST /v1/chat/completions` without `stream`.
pub type ChatCompletion = Completion<ChatChoice>;
/// `POST /v1/completions` without `stream`.
pub type TextCompletion = Completion<TextChoice>;

/// `"role": "assistant"`, the one role the server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Assistant,
}

/// The reply of a whole chat completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatChoice {
    pub index: u32,
    pub message: ChatMessage,
    pub logprobs: (),
    /// `stop` or `length` (`ingot_model::Finish::as_str`).
    pub finish_reason: &'static str,
}

/// A text completion's choice, whole or streamed: in a stream, `text` is one piece and
/// `finish_reason` is `null` until the last chunk (whose `text` is empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TextChoice {
    pub index: u32,
    pub text: String,
    pub logprobs: (),
    pub finish_reason: Option<&'static str>,
}

/// One server-sent event of a stream (before `data: [DONE]`): `C` is [`ChatChunkChoice`] or
/// [`TextChoice`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chunk<C> {
    pub id: String,
    pub object: Object,
    pub created: u64,
    pub model: String,
    /// One choice; none in the usage chunk.
    pub choices: Vec<C>,
    /// Absent unless the request set `stream_options.include_usage`; then `null` in every chunk but
    /// the last, which carries the counts (and no choice).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<Usage>>,
}

/// A chunk of a streamed chat completion.
pub type ChatCompletionChunk = Chunk<ChatChunkChoice>;
/// A chunk of a streamed text completion.
pub type TextCompletionChunk = Chunk<TextChoice>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatChunkChoice {
    pub index: u32,
    pub delta: Delta,
    pub logprobs: (),
    /// `null` until the chunk that ends the choice.
    pub finish_reason: Option<&'static str>,
}

/// What a chunk adds to the reply: the role in the first chunk, a piece of text in the others,
/// nothing in the finishing one (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// A whole completion of either kind, serialized as the kind it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AnyCompletion {
    Chat(ChatCompletion),
    Text(TextCompletion),
}

/// A stream chunk of either kind, serialized as the kind it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AnyChunk {
    Chat(ChatCompletionChunk),
    Text(TextCompletionChunk),
}

/// `GET /v1/models`: the one model this server has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelList {
    pub object: Object,
    pub data: Vec<ModelCard>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelCard {
    pub id: String,
    pub object: Object,
    pub created: u64,
    pub owned_by: &'static str,
    /// llama-server's extension: what a client needs to size its requests.
    pub meta: ModelMeta,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelMeta {
    /// Context size in tokens, prompt and completion together.
    pub n_ctx: usize,
    /// The backend that decodes (`cpu`, `sim`, `cuda`, ...).
    pub backend: &'static str,
}

/// `GET /health` while the decoder thread runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    pub status: HealthStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    Ok,
}

/// An OpenAI-style error body, `{"error": {"message", "type", "code"}}` (also a stream's last event
/// when generation fails midway).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorBody<'a> {
    pub error: ErrorDetail<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorDetail<'a> {
    pub message: &'a str,
    /// OpenAI's error class: `invalid_request_error`, `authentication_error`, `rate_limit_error`,
    /// `server_error`.
    #[serde(rename = "type")]
    pub kind: &'a str,
    /// What went wrong, for programs: `invalid_json`, `queue_full`, ...
    pub code: &'a str,
}

#[cfg(test)]
mod tests {
    //! The wire format, pinned: each shape against the JSON OpenAI's clients read.

    use serde_json::{json, Value};

    use super::*;

    fn wire(v: &impl Serialize) -> Value {
        serde_json::to_value(v).expect("serializes")
    }

    #[test]
    fn whole_completions() {
        let chat = ChatCompletion {
            id: "chatcmpl-1-2".into(),
            object: Object::ChatCompletion,
            created: 7,
            model: "tiny".into(),
            choices: vec![ChatChoice {
                index: 0,
                message: ChatMessage {
                    role: Role::Assistant,
                    content: "hi".into(),
                },
                logprobs: (),
                finish_reason: "stop",
            }],
            usage: Usage::new(3, 2),
        };
        assert_eq!(
            wire(&AnyCompletion::Chat(chat)),
            json!({
                "id": "chatcmpl-1-2", "object": "chat.completion", "created": 7, "model": "tiny",
                "choices": [{
                    "index": 0, "message": { "role": "assistant", "content": "hi" },
                    "logprobs": null, "finish_reason": "stop",
                }],
                "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 },
            })
        );
        let text = TextCompletion {
            id: "cmpl-1-3".into(),
            object: Object::TextCompletion,
            created: 7,
            model: "tiny".into(),
            choices: vec![TextChoice {
                index: 0,
                text: "fox".into(),
                logprobs: (),
                finish_reason: Some("length"),
            }],
            usage: Usage::new(4, 1),
        };
        assert_eq!(
            wire(&AnyCompletion::Text(text)),
            json!({
                "id": "cmpl-1-3", "object": "text_completion", "created": 7, "model": "tiny",
                "choices": [{ "index": 0, "text": "fox", "logprobs": null, "finish_reason": "length" }],
                "usage": { "prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5 },
            })
        );
    }

    #[test]
    fn stream_chunks_with_and_without_usage() {
        let chunk = |delta: Delta, finish, usage| ChatCompletionChunk {
            id: "chatcmpl-1-2".into(),
            object: Object::ChatCompletionChunk,
            created: 7,
            model: "tiny".into(),
            choices: vec![ChatChunkChoice {
                index: 0,
                delta,
                logprobs: (),
                finish_reason: finish,
            }],
            usage,
        };
        let head = |choices: Value| {
            json!({
                "id": "chatcmpl-1-2", "object": "chat.completion.chunk", "created": 7, "model": "tiny",
                "choices": choices,
            })
        };
        let first = Delta {
            role: Some(Role::Assistant),
            content: Some(String::new()),
        };
        assert_eq!(
            wire(&chunk(first, None, None)),
            head(json!([{
                "index": 0, "delta": { "role": "assistant", "content": "" },
                "logprobs": null, "finish_reason": null,
            }]))
        );
        let mut with_null = head(json!([{
            "index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop",
        }]));
        with_null["usage"] = Value::Null;
        assert_eq!(
            wire(&chunk(Delta::default(), Some("stop"), Some(None))),
            with_null
        );
        let usage = ChatCompletionChunk {
            choices: Vec::new(),
            usage: Some(Some(Usage::new(3, 2))),
            ..chunk(Delta::default(), None, None)
        };
        let mut want = head(json!([]));
        want["usage"] = json!({ "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 });
        assert_eq!(wire(&AnyChunk::Chat(usage)), want);
        let text = TextCompletionChunk {
            id: "cmpl-1-3".into(),
            object: Object::TextCompletion,
            created: 7,
            model: "tiny".into(),
            choices: vec![TextChoice {
                index: 0,
                text: "a".into(),
                logprobs: (),
                finish_reason: None,
            }],
            usage: None,
        };
        assert_eq!(
            wire(&AnyChunk::Text(text)),
            json!({
                "id": "cmpl-1-3", "object": "text_completion", "created": 7, "model": "tiny",
                "choices": [{ "index": 0, "text": "a", "logprobs": null, "finish_reason": null }],
            })
        );
    }

    #[test]
    fn models_health_and_errors() {
        let models = ModelList {
            object: Object::List,
            data: vec![ModelCard {
                id: "tiny".into(),
                object: Object::Model,
                created: 7,
                owned_by: "ingot",
                meta: ModelMeta {
                    n_ctx: 256,
                    backend: "cpu",
                },
            }],
        };
        assert_eq!(
            wire(&models),
            json!({
                "object": "list",
                "data": [{
                    "id": "tiny", "object": "model", "created": 7, "owned_by": "ingot",
                    "meta": { "n_ctx": 256, "backend": "cpu" },
                }],
            })
        );
        let health = Health {
            status: HealthStatus::Ok,
        };
        assert_eq!(wire(&health), json!({ "status": "ok" }));
        let error = ErrorBody {
            error: ErrorDetail {
                message: "busy",
                kind: "rate_limit_error",
                code: "queue_full",
            },
        };
        assert_eq!(
            wire(&error),
            json!({ "error": { "message": "busy", "type": "rate_limit_error", "code": "queue_full" } })
        );
    }
}
