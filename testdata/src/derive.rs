//! Golden files that are not committed because they are a fixed function of one that is: a model
//! in another layout, and files committed xz-compressed ([`unxz`]; f32 models as byte planes,
//! [`unxz_planes`]).
//!
//! `tiny-legacy-f32/model.gguf` holds the numbers of `tiny-mla-f32/model.gguf` in the legacy
//! attention layout: per layer one `attn_kv_b` `[kv_lora, n_head * (nope + v)]` in place of the
//! split `attn_k_b` (per head `[nope, kv_lora]`, stored transposed) and `attn_v_b` (per head
//! `[kv_lora, v]`), with the `*_mla` key/value widths as `key_length`/`value_length`, one kv head
//! per head, and named `...-legacy` for `...-mla`. llama.cpp's logits in that folder
//! were computed from the committed original; [`legacy_from_mla`] rebuilds it byte for byte
//! (GGUF v3, gguf-py's layout: keys and tensors in the source order, data aligned to
//! `general.alignment`, default 32), and [`LEGACY_SHA256`] pins the result, so a derivation that
//! drifts fails loudly instead of testing another model.
//!
//! It reads and writes the few GGUF structures it needs itself rather than through `ingot-gguf`:
//! this crate sits below every crate whose tests use it, `ingot-gguf`'s among them
//! (xtask/tests/layering.rs), and the pinned hash, not the code, is what vouches for the bytes.

use sha2::{Digest, Sha256};

/// SHA-256 of the original `tiny-legacy-f32/model.gguf` (5,304,256 bytes).
pub const LEGACY_SHA256: &str = "1309178414d27ed6cda839a6e17050308d222c80aa6a3f37a29d6c9b17d2f0e5";

const GGUF_F32: u32 = 0;
const ALIGNMENT: usize = 32;

/// Why a source file cannot be derived from: it is not the GGUF this module was written for.
#[derive(Debug)]
pub struct DeriveError(pub String);

impl std::fmt::Display for DeriveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The contents of an xz-compressed file (a test fixture committed compressed).
pub fn unxz(src: &[u8]) -> Result<Vec<u8>, DeriveError> {
    use std::io::Read;
    let mut out = Vec::new();
    xz2::read::XzDecoder::new(src)
        .read_to_end(&mut out)
        .map_err(|e| DeriveError(format!("not a whole xz stream: {e}")))?;
    Ok(out)
}

/// Byte planes of [`PLANE_WIDTH`]-byte words: an f32 model's sign-and-exponent bytes, which xz
/// packs tightly, apart from its mantissa bytes, which it barely packs (random f32 weights: 8% with
/// plain xz, 16% as planes).
pub const PLANE_WIDTH: usize = 4;

/// A file committed as [`planes_xz`] wrote it: the xz stream unpacked, then its planes
/// interleaved back.
pub fn unxz_planes(src: &[u8]) -> Result<Vec<u8>, DeriveError> {
    let planes = unxz(src)?;
    let words = planes.len() / PLANE_WIDTH;
    let body = words * PLANE_WIDTH;
    let mut out = vec![0u8; planes.len()];
    for (k, plane) in planes[..body]
        .chunks_exact(words.max(1))
        .enumerate()
        .take(PLANE_WIDTH)
    {
        for (i, &b) in plane.iter().enumerate() {
            out[i * PLANE_WIDTH + k] = b;
        }
    }
    out[body..].copy_from_slice(&planes[body..]);
    Ok(out)
}

