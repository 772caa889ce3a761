#!/usr/bin/env python3
"""make_photos.py - a folder of photo-sized JPEGs for the end-to-end benchmark (needs PIL, numpy).

  make_photos.py --src fixtures/media/images --out DIR --count 2000 [--size 1600x1200] [--seed 0] [--exact]

Each file is a fixture image, randomly cropped, flipped, colour-jittered and resized to about the
given size (sizes vary by up to 10%; --exact: exactly the size, the same crops and colours), with
noise added so it compresses like a photo, saved as a quality-90 4:2:0 JPEG. Deterministic for a
seed. Uses all cores."""
import argparse
import os
from multiprocessing import Pool

import numpy as np
from PIL import Image

ARGS = None


def one(i):
    a = ARGS
    rng = np.random.default_rng(a.seed * 1000003 + i)
    srcs = sorted(f for f in os.listdir(a.src) if f.lower().endswith((".jpg", ".png", ".webp")))
    im = Image.open(os.path.join(a.src, srcs[i % len(srcs)])).convert("RGB")
    w, h = im.size
    cw, ch = int(w * rng.uniform(0.6, 1.0)), int(h * rng.uniform(0.6, 1.0))
    x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    im = im.crop((x0, y0, x0 + cw, y0 + ch))
    if rng.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    W, H = (int(v) for v in a.size.split("x"))
    s = rng.uniform(0.9, 1.1)  # drawn with --exact too: the colours and noise stay the mixed set's
    if a.exact:
        s = 1.0
    im = im.resize((int(W * s), int(H * s)), Image.BICUBIC)
    arr = np.asarray(im).astype(np.float32)
    arr = arr * rng.uniform(0.8, 1.2, size=3) + rng.normal(0, 6, size=arr.shape)
    im = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    sub = os.path.join(a.out, f"{i // 500:03d}")
    os.makedirs(sub, exist_ok=True)
    im.save(os.path.join(sub, f"photo_{i:05d}.jpg"), quality=90, subsampling=2)
    return 0


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--size", default="1600x1200")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exact", action="store_true", help="every file exactly --size")
    ARGS = ap.parse_args()
    with Pool() as p:
        p.map(one, range(ARGS.count), chunksize=16)
    print(f"make_photos: {ARGS.count} JPEGs of about {ARGS.size} in {ARGS.out}")


if __name__ == "__main__":
    main()
