#!/usr/bin/env python3
"""bench_cpu_hf.py - helpers of scripts/bench-cpu.sh (a benchmark, not a test).

  pixels --grid "t,h,w;..." --seed S --out P.npy
         packed pixel_values, uniform [-1, 1) f32 (numpy only)
  hf     --model DIR --pixels P.npy --grid "t,h,w;..." --threads N [--iters K]
         HF transformers' Qwen3_5VisionModel (scripts/hf_reference.py load_model) in f32 on the CPU,
         sdpa attention, torch.set_num_threads(N): times the forward alone (model load excluded),
         one warm-up then K runs; prints "hf MEDIAN" and "hf_min MIN" (seconds).
"""
import argparse
import os
import sys
import time

import numpy as np


def parse_grid(s):
    return [tuple(int(v) for v in g.split(",")) for g in s.split(";") if g]


def cmd_pixels(a):
    g = parse_grid(a.grid)
    n = sum(t * h * w for t, h, w in g)
    rng = np.random.default_rng(a.seed)
    np.save(a.out, rng.uniform(-1.0, 1.0, size=(n, 1536)).astype(np.float32))


def cmd_hf(a):
    import torch
    torch.set_num_threads(a.threads)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from hf_reference import load_model
    model, _ = load_model(a.model)
    try:
        model.config._attn_implementation = "sdpa"
    except Exception:
        pass
    x = torch.from_numpy(np.load(a.pixels))
    g = torch.tensor(parse_grid(a.grid), dtype=torch.long)
    ts = []
    with torch.no_grad():
        for _ in range(a.iters + 1):
            t0 = time.perf_counter()
            model(x, grid_thw=g)
            ts.append(time.perf_counter() - t0)
    ts = sorted(ts[1:])
    print(f"hf {ts[len(ts) // 2]:.4f}\nhf_min {ts[0]:.4f}\nhf_torch_threads {torch.get_num_threads()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pixels")
    p.add_argument("--grid", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p = sub.add_parser("hf")
    p.add_argument("--model", required=True)
    p.add_argument("--pixels", required=True)
    p.add_argument("--grid", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--iters", type=int, default=3)
    a = ap.parse_args()
    {"pixels": cmd_pixels, "hf": cmd_hf}[a.cmd](a)


if __name__ == "__main__":
    main()
