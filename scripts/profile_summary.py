#!/usr/bin/env python3
"""profile_summary.py CSV LABEL - GPU time by kernel family from an `nsys stats --report
cuda_gpu_kern_sum --format csv` table or an `ncu --csv --page raw --metrics gpu__time_duration.sum`
dump (scripts/device-run.sh profile). Families: GEMM (cuBLASLt/nvjet/cutlass), attention (ours,
cuDNN), layernorm, rope, position embedding, conversions/activations, pooling/patchify, other.
Prints one line per family: total ms, share, kernel launches."""
import csv, io, re, sys

FAMILIES = [
    ("gemm", r"gemm|nvjet|cutlass|sm90_xmma|cublas|Kernel2"),
    ("attention", r"attn|flash|fmha|cudnn|mha|sdpa"),
    ("layernorm", r"layernorm|ln_"),
    ("rope", r"rope"),
    ("posembed", r"pos_embed|posembed"),
    ("convert/act", r"f32|bf16|act_kernel|convert"),
    ("pool/patchify", r"pool|patchify"),
]


def family(name):
    for fam, rx in FAMILIES:
        if re.search(rx, name, re.I):
            return fam
    return "other"


def rows(path):
    text = open(path, errors="replace").read()
    # ncu/nsys print lines before the CSV (the profiled program's own output among them, which
    # may hold quotes): the table starts at its header row
    heads = [i for i in (text.find('"ID"'), text.find('"Time (%)"'), text.find('"Total Time')) if i >= 0]
    start = min(heads) if heads else text.find('"')
    lines = [l for l in text[start:].splitlines() if l.startswith('"')]
    r = list(csv.reader(io.StringIO("\n".join(lines))))
    if not r:
        return []
    head = r[0]
    out = []
    if "Total Time (ns)" in head:  # nsys cuda_gpu_kern_sum
        it, ic, iname = head.index("Total Time (ns)"), head.index("Instances"), head.index("Name")
        for x in r[1:]:
            out.append((x[iname], float(x[it]) / 1e6, int(float(x[ic]))))
    elif "gpu__time_duration.sum" in head:  # ncu raw page: one row per kernel launch (+ a units row)
        it, iname = head.index("gpu__time_duration.sum"), head.index("Kernel Name")
        units = r[1][it] if len(r) > 1 else "ns"
        scale = {"ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "nsecond": 1e-6}.get(units, 1e-6)
        for x in r[2:]:
            try:
                out.append((x[iname], float(x[it].replace(",", "")) * scale, 1))
            except (ValueError, IndexError):
                pass
    return out


def main():
    path, label = sys.argv[1], sys.argv[2]
    agg = {}
    for name, ms, n in rows(path):
        f = family(name)
        t, c = agg.get(f, (0.0, 0))
        agg[f] = (t + ms, c + n)
    total = sum(t for t, _ in agg.values())
    if total <= 0:
        print(f"profile {label}: no kernel times in {path}")
        return
    print(f"profile {label}: {total:.1f} ms of kernels")
    for f, (t, c) in sorted(agg.items(), key=lambda kv: -kv[1][0]):
        print(f"  {f:14s} {t:9.2f} ms {100 * t / total:5.1f} %  {c} launches")


if __name__ == "__main__":
    main()
