#!/usr/bin/env python3
"""Train the small deepseek2 model that `ingot demo` decodes, and export it to GGUF.

Run by hand (never by CI); see docs/perf.md "The demo's trained model" for the recipe and its numbers:

    python3 -m venv VENV && VENV/bin/pip install -r scripts/train/requirements.txt
    nice -n 10 VENV/bin/python scripts/train/train.py --out OUTDIR --minutes 60

Structure (exactly llama.cpp's `deepseek2` graph, DeepSeek-V3 flavour):
- MLA attention with a low-rank query (attn_q_a -> attn_q_a_norm -> attn_q_b), the compressed KV
  (attn_kv_a_mqa -> [latent | k_rope], attn_kv_a_norm on the latent), attn_kv_b split into attn_k_b /
  attn_v_b on export, the decoupled rope part shared by every head; rope in ggml's NORM mode
  (adjacent pairs (2i, 2i+1)), no rope scaling, so kq_scale = 1/sqrt(nope + rope).
- One dense lead layer (SwiGLU), then MoE layers: a shared expert plus routed experts chosen by
  sigmoid(router logits) + the selection bias `exp_probs_b` (top-k on the biased scores, the weights
  are the unbiased scores, normalized to sum 1 and scaled by `expert_weights_scale`). The bias is not
  trained by gradient: DeepSeek-V3's aux-loss-free balancing moves it by +-gamma toward equal load.
- One NextN/MTP block after the main layers (DeepSeek-V3 / GLM-4.7-Flash layout, as vLLM's
  deepseek_mtp runs it): h' = eh_proj([enorm(emb(t_{i+1})) ; hnorm(h_i)]) where h_i is the main
  model's final hidden state after output_norm, then a full MoE decoder layer, shared_head_norm, and
  the shared output matrix predicts t_{i+2}. Trained with the MTP loss (weight --mtp-weight).
  The committed model's block comes from scripts/train/mtp_finetune.py (the main model frozen; see
  docs/perf.md "Speculative decoding with the MTP block").
- Byte-level BPE (HF tokenizers) with DeepSeek-V3's pre-tokenizer (the three Split regexes of its
  tokenizer.json, then ByteLevel without regex), written as `tokenizer.ggml.model` "gpt2",
  `tokenizer.ggml.pre` "deepseek-v3", BOS/EOS the last two ids.

Corpus: the Rust standard library sources of the installed rust-src component, split into train and
held-out BY FILE (sha256 of the relative path), files in sorted order: deterministic given --seed and
the rust-src version (printed and stored in the GGUF's general.source.url-like key `ingot.train.*`).

The committed weights are snapped to the Q8_0 grid at the end of training (every matrix that the Q8_0
mix quantizes), so the Q8_0 GGUF holds exactly the weights the PyTorch reference numbers come from.
"""

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# Hyper-parameters (every size that reaches the GGUF)
# ---------------------------------------------------------------------------------------------

CFG = dict(
    vocab=1024,  # 1022 BPE tokens (256 bytes + merges) + BOS + EOS
    n_embd=128,
    n_head=4,
    q_lora=64,
    kv_lora=64,
    nope=32,
    rope=16,
    v_head=32,
    n_layer=3,  # main layers; the MTP block is layer n_layer (block_count = n_layer + 1)
    n_dense_lead=1,
    ff_dense=256,
    n_expert=4,
    n_expert_used=2,
    n_shared=1,
    ff_exp=64,
    weights_scale=1.5,
    rope_theta=10000.0,
    rms_eps=1e-6,
    ctx=256,
)

BOS_TEXT = "<｜begin▁of▁sentence｜>"
EOS_TEXT = "<｜end▁of▁sentence｜>"

# DeepSeek-V3's tokenizer.json pre-tokenizer regexes (the three `Split` steps, behaviour Isolated).
V3_SPLITS = [
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
]

# Parts of library/ left out: generated bindings and vendored code, not the hand-written std.
EXCLUDE = ("stdarch", "vendor", "windows-sys", "windows_link", "compiler-builtins", "backtrace")


# ---------------------------------------------------------------------------------------------
# Corpus and tokenizer
# ---------------------------------------------------------------------------------------------


def library_root() -> Path:
    sysroot = subprocess.check_output(["rustc", "+nightly", "--print", "sysroot"], text=True).strip()
    return Path(sysroot) / "lib/rustlib/src/rust/library"


