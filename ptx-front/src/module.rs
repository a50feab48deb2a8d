//! A PTX module reduced to what control-flow and resource analyses need: per function, a flat
//! list of labels and instructions (mnemonic, predicate, branch targets, source line), its
//! `.local` and `.shared` declarations, and the positions of `ingot:hot` markers.
//!
//! Parsing is done by `ptx-syntax`; mnemonics are read back from the source text through the
//! byte spans the parser records, which keeps this module independent of the parser's
//! one-type-per-instruction-form AST.

use std::collections::HashMap;

use ptx_syntax::r#type::instruction::Inst;
use ptx_syntax::r#type::{
    DataLinkage, DataType, FunctionBody, FunctionStatement, GeneralOperand, ModuleDirective,
    ModuleVariableDirective, Operand, StatementDirective, VariableDirective,
};

use crate::error::PtxError;
use crate::lines::LineIndex;
use crate::source::Source;

/// Largest PTX text accepted (bytes). rustc's PTX for the whole kernel crate is well under 10 MiB;
/// the cap keeps a wrong path (a model file, say) from being read and parsed into gigabytes.
pub const MAX_PTX_BYTES: usize = 64 << 20;

/// The marker a kernel leaves in its PTX to mark the enclosing loop hot (see the crate docs).
pub const HOT_MARKER: &str = "ingot:hot";

/// A parsed PTX module.
#[derive(Debug, Clone)]
pub struct PtxModule {
    /// `.entry` kernels and `.func` device functions that have a body, in source order.
    pub functions: Vec<Function>,
    /// Module-scope `.shared` variables (static and `.extern` dynamic ones).
    pub shared: Vec<VariableDecl>,
}

/// One `.entry` or `.func` with a body.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    /// `true` for `.entry` (a kernel), `false` for `.func`.
    pub is_kernel: bool,
    /// Instructions in source order; `Stmt::Instr` indexes into this.
    pub instrs: Vec<Instr>,
    /// Labels and instructions in source order, nested `{ }` blocks flattened.
    pub stmts: Vec<Stmt>,
    /// Total bytes of `.local` declarations (rustc's `__local_depot<N>` stack included).
    pub local_decl_bytes: u64,
    /// Whether a `__local_depot` (the LLVM stack frame in local memory) is declared.
    pub has_local_depot: bool,
    /// `.shared` declarations inside the function body.
    pub shared: Vec<VariableDecl>,
    /// Indices into `instrs` of the first instruction after each `ingot:hot` marker comment.
    pub hot_markers: Vec<usize>,
    /// Symbol names the body refers to (operands), used to attribute module-scope `.shared`.
    pub referenced_symbols: Vec<String>,
    /// 1-based source line of the function header.
    pub line: usize,
}

/// A label or an instruction of a function body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stmt {
    Label(String),
    /// Index into [`Function::instrs`].
    Instr(usize),
}

/// A `.shared` or `.local` variable declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableDecl {
    pub name: String,
    /// Static size in bytes; 0 for an unsized `.extern` (dynamic) array.
    pub bytes: u64,
    /// `true` for an unsized array, whose size is set at launch (dynamic shared memory).
    pub dynamic: bool,
}

/// A predicate guard `@p` / `@!p`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredicateGuard {
    pub negated: bool,
    pub register: String,
}

/// One PTX instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instr {
    /// Full dotted mnemonic as written, e.g. `ld.local.b32`, `bra.uni`, `trap`.
    pub opcode: String,
    pub predicate: Option<PredicateGuard>,
    pub kind: InstrKind,
    /// 1-based source line.
    pub line: usize,
    /// Byte offset of the instruction in the source.
    pub offset: usize,
}

/// What an instruction does to control flow (or whether it is a call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstrKind {
    /// `bra` (one target) or `brx.idx` (its `.branchtargets` list).
    Branch {
        targets: Vec<String>,
    },
    Ret,
    Exit,
    Trap,
    Call,
    Other,
}