/// What [`unxz_planes`] reads: byte `k` of every [`PLANE_WIDTH`]-byte word, for `k` in order, then
/// the bytes past the last whole word; xz-compressed (preset 9, extreme).
pub fn planes_xz(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let body = bytes.len() / PLANE_WIDTH * PLANE_WIDTH;
    let mut planes = Vec::with_capacity(bytes.len());
    for k in 0..PLANE_WIDTH {
        planes.extend(bytes[..body].iter().skip(k).step_by(PLANE_WIDTH));
    }
    planes.extend_from_slice(&bytes[body..]);
    let mut enc = xz2::write::XzEncoder::new(Vec::new(), 9 | 0x8000_0000);
    enc.write_all(&planes).expect("writing to memory");
    enc.finish().expect("writing to memory")
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DeriveError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| DeriveError(format!("truncated at byte {}", self.at)))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, DeriveError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, DeriveError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn len(&mut self) -> Result<usize, DeriveError> {
        usize::try_from(self.u64()?).map_err(|_| DeriveError("length past usize".into()))
    }
    fn string(&mut self) -> Result<&'a str, DeriveError> {
        let n = self.len()?;
        std::str::from_utf8(self.take(n)?).map_err(|_| DeriveError("string not UTF-8".into()))
    }
    /// Skips one metadata value of GGUF type `ty`.
    fn skip_value(&mut self, ty: u32) -> Result<(), DeriveError> {
        match ty {
            0 | 1 | 7 => self.take(1).map(drop),
            2 | 3 => self.take(2).map(drop),
            4..=6 => self.take(4).map(drop),
            10..=12 => self.take(8).map(drop),
            8 => self.string().map(drop),
            9 => {
                let (inner, n) = (self.u32()?, self.len()?);
                (0..n).try_for_each(|_| self.skip_value(inner))
            }
            _ => Err(DeriveError(format!("unknown metadata type {ty}"))),
        }
    }
}

struct Tensor {
    name: String,
    dims: Vec<u64>,
    ty: u32,
    data: Vec<u8>,
}

