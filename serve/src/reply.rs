//! A job's events ([`Event`]) turned into its response: one JSON body when the whole completion is
//! in, or server-sent events as the text comes (OpenAI's chunks, then `data: [DONE]`). The shapes
//! are the types of [`crate::response`].

use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::response::{
    AnyChunk, AnyCompletion, ChatChoice, ChatChunkChoice, ChatMessage, Chunk, Completion, Delta,
    Object, Role, TextChoice, Usage,
};
use crate::worker::{Event, Finish};
use crate::ApiError;

/// Which OpenAI response shape to build.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Chat,
    Text,
}

/// What every body of one response repeats.
pub(crate) struct Reply {
    pub(crate) shape: Shape,
    pub(crate) id: String,
    pub(crate) model: String,
    /// Seconds since the Unix epoch.
    pub(crate) created: u64,
    /// `stream_options.include_usage`: every chunk carries `usage` (`null` but in the last).
    pub(crate) include_usage: bool,
}

impl Reply {
    fn whole(self, text: String, finish: Finish, usage: Usage) -> AnyCompletion {
        let finish_reason = finish.as_str();
        match self.shape {
            Shape::Chat => AnyCompletion::Chat(Completion {
                id: self.id,
                object: Object::ChatCompletion,
                created: self.created,
                model: self.model,
                choices: vec![ChatChoice {
                    index: 0,
                    message: ChatMessage {
                        role: Role::Assistant,
                        content: text,
                    },
                    logprobs: (),
                    finish_reason,
                }],
                usage,
            }),
            Shape::Text => AnyCompletion::Text(Completion {
                id: self.id,
                object: Object::TextCompletion,
                created: self.created,
                model: self.model,
                choices: vec![TextChoice {
                    index: 0,
                    text,
                    logprobs: (),
                    finish_reason: Some(finish_reason),
                }],
                usage,
            }),
        }
    }

    /// A chunk of this reply holding `choices`; `usage` only in the last chunk of a stream that
    /// asked for it.
    fn chunk<C>(&self, object: Object, choices: Vec<C>, usage: Option<Usage>) -> Chunk<C> {
        Chunk {
            id: self.id.clone(),
            object,
            created: self.created,
            model: self.model.clone(),
            choices,
            usage: match usage {
                Some(u) => Some(Some(u)),
                None => self.include_usage.then_some(None),
            },
        }
    }

    /// One streamed chunk: `text` is the chat delta's content (for text completions, the text;
    /// `None` is empty); `first` adds the chat delta's role.
    fn piece(&self, text: Option<String>, first: bool, finish: Option<Finish>) -> AnyChunk {
        let finish_reason = finish.map(Finish::as_str);
        match self.shape {
            Shape::Chat => {
                let choice = ChatChunkChoice {
                    index: 0,
                    delta: Delta {
                        role: first.then_some(Role::Assistant),
                        content: text,
                    },
                    logprobs: (),
                    finish_reason,
                };
                AnyChunk::Chat(self.chunk(Object::ChatCompletionChunk, vec![choice], None))
            }
            Shape::Text => {
                let choice = TextChoice {
                    index: 0,
                    text: text.unwrap_or_default(),
                    logprobs: (),
                    finish_reason,
                };
                AnyChunk::Text(self.chunk(Object::TextCompletion, vec![choice], None))
            }
        }
    }

    /// The last chunk before `[DONE]` when the request asked for usage: the counts, no choice.
    fn usage_chunk(&self, usage: Usage) -> AnyChunk {
        match self.shape {
            Shape::Chat => {
                AnyChunk::Chat(self.chunk(Object::ChatCompletionChunk, Vec::new(), Some(usage)))
            }
            Shape::Text => {
                AnyChunk::Text(self.chunk(Object::TextCompletion, Vec::new(), Some(usage)))
            }
        }
    }
}

/// Waits for the whole completion.
pub(crate) async fn collect(reply: Reply, mut rx: mpsc::UnboundedReceiver<Event>) -> Response {
    let mut text = String::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Text(t) => text.push_str(&t),
            Event::Done {
                finish,
                prompt_tokens,
                completion_tokens,
            } => {
                let usage = Usage::new(prompt_tokens, completion_tokens);
                return Json(reply.whole(text, finish, usage)).into_response();
            }
            Event::Error(e) => return ApiError::internal(e).into_response(),
        }
    }
    ApiError::internal("the decoder thread stopped during the request").into_response()
}

/// One `data:` event holding `body` as compact JSON.
fn data(body: &impl Serialize) -> Result<SseEvent, axum::Error> {
    SseEvent::default().json_data(body)
}

/// Server-sent events: a role chunk (chat), a chunk per piece of text, a chunk with the finish
/// reason, the usage chunk when `stream_options.include_usage`, then `[DONE]`. Dropping the stream
/// (the client left) drops the receiver, which stops the generation at its next token.
pub(crate) fn stream(reply: Reply, rx: mpsc::UnboundedReceiver<Event>) -> Response {
    enum Phase {
        Start,
        Body,
        Usage(Usage),
        Done,
        End,
    }
    let events = futures_util::stream::unfold(
        (reply, rx, Phase::Start),
        move |(reply, mut rx, phase)| async move {
            match phase {
                Phase::Start if reply.shape == Shape::Chat => {
                    let ev = data(&reply.piece(Some(String::new()), true, None));
                    Some((ev, (reply, rx, Phase::Body)))
                }
                Phase::Start | Phase::Body => match rx.recv().await {
                    Some(Event::Text(t)) => {
                        let ev = data(&reply.piece(Some(t), false, None));
                        Some((ev, (reply, rx, Phase::Body)))
                    }
                    Some(Event::Done {
                        finish,
                        prompt_tokens,
                        completion_tokens,
                    }) => {
                        let ev = data(&reply.piece(None, false, Some(finish)));
                        let next = if reply.include_usage {
                            Phase::Usage(Usage::new(prompt_tokens, completion_tokens))
                        } else {
                            Phase::Done
                        };
                        Some((ev, (reply, rx, next)))
                    }
                    Some(Event::Error(e)) => {
                        let ev = data(&ApiError::internal(e).body());
                        Some((ev, (reply, rx, Phase::Done)))
                    }
                    None => {
                        let stopped =
                            ApiError::internal("the decoder thread stopped during the request");
                        let ev = data(&stopped.body());
                        Some((ev, (reply, rx, Phase::Done)))
                    }
                },
                Phase::Usage(usage) => {
                    let ev = data(&reply.usage_chunk(usage));
                    Some((ev, (reply, rx, Phase::Done)))
                }
                Phase::Done => {
                    let ev = Ok(SseEvent::default().data("[DONE]"));
                    Some((ev, (reply, rx, Phase::End)))
                }
                Phase::End => None,
            }
        },
    );
    Sse::new(events).into_response()
}