def corpus_files(root: Path):
    """(train, heldout): sorted relative paths; a file is held out when sha256(path) % 40 == 0."""
    train, held = [], []
    for p in sorted(root.rglob("*.rs")):
        rel = p.relative_to(root).as_posix()
        if rel.split("/")[0] in EXCLUDE:
            continue
        h = int.from_bytes(hashlib.sha256(rel.encode()).digest()[:8], "little")
        (held if h % 40 == 0 else train).append(rel)
    return train, held


def read_text(root: Path, rel: str) -> str:
    return (root / rel).read_text(encoding="utf-8", errors="replace")


def make_tokenizer(texts):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in V3_SPLITS]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=CFG["vocab"] - 2,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(texts, trainer=trainer)
    assert tok.get_vocab_size() == CFG["vocab"] - 2, tok.get_vocab_size()
    tok.add_special_tokens([BOS_TEXT, EOS_TEXT])
    assert tok.token_to_id(BOS_TEXT) == CFG["vocab"] - 2 and tok.token_to_id(EOS_TEXT) == CFG["vocab"] - 1
    return tok


def vocab_tables(tok):
    """tokens (by id), merges ("a b"), both as GGUF wants them."""
    model = json.loads(tok.to_str())["model"]
    vocab = model["vocab"]
    tokens = [None] * CFG["vocab"]
    for t, i in vocab.items():
        tokens[i] = t
    tokens[CFG["vocab"] - 2] = BOS_TEXT
    tokens[CFG["vocab"] - 1] = EOS_TEXT
    assert all(t is not None for t in tokens)
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in model["merges"]]
    return tokens, merges


def encode_files(tok, root, files):
    """One BOS, then each file's ids followed by EOS; a flat int64 array."""
    out = [CFG["vocab"] - 2]
    enc = tok.encode_batch([read_text(root, f) for f in files], add_special_tokens=False)
    for e in enc:
        out.extend(e.ids)
        out.append(CFG["vocab"] - 1)
    return np.array(out, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + CFG["rms_eps"])
        return x * self.weight


