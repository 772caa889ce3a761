#!/usr/bin/python3
"""bf16_error_study.py - where the bf16 tower's error against f64 comes from (numpy only, CPU).

Emulates a random 27B-layout tower (depth 27, hidden 1152, 16 heads, intermediate 4304, out 5120;
weights ~ N(0, 1/fan_in), LayerNorm weights 1 + 0.1 N, biases 0.05 N, all rounded to bf16, like
scripts/hf_reference.py make-model) on one 512x512 image (32x32 patches), three ways:
  f64     exact reference
  bf16    HF's rounding points (docs/hf-reference.md §6): every Linear output, LayerNorm
          output, rope output, attention probabilities and output, and the residual stream
          rounded to bf16; products accumulated exactly
  f32res  the same, but the residual stream kept unrounded (f32 in a real kernel)
and prints the output's relative L2 error and min row cosine against f64. About 3 minutes.
"""
import numpy as np, sys, time
rng = np.random.default_rng(0)
H, heads, I, depth, L = 1152, 16, 4304, 27, 5120
D = H // heads
def bf(x):
    a = np.asarray(x, dtype=np.float32).copy()
    u = a.view(np.uint32)
    u += 0x7FFF + ((u >> 16) & 1)
    u &= 0xFFFF0000
    return a.astype(np.float64)
def W(o, i): return bf(rng.standard_normal((o, i)) / np.sqrt(i))
def Bv(n): return bf(0.05 * rng.standard_normal(n))
def LNw(n): return bf(1 + 0.1 * rng.standard_normal(n))
blocks = []
for _ in range(depth):
    blocks.append(dict(n1w=LNw(H), n1b=Bv(H), qkv=W(3*H, H), qkvb=Bv(3*H), proj=W(H, H), projb=Bv(H),
                       n2w=LNw(H), n2b=Bv(H), fc1=W(I, H), fc1b=Bv(I), fc2=W(H, I), fc2b=Bv(H)))
mnw, mnb = LNw(H), Bv(H); m1 = W(4*H, 4*H); m1b = Bv(4*H); m2 = W(L, 4*H); m2b = Bv(L)
gh, gw = 32, 32
N = gh * gw
# input: patch_embed + pos output stand-in: random with std like the real embed (bf16-rounded)
x0 = bf(rng.standard_normal((N, H)) * 0.7)
# rope
Q = D // 4
inv = 1.0 / (10000.0 ** (np.arange(0, D // 2, 2) / (D // 2)))
q = np.arange(N); blk = q // 4; inn = q % 4; bw = gw // 2
row = (blk // bw) * 2 + inn // 2; col = (blk % bw) * 2 + inn % 2
ah = row[:, None] * inv[None]; aw = col[:, None] * inv[None]
ang = np.concatenate([ah, aw, ah, aw], 1); cos, sin = np.cos(ang).astype(np.float32).astype(np.float64), np.sin(ang).astype(np.float32).astype(np.float64)
def ln(x, w, b):
    m = x.mean(1, keepdims=True); v = ((x - m) ** 2).mean(1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-6) * w + b
def gelu_t(x): return 0.5 * x * (1 + np.tanh(np.sqrt(2/np.pi) * (x + 0.044715 * x**3)))
from math import erf
verf = np.vectorize(erf)
def gelu_e(x):
    return 0.5 * x * (1 + verf(x / np.sqrt(2)))
def run(mode):
    R = (lambda a: a) if mode == "f64" else bf           # rounding of op outputs
    RR = (lambda a: a) if mode in ("f64", "f32res") else bf  # rounding of the residual stream
    x = x0.copy()
    for B in blocks:
        h = R(ln(x, B["n1w"], B["n1b"]))
        qkv = R(h @ B["qkv"].T + B["qkvb"])
        qkv = qkv.reshape(N, 3, heads, D)
        def rope(t):
            t2 = np.concatenate([-t[..., D//2:], t[..., :D//2]], -1)
            return R(t * cos[:, None] + t2 * sin[:, None])
        qh, kh, vh = rope(qkv[:, 0]), rope(qkv[:, 1]), qkv[:, 2]
        s = np.einsum("nhd,mhd->hnm", qh, kh) / np.sqrt(D)
        s = s - s.max(-1, keepdims=True); p = np.exp(s); p = p / p.sum(-1, keepdims=True)
        p = R(p) if mode != "f64" else p
        o = R(np.einsum("hnm,mhd->nhd", p, vh).reshape(N, H))
        x = RR(x + R(o @ B["proj"].T + B["projb"]))
        h = R(ln(x, B["n2w"], B["n2b"]))
        f = R(gelu_t(R(h @ B["fc1"].T + B["fc1b"])))
        x = RR(x + R(f @ B["fc2"].T + B["fc2b"]))
    h = R(ln(x, mnw, mnb)).reshape(N // 4, 4 * H)
    h = R(gelu_e(R(h @ m1.T + m1b)))
    return R(h @ m2.T + m2b)
t = time.time(); ref = run("f64"); print("f64", time.time() - t, flush=True)
for mode in ["bf16", "f32res"]:
    o = run(mode)
    rel = np.linalg.norm(o - ref) / np.linalg.norm(ref)
    cos_ = ((o * ref).sum(1) / np.linalg.norm(o, axis=1) / np.linalg.norm(ref, axis=1)).min()
    print(mode, f"rel_l2 {rel:.4e} min_cos {cos_:.6f}", flush=True)
