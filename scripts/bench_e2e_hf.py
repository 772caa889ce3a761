#!/usr/bin/env python3
"""bench_e2e_hf.py - Hugging Face transformers doing mvembed's job its own way, for the
end-to-end benchmark: load_image (PIL) -> Qwen2VLImageProcessor (CPU, torchvision backend) ->
Qwen3_5VisionModel (bf16, sdpa, CUDA), batched, outputs copied back to the host.

  bench_e2e_hf.py --model DIR --files LIST.txt [--limit N] [--batch B] [--videos]

Prints files/s over the timed files (after one warm-up batch); --out DIR also saves every
embedding with numpy.save, so that both sides do the whole job. --videos loads clips with
transformers' load_video (opencv backend: the GPU machine has no PyAV/decord) and uses
Qwen3VLVideoProcessor."""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as H  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--files", required=True)
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--videos", action="store_true")
    ap.add_argument("--out", help="also save each file's embedding as OUT/<name>.npy (the same job "
                                  "as mvembed's, which writes every output)")
    a = ap.parse_args()
    files = [l.strip() for l in open(a.files) if l.strip()][: a.limit]
    model, cfg = H.load_model(a.model)
    model = model.to("cuda", torch.bfloat16).eval()
    model.config._attn_implementation = "sdpa"
    if a.videos:
        from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
        from transformers.video_utils import load_video
        pc = json.load(open(os.path.join(a.model, "video_preprocessor_config.json")))
        proc = Qwen3VLVideoProcessor(**{k: pc[k] for k in ["size", "patch_size", "temporal_patch_size",
                                                            "merge_size", "image_mean", "image_std", "fps",
                                                            "min_frames", "max_frames"]})
    else:
        from transformers.image_utils import load_image
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
        pc = json.load(open(os.path.join(a.model, "preprocessor_config.json")))
        proc = Qwen2VLImageProcessor(**{k: pc[k] for k in ["size", "patch_size", "temporal_patch_size",
                                                            "merge_size", "image_mean", "image_std"]})

    def run(batch):
        if a.videos:
            vids, mds = [], []
            for f in batch:
                v, md = load_video(f, backend="opencv")
                vids.append(v)
                mds.append(md)
            r = proc(videos=vids, video_metadata=mds, do_sample_frames=True, return_tensors="pt")
            pix, grid = r["pixel_values_videos"], r["video_grid_thw"]
        else:
            r = proc(images=[load_image(f) for f in batch], return_tensors="pt")
            pix, grid = r["pixel_values"], r["image_grid_thw"]
        with torch.no_grad():
            o = model(pix.to("cuda", torch.bfloat16), grid_thw=grid.to("cuda"))
        o = getattr(o, "pooler_output", o)
        o = o.float().cpu()
        if a.out:
            import numpy as np
            os.makedirs(a.out, exist_ok=True)
            sizes = (grid.prod(-1) // 4).tolist()
            for f, part in zip(batch, torch.split(o, sizes)):
                np.save(os.path.join(a.out, os.path.basename(f) + ".npy"), part.numpy())
        return o, int(grid.prod(-1).sum())

    run(files[: a.batch])  # warm-up
    torch.cuda.synchronize()
    t = time.time()
    n = tok = 0
    for i in range(a.batch, len(files), a.batch):
        b = files[i:i + a.batch]
        _, k = run(b)
        n += len(b)
        tok += k
    dt = time.time() - t
    print(f"hf_e2e: {n} {'videos' if a.videos else 'images'} in {dt:.2f}s: {n / dt:.2f} files/s, "
          f"{tok / dt:.0f} patches/s (batch {a.batch})")


if __name__ == "__main__":
    main()
