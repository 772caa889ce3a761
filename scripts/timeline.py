#!/usr/bin/env python3
"""timeline.py TRACE --patches N [--label L] [--gaps G] - a CUPTI timeline (test/cuda/cuptitrace.c's lines)
summed up over the window from the first attention kernel's start to the last one's end (the
forwards, without model upload and start-up):
  - the union of kernel intervals (the GPU busy with at least one kernel) and the sum of kernel
    durations (over 1: kernels of several streams overlapped), both per 1000 patches;
  - the gaps of that union by size (an idle GPU between kernels inside and between forwards);
  - in-situ kernel time by family (profile_summary.py's families) per 1000 patches, i.e. as the
    kernels ran beside each other, where ncu's durations are of kernels run one at a time;
  - per stream (the six with most kernels): kernels, time, gaps between its own kernels, and its
    commonest kernel names; copies by kind (1 H2D, 2 D2H, 8 D2D): count, GB, seconds;
  - where the idle time lies: the union's gaps over 0.5 ms by tenth of the window, and (--gaps)
    the G longest, each with when it began, the kernels either side and the host's runtime calls
    (cuptitrace's A lines: allocations, frees, synchronisations, slow calls) that overlap it.
N is the patches the window's forwards ran (an mvembed manifest's grid_thw, or mvtower's forwards
x patches). Used by scripts/device-dataset.sh step 7. Not a profiler: no counters, no clocks."""
import argparse, collections, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_summary import family  # noqa: E402


def load(path):
    K, C, A, dropped = [], [], [], 0
    for ln in open(path, errors="replace"):
        f = ln.split(" ", 4) if ln[:2] in ("K ", "A ") else ln.split()
        if len(f) < 2:
            continue
        if f[0] == "K" and len(f) == 5:
            K.append((int(f[1]), int(f[2]), int(f[3]), f[4].strip()))
        elif f[0] == "C" and len(f) == 6:
            C.append((int(f[1]), int(f[2]), int(f[3]), int(f[4]), int(f[5])))
        elif f[0] == "A" and len(f) == 5:
            A.append((int(f[1]), int(f[2]), int(f[3]), f[4].strip()))
        elif f[0] == "D":
            dropped += int(f[1])
    return K, C, A, dropped


def gap_class(g):
    return "<5us" if g < 5e3 else "5-50us" if g < 5e4 else "50-500us" if g < 5e5 else ">0.5ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--patches", type=float, required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--gaps", type=int, default=0, help="list the G longest gaps of the union")
    a = ap.parse_args()
    K, C, A, dropped = load(a.trace)
    att = [k for k in K if "attn" in k[3] or "fmha" in k[3]]
    if not att:
        print(f"{a.label}: no attention kernels in {a.trace}")
        return 1
    w0, w1 = min(k[0] for k in att), max(k[1] for k in att)
    Kw = sorted(k for k in K if k[0] >= w0 and k[1] <= w1)
    span = (w1 - w0) / 1e9
    busy, gaps, c0, c1 = 0, collections.Counter(), None, None
    big = []  # (length, start, index of the kernel after the gap) of gaps over 0.5 ms
    for i, (s, e, _, _) in enumerate(Kw):
        if c1 is None:
            c0, c1 = s, e
        elif s > c1:
            busy += c1 - c0
            gaps[gap_class(s - c1)] += s - c1
            if s - c1 >= 5e5:
                big.append((s - c1, c1, i))
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
    tenth = [0.0] * 10
    for g, t, _ in big:
        tenth[min(9, int(10 * (t - w0) / (w1 - w0)))] += g / 1e6
    print("  gaps over 0.5 ms by tenth of the window (ms): " + " ".join(f"{x:.1f}" for x in tenth))
    threads = {t: i for i, t in enumerate(sorted({x[2] for x in A}))}
    short = lambda n: re.sub(r"[(<].*", "", n)[:32]
    for g, t, i in sorted(big, reverse=True)[:a.gaps]:
        before = max((k for k in Kw[:i] if k[1] <= t + 1), key=lambda k: k[1])
        after = Kw[i]
        calls = [x for x in A if x[0] < t + g and x[1] > t]
        print(f"  gap {g / 1e6:.2f} ms at {(t - w0) / 1e6:.1f} ms: after {short(before[3])} (stream {before[2]}), "
              f"before {short(after[3])} (stream {after[2]}); host calls: " +
              (", ".join(f"{n} t{threads[th]} {(e - s) / 1e6:.2f} ms" for s, e, th, n in calls[:6])
               + (f" (+{len(calls) - 6})" if len(calls) > 6 else "") or "none"))
    if A:
        an = collections.defaultdict(lambda: [0, 0])
        for s, e, _, n in A:
            if s >= w0 and e <= w1:
                an[n][0] += 1
                an[n][1] += e - s
        print("  host calls in the window (count, s): " +
              ", ".join(f"{n} {v[0]}, {v[1] / 1e9:.3f}" for n, v in sorted(an.items(), key=lambda x: -x[1][1])[:8]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
