//! The file's own chat template (`tokenizer.chat_template`, Jinja as in Hugging Face's
//! `tokenizer_config.json`), rendered with `minijinja`, with the built-in DeepSeek-V2 format
//! ([`apply_chat_template_deepseek2`]) as the fallback when a file has no template or its template
//! does not render.
//!
//! The template sees what HF's `apply_chat_template` passes: `messages` (a list of `{role,
//! content}`, the system message first), `add_generation_prompt`, `bos_token`, `eos_token`, and a
//! `raise_exception(message)` function; Python string and dict methods (`.strip()`, `.split()`,
//! `.items()`, ...) come from `minijinja-contrib`'s pycompat.

use minijinja::syntax::SyntaxConfig;
use minijinja::{context, Environment, Error, ErrorKind, Value};

use crate::chat::{apply_chat_template_deepseek2, Role};

/// GGUF key of the Jinja chat template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// One conversation to render.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// BOS text the prompt starts with: the template's `bos_token`. Pass `""` when the encoder adds
    /// BOS itself (as for [`apply_chat_template_deepseek2`]), or the prompt starts with two BOS
    /// tokens.
    pub bos: &'a str,
    /// The template's `eos_token` (the built-in format always writes DeepSeek-V2's).
    pub eos: &'a str,
    /// Comes first, before `turns`, when given.
    pub system: Option<&'a str>,
    pub turns: &'a [(Role, &'a str)],
    pub add_generation_prompt: bool,
}

/// Why a Jinja template could not be used.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ChatTemplateError {
    #[error("the model has no {CHAT_TEMPLATE_KEY}")]
    Absent,
    #[error("{CHAT_TEMPLATE_KEY} does not render: {0}")]
    Render(String),
}

/// A model's chat template: its Jinja source, or none (the built-in format).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatTemplate {
    jinja: Option<String>,
}

impl ChatTemplate {
    /// The built-in DeepSeek-V2 format.
    pub fn builtin() -> Self {
        ChatTemplate { jinja: None }
    }

    /// A Jinja template (HF `chat_template` syntax).
    pub fn jinja(source: impl Into<String>) -> Self {
        ChatTemplate {
            jinja: Some(source.into()),
        }
    }

    /// The template stored in a GGUF header; the built-in format when the key is absent or not a
    /// string.
    #[cfg(feature = "gguf")]
    pub fn from_gguf(header: &ingot_gguf::Gguf) -> Self {
        match header.get(CHAT_TEMPLATE_KEY).and_then(|v| v.as_str()) {
            Some(source) => Self::jinja(source),
            None => Self::builtin(),
        }
    }

    /// The Jinja source, if the model has one.
    pub fn source(&self) -> Option<&str> {
        self.jinja.as_deref()
    }

    /// Renders with the Jinja template, or says why it cannot.
    pub fn try_render(&self, r: &ChatRequest<'_>) -> Result<String, ChatTemplateError> {
        let source = self.jinja.as_deref().ok_or(ChatTemplateError::Absent)?;
        render_jinja(source, r).map_err(|e| ChatTemplateError::Render(describe(&e)))
    }

    /// Renders with the Jinja template, or with the built-in DeepSeek-V2 format when the model has
    /// none; says why a template does not render.
    pub fn render_or_builtin(&self, r: &ChatRequest<'_>) -> Result<String, ChatTemplateError> {
        match self.try_render(r) {
            Err(ChatTemplateError::Absent) => Ok(builtin(r)),
            other => other,
        }
    }

    /// Renders with the Jinja template; without one, or when it fails, uses the built-in
    /// DeepSeek-V2 format (saying why on stderr when a template fails). Never panics.
    pub fn render(&self, r: &ChatRequest<'_>) -> String {
        self.render_or_builtin(r).unwrap_or_else(|e| {
            eprintln!("chat template: {e}; using the built-in DeepSeek-V2 template");
            builtin(r)
        })
    }
}

fn builtin(r: &ChatRequest<'_>) -> String {
    apply_chat_template_deepseek2(r.bos, r.system, r.turns, r.add_generation_prompt)
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn render_jinja(source: &str, r: &ChatRequest<'_>) -> Result<String, Error> {
    let mut env = Environment::new();
    // HF renders with trim_blocks and lstrip_blocks on.
    env.set_syntax(
        SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()?,
    );
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |message: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        },
    );
    env.add_template("chat_template", source)?;
    let messages: Vec<Value> = r
        .system
        .map(|s| (Role::System, s))
        .into_iter()
        .chain(r.turns.iter().copied())
        .map(|(role, content)| {
            context! {
                role => Value::from(role_name(role)),
                content => Value::from(content),
            }
        })
        .collect();
    let ctx = context! {
        messages => Value::from(messages),
        add_generation_prompt => Value::from(r.add_generation_prompt),
        bos_token => Value::from(r.bos),
        eos_token => Value::from(r.eos),
    };
    env.get_template("chat_template")?.render(ctx)
}

/// The error with its causes, on one line.
fn describe(e: &Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
