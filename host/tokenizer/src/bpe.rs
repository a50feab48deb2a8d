//! Byte-level BPE merging, as llama.cpp's `llm_tokenizer_bpe_session::tokenize` does it.
//!
//! Every string that can appear during merging (vocabulary entries, both halves of every merge and
//! their concatenation, the 256 single-byte symbols) is interned once as a *symbol id*. Symbol ids
//! below `n_vocab` are token ids; strings that are not vocabulary entries get ids from `n_vocab`
//! up. Merging then works on integers only.
//!
//! Merge order: repeatedly merge the adjacent pair with the lowest rank (merge-list index), the
//! leftmost one among equal ranks. A priority queue keyed by `(rank, left position)` with lazy
//! deletion makes one word `O(n log n)` in its byte length `n`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::byte_level::ByteLevel;

/// Merge table and symbol interner.
#[derive(Debug, Clone)]
pub(crate) struct Bpe {
    /// Symbol id of the visible character standing for each byte.
    byte_symbol: [u32; 256],
    /// `(left symbol, right symbol)` -> `(rank, merged symbol)`.
    pairs: HashMap<(u32, u32), (u32, u32)>,
    /// Number of token ids; symbol ids at or above it are not tokens.
    n_vocab: u32,
}

/// Interns strings to symbol ids during construction.
struct Interner<'v> {
    ids: HashMap<&'v str, u32>,
    /// Strings not in the vocabulary (merge halves and results); their ids are `n_vocab + index`.
    extra: HashMap<String, u32>,
    next_extra: u32,
}

impl<'v> Interner<'v> {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        if let Some(&id) = self.extra.get(s) {
            return id;
        }
        let id = self.next_extra;
        self.next_extra += 1;
        self.extra.insert(s.to_owned(), id);
        id
    }
}

impl Bpe {
    /// Builds the merge table. `token_to_id` maps every vocabulary string to its token id (last
    /// duplicate wins, as in llama.cpp). Merge lines are `"left right"`, split at the first space
    /// after the first byte; lines without such a space cannot match anything in llama.cpp and are
    /// skipped. The first of duplicate merges wins.
    pub(crate) fn new(
        token_to_id: &HashMap<&str, u32>,
        n_vocab: u32,
        merges: &[&str],
        bytes: &ByteLevel,
    ) -> Bpe {
        let mut interner = Interner {
            ids: token_to_id.clone(),
            extra: HashMap::new(),
            next_extra: n_vocab,
        };
        let mut byte_symbol = [0u32; 256];
        let mut buf = [0u8; 4];
        for (b, slot) in byte_symbol.iter_mut().enumerate() {
            *slot = interner.id(bytes.char_of(b as u8).encode_utf8(&mut buf));
        }
        let mut pairs = HashMap::with_capacity(merges.len());
        let mut joined = String::new();
        for (rank, line) in merges.iter().enumerate() {
            let Some(split) = line.bytes().skip(1).position(|b| b == b' ').map(|p| p + 1) else {
                continue;
            };
            let (left, right) = (&line[..split], &line[split + 1..]);
            joined.clear();
            joined.push_str(left);
            joined.push_str(right);
            let key = (interner.id(left), interner.id(right));
            let merged = interner.id(&joined);
            // Ranks beyond u32 cannot occur: the merge count is bounded by the vocabulary size
            // checks upstream, and saturating keeps the order monotone regardless.
            let rank = u32::try_from(rank).unwrap_or(u32::MAX);
            pairs.entry(key).or_insert((rank, merged));
        }
        Bpe {
            byte_symbol,
            pairs,
            n_vocab,
        }
    }

    /// Number of merge rules kept.
    pub(crate) fn n_merges(&self) -> usize {
        self.pairs.len()
    }

    /// Appends the tokens of one pre-token `word` (raw bytes) to `out`.
    ///
    /// A final symbol that is not a vocabulary entry (only possible with a merge list inconsistent
    /// with the vocabulary, or a vocabulary missing byte tokens) falls back to the tokens of its
    /// single bytes, skipping bytes that have no token.
    pub(crate) fn encode_word(&self, word: &[u8], scratch: &mut BpeScratch, out: &mut Vec<u32>) {
        let symbols = &mut scratch.symbols;
        let queue = &mut scratch.queue;
        symbols.clear();
        queue.clear();
        let n = word.len();
        symbols.extend(word.iter().enumerate().map(|(i, &b)| Symbol {
            id: self.byte_symbol[b as usize],
            len: 1,
            prev: i.wrapping_sub(1),
            next: if i + 1 < n { i + 1 } else { NONE },
        }));
        for i in 1..n {
            self.push_pair(symbols, queue, i - 1, i);
        }
        while let Some(Reverse(cand)) = queue.pop() {
            let (l, r) = (cand.left, cand.right);
            // Stale entries: either side already merged elsewhere or grown since the pair was
            // queued. Symbol start offsets never move, so unchanged lengths mean unchanged text.
            if symbols[l].len != cand.left_len
                || symbols[r].len != cand.right_len
                || symbols[l].next != r
            {
                continue;
            }
            let right_len = symbols[r].len;
            let right_next = symbols[r].next;
            symbols[l].id = cand.merged;
            symbols[l].len += right_len;
            symbols[r].len = 0;
            symbols[l].next = right_next;
            if right_next != NONE {
                symbols[right_next].prev = l;
            }
            let prev = symbols[l].prev;
            if prev != NONE {
                self.push_pair(symbols, queue, prev, l);
            }
            if right_next != NONE {
                self.push_pair(symbols, queue, l, right_next);
            }
        }
        let mut i = if n == 0 { NONE } else { 0 };
        let mut start = 0usize;
        while i != NONE {
            let sym = symbols[i];
            if sym.id < self.n_vocab {
                out.push(sym.id);
            } else {
                for &b in &word[start..start + sym.len] {
                    let id = self.byte_symbol[b as usize];
                    if id < self.n_vocab {
                        out.push(id);
                    }
                }
            }
            start += sym.len;
            i = sym.next;
        }
    }

    fn push_pair(
        &self,
        symbols: &[Symbol],
        queue: &mut BinaryHeap<Reverse<Candidate>>,
        l: usize,
        r: usize,
    ) {
        let (left, right) = (symbols[l], symbols[r]);
        if let Some(&(rank, merged)) = self.pairs.get(&(left.id, right.id)) {
            queue.push(Reverse(Candidate {
                rank,
                left: l,
                right: r,
                left_len: left.len,
                right_len: right.len,
                merged,
            }));
        }
    }
}

/// Marks "no neighbour" in the symbol chain (`usize::MAX`, which `0usize.wrapping_sub(1)` also
/// yields).
const NONE: usize = usize::MAX;

#[derive(Debug, Clone, Copy)]
struct Symbol {
    id: u32,
    /// Byte length of the symbol's text; 0 once merged into its left neighbour.
    len: usize,
    prev: usize,
    next: usize,
}

/// A queued merge. Field order makes the derived ordering `(rank, left, ...)`: lowest rank first,
/// then leftmost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    rank: u32,
    left: usize,
    right: usize,
    left_len: usize,
    right_len: usize,
    merged: u32,
}

/// Reusable buffers for [`Bpe::encode_word`], so encoding many words allocates once.
#[derive(Debug, Default)]
pub(crate) struct BpeScratch {
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Reverse<Candidate>>,
}
