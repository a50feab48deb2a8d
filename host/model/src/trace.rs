//! Routing traces (`ingot run --trace-routing FILE`): which experts every MoE layer chose, with
//! what weight, for every token a decoder ran, in a binary format numpy can memory-map. Format (all
//! little-endian; `docs/routing-trace.md` has the numpy recipe):
//!
//! | offset | bytes | content |
//! |---|---|---|
//! | 0 | 8 | magic `INGOTRTR` |
//! | 8 | 4 | u32 format version, 1 |
//! | 12 | 4 | u32 `H`: length of the JSON header that follows, padded with spaces so that `16 + H` is a multiple of 64 |
//! | 16 | `H` | JSON [`TraceHeader`], including `numpy_dtype` (the record layout as numpy's `descr` list) |
//! | `16 + H` | `R` each | records to the end of the file; `R` = `record_bytes` of the header |
//!
//! One record per token: `session` u32, `turn` u32, `pos` u32, `token` u32, `phase` u8 (0 prefill,
//! 1 decode), 3 bytes of padding, `weights` f32 `[L][K]`, `experts` u16 `[L][K]`, zero padding to a
//! multiple of 4 bytes; `L` = MoE decoding layers (in `moe_layers`), `K` = `n_expert_used`, each
//! layer's pairs in routing order.
//!
//! Invariants: a trace is written to a temporary file and renamed when finished, so a trace on disk
//! is complete; its record count is `(file size − 16 − H) / R`, exact; the header names the model
//! it came from (`fingerprint`: FNV-1a 64 of the architecture, name and tensor table), so a trace
//! is never read against another model.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use ingot_abi::hash::Fnv1a;
use ingot_gguf::{Gguf, OutputFile, OutputPolicy};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::ModelConfig;

pub const MAGIC: [u8; 8] = *b"INGOTRTR";
pub const VERSION: u32 = 1;
/// Bytes before the weights of a record: session, turn, pos, token, phase + 3 padding.
const FIXED_BYTES: usize = 20;

#[derive(Debug, Error)]
pub enum TraceError {
    #[error("routing trace {path}: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error("routing trace {path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        source: std::io::Error,
    },
    #[error("routing trace: {0}")]
    Output(#[from] ingot_gguf::OutputError),
}

type Result<T> = std::result::Result<T, TraceError>;

/// Phase of the token a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Prefill = 0,
    Decode = 1,
}

/// The JSON header of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// `general.name` of the model, or empty.
    pub model: String,
    /// [`fingerprint`] of the model's GGUF header, 16 hex digits.
    pub fingerprint: String,
    pub n_expert: usize,
    pub n_expert_used: usize,
    /// Block indices of the MoE decoding layers, in record order.
    pub moe_layers: Vec<usize>,
    /// Bytes of one routed expert (gate, up and down slabs together) per MoE layer: what a cache
    /// moves per miss.
    pub expert_bytes: Vec<u64>,
    pub record_bytes: usize,
    /// The record layout as numpy's structured `descr`: `[[name, type], [name, type, [dims]],
    /// ...]`.
    pub numpy_dtype: serde_json::Value,
}

impl TraceHeader {
    /// The header for traces of `config`'s model, whose GGUF header is `gguf`.
    pub fn new(gguf: &Gguf, config: &ModelConfig) -> Self {
        let moe_layers: Vec<usize> = (0..config.n_layer)
            .filter(|&il| config.is_moe_layer(il))
            .collect();
        let expert_bytes = moe_layers
            .iter()
            .map(|&il| {
                gguf.tensors
                    .iter()
                    .filter(|t| {
                        t.name.starts_with(&format!("blk.{il}.ffn_")) && t.name.contains("_exps.")
                    })
                    .map(|t| t.nbytes / config.n_expert.max(1) as u64)
                    .sum()
            })
            .collect();
        let (l, k) = (moe_layers.len(), config.n_expert_used);
        TraceHeader {
            model: config.name.clone().unwrap_or_default(),
            fingerprint: format!("{:016x}", fingerprint(gguf)),
            n_expert: config.n_expert,
            n_expert_used: k,
            expert_bytes,
            record_bytes: record_bytes(l, k),
            numpy_dtype: numpy_dtype(l, k),
            moe_layers,
        }
    }

    fn pairs(&self) -> usize {
        self.moe_layers.len() * self.n_expert_used
    }
}

