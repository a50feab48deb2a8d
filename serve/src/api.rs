//! The OpenAI request bodies this server reads, and the sampling parameters they carry (OpenAI's
//! names plus llama-server's `top_k`, `min_p`, `repeat_penalty`, `repeat_last_n`). Unknown fields
//! are ignored, as OpenAI's clients send many.

use ingot_model::SamplerConfig;
use serde::Deserialize;

use crate::error::ApiError;

/// `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
pub struct ChatCompletionRequest {
    pub model: Option<String>,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    #[serde(flatten)]
    pub sampling: SamplingParams,
}

/// `POST /v1/completions`.
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: Prompt,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    #[serde(flatten)]
    pub sampling: SamplingParams,
}

#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// A completion prompt: a string, or a list holding one string.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    One(String),
    Many(Vec<String>),
}

impl Prompt {
    pub fn text(&self) -> Result<&str, ApiError> {
        match self {
            Prompt::One(s) => Ok(s),
            Prompt::Many(v) if v.len() == 1 => Ok(&v[0]),
            Prompt::Many(_) => Err(ApiError::bad_request(
                "invalid_prompt",
                "`prompt` must be a string or a list of exactly one string",
            )),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct Message {
    pub role: String,
    #[serde(default)]
    pub content: Content,
}

/// Message content: a string, or a list of parts of which the `text` ones are joined.
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
pub enum Content {
    #[default]
    Null,
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

impl Content {
    pub fn text(&self) -> Result<String, ApiError> {
        match self {
            Content::Null => Ok(String::new()),
            Content::Text(s) => Ok(s.clone()),
            Content::Parts(parts) => {
                let mut out = String::new();
                for p in parts {
                    match (p.kind.as_str(), &p.text) {
                        ("text", Some(t)) => out.push_str(t),
                        (kind, _) => {
                            return Err(ApiError::bad_request(
                                "unsupported_content",
                                format!(
                                    "content part of type {kind:?} is not supported (text only)"
                                ),
                            ))
                        }
                    }
                }
                Ok(out)
            }
        }
    }
}

/// `stop`: one string or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// Sampling as OpenAI names it, plus llama-server's extras.
#[derive(Debug, Default, Deserialize)]
pub struct SamplingParams {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub max_tokens: Option<u64>,
    pub max_completion_tokens: Option<u64>,
    pub stop: Option<Stop>,
    pub seed: Option<i64>,
    pub n: Option<u64>,
    pub frequency_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub top_k: Option<u64>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<u64>,
    /// llama-server's extension: never choose an end-of-generation token.
    pub ignore_eos: Option<bool>,
    /// `true` (chat) or a count (completions): not supported, so refused rather than ignored.
    pub logprobs: Option<serde_json::Value>,
    pub top_logprobs: Option<serde_json::Value>,
}

/// The most stop strings a request may give (OpenAI allows 4; llama-server more).
pub const MAX_STOPS: usize = 16;

/// What the worker needs besides the prompt: the sampler, the token budget, the stop strings.
#[derive(Debug, Clone)]
pub struct Generation {
    pub sampler: SamplerConfig,
    /// `None`: until the context is full.
    pub max_tokens: Option<usize>,
    pub stops: Vec<String>,
    /// Never choose an end-of-generation token (`ignore_eos`).
    pub ignore_eos: bool,
}

impl SamplingParams {
    /// Validates and converts; defaults as `ingot run` (llama.cpp's), a clock seed when none is
    /// given.
    pub fn generation(&self) -> Result<Generation, ApiError> {
        let d = SamplerConfig::default();
        // Seeded below; the ranges are checked first, by the validator `ingot run` uses.
        let mut sampler = SamplerConfig {
            temperature: self.temperature.unwrap_or(d.temperature),
            top_k: self.top_k.map_or(d.top_k, |k| k as usize),
            top_p: self.top_p.unwrap_or(d.top_p),
            min_p: self.min_p.unwrap_or(d.min_p),
            repeat_penalty: self.repeat_penalty.unwrap_or(d.repeat_penalty),
            repeat_last_n: self.repeat_last_n.map_or(d.repeat_last_n, |n| n as usize),
            frequency_penalty: self.frequency_penalty.unwrap_or(d.frequency_penalty),
            presence_penalty: self.presence_penalty.unwrap_or(d.presence_penalty),
            seed: 0,
        };
        sampler.validate().map_err(|e| {
            ApiError::bad_request(
                "invalid_value",
                e.message(&format!("`{}`", e.param.api_name())),
            )
        })?;
        let asks = |v: &Option<serde_json::Value>| match v {
            None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => false,
            Some(serde_json::Value::Number(n)) => n.as_u64() != Some(0),
            Some(_) => true,
        };
        if asks(&self.logprobs) || asks(&self.top_logprobs) {
            return Err(ApiError::bad_request(
                "unsupported_parameter",
                "`logprobs` and `top_logprobs` are not supported by this server; leave them out",
            ));
        }
        if let Some(n) = self.n {
            if n != 1 {
                return Err(ApiError::bad_request(
                    "invalid_value",
                    format!("`n` must be 1 (one choice per request), got {n}"),
                ));
            }
        }
        let max_tokens = self.max_completion_tokens.or(self.max_tokens);
        if max_tokens == Some(0) {
            return Err(ApiError::bad_request(
                "invalid_value",
                "`max_tokens` must be at least 1",
            ));
        }
        let stops: Vec<String> = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        }
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
        if stops.len() > MAX_STOPS {
            return Err(ApiError::bad_request(
                "invalid_value",
                format!("at most {MAX_STOPS} stop strings, got {}", stops.len()),
            ));
        }
        let seed = match self.seed {
            Some(s) if s >= 0 => s as u64,
            _ => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        };
        sampler.seed = seed;
        Ok(Generation {
            sampler,
            max_tokens: max_tokens.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            stops,
            ignore_eos: self.ignore_eos.unwrap_or(false),
        })
    }
}

/// Parses a JSON body; a syntax or type error is a 400 that says where.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("invalid_json", format!("invalid request body: {e}")))
}
