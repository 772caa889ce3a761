#!/usr/bin/env python3
"""hf_reference.py - the oracle for mvembed: Hugging Face transformers' own Qwen3.5 vision tower
and processors, run on given inputs, with every intermediate stage saved as .npy.

Needs torch and transformers >= 5.17 (with qwen3_5); run it on the GPU machine, which has both.

  make-model  builds a random-initialised Qwen3_5VisionModel (weights, LayerNorm and biases all
              random, rounded to bf16) and saves it laid out like a released checkpoint:
              config.json with "vision_config", model.visual.* keys in bf16 safetensors (optionally
              sharded with model.safetensors.index.json), preprocessor_config.json and
              video_preprocessor_config.json.
  run         runs HF's image processor (Qwen2VLImageProcessor, torchvision backend, on CPU) on image
              files, HF's Qwen3VLVideoProcessor on decoded video frames (.npy [T,H,W,3] uint8 with a
              .json of fps/total frames beside it, made by scripts/ffmpeg_frames.py; the per-frame
              pixel cap from the config or --cap-pixels-per-frame / --max-video-tokens), or takes given
              pixel_values, then the tower in f64 and f32 (CPU) and optionally bf16 (GPU), writing
              OUT/<name>/{pixel_values.npy, grid_thw.npy, meta.json, <stage>.<dtype>.npy, errors.json};
              an image's meta.json also holds the sha256 of the decoded RGB picture (load_image's,
              before resizing) and the Pillow and transformers versions that made it.

Stage names (same as mvembed --dump-stages): pixel_values patch_embed embed block_00.. merger_norm
merger_fc1 (linear_fc1 output, before the erf GELU) output.
"""
import argparse
import copy
import json
import os
import sys

import numpy as np
import torch

CONFIGS = {
    # tiny: fixtures/model-tiny (head_dim 64, small pixel budget so tests run fast on a CPU)
    "tiny": dict(depth=2, hidden_size=128, num_heads=2, intermediate_size=192, out_hidden_size=64,
                 num_position_embeddings=256),
    # tiny72: head_dim 72 like the 9B/27B towers
    "tiny72": dict(depth=2, hidden_size=144, num_heads=2, intermediate_size=160, out_hidden_size=48,
                   num_position_embeddings=256),
    "2b": dict(depth=24, hidden_size=1024, num_heads=16, intermediate_size=4096, out_hidden_size=2048,
               num_position_embeddings=2304),
    "27b": dict(depth=27, hidden_size=1152, num_heads=16, intermediate_size=4304, out_hidden_size=5120,
                num_position_embeddings=2304),
}
COMMON = dict(patch_size=16, spatial_merge_size=2, temporal_patch_size=2, in_channels=3,
              hidden_act="gelu_pytorch_tanh")
# Pixel budgets: released checkpoints use 65536..16777216 (images) and 4096..25165824 (videos);
# the tiny fixture model uses small budgets so CPU tests stay fast.
PREPROC = {
    "tiny": dict(image=(1024, 200704), video=(1024, 401408)),
    "tiny72": dict(image=(1024, 200704), video=(1024, 401408)),
    "2b": dict(image=(65536, 16777216), video=(4096, 25165824)),
    "27b": dict(image=(65536, 16777216), video=(4096, 25165824)),
}
STAGES_FIXED = ["pixel_values", "patch_embed", "embed"]


def vision_classes():
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq
    from transformers.models.qwen3_5 import configuration_qwen3_5 as cq
    return cq.Qwen3_5VisionConfig, mq.Qwen3_5VisionModel


