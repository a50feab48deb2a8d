#!/usr/bin/env python3
"""Reference numbers for the trained model's NextN/MTP block: PyTorch's MTP head on held-out text.

Run by hand after train.py (never by CI):

    VENV/bin/python scripts/train/mtp_ref.py --out OUTDIR --windows 2

reads OUTDIR/model.pt (the weights snapped to the Q8_0 grid, exactly the committed Q8_0 file's) and
OUTDIR/heldout_ids.npy, and writes OUTDIR/mtp-ref.tsv. The windows are heldout-ref.tsv's (BOS, then
ctx-1 held-out ids, fresh context per window). Row i of a window: the MTP block at position i, fed
the main model's hidden state at i (after output_norm, as train.py trains it) and the id at i+1,
predicts the id at i+2: PyTorch's top-1, top1-top2 margin and nll of the true id.
"""

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
import train  # noqa: E402


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--windows", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(1)
    model = train.Model()
    model.load_state_dict(torch.load(a.out / "model.pt"))
    model.eval()
    held = np.load(a.out / "heldout_ids.npy")
    ctx = train.CFG["ctx"]
    step = ctx - 1
    rows = []
    for w in range(a.windows):
        seg = held[w * step : w * step + step]
        ids = torch.tensor([[train.CFG["vocab"] - 2] + seg.tolist()])
        _, mtp = model(ids, mtp=True)  # [1, T-1, V]: row i predicts ids[i+2]
        lp = F.log_softmax(mtp[0].double(), -1)
        top = torch.topk(mtp[0], 2, dim=-1)
        for i in range(ids.shape[1] - 2):
            tgt = int(ids[0, i + 2])
            rows.append((w, i, int(ids[0, i + 1]), tgt, float(-lp[i, tgt]), int(top.indices[i, 0]),
                         float(top.values[i, 0] - top.values[i, 1])))
    nll = sum(r[4] for r in rows) / len(rows)
    agree = sum(r[3] == r[5] for r in rows) / len(rows)
    with open(a.out / "mtp-ref.tsv", "w") as f:
        f.write("# window\tpos\tnext\ttarget\tnll\ttop1\tmargin  (PyTorch f32 MTP head on the committed Q8_0 weights)\n")
        f.write(f"# windows {a.windows} ctx {ctx} positions {len(rows)} mean_nll {nll:.6f} "
                f"ppl {math.exp(nll):.4f} top1==target {agree:.4f}\n")
        for r in rows:
            f.write(f"{r[0]}\t{r[1]}\t{r[2]}\t{r[3]}\t{r[4]:.6f}\t{r[5]}\t{r[6]:.4f}\n")
    print(f"{len(rows)} rows, mtp ppl {math.exp(nll):.4f}, top1 == target {agree:.4f}")


if __name__ == "__main__":
    main()