/// The record layout as numpy's `descr` (a trailing padding field only when there is padding).
fn numpy_dtype(l: usize, k: usize) -> serde_json::Value {
    let mut fields = vec![
        serde_json::json!(["session", "<u4"]),
        serde_json::json!(["turn", "<u4"]),
        serde_json::json!(["pos", "<u4"]),
        serde_json::json!(["token", "<u4"]),
        serde_json::json!(["phase", "u1"]),
        serde_json::json!(["_pad", "V3"]),
        serde_json::json!(["weights", "<f4", [l, k]]),
        serde_json::json!(["experts", "<u2", [l, k]]),
    ];
    let tail = record_bytes(l, k) - FIXED_BYTES - 6 * l * k;
    if tail > 0 {
        fields.push(serde_json::json!(["_tail", format!("V{tail}")]));
    }
    serde_json::Value::Array(fields)
}

/// Record size for `l` layers of `k` experts: the fixed fields, `6·l·k` bytes of pairs, padded to 4
/// bytes.
fn record_bytes(l: usize, k: usize) -> usize {
    (FIXED_BYTES + 6 * l * k).div_ceil(4) * 4
}

/// FNV-1a 64 over the architecture, the name and every tensor's name, type and shape: equal for the
/// same model file (and for a requantized copy only if every type is equal), different for another
/// model.
pub fn fingerprint(gguf: &Gguf) -> u64 {
    let mut h = Fnv1a::new();
    for key in ["general.architecture", "general.name"] {
        if let Some(ingot_gguf::MetaValue::String(s)) = gguf.get(key) {
            h = h.bytes(s.as_bytes());
        }
        h = h.bytes(&[0]);
    }
    for t in &gguf.tensors {
        h = h.bytes(t.name.as_bytes()).bytes(&t.ty.id().to_le_bytes());
        for d in &t.ne {
            h = h.bytes(&d.to_le_bytes());
        }
    }
    h.finish()
}

/// One token's routing.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRecord {
    pub session: u32,
    pub turn: u32,
    pub pos: u32,
    pub token: u32,
    pub phase: Phase,
    /// `L·K` pairs `(expert, weight)`, layer-major (what [`crate::Decoder::routing`] returns).
    pub routing: Vec<(u32, f32)>,
}

/// Writes a trace: header at creation, one record per call, renamed into place by
/// [`TraceWriter::finish`].
pub struct TraceWriter {
    out: OutputFile,
    header: TraceHeader,
    buf: Vec<u8>,
}

impl TraceWriter {
    /// A trace at `path`, replacing a regular file there ([`OutputPolicy::REPLACE`]).
    pub fn create(path: &Path, header: TraceHeader) -> Result<Self> {
        Self::create_output(OutputFile::create(path, &OutputPolicy::REPLACE)?, header)
    }

    /// A trace written into `out` (checked against the caller's policy when it was created).
    pub fn create_output(mut out: OutputFile, header: TraceHeader) -> Result<Self> {
        let mut json = serde_json::to_string(&header).expect("a header serializes");
        while !(16 + json.len()).is_multiple_of(64) {
            json.push(' ');
        }
        let mut head = Vec::with_capacity(16 + json.len());
        head.extend_from_slice(&MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&(json.len() as u32).to_le_bytes());
        head.extend_from_slice(json.as_bytes());
        out.write_all(&head).map_err(|e| TraceError::Io {
            path: out.tmp().to_path_buf(),
            op: "write",
            source: e,
        })?;
        Ok(TraceWriter {
            out,
            buf: Vec::with_capacity(header.record_bytes),
            header,
        })
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// Appends one record; its routing must hold exactly `L·K` pairs.
    pub fn record(&mut self, r: &TraceRecord) -> Result<()> {
        let pairs = self.header.pairs();
        if r.routing.len() != pairs {
            return Err(TraceError::Format {
                path: self.out.dest().to_path_buf(),
                reason: format!(
                    "a record of {} pairs, the header says {pairs}",
                    r.routing.len()
                ),
            });
        }
        let b = &mut self.buf;
        b.clear();
        for v in [r.session, r.turn, r.pos, r.token] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[r.phase as u8, 0, 0, 0]);
        for &(_, w) in &r.routing {
            b.extend_from_slice(&w.to_le_bytes());
        }
        for &(e, _) in &r.routing {
            let e = u16::try_from(e).map_err(|_| TraceError::Format {
                path: self.out.dest().to_path_buf(),
                reason: format!("expert id {e} does not fit the format's u16"),
            })?;
            b.extend_from_slice(&e.to_le_bytes());
        }
        b.resize(self.header.record_bytes, 0);
        self.out.write_all(b).map_err(|e| TraceError::Io {
            path: self.out.tmp().to_path_buf(),
            op: "write",
            source: e,
        })
    }

    /// Flushes, syncs and renames the trace into place.
    pub fn finish(self) -> Result<()> {
        Ok(self.out.commit()?)
    }
}

/// A trace opened for reading: its header, and its records memory-mapped (decoded one at a time, so
/// a trace of any length costs no memory of its own).
pub struct Trace {
    pub header: TraceHeader,
    path: PathBuf,
    map: memmap2::Mmap,
    body: usize,
    len: usize,
}

