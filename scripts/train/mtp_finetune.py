#!/usr/bin/env python3
"""Retrain the NextN/MTP block of a trained model on the corrected MTP target, the main model frozen.

train.py before the fix aligned the MTP loss one token late: the block fed the main hidden state at i
and the id at i+1 was scored against the id at i+3 (`mtp[:, :-1]` against `y[:, 2:]`) instead of i+2.
This script keeps every main-model weight bit for bit (so heldout-ref.tsv is unchanged) and trains only
`nextn.*` (from its current values) against the id at i+2, then snaps those to the Q8_0 grid and
exports as train.py does. Run by hand (never by CI):

    nice -n 10 VENV/bin/python scripts/train/mtp_finetune.py --out OUTDIR --minutes 12

OUTDIR holds train.py's outputs (model.pt, tokenizer.json, train-log.json); the new files are written
to OUTDIR/mtp-fixed/.
"""

import argparse
import copy
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
import train  # noqa: E402


def mtp_loss(model, x):
    """Cross-entropy of the MTP head: row i (main hidden at i, id at i+1) against the id at i+2."""
    with torch.no_grad():
        h = model.tok_emb(x)
        for b in model.blocks:
            h = b(h, model.cos, model.sin)
        h = model.out_norm(h)
    n = model.nextn
    e = n.enorm(model.tok_emb(x[:, 1:]))
    z = n.eh_proj(torch.cat([e, n.hnorm(h[:, :-1])], -1))
    z = n.block(z, model.cos, model.sin)
    logits = model.output(n.shared_head_norm(z))  # [B, T-1, V]
    return F.cross_entropy(logits[:, :-1].reshape(-1, train.CFG["vocab"]), x[:, 2:].reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--minutes", type=float, default=12.0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--bias-gamma", type=float, default=1e-3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    dst = a.out / "mtp-fixed"
    dst.mkdir(exist_ok=True)

    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(a.out / "tokenizer.json"))
    root = train.library_root()
    rust_src = subprocess.check_output(["rustc", "+nightly", "--version"], text=True).strip()
    train_files, held_files = train.corpus_files(root)
    data = train.encode_files(tok, root, train_files)
    held = np.load(a.out / "heldout_ids.npy")
    tokens, merges = train.vocab_tables(tok)
    print(f"tokens: train {len(data)}, held-out {len(held)}", flush=True)

    model = train.Model()
    model.load_state_dict(torch.load(a.out / "model.pt"))
    main_state = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("nextn.")}
    params = [p for n, p in model.named_parameters() if n.startswith("nextn.")]
    for n, p in model.named_parameters():
        p.requires_grad_(n.startswith("nextn."))
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    ctx, B = train.CFG["ctx"], a.batch
    g = torch.Generator().manual_seed(a.seed)
    gh = torch.Generator().manual_seed(0)
    hs = torch.randint(0, len(held) - ctx - 1, (16,), generator=gh)
    held_x = torch.stack([torch.from_numpy(held[s : s + ctx]) for s in hs])

    def held_loss():
        model.eval()
        with torch.no_grad():
            v = mtp_loss(model, held_x).item()
        model.train()
        return v

    print(f"held-out MTP loss (id at i+2) before: {held_loss():.4f}", flush=True)
    budget, warm, t0, step, log = a.minutes * 60, 50, time.time(), 0, []
    model.train()
    while time.time() - t0 < budget:
        frac = (time.time() - t0) / budget
        lr = a.lr * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for pg in opt.param_groups:
            pg["lr"] = lr
        starts = torch.randint(0, len(data) - ctx - 1, (B,), generator=g)
        x = torch.stack([torch.from_numpy(data[s : s + ctx]) for s in starts])
        loss = mtp_loss(model, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        with torch.no_grad():
            mod = model.nextn.block.ffn
            if mod.last_load is not None:
                mod.probs_b += a.bias_gamma * torch.sign(mod.last_load.mean() - mod.last_load)
        step += 1
        if step % 100 == 0 or step == 1:
            row = (step, round(time.time() - t0), loss.item(), held_loss())
            log.append(row)
            print("step %d  %ds  train mtp %.4f  held-out mtp %.4f" % row, flush=True)

    train.snap_to_q8_0(model)
    # Snapping is applied to every matrix; the main model's weights are restored bit for bit.
    sd = model.state_dict()
    for k, v in main_state.items():
        sd[k] = v
    model.load_state_dict(sd)
    final = held_loss()
    print(f"after Q8_0 snap: held-out mtp {final:.4f} ({step} steps)", flush=True)
    info = json.loads((a.out / "train-log.json").read_text())
    meta = dict(seed=20261203, steps=info["steps"], batch=16, ctx=ctx, lr=0.003, mtp_weight=0.3,
                rust_src=rust_src, params=info["params"], mtp_finetune_steps=step,
                mtp_finetune_seed=a.seed, mtp_finetune_lr=a.lr)
    train.write_gguf(dst / "model-q8_0.gguf", model, tokens, merges, True, meta)
    train.reference(model, held, dst / "heldout-ref.tsv", 4, ctx)
    torch.save(model.state_dict(), dst / "model.pt")
    with open(dst / "mtp-finetune-log.json", "w") as f:
        json.dump(dict(log=log, steps=step, minutes=a.minutes, final_heldout_mtp=final, args=vars(a) | {"out": str(a.out)}), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