def rope_tables(n_pos, n_rot, theta):
    """cos/sin [n_pos, n_rot/2]: pair i rotates by pos * theta^(-2i/n_rot) (ggml NORM mode)."""
    inv = theta ** (-torch.arange(0, n_rot, 2, dtype=torch.float64) / n_rot)
    ang = torch.arange(n_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    """x [..., T, n_rot]; adjacent pairs (x[2i], x[2i+1]) rotate together (ggml NORM mode)."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack([y0, y1], dim=-1).flatten(-2)


class MLA(nn.Module):
    def __init__(self):
        super().__init__()
        c = CFG
        self.q_a = nn.Linear(c["n_embd"], c["q_lora"], bias=False)
        self.q_a_norm = RMSNorm(c["q_lora"])
        self.q_b = nn.Linear(c["q_lora"], c["n_head"] * (c["nope"] + c["rope"]), bias=False)
        self.kv_a = nn.Linear(c["n_embd"], c["kv_lora"] + c["rope"], bias=False)
        self.kv_a_norm = RMSNorm(c["kv_lora"])
        self.kv_b = nn.Linear(c["kv_lora"], c["n_head"] * (c["nope"] + c["v_head"]), bias=False)
        self.o = nn.Linear(c["n_head"] * c["v_head"], c["n_embd"], bias=False)

    def forward(self, x, cos, sin):
        c = CFG
        B, T, _ = x.shape
        H, dn, dr, dv = c["n_head"], c["nope"], c["rope"], c["v_head"]
        q = self.q_b(self.q_a_norm(self.q_a(x))).view(B, T, H, dn + dr).transpose(1, 2)
        q_nope, q_pe = q[..., :dn], q[..., dn:]
        kv = self.kv_a(x)
        lat, k_pe = kv[..., : c["kv_lora"]], kv[..., c["kv_lora"] :]
        kvb = self.kv_b(self.kv_a_norm(lat)).view(B, T, H, dn + dv).transpose(1, 2)
        k_nope, v = kvb[..., :dn], kvb[..., dn:]
        q_pe = apply_rope(q_pe, cos[:T], sin[:T])
        k_pe = apply_rope(k_pe[:, None], cos[:T], sin[:T]).expand(B, H, T, dr)
        qf = torch.cat([q_nope, q_pe], -1)
        kf = torch.cat([k_nope, k_pe], -1)
        y = F.scaled_dot_product_attention(qf, kf, v, is_causal=True, scale=1.0 / math.sqrt(dn + dr))
        return self.o(y.transpose(1, 2).reshape(B, T, H * dv))


class DenseFFN(nn.Module):
    def __init__(self, n_ff):
        super().__init__()
        self.gate = nn.Linear(CFG["n_embd"], n_ff, bias=False)
        self.up = nn.Linear(CFG["n_embd"], n_ff, bias=False)
        self.down = nn.Linear(n_ff, CFG["n_embd"], bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        c = CFG
        E, d, f = c["n_expert"], c["n_embd"], c["ff_exp"]
        self.gate_inp = nn.Linear(d, E, bias=False)
        # Selection bias (exp_probs_b): a buffer, moved by the balancing rule, not by gradient.
        self.register_buffer("probs_b", torch.zeros(E))
        self.w_gate = nn.Parameter(torch.randn(E, f, d) / math.sqrt(d))
        self.w_up = nn.Parameter(torch.randn(E, f, d) / math.sqrt(d))
        self.w_down = nn.Parameter(torch.randn(E, d, f) / math.sqrt(f))
        self.shared = DenseFFN(f * c["n_shared"])
        self.last_load = None

    def forward(self, x):
        c = CFG
        B, T, d = x.shape
        xs = x.reshape(-1, d)
        scores = torch.sigmoid(self.gate_inp(xs))  # [N, E]
        sel = torch.topk(scores + self.probs_b, c["n_expert_used"], dim=-1).indices  # [N, k]
        w = scores.gather(1, sel)
        w = w / w.sum(-1, keepdim=True) * c["weights_scale"]
        # Dense evaluation of every expert (cheap at these sizes); unselected experts get weight 0,
        # so the output and the gradients equal the sparse computation's.
        gates = torch.zeros_like(scores).scatter(1, sel, w)  # [N, E]
        h = F.silu(torch.einsum("nd,efd->nef", xs, self.w_gate)) * torch.einsum("nd,efd->nef", xs, self.w_up)
        y = torch.einsum("nef,edf,ne->nd", h, self.w_down, gates)
        if self.training:
            self.last_load = torch.zeros(c["n_expert"]).scatter_add_(0, sel.flatten(), torch.ones(sel.numel()))
        return (y + self.shared(xs)).view(B, T, d)


class Block(nn.Module):
    def __init__(self, dense):
        super().__init__()
        self.attn_norm = RMSNorm(CFG["n_embd"])
        self.attn = MLA()
        self.ffn_norm = RMSNorm(CFG["n_embd"])
        self.ffn = DenseFFN(CFG["ff_dense"]) if dense else MoE()

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.ffn(self.ffn_norm(x))


class NextN(nn.Module):
    def __init__(self):
        super().__init__()
        d = CFG["n_embd"]
        self.enorm = RMSNorm(d)
        self.hnorm = RMSNorm(d)
        self.eh_proj = nn.Linear(2 * d, d, bias=False)
        self.block = Block(dense=False)
        self.shared_head_norm = RMSNorm(d)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        c = CFG
        self.tok_emb = nn.Embedding(c["vocab"], c["n_embd"])
        self.blocks = nn.ModuleList([Block(dense=i < c["n_dense_lead"]) for i in range(c["n_layer"])])
        self.out_norm = RMSNorm(c["n_embd"])
        self.output = nn.Linear(c["n_embd"], c["vocab"], bias=False)
        self.nextn = NextN()
        cos, sin = rope_tables(c["ctx"], c["rope"], c["rope_theta"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for n, p in self.named_parameters():
            if p.dim() == 2 and "norm" not in n:
                nn.init.normal_(p, std=0.02)
        nn.init.normal_(self.tok_emb.weight, std=1.0)

    def forward(self, ids, mtp=False):
        """Logits [B, T, V] of the main model; with mtp, also the MTP block's logits [B, T-1, V]
        (position i predicts ids[i+2] from the main hidden state at i and the embedding of ids[i+1])."""
        x = self.tok_emb(ids)
        for b in self.blocks:
            x = b(x, self.cos, self.sin)
        h = self.out_norm(x)
        logits = self.output(h)
        if not mtp:
            return logits, None
        n = self.nextn
        e = n.enorm(self.tok_emb(ids[:, 1:]))
        z = n.eh_proj(torch.cat([e, n.hnorm(h[:, :-1])], -1))
        z = n.block(z, self.cos, self.sin)
        return logits, self.output(n.shared_head_norm(z))


# ---------------------------------------------------------------------------------------------
# Q8_0 snapping and GGUF export
# ---------------------------------------------------------------------------------------------


def gguf_tensors(model):
    """(name, numpy array in GGUF order (numpy shape = reversed ne), quantize?) for every tensor."""
    c = CFG
    H, dn, dv, L = c["n_head"], c["nope"], c["v_head"], c["kv_lora"]
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    out = [("token_embd.weight", sd["tok_emb.weight"], True)]

    def block(i, p, dense):
        r = [
            (f"blk.{i}.attn_norm.weight", sd[p + "attn_norm.weight"], False),
            (f"blk.{i}.attn_q_a.weight", sd[p + "attn.q_a.weight"], True),
            (f"blk.{i}.attn_q_a_norm.weight", sd[p + "attn.q_a_norm.weight"], False),
            (f"blk.{i}.attn_q_b.weight", sd[p + "attn.q_b.weight"], True),
            (f"blk.{i}.attn_kv_a_mqa.weight", sd[p + "attn.kv_a.weight"], True),
            (f"blk.{i}.attn_kv_a_norm.weight", sd[p + "attn.kv_a_norm.weight"], False),
        ]
        kvb = sd[p + "attn.kv_b.weight"].reshape(H, dn + dv, L)
        # llama.cpp's converter: k_b = kv_b[:, :nope].T per head (ne [nope, kv_lora, H]), v_b = kv_b[:, nope:]
        r.append((f"blk.{i}.attn_k_b.weight", np.ascontiguousarray(kvb[:, :dn, :].transpose(0, 2, 1)), True))
        r.append((f"blk.{i}.attn_v_b.weight", np.ascontiguousarray(kvb[:, dn:, :]), True))
        r.append((f"blk.{i}.attn_output.weight", sd[p + "attn.o.weight"], True))
        r.append((f"blk.{i}.ffn_norm.weight", sd[p + "ffn_norm.weight"], False))
        if dense:
            for a, b in (("gate", "gate"), ("up", "up"), ("down", "down")):
                r.append((f"blk.{i}.ffn_{a}.weight", sd[p + f"ffn.{b}.weight"], True))
        else:
            r.append((f"blk.{i}.ffn_gate_inp.weight", sd[p + "ffn.gate_inp.weight"], False))
            r.append((f"blk.{i}.exp_probs_b.bias", sd[p + "ffn.probs_b"], False))
            for a in ("gate", "up", "down"):
                r.append((f"blk.{i}.ffn_{a}_exps.weight", sd[p + f"ffn.w_{a}"], True))
            for a in ("gate", "up", "down"):
                r.append((f"blk.{i}.ffn_{a}_shexp.weight", sd[p + f"ffn.shared.{a}.weight"], True))
        return r

    for i in range(c["n_layer"]):
        out += block(i, f"blocks.{i}.", i < c["n_dense_lead"])
    m = c["n_layer"]
    out += block(m, "nextn.block.", False)
    out += [
        (f"blk.{m}.nextn.eh_proj.weight", sd["nextn.eh_proj.weight"], True),
        (f"blk.{m}.nextn.enorm.weight", sd["nextn.enorm.weight"], False),
        (f"blk.{m}.nextn.hnorm.weight", sd["nextn.hnorm.weight"], False),
        (f"blk.{m}.nextn.shared_head_norm.weight", sd["nextn.shared_head_norm.weight"], False),
        ("output_norm.weight", sd["out_norm.weight"], False),
        ("output.weight", sd["output.weight"], True),
    ]
    return out


def q8_roundtrip(a):
    from gguf import GGMLQuantizationType as T
    from gguf import quants

    return quants.dequantize(quants.quantize(a.astype(np.float32), T.Q8_0), T.Q8_0).reshape(a.shape)


@torch.no_grad()
def snap_to_q8_0(model):
    """Replace every weight the Q8_0 file quantizes with its Q8_0 round trip (rows of 32 along ne0).
    kv_b is split into k_b / v_b on export with k_b transposed, so its rows differ from the file's:
    it is snapped through the split (k part transposed, snapped, transposed back)."""
    c = CFG
    H, dn, dv, L = c["n_head"], c["nope"], c["v_head"], c["kv_lora"]
    for name, p in model.named_parameters():
        if p.dim() < 2 or "norm" in name or "gate_inp" in name:
            continue
        a = p.detach().numpy()
        if name.endswith("attn.kv_b.weight"):
            kvb = a.reshape(H, dn + dv, L).copy()
            kvb[:, :dn, :] = q8_roundtrip(np.ascontiguousarray(kvb[:, :dn, :].transpose(0, 2, 1))).transpose(0, 2, 1)
            kvb[:, dn:, :] = q8_roundtrip(np.ascontiguousarray(kvb[:, dn:, :]))
            p.copy_(torch.from_numpy(kvb.reshape(a.shape)))
        else:
            p.copy_(torch.from_numpy(q8_roundtrip(a)))


def write_gguf(path, model, tokens, merges, quant, meta):
    import gguf
    from gguf import GGMLQuantizationType as T

    c = CFG
    w = gguf.GGUFWriter(str(path), "deepseek2")
    w.add_name("ingot-demo-rust-std")
    w.add_file_type(7 if quant else 0)
    w.add_context_length(c["ctx"])
    w.add_embedding_length(c["n_embd"])
    w.add_block_count(c["n_layer"] + 1)
    w.add_uint32("deepseek2.nextn_predict_layers", 1)
    w.add_feed_forward_length(c["ff_dense"])
    w.add_head_count(c["n_head"])
    w.add_head_count_kv(1)
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_eps"])
    w.add_expert_used_count(c["n_expert_used"])
    w.add_expert_count(c["n_expert"])
    w.add_leading_dense_block_count(c["n_dense_lead"])
    w.add_vocab_size(c["vocab"])
    w.add_q_lora_rank(c["q_lora"])
    w.add_kv_lora_rank(c["kv_lora"])
    w.add_key_length(c["kv_lora"] + c["rope"])
    w.add_value_length(c["kv_lora"])
    w.add_uint32("deepseek2.attention.key_length_mla", c["nope"] + c["rope"])
    w.add_uint32("deepseek2.attention.value_length_mla", c["v_head"])
    w.add_expert_feed_forward_length(c["ff_exp"])
    w.add_expert_shared_count(c["n_shared"])
    w.add_expert_weights_scale(c["weights_scale"])
    w.add_expert_weights_norm(True)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_rope_dimension_count(c["rope"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("deepseek-v3")
    w.add_token_list(tokens)
    w.add_token_types([1] * (c["vocab"] - 2) + [3, 3])
    w.add_token_merges(merges)
    w.add_bos_token_id(c["vocab"] - 2)
    w.add_eos_token_id(c["vocab"] - 1)
    w.add_pad_token_id(c["vocab"] - 1)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    for k, v in meta.items():
        w.add_string(f"ingot.train.{k}", str(v))
    for name, a, q in gguf_tensors(model):
        a = np.ascontiguousarray(a.astype(np.float32))
        if quant and q:
            qa = gguf.quants.quantize(a, T.Q8_0)
            w.add_tensor(name, qa, raw_dtype=T.Q8_0)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---------------------------------------------------------------------------------------------
# Reference numbers for the Rust tests
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def reference(model, held_ids, path, n_windows, ctx):
    """Per position of n_windows windows of ctx held-out tokens (each window starts with BOS, then ctx-1
    held-out ids, fresh context per window): target id, PyTorch's nll (nats), top-1 id and top1-top2 margin."""
    model.eval()
    rows = []
    step = ctx - 1
    for w in range(n_windows):
        seg = held_ids[w * step : w * step + step]
        ids = torch.tensor([[CFG["vocab"] - 2] + seg.tolist()])
        logits, _ = model(ids)
        lp = F.log_softmax(logits[0].double(), -1)
        top = torch.topk(logits[0], 2, dim=-1)
        for t in range(ids.shape[1] - 1):
            tgt = int(ids[0, t + 1])
            rows.append((w, t, int(ids[0, t]), tgt, float(-lp[t, tgt]), int(top.indices[t, 0]),
                         float(top.values[t, 0] - top.values[t, 1])))
    nll = sum(r[4] for r in rows) / len(rows)
    with open(path, "w") as f:
        f.write("# window\tpos\tinput\ttarget\tnll\ttop1\tmargin  (PyTorch f32 on the committed Q8_0 weights)\n")
        f.write(f"# windows {n_windows} ctx {ctx} positions {len(rows)} mean_nll {nll:.6f} ppl {math.exp(nll):.4f}\n")
        for r in rows:
            f.write(f"{r[0]}\t{r[1]}\t{r[2]}\t{r[3]}\t{r[4]:.6f}\t{r[5]}\t{r[6]:.4f}\n")
    return math.exp(nll)


def tokenize_samples(tok, root, held_files, path):
    """Texts (escaped: \\ \n \r \t) TAB the ids HF tokenizers gives them with BOS first, for ingot's
    tokenizer test: 300 characters from the middle of each held-out file, plus edge cases."""
    texts = []
    for f in held_files[:16]:
        t = read_text(root, f)
        texts.append(t[len(t) // 2 : len(t) // 2 + 300])
    texts += ["12345 0x1F_u64 3.14e-10", "    \n\n\t  \r\n}", "let café = \"中文 ひらがな 😀\";", "a<'b>::c(&mut d)?;"]
    esc = lambda t: t.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    with open(path, "w") as out:
        for t in texts:
            ids = [CFG["vocab"] - 2] + tok.encode(t, add_special_tokens=False).ids
            out.write(f"{esc(t)}\t{ids}\n")


@torch.no_grad()
def eval_loss(model, data, ctx, n):
    model.eval()
    g = torch.Generator().manual_seed(0)
    starts = torch.randint(0, len(data) - ctx - 1, (n,), generator=g)
    x = torch.stack([torch.from_numpy(data[s : s + ctx]) for s in starts])
    y = torch.stack([torch.from_numpy(data[s + 1 : s + ctx + 1]) for s in starts])
    logits, mtp = model(x, mtp=True)
    main = F.cross_entropy(logits.reshape(-1, CFG["vocab"]), y.reshape(-1)).item()
    m = F.cross_entropy(mtp.reshape(-1, CFG["vocab"]), y[:, 1:].reshape(-1)).item()
    model.train()
    return main, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--minutes", type=float, default=60.0, help="wall-time budget of the training loop")
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (overrides --minutes; deterministic)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--bias-gamma", type=float, default=1e-3, help="aux-loss-free balancing step")
    ap.add_argument("--ref-windows", type=int, default=4)
    ap.add_argument("--reexport", type=Path, help="skip training: load this model.pt (already snapped) and export")
    ap.add_argument("--checkpoint-every", type=int, default=500, help="export a snapped copy every N steps (0: never)")
    a = ap.parse_args()

    torch.set_num_threads(1)
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    torch.manual_seed(a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    root = library_root()
    rust_src = subprocess.check_output(["rustc", "+nightly", "--version"], text=True).strip()
    train_files, held_files = corpus_files(root)
    print(f"corpus: {len(train_files)} train files, {len(held_files)} held-out files ({rust_src})", flush=True)
    tok = make_tokenizer(read_text(root, f) for f in train_files)
    tok.save(str(a.out / "tokenizer.json"))
    tokens, merges = vocab_tables(tok)
    train = encode_files(tok, root, train_files)
    held = encode_files(tok, root, held_files)
    np.save(a.out / "heldout_ids.npy", held)
    print(f"tokens: train {len(train)}, held-out {len(held)} ({time.time() - t0:.0f} s)", flush=True)

    tokenize_samples(tok, root, held_files, a.out / "tokenize.tsv")

    model = Model()
    if a.reexport:
        model.load_state_dict(torch.load(a.reexport))
        info = json.loads((a.reexport.parent / "train-log.json").read_text())
        meta = dict(seed=a.seed, steps=info["steps"], batch=a.batch, ctx=CFG["ctx"], lr=a.lr,
                    mtp_weight=a.mtp_weight, rust_src=rust_src, params=info["params"])
        write_gguf(a.out / "model-q8_0.gguf", model, tokens, merges, True, meta)
        write_gguf(a.out / "model-f32.gguf", model, tokens, merges, False, meta)
        ppl = reference(model, held, a.out / "heldout-ref.tsv", a.ref_windows, CFG["ctx"])
        print(f"re-exported {a.reexport}: reference held-out ppl {ppl:.4f}")
        return 0
    n_params = sum(p.numel() for p in model.parameters())
    print(f"parameters: {n_params}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    ctx, B = CFG["ctx"], a.batch
    g = torch.Generator().manual_seed(a.seed)
    budget = a.minutes * 60
    est_steps = a.steps if a.steps else None
    warm = 100
    log = []
    t_train = time.time()
    step = 0
    while True:
        el = time.time() - t_train
        if a.steps and step >= a.steps:
            break
        if not a.steps and el >= budget:
            break
        # lr: linear warmup, then cosine to 10% over the planned steps (or over the time budget).
        frac = step / est_steps if est_steps else el / budget
        lr = a.lr * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for pg in opt.param_groups:
            pg["lr"] = lr
        starts = torch.randint(0, len(train) - ctx - 1, (B,), generator=g)
        x = torch.stack([torch.from_numpy(train[s : s + ctx]) for s in starts])
        y = torch.stack([torch.from_numpy(train[s + 1 : s + ctx + 1]) for s in starts])
        logits, mtp = model(x, mtp=True)
        l_main = F.cross_entropy(logits.reshape(-1, CFG["vocab"]), y.reshape(-1))
        # MTP row i (hidden at i, id at i+1) predicts the id at i+2 = y[:, i+1].
        l_mtp = F.cross_entropy(mtp.reshape(-1, CFG["vocab"]), y[:, 1:].reshape(-1))
        loss = l_main + a.mtp_weight * l_mtp
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        # DeepSeek-V3 aux-loss-free balancing: raise the bias of under-loaded experts, lower the others.
        with torch.no_grad():
            for mod in model.modules():
                if isinstance(mod, MoE) and mod.last_load is not None:
                    mod.probs_b += a.bias_gamma * torch.sign(mod.last_load.mean() - mod.last_load)
        step += 1
        if a.checkpoint_every and step % a.checkpoint_every == 0:
            # A snapped copy in OUT/step-N: lets the export be checked against ingot while training runs.
            import copy

            ck = copy.deepcopy(model)
            snap_to_q8_0(ck)
            d = a.out / f"step-{step}"
            d.mkdir(exist_ok=True)
            write_gguf(d / "model-q8_0.gguf", ck, tokens, merges, True, dict(seed=a.seed, steps=step))
            reference(ck, held, d / "heldout-ref.tsv", a.ref_windows, ctx)
            model.train()
        if step % 100 == 0 or step == 1:
            ev = eval_loss(model, held, ctx, 8)
            row = (step, round(time.time() - t_train), l_main.item(), l_mtp.item(), ev[0], ev[1])
            log.append(row)
            print("step %d  %ds  train %.4f  mtp %.4f  held-out %.4f  held-out mtp %.4f" % row, flush=True)
    train_s = time.time() - t_train

    snap_to_q8_0(model)
    ev = eval_loss(model, held, ctx, 32)
    print(f"after Q8_0 snap: held-out {ev[0]:.4f} mtp {ev[1]:.4f}", flush=True)
    meta = dict(seed=a.seed, steps=step, batch=B, ctx=ctx, lr=a.lr, mtp_weight=a.mtp_weight,
                rust_src=rust_src, params=n_params)
    write_gguf(a.out / "model-q8_0.gguf", model, tokens, merges, True, meta)
    write_gguf(a.out / "model-f32.gguf", model, tokens, merges, False, meta)
    ppl = reference(model, held, a.out / "heldout-ref.tsv", a.ref_windows, ctx)
    torch.save(model.state_dict(), a.out / "model.pt")
    with open(a.out / "train-log.json", "w") as f:
        json.dump(dict(log=log, train_s=train_s, steps=step, params=n_params, ppl=ppl, cfg=CFG, args=vars(a) | {"out": str(a.out)},
                       final_heldout=ev, rust_src=rust_src), f, indent=1)
    print(f"done: {step} steps in {train_s:.0f} s, reference held-out ppl {ppl:.4f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
