#!/usr/bin/env python3
"""bench_attn_torch.py - PyTorch's scaled_dot_product_attention on the shapes of test/cuda/attnbench.cu
(head dim 72 and 64, 16 heads, segments 64x784, 16x4096, 4x8160, 1x47376; bf16, bidirectional),
through its FlashAttention-2 and cuDNN backends (torch.nn.attention.sdpa_kernel), for comparison
with mvembed's kernels in the same device call. Equal-length segments, so a plain [B, H, S, D]
batch is the same work as the varlen call. Times with CUDA events: median of --iters after 3
warm-ups; TFLOP/s = sum 4 * S^2 * D * H / time. One JSON line per run, a table at the end. A
backend that refuses a shape (e.g. FlashAttention-2 with D = 72 on some builds) prints its error.
Not a test. Runs on the GPU machine (scripts/device-run.sh attn).
"""
import argparse
import json

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    heads = 16
    shapes = [(64, 784), (16, 4096), (4, 8160), (1, 47376)]
    rows = []
    for D in (72, 64):
        for nseg, S in shapes:
            g = torch.Generator(device="cuda").manual_seed(D * 131 + S)
            q, k, v = (torch.rand(nseg, heads, S, D, device="cuda", generator=g, dtype=torch.float32)
                       .sub_(0.5).mul_(4).to(torch.bfloat16) for _ in range(3))
            flop = 4.0 * S * S * D * heads * nseg
            for name, be in (("torch_flash2", SDPBackend.FLASH_ATTENTION), ("torch_cudnn", SDPBackend.CUDNN_ATTENTION)):
                rec = {"what": "attn", "impl": name, "D": D, "heads": heads, "segments": f"{nseg}x{S}"}
                try:
                    with sdpa_kernel([be]):
                        ts = []
                        for it in range(a.iters + 3):
                            e0 = torch.cuda.Event(enable_timing=True)
                            e1 = torch.cuda.Event(enable_timing=True)
                            e0.record()
                            F.scaled_dot_product_attention(q, k, v)
                            e1.record()
                            e1.synchronize()
                            if it >= 3:
                                ts.append(e0.elapsed_time(e1) * 1e-3)
                    ts.sort()
                    med = ts[len(ts) // 2]
                    rec.update(median_s=med, min_s=ts[0], tflops=round(flop / med / 1e12, 1))
                except Exception as ex:  # a backend that does not take the shape
                    rec["error"] = str(ex).splitlines()[0][:200]
                print(json.dumps(rec), flush=True)
                rows.append(rec)
            del q, k, v
            torch.cuda.empty_cache()
    print(f"{'impl':<14} {'D':>4} {'segments':<10} {'median_ms':>10} {'TFLOP/s':>9}")
    for r in rows:
        if "error" in r:
            print(f"{r['impl']:<14} {r['D']:>4} {r['segments']:<10} {'error':>10}  {r['error'][:60]}")
        else:
            print(f"{r['impl']:<14} {r['D']:>4} {r['segments']:<10} {r['median_s'] * 1e3:>10.3f} {r['tflops']:>9.1f}")


if __name__ == "__main__":
    main()
