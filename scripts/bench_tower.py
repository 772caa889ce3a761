#!/usr/bin/env python3
"""bench_tower.py - parity and speed of mvembed's CUDA tower against Hugging Face's, on the GPU
machine (needs numpy; `bench` also torch + transformers 5.17 and scripts/hf_reference.py).

  pixels  --grid "t,h,w;..." --seed S --out P.npy
          random packed pixel_values (uniform [-1, 1), like normalized pixels) for a grid list.
  grids   --manifest OUT/manifest.jsonl --count N --out PREFIX
          the grid_thw of the first N ok lines of an mvembed manifest (the sizes its preprocessing
          gave real inputs) as PREFIX.grid (mvtower's --grid string) and random pixel_values for
          them as PREFIX.npy (seed 1)
  compare --ref DIR --ours NAME=DIR [NAME=DIR ...] [--json OUT.json]
          DIR of `hf_reference.py run` (<stage>.f64.npy, <stage>.f32.npy, ...) against mvtower run
          dumps (<stage>.npy). Per stage: relative L2 error vs HF f64; at the output also the
          minimum row cosine. Checks (exit status 1 when one fails):
            NAME starting with f32: output rel L2 <= 2 x HF f32's own rel L2 (vs f64)
            NAME starting with bf16 and containing "hfres" (residual stream rounded to bf16 as HF
              does, mvtower --cuda-residual bf16, kept for comparison): output min row cosine >= 0.999
              and rel L2 <= 1.05 x HF bf16's own (it rounds where HF rounds, so it is as far from
              f64 as HF's bf16 is; 1e-2 when HF bf16 is not in the reference)
            other NAME starting with bf16 (the default f32 residual stream, either attention):
              output min row cosine >= 0.9999 and rel L2 <= 5e-3
  bench   --model DIR --mvtower BIN [--sizes 64x448x448,...,16x1600x1200,...] [--iters 10] [--attention LIST]
          [--json OUT.json] [--batch-tokens N] [--cli] [--mvtower-args "ARGS"]
          tower throughput of mvembed (mvtower bench: host f32 pixels in, host f32 out, one forward
          at a time; once per attention implementation in LIST, default auto (the CLI's); with --cli
          each also as the CLI's pipeline drives it, "NAME+cli": uint8 frames in, 2 forwards in
          flight, the time per batch in steady state) and of HF
          (bf16, sdpa, same packed inputs, same GPU, same run), HF timed both with inputs already on
          the GPU ("hf_dev") and host to host like mvembed ("hf_e2e"); plus the cuBLASLt bf16 GEMM
          rate measured in the same run (mvtower gemm-peak) and MFU = mvembed TFLOP/s / that rate.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def parse_grid(s):
    return [tuple(int(v) for v in g.split(",")) for g in s.split(";") if g]


def grid_str(g):
    return ";".join(",".join(str(v) for v in e) for e in g)


def make_pixels(grid, seed):
    n = sum(t * h * w for t, h, w in grid)
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, size=(n, 1536)).astype(np.float32)


def cmd_pixels(a):
    np.save(a.out, make_pixels(parse_grid(a.grid), a.seed))


def cmd_grids(a):
    grid = []
    with open(a.manifest) as f:
        for line in f:
            r = json.loads(line)
            if r.get("status") == "ok" and r.get("grid_thw"):
                grid.append(tuple(int(v) for v in r["grid_thw"]))
            if len(grid) == a.count:
                break
    if len(grid) < a.count:
        sys.exit(f"bench_tower.py grids: {a.manifest} has {len(grid)} ok lines with a grid, {a.count} wanted")
    np.save(a.out + ".npy", make_pixels(grid, 1))
    with open(a.out + ".grid", "w") as f:
        f.write(grid_str(grid))
    n = sum(t * h * w for t, h, w in grid)
    print(f"grids: {len(grid)} entries, {n} patches ({n / len(grid):.1f} each), segment lengths "
          f"{sorted(set(h * w for _, h, w in grid))} -> {a.out}.grid, {a.out}.npy")


def rel_l2(x, ref):
    d = np.linalg.norm((x.astype(np.float64) - ref).ravel())
    n = np.linalg.norm(ref.ravel())
    return float(d / n) if n > 0 else float(d)


def min_row_cos(x, ref):
    x = x.astype(np.float64)
    num = (x * ref).sum(1)
    den = np.linalg.norm(x, axis=1) * np.linalg.norm(ref, axis=1) + 1e-300
    return float((num / den).min())


def cmd_compare(a):
    ref = a.ref
    stages = sorted(f[:-len(".f64.npy")] for f in os.listdir(ref) if f.endswith(".f64.npy"))
    order = ["pixel_values", "patch_embed", "embed"] + sorted(s for s in stages if s.startswith("block_")) + \
        ["merger_norm", "merger_fc1", "output"]
    stages = [s for s in order if s in stages]
    res = {"ref": ref, "stages": {}, "checks": []}
    names = []
    for spec in a.ours:
        name, d = spec.split("=", 1)
        names.append((name, d))
    hf_other = [dt for dt in ("f32", "bf16") if os.path.exists(os.path.join(ref, f"output.{dt}.npy"))]
    print(f"{'stage':14s}" + "".join(f"{'hf_' + dt:>12s}" for dt in hf_other) + "".join(f"{n:>12s}" for n, _ in names))
    for s in stages:
        r64 = np.load(os.path.join(ref, f"{s}.f64.npy"))
        r64 = r64.reshape(-1, r64.shape[-1])
        row = {}
        for dt in hf_other:
            p = os.path.join(ref, f"{s}.{dt}.npy")
            if os.path.exists(p):
                row["hf_" + dt] = rel_l2(np.load(p).reshape(r64.shape), r64)
        if s == "output" and "hf_bf16" in row:
            row["hf_bf16_min_row_cos"] = min_row_cos(np.load(os.path.join(ref, "output.bf16.npy")).reshape(r64.shape), r64)
        for n, d in names:
            p = os.path.join(d, f"{s}.npy")
            if os.path.exists(p):
                x = np.load(p)
                if x.size != r64.size:
                    row[n] = float("nan")
                    continue
                row[n] = rel_l2(x.reshape(r64.shape), r64)
                if s == "output":
                    row[n + "_min_row_cos"] = min_row_cos(x.reshape(r64.shape), r64)
        res["stages"][s] = row
        cols = [row.get("hf_" + dt, float("nan")) for dt in hf_other] + [row.get(n, float("nan")) for n, _ in names]
        print(f"{s:14s}" + "".join(f"{v:12.3e}" for v in cols))
    out = res["stages"].get("output", {})
    ok_all = True
    for n, _ in names:
        err = out.get(n, float("nan"))
        if n.startswith("f32"):
            lim = 2 * out.get("hf_f32", float("nan"))
            ok = err <= lim
            msg = f"{n}: output rel L2 {err:.3e} <= 2 x HF f32 {lim / 2:.3e}"
        elif n.startswith("bf16"):
            cs = out.get(n + "_min_row_cos", float("nan"))
            cmin, emax = (0.999, 1.05 * out.get("hf_bf16", 1e-2 / 1.05)) if "hfres" in n else (0.9999, 5e-3)
            ok = cs >= cmin and err <= emax
            msg = f"{n}: output min row cos {cs:.6f} >= {cmin} and rel L2 {err:.3e} <= {emax:.3e}" + \
                (f" (HF bf16 itself: rel L2 {out['hf_bf16']:.3e}, min row cos {out['hf_bf16_min_row_cos']:.6f})"
                 if "hf_bf16" in out else "")
        else:
            continue
        res["checks"].append({"check": msg, "ok": bool(ok)})
        print(("PASS " if ok else "FAIL ") + msg)
        ok_all &= bool(ok)
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)
    sys.exit(0 if ok_all else 1)


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def size_grid(spec):
    n, w, h = (int(v) for v in spec.split("x"))
    # HF smart_resize rounds each side to a multiple of 32 (patch 16 x merge 2): 1920x1080 -> 1920x1088
    gh, gw = (h + 31) // 32 * 2, (w + 31) // 32 * 2
    return n, [(1, gh, gw)] * n


def cmd_bench(a):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hf_reference as hr
    peak = run_json([a.mvtower, "gemm-peak"])
    print(f"cuBLASLt bf16 GEMM peak (8192^3, random): {peak['tflops']:.1f} TFLOP/s", flush=True)
    m = None
    if not a.no_hf:
        model, cfg = hr.load_model(a.model)
        m = model.to(device="cuda", dtype=torch.bfloat16).eval()
        try:
            m.config._attn_implementation = "sdpa"
        except Exception:
            pass
    results = {"gemm_peak": peak, "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "sizes": []}
    import transformers
    results["transformers"] = transformers.__version__
    for spec in a.sizes.split(","):
        n, grid = size_grid(spec)
        pix = make_pixels(grid, 1)
        ppath = f"/tmp/bench_pix_{spec}.npy"
        np.save(ppath, pix)
        cmd = [a.mvtower, "bench", "--model", a.model, "--pixels", ppath, "--grid", grid_str(grid),
               "--iters", str(a.iters), "--warmup", "2"] + a.mvtower_args.split()
        if a.batch_tokens:
            cmd += ["--batch-tokens", str(a.batch_tokens)]
        runs = {}
        # NAME -> extra mvtower arguments: each attention implementation host f32 pixels in, one
        # forward at a time; with --cli also as the CLI drives the tower ("NAME+cli": uint8
        # frames in, two forwards in flight taking turns, as the pipeline's default --inflight 2)
        variants = [(impl, ["--attention", impl]) for impl in a.attention.split(",")]
        if a.cli:
            variants += [(impl + "+cli", ["--attention", impl, "--input", "u8", "--inflight", "2"])
                         for impl in a.attention.split(",")]
        for name, extra in variants:
            try:
                runs[name] = run_json(cmd + extra)
            except RuntimeError as ex:
                runs[name] = {"error": str(ex)[-500:]}
                print(f"{spec:14s} mvembed {name}: {runs[name]['error']}", flush=True)
        ok_runs = [k for k in runs if "error" not in runs[k]]
        if not ok_runs:
            results["sizes"].append({"size": spec, "images": n, "mvembed_runs": runs})
            continue
        mv = runs[ok_runs[0]]
        tok = mv["tokens"]
        for impl in ok_runs:
            r_ = runs[impl]
            print(f"{spec:14s} tokens {tok:7d}  mvembed[{impl}] {n / r_['median_s']:8.1f} img/s "
                  f"{tok / r_['median_s']:10.0f} tok/s {r_['tflops']:6.1f} TFLOP/s MFU "
                  f"{r_['tflops'] / peak['tflops'] * 100:5.1f}%", flush=True)
        if m is None:
            results["sizes"].append({"size": spec, "images": n, "tokens": tok, "mvembed": mv,
                                     "mvembed_runs": runs, "mfu": mv["tflops"] / peak["tflops"]})
            continue
        # HF, same inputs
        g = torch.tensor(grid, dtype=torch.long, device="cuda")
        xd = torch.from_numpy(pix).to("cuda")
        ts_dev, ts_e2e = [], []
        with torch.no_grad():
            for i in range(2 + a.iters):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                r = m(xd.to(torch.bfloat16), grid_thw=g)
                torch.cuda.synchronize()
                if i >= 2:
                    ts_dev.append(time.perf_counter() - t0)
            for i in range(1 + a.iters):
                t0 = time.perf_counter()
                x = torch.from_numpy(pix).to("cuda").to(torch.bfloat16)
                r = m(x, grid_thw=g)
                o = (r.pooler_output if hasattr(r, "pooler_output") else r[1]).float().cpu()
                if i >= 1:
                    ts_e2e.append(time.perf_counter() - t0)
        del xd, r, o
        torch.cuda.empty_cache()
        hf_dev, hf_e2e = float(np.median(ts_dev)), float(np.median(ts_e2e))
        row = {"size": spec, "images": n, "grid": list(grid[0]), "tokens": tok,
               "mvembed_s": mv["median_s"], "mvembed_img_s": n / mv["median_s"],
               "mvembed_tok_s": tok / mv["median_s"], "mvembed_tflops": mv["tflops"],
               "mfu": mv["tflops"] / peak["tflops"],
               "hf_dev_s": hf_dev, "hf_dev_img_s": n / hf_dev, "hf_dev_tok_s": tok / hf_dev,
               "hf_e2e_s": hf_e2e, "hf_e2e_img_s": n / hf_e2e,
               "speedup_vs_hf_dev": hf_dev / mv["median_s"], "mvembed": mv, "mvembed_runs": runs}
        for impl in ok_runs:
            row[f"speedup_vs_hf_dev_{impl}"] = hf_dev / runs[impl]["median_s"]
        results["sizes"].append(row)
        print(f"{spec:14s} HF sdpa {row['hf_dev_img_s']:7.1f} img/s {tok / hf_dev:10.0f} tok/s (host-to-host "
              f"{row['hf_e2e_img_s']:7.1f} img/s)  speedup " +
              " ".join(f"{k} x{hf_dev / runs[k]['median_s']:.2f}" for k in ok_runs), flush=True)
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pixels")
    p.add_argument("--grid", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    g = sub.add_parser("grids")
    g.add_argument("--manifest", required=True)
    g.add_argument("--count", type=int, default=64)
    g.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--ref", required=True)
    c.add_argument("--ours", nargs="+", required=True)
    c.add_argument("--json")
    b = sub.add_parser("bench")
    b.add_argument("--model", required=True)
    b.add_argument("--mvtower", required=True)
    b.add_argument("--sizes", default="64x448x448,16x1024x1024,4x1920x1080,16x1600x1200,1x2048x2048,1x3024x4032")
    b.add_argument("--attention", default="auto",
                   help="mvembed attention implementations to time, comma-separated (default auto: the CLI's)")
    b.add_argument("--iters", type=int, default=10)
    b.add_argument("--batch-tokens", type=int, default=0)
    b.add_argument("--json")
    b.add_argument("--no-hf", action="store_true", help="mvembed only (variant comparisons)")
    b.add_argument("--mvtower-args", default="",
                   help="more mvtower bench arguments, e.g. a variant: \"--fa3 sw=0\" (test/cuda/variants/variants.cuh)")
    b.add_argument("--cli", action="store_true",
                   help="also time each attention as the CLI drives the tower (uint8 frames, 2 in flight)")
    a = ap.parse_args()
    {"pixels": cmd_pixels, "grids": cmd_grids, "compare": cmd_compare, "bench": cmd_bench}[a.cmd](a)


if __name__ == "__main__":
    main()