impl Trace {
    pub fn open(path: &Path) -> Result<Trace> {
        let io = |op, source| TraceError::Io {
            path: path.to_path_buf(),
            op,
            source,
        };
        // A FIFO would block the open forever; a directory fails to map with "No such device".
        let meta = std::fs::metadata(path).map_err(|e| io("open", e))?;
        if let Some(kind) = ingot_gguf::output::non_regular_kind(&meta) {
            return Err(TraceError::Format {
                path: path.to_path_buf(),
                reason: format!("is {kind}, not a regular file: name a routing trace file"),
            });
        }
        let file = File::open(path).map_err(|e| io("open", e))?;
        // SAFETY: the map is read only; a trace is written to a temporary file and renamed, so a
        // finished trace is not modified in place by ingot.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io("map", e))?;
        let bad = |reason: String| TraceError::Format {
            path: path.to_path_buf(),
            reason,
        };
        let bytes = &map[..];
        if bytes.len() < 16 || bytes[..8] != MAGIC {
            return Err(bad("not a routing trace (no INGOTRTR magic)".into()));
        }
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let version = word(8);
        if version != VERSION {
            return Err(bad(format!(
                "format version {version}, this ingot reads {VERSION}"
            )));
        }
        let h = word(12) as usize;
        let json = bytes.get(16..16 + h).ok_or_else(|| {
            bad(format!(
                "truncated: a {h}-byte header in {} bytes",
                bytes.len()
            ))
        })?;
        let header: TraceHeader =
            serde_json::from_slice(json).map_err(|e| bad(format!("header: {e}")))?;
        let (l, k) = (header.moe_layers.len(), header.n_expert_used);
        if header.record_bytes != record_bytes(l, k) || header.expert_bytes.len() != l || k == 0 {
            return Err(bad(format!(
                "header inconsistent: {l} layers x {k} experts need {}-byte records and {l} expert sizes, \
                 it says {} and {}",
                record_bytes(l, k),
                header.record_bytes,
                header.expert_bytes.len()
            )));
        }
        let body_len = bytes.len() - 16 - h;
        let r = header.record_bytes;
        if !body_len.is_multiple_of(r) {
            return Err(bad(format!(
                "truncated: {body_len} bytes of records is not a whole number of {r}-byte records"
            )));
        }
        Ok(Trace {
            path: path.to_path_buf(),
            body: 16 + h,
            len: body_len / r,
            header,
            map,
        })
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Record `i` (< [`Trace::len`]), checked: a phase other than 0/1 or an expert id outside the
    /// model is an error naming the record.
    pub fn record(&self, i: usize) -> Result<TraceRecord> {
        let r = self.header.record_bytes;
        let rec = &self.map[self.body + i * r..self.body + (i + 1) * r];
        let bad = |reason: String| TraceError::Format {
            path: self.path.clone(),
            reason: format!("record {i}: {reason}"),
        };
        let w = |at: usize| u32::from_le_bytes(rec[at..at + 4].try_into().expect("4 bytes"));
        let phase = match rec[16] {
            0 => Phase::Prefill,
            1 => Phase::Decode,
            p => return Err(bad(format!("phase {p} is neither 0 nor 1"))),
        };
        let pairs = self.header.pairs();
        let mut routing = Vec::with_capacity(pairs);
        for j in 0..pairs {
            let at = FIXED_BYTES + 4 * j;
            let weight = f32::from_le_bytes(rec[at..at + 4].try_into().expect("4 bytes"));
            let at = FIXED_BYTES + 4 * pairs + 2 * j;
            let expert = u32::from(u16::from_le_bytes([rec[at], rec[at + 1]]));
            if expert as usize >= self.header.n_expert {
                return Err(bad(format!(
                    "expert {expert} is outside the model's {}",
                    self.header.n_expert
                )));
            }
            routing.push((expert, weight));
        }
        Ok(TraceRecord {
            session: w(0),
            turn: w(4),
            pos: w(8),
            token: w(12),
            phase,
            routing,
        })
    }

    /// Every record in order.
    pub fn records(&self) -> impl Iterator<Item = Result<TraceRecord>> + '_ {
        (0..self.len).map(|i| self.record(i))
    }

    /// Refuses a trace recorded on another model than the one whose header is `gguf`.
    pub fn check_model(&self, gguf: &Gguf) -> Result<()> {
        let want = format!("{:016x}", fingerprint(gguf));
        if self.header.fingerprint != want {
            return Err(TraceError::Format {
                path: self.path.clone(),
                reason: format!(
                    "recorded on model {:?} (fingerprint {}), not this one (fingerprint {want})",
                    self.header.model, self.header.fingerprint
                ),
            });
        }
        Ok(())
    }
}
