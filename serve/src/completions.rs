//! `POST /v1/chat/completions` and `POST /v1/completions`: the body read and checked, the prompt
//! templated and tokenized off the runtime's threads, its length checked against the context, the
//! job queued (429 when the queue is full), and the answer whole or streamed ([`crate::reply`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use ingot_tokenizer::{ChatRequest, Role};
use tokio::sync::mpsc;

use crate::api;
use crate::body::require_json;
use crate::reply::{collect, stream, Reply, Shape};
use crate::service::{now_s, AppState};
use crate::worker::{Event, Job};
use crate::ApiError;

impl AppState {
    fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        match model {
            None => Ok(()),
            Some(m) if m == self.model_id || m == self.file_name => Ok(()),
            Some(m) => Err(ApiError::not_found(
                "model_not_found",
                format!(
                    "the model {m:?} does not exist; this server has {:?}",
                    self.model_id
                ),
            )),
        }
    }

    fn check_length(&self, prompt: &[u32]) -> Result<(), ApiError> {
        if prompt.is_empty() {
            return Err(ApiError::bad_request(
                "empty_prompt",
                "the prompt is empty and the model adds no BOS token",
            ));
        }
        if prompt.len() >= self.ctx {
            return Err(ApiError::bad_request(
                "context_length_exceeded",
                format!(
                    "the prompt is {} tokens; this server's context is {} tokens (prompt + completion)",
                    prompt.len(),
                    self.ctx
                ),
            ));
        }
        Ok(())
    }

    /// The conversation through the model's chat template, tokenized as `ingot run --chat` does.
    fn chat_prompt(&self, messages: &[api::Message]) -> Result<Vec<u32>, ApiError> {
        if messages.is_empty() {
            return Err(ApiError::bad_request(
                "invalid_messages",
                "`messages` must not be empty",
            ));
        }
        let mut system: Option<String> = None;
        let mut turns: Vec<(Role, String)> = Vec::new();
        for m in messages {
            let text = m.content.text()?;
            match m.role.as_str() {
                "system" | "developer" => match &mut system {
                    Some(s) => {
                        s.push_str("\n\n");
                        s.push_str(&text);
                    }
                    None => system = Some(text),
                },
                "user" => turns.push((Role::User, text)),
                "assistant" => turns.push((Role::Assistant, text)),
                other => {
                    return Err(ApiError::bad_request(
                        "invalid_role",
                        format!("unsupported message role {other:?} (system, user, assistant)"),
                    ))
                }
            }
        }
        let turns: Vec<(Role, &str)> = turns.iter().map(|(r, t)| (*r, t.as_str())).collect();
        let (bos, eos) = self.tok.chat_specials();
        let request = ChatRequest {
            bos,
            eos: &eos,
            system: system.as_deref(),
            turns: &turns,
            add_generation_prompt: true,
        };
        let text = self
            .template
            .render_or_builtin(&request)
            .map_err(|e| ApiError::bad_request("invalid_messages", e.to_string()))?;
        Ok(self.tok.encode(&text, true, true))
    }

    /// Queues a job; 429 when the queue is full.
    fn submit(
        &self,
        prompt: Vec<u32>,
        generation: api::Generation,
    ) -> Result<mpsc::UnboundedReceiver<Event>, ApiError> {
        let (events, rx) = mpsc::unbounded_channel();
        // Counted before the send so the worker's decrement never underflows.
        self.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
        let job = Job {
            prompt,
            generation,
            events,
        };
        match self.jobs.try_send(job) {
            Ok(()) => Ok(rx),
            Err(e) => {
                self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                Err(match e {
                    mpsc::error::TrySendError::Full(_) => ApiError::queue_full(self.queue_bound),
                    mpsc::error::TrySendError::Closed(_) => {
                        ApiError::internal("the decoder thread has stopped")
                    }
                })
            }
        }
    }

    fn new_id(&self, prefix: &str) -> String {
        format!(
            "{prefix}-{}-{}",
            self.created,
            self.next_id.fetch_add(1, Ordering::Relaxed)
        )
    }
}

/// Templating and tokenizing a prompt of up to `max_body` bytes takes a while: not on the runtime's
/// threads but on the server's fixed tokenizer threads (`crate::tokenize`: why fixed), as many
/// prompts at once as there are threads.
async fn off_runtime<T: Send + 'static>(
    s: &Arc<AppState>,
    f: impl FnOnce(&AppState) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let state = s.clone();
    s.tokenizing
        .run(move || f(&state))
        .await
        .map_err(|e| ApiError::internal(format!("tokenizing the prompt: {e}")))?
}

pub(crate) async fn chat_completions(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    require_json(&headers)?;
    let body = body.map_err(ApiError::from_body_rejection)?;
    let req: api::ChatCompletionRequest = api::parse(&body)?;
    s.check_model(req.model.as_deref())?;
    let generation = req.sampling.generation()?;
    let messages = req.messages;
    let prompt = off_runtime(&s, move |s| s.chat_prompt(&messages)).await?;
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
    answer(
        &s,
        Shape::Chat,
        prompt,
        generation,
        (req.stream, include_usage),
    )
    .await
}

pub(crate) async fn completions(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    require_json(&headers)?;
    let body = body.map_err(ApiError::from_body_rejection)?;
    let req: api::CompletionRequest = api::parse(&body)?;
    s.check_model(req.model.as_deref())?;
    let generation = req.sampling.generation()?;
    let text = req.prompt.text()?.to_string();
    let prompt = off_runtime(&s, move |s| Ok(s.tok.encode(&text, true, false))).await?;
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
    answer(
        &s,
        Shape::Text,
        prompt,
        generation,
        (req.stream, include_usage),
    )
    .await
}

/// Queues `prompt` and answers with its generation, streamed or whole: what both completion
/// endpoints do once they have a prompt.
async fn answer(
    s: &AppState,
    shape: Shape,
    prompt: Vec<u32>,
    generation: api::Generation,
    (streamed, include_usage): (bool, bool),
) -> Result<Response, ApiError> {
    s.check_length(&prompt)?;
    let reply = Reply {
        shape,
        id: s.new_id(match shape {
            Shape::Chat => "chatcmpl",
            Shape::Text => "cmpl",
        }),
        model: s.model_id.clone(),
        created: now_s(),
        include_usage,
    };
    let rx = s.submit(prompt, generation)?;
    Ok(if streamed {
        stream(reply, rx)
    } else {
        collect(reply, rx).await
    })
}
