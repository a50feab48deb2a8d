//! Token-level reading of one instruction statement.
//!
//! `ptx-syntax` validates the whole module and gives each instruction's byte span; its typed AST
//! has one struct per instruction form (hundreds), while execution semantics depend only on the
//! opcode, its dot-modifiers and its operands. So each validated instruction is re-read here from
//! the same `ptx-syntax` token stream into that uniform shape ([`RawInst`]), which a consumer (the
//! simulator's lowering) maps with one table for all forms. Read the tokens of the normalized text
//! ([`crate::Source::tokens`]): modifiers come in the order [`crate::normalize_red`] left them, so
//! consumers must treat them as a set.

use ptx_syntax::{PtxToken, Span};

/// A literal as written in the PTX text.
#[derive(Clone, Debug, PartialEq)]
pub enum Lit {
    /// An integer literal with its sign applied (fits i128 for every 64-bit literal, signed or
    /// not).
    Int(i128),
    /// `0fXXXXXXXX`.
    F32Bits(u32),
    /// `0dXXXXXXXXXXXXXXXX`.
    F64Bits(u64),
    /// A decimal float literal such as `1.5`.
    Float(f64),
}

/// One operand as written.
#[derive(Clone, Debug, PartialEq)]
pub enum Opnd {
    /// A `%name` register, with an optional `.x`-style component (special registers).
    Reg(String, Option<String>),
    /// A bare identifier: a scoped inline-asm register, a label, or a variable symbol.
    Name(String),
    Lit(Lit),
    /// `{a, b, ...}`.
    Vec(Vec<Opnd>),
    /// `[base + offset]`; `base` is `None` for an absolute address.
    Addr(Option<Box<Opnd>>, i64),
    /// `!p`.
    Not(Box<Opnd>),
    /// `d|p` (setp and shfl second destination).
    Pipe(Box<Opnd>, Box<Opnd>),
    /// `_` sink.
    Sink,
}

/// An instruction statement split into guard, opcode, modifiers and operands.
#[derive(Clone, Debug, PartialEq)]
pub struct RawInst {
    pub guard: Option<(Opnd, bool)>,
    pub opcode: String,
    pub mods: Vec<String>,
    pub operands: Vec<Opnd>,
}

impl RawInst {
    pub fn has(&self, m: &str) -> bool {
        self.mods.iter().any(|x| x == m)
    }
}

struct Cursor<'a> {
    toks: &'a [(PtxToken, Span)],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<&'a PtxToken> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn next(&mut self) -> Option<&'a PtxToken> {
        let t = self.toks.get(self.pos).map(|t| &t.0);
        self.pos += 1;
        t
    }
    fn eat(&mut self, t: &PtxToken) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    /// True when the token at `pos` starts exactly where the previous one ended (no whitespace
    /// between).
    fn adjacent(&self) -> bool {
        self.pos > 0
            && self.pos < self.toks.len()
            && self.toks[self.pos].1.start == self.toks[self.pos - 1].1.end
    }
}

/// Reads one instruction from its tokens (the trailing `;`, if included, is ignored).
pub fn read_inst(toks: &[(PtxToken, Span)]) -> Result<RawInst, String> {
    let mut c = Cursor { toks, pos: 0 };
    let mut guard = None;
    if c.eat(&PtxToken::At) {
        let neg = c.eat(&PtxToken::Exclaim);
        guard = Some((atom(&mut c)?, neg));
    }
    let opcode = match c.next() {
        Some(PtxToken::Identifier(s)) => s.clone(),
        other => return Err(format!("expected an opcode, found {other:?}")),
    };
    let mut mods = Vec::new();
    while c.peek() == Some(&PtxToken::Dot) {
        c.pos += 1;
        let mut word = String::new();
        loop {
            match c.peek() {
                Some(PtxToken::Identifier(s)) | Some(PtxToken::DecimalInteger(s)) => {
                    word.push_str(s)
                }
                Some(PtxToken::DoubleColon) => word.push_str("::"),
                _ => break,
            }
            c.pos += 1;
            if !c.adjacent() {
                break;
            }
        }
        if word.is_empty() {
            return Err("empty modifier".into());
        }
        mods.push(word);
    }
    let mut operands = Vec::new();
    while let Some(t) = c.peek() {
        if *t == PtxToken::Semicolon {
            break;
        }
        let mut o = operand(&mut c)?;
        if c.eat(&PtxToken::Pipe) {
            o = Opnd::Pipe(Box::new(o), Box::new(operand(&mut c)?));
        }
        operands.push(o);
        if !c.eat(&PtxToken::Comma) {
            break;
        }
    }
    match c.peek() {
        None | Some(PtxToken::Semicolon) => Ok(RawInst {
            guard,
            opcode,
            mods,
            operands,
        }),
        Some(t) => Err(format!("unexpected token {t:?} after operands")),
    }
}

