//! One PTX text prepared for `ptx-syntax`: the compatibility rewrite applied once, then parsing and
//! tokenizing of the rewritten text, with errors located in the original.
//!
//! The rewrite ([`normalize_red`]) keeps every byte offset, so spans from the parser and the lexer
//! index the original text as well: instruction texts and mnemonics are read from [`Source::text`],
//! which keeps the compiler's spelling.

use std::borrow::Cow;

use ptx_syntax::{PtxToken, Span};

use crate::error::PtxError;
use crate::lines::LineIndex;
use crate::normalize::normalize_red;

/// PTX text and its rewrite for the parser.
pub struct Source<'a> {
    text: &'a str,
    normalized: Cow<'a, str>,
    lines: LineIndex,
}

impl<'a> Source<'a> {
    pub fn new(text: &'a str) -> Source<'a> {
        Source {
            text,
            normalized: normalize_red(text),
            lines: LineIndex::new(text),
        }
    }

    /// The text as given.
    pub fn text(&self) -> &'a str {
        self.text
    }

    pub fn lines(&self) -> &LineIndex {
        &self.lines
    }

    /// The module's syntax tree. The parser is generated code; a panic on some odd input becomes
    /// [`PtxError::ParserPanic`].
    pub fn parse(&self) -> Result<ptx_syntax::r#type::Module, PtxError> {
        let text: &str = &self.normalized;
        let parsed = std::panic::catch_unwind(|| ptx_syntax::parse_ptx(text))
            .map_err(|_| PtxError::ParserPanic)?;
        parsed.map_err(|e| {
            let (line, column) = self.lines.line_col(e.span.start.min(self.text.len()));
            PtxError::Parse {
                line,
                column,
                message: e.kind.to_string(),
            }
        })
    }

    /// The tokens of the rewritten text, with their byte spans.
    pub fn tokens(&self) -> Result<Vec<(PtxToken, Span)>, PtxError> {
        ptx_syntax::tokenize(&self.normalized).map_err(|e| {
            let (line, column) = self.lines.line_col(e.span.start.min(self.text.len()));
            PtxError::InvalidToken { line, column }
        })
    }
}