def make_model(args):
    VC, VM = vision_classes()
    if args.config in CONFIGS:
        params = dict(CONFIGS[args.config], **COMMON)
        budgets = PREPROC[args.config]
    else:
        with open(args.config) as f:
            params = json.load(f)
        budgets = PREPROC["27b"]
    cfg = VC(**params)
    torch.manual_seed(args.seed)
    model = VM._from_config(cfg) if hasattr(VM, "_from_config") else VM(cfg)
    model = model.float()
    g = torch.Generator().manual_seed(args.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("pos_embed.weight"):
                v = torch.randn(p.shape, generator=g) * 0.5
            elif "norm" in name and name.endswith("weight"):
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
            elif name.endswith("bias"):
                v = 0.05 * torch.randn(p.shape, generator=g)
            else:
                fan_in = int(np.prod(p.shape[1:]))
                v = torch.randn(p.shape, generator=g) / np.sqrt(fan_in)
            p.copy_(v.to(torch.bfloat16).float())
    os.makedirs(args.out, exist_ok=True)
    from safetensors.torch import save_file
    sd = {"model.visual." + k: v.detach().to(torch.bfloat16).contiguous()
          for k, v in model.state_dict().items() if "rotary" not in k}
    keys = sorted(sd)
    if args.shards > 1:
        per = (len(keys) + args.shards - 1) // args.shards
        wm = {}
        for i in range(args.shards):
            fn = f"model-{i + 1:05d}-of-{args.shards:05d}.safetensors"
            part = {k: sd[k] for k in keys[i * per:(i + 1) * per]}
            save_file(part, os.path.join(args.out, fn), metadata={"format": "pt"})
            wm.update({k: fn for k in part})
        total = sum(v.numel() * 2 for v in sd.values())
        with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)
    else:
        save_file(sd, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    vc = {k: getattr(cfg, k) for k in ["depth", "hidden_size", "hidden_act", "intermediate_size",
                                       "num_heads", "in_channels", "patch_size", "spatial_merge_size",
                                       "temporal_patch_size", "out_hidden_size",
                                       "num_position_embeddings", "initializer_range"]}
    vc["model_type"] = "qwen3_5"
    vc["deepstack_visual_indexes"] = []
    conf = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
            "image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053,
            "vision_end_token_id": 248054, "vision_config": vc,
            "mvembed_note": f"random-initialised test tower, config {args.config}, seed {args.seed}"}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
    ps = dict(patch_size=16, temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3,
              image_std=[0.5] * 3)
    with open(os.path.join(args.out, "preprocessor_config.json"), "w") as f:
        json.dump(dict(ps, image_processor_type="Qwen2VLImageProcessor", processor_class="Qwen3VLProcessor",
                       size={"shortest_edge": budgets["image"][0], "longest_edge": budgets["image"][1]}),
                  f, indent=2)
    with open(os.path.join(args.out, "video_preprocessor_config.json"), "w") as f:
        json.dump(dict(ps, video_processor_type="Qwen3VLVideoProcessor", processor_class="Qwen3VLProcessor",
                       size={"shortest_edge": budgets["video"][0], "longest_edge": budgets["video"][1]},
                       fps=2, min_frames=4, max_frames=768, do_sample_frames=True),
                  f, indent=2)
    print(f"make-model: {args.config} seed {args.seed} -> {args.out} ({len(sd)} tensors)")