/// The legacy-layout file of an MLA-layout f32 GGUF (see the module doc).
pub fn legacy_from_mla(src: &[u8]) -> Result<Vec<u8>, DeriveError> {
    let mut r = Reader { bytes: src, at: 0 };
    if r.take(4)? != b"GGUF" || r.u32()? != 3 {
        return Err(DeriveError("not a GGUF v3 file".into()));
    }
    let (n_tensors, n_kv) = (r.len()?, r.len()?);
    // (key, type, byte range of the whole entry, byte range of its value), in file order.
    let mut entries = Vec::with_capacity(n_kv);
    for _ in 0..n_kv {
        let start = r.at;
        let key = r.string()?;
        let ty = r.u32()?;
        let value_at = r.at;
        r.skip_value(ty)?;
        if key == "general.alignment" {
            return Err(DeriveError(
                "general.alignment set: not the layout this derives".into(),
            ));
        }
        entries.push((key, ty, start..r.at, value_at..r.at));
    }
    let u32_of = |name: &str| {
        entries
            .iter()
            .find(|e| e.0 == name && e.1 == 4)
            .map(|e| u32::from_le_bytes(src[e.3.clone()].try_into().expect("4 bytes")))
            .ok_or_else(|| DeriveError(format!("no u32 {name}")))
    };
    let n_head = u32_of("deepseek2.attention.head_count")?;
    // The legacy layout's per-head key and value widths are the MLA file's `*_mla` ones, and
    // every head has its own keys.
    let replaced = [
        ("deepseek2.attention.head_count_kv", n_head),
        (
            "deepseek2.attention.key_length",
            u32_of("deepseek2.attention.key_length_mla")?,
        ),
        (
            "deepseek2.attention.value_length",
            u32_of("deepseek2.attention.value_length_mla")?,
        ),
    ];
    let n_head = n_head as usize;
    let mut kv = Vec::new();
    let mut kept_kv = 0u64;
    for (key, ty, whole, value) in &entries {
        if key.ends_with("_length_mla") {
            continue;
        }
        kept_kv += 1;
        let head = &src[whole.start..value.start];
        if let Some(&(_, v)) = replaced.iter().find(|(k, _)| k == key) {
            kv.extend_from_slice(head);
            kv.extend_from_slice(&v.to_le_bytes());
        } else if let (&"general.name", 8) = (key, *ty) {
            let name = std::str::from_utf8(&src[value.start + 8..value.end]).unwrap_or("");
            let renamed = match name.strip_suffix("-mla") {
                Some(stem) => format!("{stem}-legacy"),
                None => name.to_string(),
            };
            kv.extend_from_slice(head);
            kv.extend_from_slice(&(renamed.len() as u64).to_le_bytes());
            kv.extend_from_slice(renamed.as_bytes());
        } else {
            kv.extend_from_slice(&src[whole.clone()]);
        }
    }
    let mut infos = Vec::with_capacity(n_tensors);
    for _ in 0..n_tensors {
        let name = r.string()?.to_string();
        let n_dims = r.u32()? as usize;
        let dims = (0..n_dims)
            .map(|_| r.u64())
            .collect::<Result<Vec<_>, _>>()?;
        let (ty, offset) = (r.u32()?, r.len()?);
        infos.push((name, dims, ty, offset));
    }
    let data_start = r.at.next_multiple_of(ALIGNMENT);
    let mut tensors: Vec<Tensor> = Vec::with_capacity(n_tensors);
    for (name, dims, ty, offset) in infos {
        let elems = dims.iter().product::<u64>() as usize;
        // The derivation is for the all-f32 golden model: any other type is refused.
        if ty != GGUF_F32 {
            return Err(DeriveError(format!("{name}: type {ty} is not f32")));
        }
        let size = elems * 4;
        let at = data_start + offset;
        let data = src
            .get(at..at + size)
            .ok_or_else(|| DeriveError(format!("{name}: data past the end")))?
            .to_vec();
        tensors.push(Tensor {
            name,
            dims,
            ty,
            data,
        });
    }

    // attn_k_b + attn_v_b of each layer -> attn_kv_b, in the position of attn_k_b.
    let mut out_tensors: Vec<Tensor> = Vec::with_capacity(tensors.len());
    let mut pending_k: Option<Tensor> = None;
    for t in tensors {
        if t.name.ends_with(".attn_k_b.weight") {
            pending_k = Some(t);
            continue;
        }
        if let Some(prefix) = t.name.strip_suffix(".attn_v_b.weight") {
            let k = pending_k
                .take()
                .filter(|k| k.name == format!("{prefix}.attn_k_b.weight"))
                .ok_or_else(|| DeriveError(format!("{} without its attn_k_b before it", t.name)))?;
            // k: ne = [nope, kv_lora, n_head]; v: ne = [kv_lora, v, n_head].
            let (nope, lora) = (k.dims[0] as usize, k.dims[1] as usize);
            let dv = t.dims[1] as usize;
            if k.dims.len() != 3
                || t.dims.len() != 3
                || t.dims[0] as usize != lora
                || k.dims[2] as usize != n_head
                || t.dims[2] as usize != n_head
            {
                return Err(DeriveError(format!(
                    "{prefix}: attn_k_b/attn_v_b dims do not pair"
                )));
            }
            let mut data = Vec::with_capacity(k.data.len() + t.data.len());
            for h in 0..n_head {
                // Rows of kv_b (each kv_lora wide): the head's nope rows, then its v rows.
                for j in 0..nope {
                    for c in 0..lora {
                        let i = (h * lora + c) * nope + j;
                        data.extend_from_slice(&k.data[i * 4..i * 4 + 4]);
                    }
                }
                for j in 0..dv {
                    data.extend_from_slice(
                        &t.data[(h * dv + j) * lora * 4..(h * dv + j + 1) * lora * 4],
                    );
                }
            }
            out_tensors.push(Tensor {
                name: format!("{prefix}.attn_kv_b.weight"),
                dims: vec![lora as u64, (n_head * (nope + dv)) as u64],
                ty: GGUF_F32,
                data,
            });
            continue;
        }
        out_tensors.push(t);
    }
    if let Some(k) = pending_k {
        return Err(DeriveError(format!(
            "{} without its attn_v_b after it",
            k.name
        )));
    }

    let mut out = Vec::with_capacity(src.len());
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(out_tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&kept_kv.to_le_bytes());
    out.extend_from_slice(&kv);
    let mut offset = 0usize;
    for t in &out_tensors {
        out.extend_from_slice(&(t.name.len() as u64).to_le_bytes());
        out.extend_from_slice(t.name.as_bytes());
        out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&t.ty.to_le_bytes());
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        offset = (offset + t.data.len()).next_multiple_of(ALIGNMENT);
    }
    out.resize(out.len().next_multiple_of(ALIGNMENT), 0);
    for t in &out_tensors {
        out.extend_from_slice(&t.data);
        out.resize(out.len().next_multiple_of(ALIGNMENT), 0);
    }
    Ok(out)
}