impl Instr {
    /// Whether the instruction ends a basic block.
    pub fn is_terminator(&self) -> bool {
        !matches!(self.kind, InstrKind::Other | InstrKind::Call)
    }

    /// Whether execution may continue with the next instruction after a terminator: only when
    /// the terminator is predicated.
    pub fn may_fall_through(&self) -> bool {
        !self.is_terminator() || self.predicate.is_some()
    }

    /// `ld.local*` / `st.local*`.
    pub fn is_local_access(&self) -> bool {
        let mut parts = self.opcode.split('.');
        matches!(parts.next(), Some("ld" | "st")) && parts.any(|p| p == "local")
    }
}

impl PtxModule {
    /// Parses PTX source text.
    pub fn parse(source: &str) -> Result<PtxModule, PtxError> {
        if source.len() > MAX_PTX_BYTES {
            return Err(PtxError::TooLarge {
                bytes: source.len(),
                limit: MAX_PTX_BYTES,
            });
        }
        let source_text = Source::new(source);
        let ast = source_text.parse()?;
        let lines = source_text.lines();
        let markers = hot_marker_offsets(source);

        let mut functions = Vec::new();
        let mut shared = Vec::new();
        for directive in &ast.directives {
            match directive {
                ModuleDirective::EntryFunction { directive, .. } => {
                    if let Some(body) = &directive.body {
                        let header = directive.name.span.start;
                        let builder = FunctionBuilder::new(source, lines, &directive.name.val);
                        functions.push(builder.build(true, header, &[], body, &markers)?);
                    }
                }
                ModuleDirective::FuncFunction { directive, .. } => {
                    if let Some(body) = &directive.body {
                        let header = directive.name.span.start;
                        let builder = FunctionBuilder::new(source, lines, &directive.name.val);
                        functions.push(builder.build(
                            false,
                            header,
                            &directive.pre_body_declarations,
                            body,
                            &markers,
                        )?);
                    }
                }
                ModuleDirective::ModuleVariable {
                    linkage,
                    directive: ModuleVariableDirective::Shared { directive, .. },
                    ..
                } => {
                    let is_extern = matches!(linkage, Some(DataLinkage::Extern { .. }));
                    shared.push(variable_decl(directive, is_extern));
                }
                _ => {}
            }
        }
        Ok(PtxModule { functions, shared })
    }

    /// The `.entry` functions.
    pub fn kernels(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(|f| f.is_kernel)
    }
}

impl Function {
    /// Static shared memory this function declares or references (bytes), and whether it uses
    /// dynamic shared memory. Module-scope `.shared` variables count when the body names them.
    pub fn shared_usage(&self, module: &PtxModule) -> (u64, bool) {
        let mut bytes = 0u64;
        let mut dynamic = false;
        let used = module
            .shared
            .iter()
            .filter(|d| self.referenced_symbols.contains(&d.name));
        for decl in self.shared.iter().chain(used) {
            bytes = bytes.saturating_add(decl.bytes);
            dynamic |= decl.dynamic;
        }
        (bytes, dynamic)
    }
}

/// Byte offsets of `ingot:hot` markers inside `//` line comments.
fn hot_marker_offsets(source: &str) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut line_start = 0;
    for line in source.split_inclusive('\n') {
        if let Some(comment) = line.find("//") {
            let text = &line[comment..];
            let mut from = 0;
            while let Some(pos) = text[from..].find(HOT_MARKER) {
                let end = from + pos + HOT_MARKER.len();
                let next = text[end..].chars().next();
                let whole_word = !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
                if whole_word {
                    offsets.push(line_start + comment + from + pos);
                }
                from = end;
            }
        }
        line_start += line.len();
    }
    offsets
}

struct FunctionBuilder<'a> {
    source: &'a str,
    lines: &'a LineIndex,
    function: Function,
    /// `.branchtargets` lists by the label that names them.
    branch_tables: HashMap<String, Vec<String>>,
    /// Label seen immediately before the current statement (names a `.branchtargets` list).
    pending_label: Option<String>,
    /// Indirect branches whose target list is resolved after the whole body is read:
    /// (instruction index, table label).
    indirect: Vec<(usize, String)>,
}

