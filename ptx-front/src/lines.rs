//! Byte offsets to 1-based line and column numbers, for error messages and per-line reports.

/// Start offsets of the lines of one text.
#[derive(Debug, Clone)]
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    /// 1-based line and column (in bytes) of `offset`; offsets past the end belong to the last
    /// line.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        (line, offset - self.starts[line - 1] + 1)
    }

    /// 1-based line of `offset`.
    pub fn line(&self, offset: usize) -> usize {
        self.line_col(offset).0
    }
}

#[cfg(test)]
mod tests {
    use super::LineIndex;

    #[test]
    fn lines_and_columns_are_one_based() {
        let lines = LineIndex::new("ab\ncd\n");
        assert_eq!(lines.line_col(0), (1, 1));
        assert_eq!(lines.line_col(2), (1, 3)); // the newline ends line 1
        assert_eq!(lines.line_col(3), (2, 1));
        assert_eq!(lines.line(6), 3);
    }
}