fn operand(c: &mut Cursor) -> Result<Opnd, String> {
    match c.peek() {
        Some(PtxToken::LBrace) => {
            c.pos += 1;
            let mut v = Vec::new();
            loop {
                v.push(operand(c)?);
                if c.eat(&PtxToken::RBrace) {
                    return Ok(Opnd::Vec(v));
                }
                if !c.eat(&PtxToken::Comma) {
                    return Err("expected `,` or `}` in vector operand".into());
                }
            }
        }
        Some(PtxToken::LBracket) => {
            c.pos += 1;
            let base = match c.peek() {
                Some(PtxToken::Register(_)) | Some(PtxToken::Identifier(_)) => {
                    Some(Box::new(atom(c)?))
                }
                _ => None,
            };
            let mut offset = 0i64;
            // `[imm]`, `[base+imm]` and `[base+-imm]`/`[base-imm]` (the literal reader takes the
            // sign).
            if base.is_none() || c.eat(&PtxToken::Plus) || c.peek() == Some(&PtxToken::Minus) {
                offset = int_lit(c)?;
            }
            if !c.eat(&PtxToken::RBracket) {
                return Err("expected `]`".into());
            }
            Ok(Opnd::Addr(base, offset))
        }
        Some(PtxToken::Exclaim) => {
            c.pos += 1;
            Ok(Opnd::Not(Box::new(atom(c)?)))
        }
        _ => atom(c),
    }
}

fn int_lit(c: &mut Cursor) -> Result<i64, String> {
    match lit(c)? {
        Lit::Int(v) => i64::try_from(v)
            .or_else(|_| u64::try_from(v).map(|u| u as i64))
            .map_err(|_| format!("address offset {v} out of range")),
        other => Err(format!("expected an integer offset, found {other:?}")),
    }
}

fn atom(c: &mut Cursor) -> Result<Opnd, String> {
    match c.peek() {
        Some(PtxToken::Register(name)) => {
            c.pos += 1;
            let mut comp = None;
            if c.peek() == Some(&PtxToken::Dot) && c.pos + 1 < c.toks.len() {
                if let PtxToken::Identifier(s) = &c.toks[c.pos + 1].0 {
                    if matches!(s.as_str(), "x" | "y" | "z") {
                        comp = Some(s.clone());
                        c.pos += 2;
                    }
                }
            }
            Ok(Opnd::Reg(name.clone(), comp))
        }
        Some(PtxToken::Identifier(name)) => {
            c.pos += 1;
            if name == "_" {
                return Ok(Opnd::Sink);
            }
            if c.peek() == Some(&PtxToken::Plus) {
                // `sym+4` outside brackets: a symbol address plus a constant.
                c.pos += 1;
                let off = int_lit(c)?;
                return Ok(Opnd::Addr(Some(Box::new(Opnd::Name(name.clone()))), off));
            }
            Ok(Opnd::Name(name.clone()))
        }
        _ => Ok(Opnd::Lit(lit(c)?)),
    }
}

/// The literal whose token starts at byte `start` of the tokenized text (module variable
/// initializers, whose values `ptx-syntax` keeps as token text).
pub fn literal_at(toks: &[(PtxToken, Span)], start: usize) -> Result<Lit, String> {
    let pos = toks.partition_point(|t| t.1.start < start);
    if toks.get(pos).is_none_or(|t| t.1.start != start) {
        return Err(format!("no literal token at byte {start}"));
    }
    lit(&mut Cursor { toks, pos })
}

fn lit(c: &mut Cursor) -> Result<Lit, String> {
    let neg = c.eat(&PtxToken::Minus);
    let t = c.next().ok_or("unexpected end of operands")?;
    let strip_u = |s: &str| s.trim_end_matches(['U', 'u']).to_string();
    let int = |v: i128| Lit::Int(if neg { -v } else { v });
    let parse = |s: String, radix: u32| {
        i128::from_str_radix(&s, radix).map_err(|e| format!("bad integer literal: {e}"))
    };
    Ok(match t {
        PtxToken::DecimalInteger(s) => int(parse(strip_u(s), 10)?),
        PtxToken::HexInteger(s) => int(parse(strip_u(&s[2..]), 16)?),
        PtxToken::BinaryInteger(s) => int(parse(strip_u(&s[2..]), 2)?),
        PtxToken::OctalInteger(s) => int(parse(strip_u(&s[1..]), 8)?),
        PtxToken::HexFloatSingle(s) => {
            let b = u32::from_str_radix(&s[2..], 16).map_err(|e| e.to_string())?;
            Lit::F32Bits(if neg { b ^ 0x8000_0000 } else { b })
        }
        PtxToken::HexFloatDouble(s) => {
            let b = u64::from_str_radix(&s[2..], 16).map_err(|e| e.to_string())?;
            Lit::F64Bits(if neg { b ^ (1 << 63) } else { b })
        }
        PtxToken::Float(s) | PtxToken::FloatExponent(s) => {
            let v: f64 = s.parse().map_err(|e| format!("bad float literal: {e}"))?;
            Lit::Float(if neg { -v } else { v })
        }
        other => return Err(format!("expected an operand, found {other:?}")),
    })
}