impl<'a> FunctionBuilder<'a> {
    fn new(source: &'a str, lines: &'a LineIndex, name: &str) -> Self {
        FunctionBuilder {
            source,
            lines,
            function: Function {
                name: name.to_string(),
                is_kernel: false,
                instrs: Vec::new(),
                stmts: Vec::new(),
                local_decl_bytes: 0,
                has_local_depot: false,
                shared: Vec::new(),
                hot_markers: Vec::new(),
                referenced_symbols: Vec::new(),
                line: 0,
            },
            branch_tables: HashMap::new(),
            pending_label: None,
            indirect: Vec::new(),
        }
    }

    fn build(
        mut self,
        is_kernel: bool,
        header_offset: usize,
        pre_body: &[StatementDirective],
        body: &FunctionBody,
        markers: &[usize],
    ) -> Result<Function, PtxError> {
        self.function.is_kernel = is_kernel;
        self.function.line = self.lines.line(header_offset);
        for directive in pre_body {
            self.directive(directive);
        }
        self.statements(&body.statements);
        for (index, table) in std::mem::take(&mut self.indirect) {
            let targets = self.branch_tables.get(&table).cloned().ok_or_else(|| {
                PtxError::UnresolvedBranchTable {
                    function: self.function.name.clone(),
                    table: table.clone(),
                }
            })?;
            self.function.instrs[index].kind = InstrKind::Branch { targets };
        }
        self.check_labels()?;

        let (start, end) = (body.span.start, body.span.end);
        for &offset in markers.iter().filter(|&&o| o > start && o < end) {
            let next = self.function.instrs.partition_point(|i| i.offset < offset);
            if !self.function.instrs.is_empty() {
                let index = next.min(self.function.instrs.len() - 1);
                self.function.hot_markers.push(index);
            }
        }
        self.function.referenced_symbols.sort();
        self.function.referenced_symbols.dedup();
        Ok(self.function)
    }

    /// Every branch target must be a label of this function.
    fn check_labels(&self) -> Result<(), PtxError> {
        let labels: Vec<&str> = self
            .function
            .stmts
            .iter()
            .filter_map(|s| match s {
                Stmt::Label(l) => Some(l.as_str()),
                Stmt::Instr(_) => None,
            })
            .collect();
        for instr in &self.function.instrs {
            if let InstrKind::Branch { targets } = &instr.kind {
                if let Some(missing) = targets.iter().find(|t| !labels.contains(&t.as_str())) {
                    return Err(PtxError::UnknownLabel {
                        function: self.function.name.clone(),
                        label: missing.clone(),
                        line: instr.line,
                    });
                }
            }
        }
        Ok(())
    }

    fn statements(&mut self, statements: &[FunctionStatement]) {
        for statement in statements {
            let label = self.pending_label.take();
            match statement {
                FunctionStatement::Label { label, .. } => {
                    self.pending_label = Some(label.val.clone());
                    self.function.stmts.push(Stmt::Label(label.val.clone()));
                }
                FunctionStatement::Directive { directive, .. } => {
                    if let StatementDirective::BranchTargets { directive, .. } = directive {
                        if let Some(name) = label {
                            let targets = directive.labels.iter().map(|l| l.val.clone());
                            self.branch_tables.insert(name, targets.collect());
                        }
                    } else {
                        self.directive(directive);
                    }
                }
                FunctionStatement::Instruction { instruction, span } => {
                    self.instruction(instruction, span.start, span.end);
                }
                FunctionStatement::Block { statements, .. } => self.statements(statements),
            }
        }
    }

    fn directive(&mut self, directive: &StatementDirective) {
        match directive {
            StatementDirective::Local { directive, .. } => {
                let decl = variable_decl(directive, false);
                self.function.has_local_depot |= decl.name.starts_with("__local_depot");
                self.function.local_decl_bytes =
                    self.function.local_decl_bytes.saturating_add(decl.bytes);
            }
            StatementDirective::Shared { directive, .. } => {
                self.function.shared.push(variable_decl(directive, false));
            }
            _ => {}
        }
    }

