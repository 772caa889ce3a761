#!/usr/bin/env python3
"""timeline.py TRACE --patches N [--label L] - a CUPTI timeline (test/cuda/cuptitrace.c's lines)
summed up over the window from the first attention kernel's start to the last one's end (the
forwards, without model upload and start-up):
  - the union of kernel intervals (the GPU busy with at least one kernel) and the sum of kernel
    durations (over 1: kernels of several streams overlapped), both per 1000 patches;
  - the gaps of that union by size (an idle GPU between kernels inside and between forwards);
  - in-situ kernel time by family (profile_summary.py's families) per 1000 patches, i.e. as the
    kernels ran beside each other, where ncu's durations are of kernels run one at a time;
  - per stream (the six with most kernels): kernels, time, gaps between its own kernels, and its
    commonest kernel names; copies by kind (1 H2D, 2 D2H, 8 D2D): count, GB, seconds.
N is the patches the window's forwards ran (an mvembed manifest's grid_thw, or mvtower's forwards
x patches). Used by scripts/device-dataset.sh step 7. Not a profiler: no counters, no clocks."""
import argparse, collections, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_summary import family  # noqa: E402


def load(path):
    K, C, dropped = [], [], 0
    for ln in open(path, errors="replace"):
        f = ln.split(" ", 4) if ln.startswith("K ") else ln.split()
        if len(f) < 2:
            continue
        if f[0] == "K" and len(f) == 5:
            K.append((int(f[1]), int(f[2]), int(f[3]), f[4].strip()))
        elif f[0] == "C" and len(f) == 6:
            C.append((int(f[1]), int(f[2]), int(f[3]), int(f[4]), int(f[5])))
        elif f[0] == "D":
            dropped += int(f[1])
    return K, C, dropped


def gap_class(g):
    return "<5us" if g < 5e3 else "5-50us" if g < 5e4 else "50-500us" if g < 5e5 else ">0.5ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--patches", type=float, required=True)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    K, C, dropped = load(a.trace)
    att = [k for k in K if "attn" in k[3] or "fmha" in k[3]]
    if not att:
        print(f"{a.label}: no attention kernels in {a.trace}")
        return 1
    w0, w1 = min(k[0] for k in att), max(k[1] for k in att)
    Kw = sorted(k for k in K if k[0] >= w0 and k[1] <= w1)
    span = (w1 - w0) / 1e9
    busy, gaps, c0, c1 = 0, collections.Counter(), None, None
    for s, e, _, _ in Kw:
        if c1 is None:
            c0, c1 = s, e
        elif s > c1:
            busy += c1 - c0
            gaps[gap_class(s - c1)] += s - c1
            c0, c1 = s, e
        else:
            c1 = max(c1, e)
    busy += c1 - c0
    total = sum(e - s for s, e, _, _ in Kw)
    per = 1e3 / a.patches / 1e3  # ns -> us per 1000 patches
    print(f"{a.label}: window {span:.3f} s, {len(Kw)} kernels, union busy {busy / 1e9:.3f} s "
          f"({100 * busy / 1e9 / span:.1f} %), kernels summed {total / 1e9:.3f} s (x{total / busy:.3f} the union), "
          f"{dropped} records dropped")
    print(f"  per 1000 patches: union {busy * per:.1f} us, kernels summed {total * per:.1f} us")
    print("  gaps of the union (s): " + ", ".join(f"{k} {v / 1e9:.3f}" for k, v in sorted(gaps.items())))
    fam = collections.defaultdict(lambda: [0, 0])
    for s, e, _, n in Kw:
        fam[family(n)][0] += e - s
        fam[family(n)][1] += 1
    print("  in situ per 1000 patches (us, launches): " +
          ", ".join(f"{k} {v[0] * per:.1f} ({v[1]})" for k, v in sorted(fam.items())))
    by = collections.defaultdict(list)
    for k in Kw:
        by[k[2]].append(k)
    for st, ks in sorted(by.items(), key=lambda x: -len(x[1]))[:6]:
        g = sum(max(0, b[0] - p[1]) for p, b in zip(ks, ks[1:]))
        d = sum(e - s for s, e, _, _ in ks)
        names = collections.Counter(re.sub(r"[(<].*", "", k[3])[:28] for k in ks).most_common(3)
        print(f"  stream {st}: {len(ks)} kernels, {d / 1e9:.3f} s, gaps between them {g / 1e9:.3f} s; "
              + ", ".join(f"{n} x{c}" for n, c in names))
    ck = collections.defaultdict(lambda: [0, 0, 0])
    for s, e, _, kind, b in (c for c in C if c[0] >= w0 and c[1] <= w1):
        ck[kind][0] += 1
        ck[kind][1] += b
        ck[kind][2] += e - s
    print("  copies (kind: count, GB, s): " +
          (", ".join(f"{k}: {v[0]}, {v[1] / 1e9:.2f}, {v[2] / 1e9:.3f}" for k, v in sorted(ck.items())) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