def load_model(mdir):
    VC, VM = vision_classes()
    with open(os.path.join(mdir, "config.json")) as f:
        conf = json.load(f)
    vc = dict(conf.get("vision_config", conf))
    vc.pop("model_type", None)
    cfg = VC(**vc)
    model = VM._from_config(cfg) if hasattr(VM, "_from_config") else VM(cfg)
    from safetensors.torch import load_file
    sd = {}
    idx = os.path.join(mdir, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    for fn in files:
        for k, v in load_file(os.path.join(mdir, fn)).items():
            if k.startswith("model.visual."):
                sd[k[len("model.visual."):]] = v
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
    missing = [m for m in missing if "rotary" not in m]
    if missing or unexpected:
        sys.exit(f"load_model: missing {missing} unexpected {unexpected}")
    return model.float().eval(), cfg


def run_tower(model, pix, grid, dtype, device, attn):
    m = copy.deepcopy(model).to(device=device, dtype=dtype)
    try:
        m.config._attn_implementation = attn
    except Exception:
        pass
    out = {}
    hooks = []

    def save(name):
        def fn(_mod, _inp, o):
            t = o[0] if isinstance(o, tuple) else o
            t = getattr(t, "last_hidden_state", t)
            out[name] = t.detach().to("cpu", torch.float64).numpy()
        return fn
    hooks.append(m.patch_embed.register_forward_hook(save("patch_embed")))
    def pre(_m, a, kw):
        t = a[0] if a else kw["hidden_states"]
        out["embed"] = t.detach().to("cpu", torch.float64).numpy()
    hooks.append(m.blocks[0].register_forward_pre_hook(pre, with_kwargs=True))
    for i, b in enumerate(m.blocks):
        hooks.append(b.register_forward_hook(save(f"block_{i:02d}")))
    hooks.append(m.merger.norm.register_forward_hook(save("merger_norm")))
    hooks.append(m.merger.linear_fc1.register_forward_hook(save("merger_fc1")))
    with torch.no_grad():
        x = torch.from_numpy(pix).to(device=device, dtype=dtype)
        g = torch.from_numpy(grid).to(device=device, dtype=torch.long)
        r = m(x, grid_thw=g)
    for h in hooks:
        h.remove()
    if hasattr(r, "pooler_output") and r.pooler_output is not None:
        o = r.pooler_output
    elif isinstance(r, tuple):
        o = r[1] if len(r) > 1 and r[1] is not None else r[0]
    else:
        o = r
    out["output"] = o.detach().to("cpu", torch.float64).numpy()
    out["merger_norm"] = out["merger_norm"].reshape(-1, model.config.hidden_size)
    return out


def rel_l2(a, ref):
    d = np.linalg.norm((a - ref).ravel())
    n = np.linalg.norm(ref.ravel())
    return float(d / n) if n > 0 else float(d)


def image_inputs(path, mdir):
    from transformers.image_utils import load_image
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    pc = json.load(open(os.path.join(mdir, "preprocessor_config.json")))
    kw = {k: pc[k] for k in ["size", "patch_size", "temporal_patch_size", "merge_size", "image_mean", "image_std"]}
    proc = Qwen2VLImageProcessor(**kw)
    import hashlib
    import PIL
    import transformers
    img = load_image(path)
    # the decoded picture itself (RGB, EXIF orientation applied), before any resizing
    decoded = np.ascontiguousarray(np.asarray(img, dtype=np.uint8))
    r = proc(images=[img], return_tensors="pt")
    pix = r["pixel_values"].numpy().astype(np.float32)
    grid = r["image_grid_thw"].numpy().astype(np.int64)
    meta = {"kind": "image", "width": img.width, "height": img.height,
            "resized": [int(grid[0, 2]) * 16, int(grid[0, 1]) * 16], "processor": type(proc).__name__,
            "decoded_sha256": hashlib.sha256(decoded.tobytes()).hexdigest(), "decoded_shape": list(decoded.shape),
            "pillow": PIL.__version__, "transformers": transformers.__version__}
    return pix, grid, meta


def video_inputs(npy, mdir, fps=None, num_frames=None, cap=None, max_video_tokens=None):
    """cap (True/False) and max_video_tokens override the config's cap_pixels_per_frame and
    max_video_tokens; both reach the processor as constructor settings, as from the config file."""
    import inspect
    import transformers
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
    from transformers.video_utils import VideoMetadata
    pc = json.load(open(os.path.join(mdir, "video_preprocessor_config.json")))
    kw = {k: pc[k] for k in ["size", "patch_size", "temporal_patch_size", "merge_size", "image_mean",
                             "image_std", "fps", "min_frames", "max_frames", "cap_pixels_per_frame",
                             "max_video_tokens"] if k in pc}
    if num_frames is not None:
        kw.pop("fps", None)
    elif fps is not None:
        kw["fps"] = fps
    if cap is not None:
        kw["cap_pixels_per_frame"] = cap
    if max_video_tokens is not None:
        kw["max_video_tokens"] = max_video_tokens
    proc = Qwen3VLVideoProcessor(**kw)
    # refuse to write references for a rule this transformers does not implement
    src = inspect.getsource(Qwen3VLVideoProcessor)
    for k in ("cap_pixels_per_frame", "max_video_tokens"):
        if k in kw and (k not in src or getattr(proc, k, None) != kw[k]):
            sys.exit(f"video_inputs: transformers {transformers.__version__} ignores {k}={kw[k]!r}")
    frames = np.load(npy)
    info = json.load(open(npy[:-4] + ".json"))
    md = VideoMetadata(total_num_frames=int(frames.shape[0]), fps=float(info["fps"]),
                       duration=float(info.get("duration", frames.shape[0] / info["fps"])),
                       width=int(frames.shape[2]), height=int(frames.shape[1]))
    call = dict(videos=[frames], video_metadata=[md], do_sample_frames=True, return_metadata=True,
                return_tensors="pt")
    if num_frames is not None:
        call["num_frames"] = num_frames
        call["fps"] = None
    r = proc(**call)
    pix = r["pixel_values_videos"].numpy().astype(np.float32)
    grid = r["video_grid_thw"].numpy().astype(np.int64)
    mds = r.get("video_metadata")
    idx = None
    if mds is not None:
        m0 = mds[0]
        idx = getattr(m0, "frames_indices", None)
        if idx is None and isinstance(m0, dict):
            idx = m0.get("frames_indices")
    meta = {"kind": "video", "width": int(frames.shape[2]), "height": int(frames.shape[1]),
            "total_frames": int(frames.shape[0]), "fps": float(info["fps"]),
            "frame_indices": [int(i) for i in idx] if idx is not None else None,
            "resized": [int(grid[0, 2]) * 16, int(grid[0, 1]) * 16], "processor": type(proc).__name__,
            "video_rule": {"cap_pixels_per_frame": getattr(proc, "cap_pixels_per_frame", None),
                           "max_video_tokens": getattr(proc, "max_video_tokens", None),
                           "size": dict(pc["size"]), "transformers": transformers.__version__}}
    return pix, grid, meta


def save_frames(pix, grid, d, pc):
    """Inverts normalisation + patchify: writes hf_frame_NNN.png, the uint8 frames HF resized."""
    from PIL import Image
    t, gh, gw = (int(x) for x in grid[0])
    T, P = pc["temporal_patch_size"], pc["patch_size"]
    mean = np.array(pc["image_mean"]) * 255.0
    std = np.array(pc["image_std"]) * 255.0
    x = pix[: t * gh * gw].reshape(t, gh // 2, gw // 2, 2, 2, 3, T, P, P)
    x = x.transpose(0, 6, 1, 3, 7, 2, 4, 8, 5).reshape(t * T, gh * P, gw * P, 3)
    u = np.rint(x * std + mean).clip(0, 255).astype(np.uint8)
    n = 1 if grid[0][0] == 1 and np.array_equal(u[0], u[-1]) and u.shape[0] == T else u.shape[0]
    for i in range(n):
        Image.fromarray(u[i]).save(os.path.join(d, f"hf_frame_{i:03d}.png"))


def run(args):
    model, cfg = load_model(args.model)
    dtypes = args.dtypes.split(",")
    jobs = []
    for p in args.images or []:
        jobs.append((os.path.basename(p), lambda p=p: image_inputs(p, args.model)))
    for p in args.videos or []:
        cap = None if args.cap_pixels_per_frame is None else args.cap_pixels_per_frame == "on"
        jobs.append((os.path.basename(p)[:-4], lambda p=p, cap=cap: video_inputs(
            p, args.model, args.fps, args.num_frames, cap, args.max_video_tokens)))
    if args.pixels:
        def given():
            pix = np.load(args.pixels).astype(np.float32)
            grid = np.array([[int(x) for x in g.split(",")] for g in args.grid.split(";")], dtype=np.int64)
            return pix, grid, {"kind": "pixels"}
        jobs.append((args.name or os.path.basename(args.pixels)[:-4], given))
    keep = set(args.stages.split(",")) if args.stages != "all" else None
    for name, fn in jobs:
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        try:
            pix, grid, meta = fn()
        except Exception as ex:  # the processor refused the input: record why
            json.dump({"error": f"{type(ex).__name__}: {ex}"}, open(os.path.join(d, "meta.json"), "w"))
            print(f"{name}: processor error: {ex}")
            continue
        if args.pixel_digest:
            # compact form for committed fixtures: a digest of the exact f32 bytes, plus the
            # resized uint8 frames recovered from them (the normalisation is injective)
            import hashlib
            with open(os.path.join(d, "pixel_values.sha256"), "w") as f:
                f.write(hashlib.sha256(np.ascontiguousarray(pix, dtype="<f4").tobytes()).hexdigest() + "\n")
            save_frames(pix, grid, d, json.load(open(os.path.join(args.model, "preprocessor_config.json"))))
        else:
            np.save(os.path.join(d, "pixel_values.npy"), pix)
        np.save(os.path.join(d, "grid_thw.npy"), grid)
        json.dump(meta, open(os.path.join(d, "meta.json"), "w"), indent=1)
        if args.no_tower:
            print(f"{name}: grid {grid.tolist()} (processor only)")
            continue
        res = {}
        for dt in dtypes:
            if dt == "f64":
                res[dt] = run_tower(model, pix, grid, torch.float64, "cpu", "sdpa")
            elif dt == "f32":
                res[dt] = run_tower(model, pix, grid, torch.float32, "cpu", "sdpa")
            elif dt == "bf16":
                res[dt] = run_tower(model, pix, grid, torch.bfloat16, "cuda", args.attn)
            res[dt]["pixel_values"] = pix.astype(np.float64)
        errs = {}
        for dt, st in res.items():
            for s, a in st.items():
                if s == "pixel_values":
                    continue
                if keep is None or s in keep:
                    arr = a.astype(np.float64 if dt == "f64" else np.float32)
                    np.save(os.path.join(d, f"{s}.{dt}.npy"), arr)
                if dt != "f64" and "f64" in res:
                    errs.setdefault(dt, {})[s] = rel_l2(a, res["f64"][s])
        json.dump(errs, open(os.path.join(d, "errors.json"), "w"), indent=1)
        print(f"{name}: grid {grid.tolist()} rows {pix.shape[0]} output {res[dtypes[0]]['output'].shape} "
              f"f32 err {errs.get('f32', {}).get('output')} bf16 err {errs.get('bf16', {}).get('output')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    mm = sub.add_parser("make-model")
    mm.add_argument("--config", default="tiny", help="tiny | tiny72 | 2b | 27b | path to a vision config JSON")
    mm.add_argument("--seed", type=int, default=0)
    mm.add_argument("--shards", type=int, default=1)
    mm.add_argument("--out", required=True)
    r = sub.add_parser("run")
    r.add_argument("--model", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--images", nargs="*")
    r.add_argument("--videos", nargs="*", help="frames .npy files from scripts/ffmpeg_frames.py")
    r.add_argument("--fps", type=float)
    r.add_argument("--num-frames", type=int)
    r.add_argument("--cap-pixels-per-frame", choices=["on", "off"],
                   help="Qwen3VLVideoProcessor cap_pixels_per_frame (default: the model's config, else unset)")
    r.add_argument("--max-video-tokens", type=int, help="Qwen3VLVideoProcessor max_video_tokens")
    r.add_argument("--pixels")
    r.add_argument("--grid", help="t,h,w[;t,h,w...] for --pixels")
    r.add_argument("--name")
    r.add_argument("--dtypes", default="f64,f32")
    r.add_argument("--attn", default="sdpa")
    r.add_argument("--stages", default="all", help="comma list of stages to save, or all")
    r.add_argument("--no-tower", action="store_true", help="processor outputs only")
    r.add_argument("--pixel-digest", action="store_true",
                   help="save pixel_values.sha256 and hf_frame_NNN.png instead of pixel_values.npy")
    a = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    {"make-model": make_model, "run": run}[a.cmd](a)


if __name__ == "__main__":
    main()