    fn instruction(
        &mut self,
        instruction: &ptx_syntax::r#type::Instruction,
        start: usize,
        end: usize,
    ) {
        let text_start = instruction
            .predicate
            .as_ref()
            .map_or(start, |p| p.span.end.max(start));
        let text = self.source.get(text_start..end).unwrap_or("");
        let opcode: String = text
            .trim_start()
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != ';')
            .collect();
        let predicate = instruction.predicate.as_ref().map(|p| PredicateGuard {
            negated: p.negated,
            register: operand_text(self.source, &p.operand),
        });
        let index = self.function.instrs.len();
        let kind = match &instruction.inst {
            Inst::BraUni(b) => InstrKind::Branch {
                targets: vec![general_operand_symbol(&b.tgt).unwrap_or_default()],
            },
            Inst::BraUni1(b) => InstrKind::Branch {
                targets: vec![general_operand_symbol(&b.tgt).unwrap_or_default()],
            },
            Inst::BrxIdxUni(b) => {
                self.indirect
                    .push((index, general_operand_symbol(&b.tlist).unwrap_or_default()));
                InstrKind::Branch {
                    targets: Vec::new(),
                }
            }
            Inst::BrxIdxUni1(b) => {
                self.indirect
                    .push((index, general_operand_symbol(&b.tlist).unwrap_or_default()));
                InstrKind::Branch {
                    targets: Vec::new(),
                }
            }
            _ => classify_mnemonic(&opcode),
        };
        collect_symbols(text, &mut self.function.referenced_symbols);
        self.function.instrs.push(Instr {
            opcode,
            predicate,
            kind,
            line: self.lines.line(start),
            offset: start,
        });
        self.function.stmts.push(Stmt::Instr(index));
    }
}

fn classify_mnemonic(opcode: &str) -> InstrKind {
    match opcode.split('.').next().unwrap_or("") {
        "ret" => InstrKind::Ret,
        "exit" => InstrKind::Exit,
        "trap" => InstrKind::Trap,
        "call" => InstrKind::Call,
        _ => InstrKind::Other,
    }
}

fn general_operand_symbol(operand: &GeneralOperand) -> Option<String> {
    match operand {
        GeneralOperand::Single {
            operand: Operand::Symbol { name, .. },
            ..
        } => Some(name.clone()),
        _ => None,
    }
}

fn operand_text(source: &str, operand: &Operand) -> String {
    let span = ptx_syntax::span::Spanned::span(operand);
    source.get(span.start..span.end).unwrap_or("").to_string()
}

/// Identifiers in an instruction's operand text that are not registers (`%r1`), i.e. symbols such
/// as shared variables, parameters and labels. Over-approximates; used only to match names.
fn collect_symbols(text: &str, out: &mut Vec<String>) {
    let operands = text
        .trim_start()
        .split_once(char::is_whitespace)
        .map_or("", |(_, rest)| rest);
    let mut word = String::new();
    let mut register = false;
    for c in operands.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
            word.push(c);
        } else {
            let starts_like_symbol = word
                .chars()
                .next()
                .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == '$');
            if !register && starts_like_symbol {
                out.push(std::mem::take(&mut word));
            }
            word.clear();
            register = c == '%';
        }
    }
}

/// Size of one element of `ty` in bytes (`.pred` and opaque handles count 0: they have no
/// memory footprint in `.shared`/`.local`).
fn type_bytes(ty: &DataType) -> u64 {
    match ty {
        DataType::U8 { .. } | DataType::S8 { .. } | DataType::B8 { .. } => 1,
        DataType::U16 { .. } | DataType::S16 { .. } | DataType::B16 { .. } => 2,
        DataType::F16 { .. } => 2,
        DataType::U32 { .. } | DataType::S32 { .. } | DataType::B32 { .. } => 4,
        DataType::F32 { .. } | DataType::F16x2 { .. } => 4,
        DataType::U64 { .. } | DataType::S64 { .. } | DataType::B64 { .. } => 8,
        DataType::F64 { .. } => 8,
        DataType::B128 { .. } => 16,
        DataType::Pred { .. }
        | DataType::TexRef { .. }
        | DataType::SamplerRef { .. }
        | DataType::SurfRef { .. } => 0,
    }
}

