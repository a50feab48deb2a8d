//! Errors of the PTX front end. Each names the line (and column) or the function involved.

/// Why PTX text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PtxError {
    #[error("PTX is {bytes} bytes, over the {limit}-byte limit")]
    TooLarge { bytes: usize, limit: usize },
    #[error("PTX parse error at line {line}, column {column}: {message}")]
    Parse {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("PTX parse error at line {line}, column {column}: invalid token")]
    InvalidToken { line: usize, column: usize },
    #[error("the PTX parser (ptx-syntax) panicked on this input")]
    ParserPanic,
    #[error("function `{function}` line {line}: branch to unknown label `{label}`")]
    UnknownLabel {
        function: String,
        label: String,
        line: usize,
    },
    #[error("function `{function}`: brx.idx names `{table}`, which is not a .branchtargets list")]
    UnresolvedBranchTable { function: String, table: String },
}