fn variable_decl(directive: &VariableDirective, is_extern: bool) -> VariableDecl {
    let vector = directive
        .modifiers
        .iter()
        .find_map(|m| match m {
            ptx_syntax::r#type::VariableModifier::Vector { value, .. } => Some(u64::from(*value)),
            _ => None,
        })
        .unwrap_or(1);
    let mut bytes = type_bytes(&directive.ty).saturating_mul(vector);
    let mut dynamic = false;
    for dim in &directive.array_dims {
        match dim {
            Some(n) => bytes = bytes.saturating_mul(*n),
            None => dynamic = true,
        }
    }
    if dynamic || (is_extern && directive.array_dims.is_empty()) {
        bytes = 0;
        dynamic = true;
    }
    VariableDecl {
        name: directive.name.val.clone(),
        bytes,
        dynamic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = r#"
.version 7.8
.target sm_86
.address_size 64
.shared .align 4 .b8 tile[512];
.extern .shared .align 16 .b8 dyn_smem[];

.visible .entry k(.param .u32 n)
{
    .local .align 4 .b8 __local_depot0[64];
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    mov.u32 %r1, tile;
    mov.u64 %rd1, dyn_smem;
$L__BB0_1:
    // ingot:hot
    ld.local.b32 %r2, [%rd1];
    setp.lt.u32 %p1, %r2, 4;
    @!%p1 bra $L__BB0_1;
    trap; exit;
}
"#;

    #[test]
    fn reads_kernel_structure() {
        let module = PtxModule::parse(MINI).unwrap();
        let k = module.kernels().next().unwrap();
        assert_eq!(k.name, "k");
        assert_eq!(k.instrs.len(), 7);
        assert_eq!(k.instrs[2].opcode, "ld.local.b32");
        assert!(k.instrs[2].is_local_access());
        assert_eq!(
            k.instrs[4].predicate,
            Some(PredicateGuard {
                negated: true,
                register: "%p1".into()
            })
        );
        assert_eq!(
            k.instrs[4].kind,
            InstrKind::Branch {
                targets: vec!["$L__BB0_1".into()]
            }
        );
        assert_eq!(k.instrs[5].kind, InstrKind::Trap);
        assert_eq!(k.instrs[6].kind, InstrKind::Exit);
        assert_eq!(k.local_decl_bytes, 64);
        assert!(k.has_local_depot);
        // The marker sits right before the ld.local, instruction index 2.
        assert_eq!(k.hot_markers, vec![2]);
        assert_eq!(k.shared_usage(&module), (512, true));
        assert_eq!(k.instrs[2].line, 18);
    }

    #[test]
    fn marker_must_be_a_whole_word_in_a_comment() {
        let text = "// ingot:hotter\n  // ingot:hot\nmov.u32 %r1, 0; // x ingot:hot.\n";
        assert_eq!(hot_marker_offsets(text).len(), 2);
    }

    #[test]
    fn malformed_ptx_is_a_parse_error_with_a_line() {
        let err = PtxModule::parse(".version 7.8\n.target sm_86\n.entry k( {\n").unwrap_err();
        assert!(matches!(err, PtxError::Parse { .. }), "{err:?}");
    }

    #[test]
    fn branch_to_a_missing_label_is_an_error() {
        let src = ".version 7.8\n.target sm_86\n.address_size 64\n.visible .entry k()\n{\n bra.uni $L_nowhere;\n ret;\n}\n";
        let err = PtxModule::parse(src).unwrap_err();
        assert!(
            matches!(&err, PtxError::UnknownLabel { label, .. } if label == "$L_nowhere"),
            "{err:?}"
        );
    }
}
