#!/usr/bin/python3
"""make_random_tower.py - writes a random-initialised Qwen3.5 vision tower with numpy alone (no
torch): config.json + model.safetensors (bf16, model.visual.* keys), the same layout and the same
kind of values as `hf_reference.py make-model` (LayerNorm weights near 1, small biases, weights
~ N(0, 1/fan_in), all rounded to bf16), but not the same numbers (numpy's generator, not torch's).
For CPU benchmarks (scripts/bench-cpu.sh); not an oracle.

  make_random_tower.py OUT [--config 27b|2b|tiny72|DEPTHxHIDDENxHEADSxINTERxOUT] [--seed S]
                           [--depth N]
"""
import argparse
import json
import os
import struct

import numpy as np

CONFIGS = {  # the same numbers as scripts/hf_reference.py's CONFIGS
    "tiny72": dict(depth=2, hidden_size=144, num_heads=2, intermediate_size=160, out_hidden_size=48,
                   num_position_embeddings=256),
    "2b": dict(depth=24, hidden_size=1024, num_heads=16, intermediate_size=4096,
               out_hidden_size=2048, num_position_embeddings=2304),
    "27b": dict(depth=27, hidden_size=1152, num_heads=16, intermediate_size=4304,
                out_hidden_size=5120, num_position_embeddings=2304),
}
COMMON = dict(patch_size=16, spatial_merge_size=2, temporal_patch_size=2, in_channels=3,
              hidden_act="gelu_pytorch_tanh")


def bf16_bytes(a):
    """f32 array -> bf16 bytes, round to nearest even (as torch's .to(bfloat16))."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16).tobytes()


def tensors(c, rng):
    H, I, L = c["hidden_size"], c["intermediate_size"], c["out_hidden_size"]
    P, T, C = c["patch_size"], c["temporal_patch_size"], c["in_channels"]
    mh = H * c["spatial_merge_size"] ** 2

    def w(*shape):
        return rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(np.prod(shape[1:])))

    def ln(n):
        return 1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)

    def b(n):
        return 0.05 * rng.standard_normal(n, dtype=np.float32)

    yield "patch_embed.proj.weight", w(H, C, T, P, P)
    yield "patch_embed.proj.bias", b(H)
    yield "pos_embed.weight", 0.5 * rng.standard_normal((c["num_position_embeddings"], H),
                                                        dtype=np.float32)
    for i in range(c["depth"]):
        p = f"blocks.{i}."
        yield p + "norm1.weight", ln(H)
        yield p + "norm1.bias", b(H)
        yield p + "attn.qkv.weight", w(3 * H, H)
        yield p + "attn.qkv.bias", b(3 * H)
        yield p + "attn.proj.weight", w(H, H)
        yield p + "attn.proj.bias", b(H)
        yield p + "norm2.weight", ln(H)
        yield p + "norm2.bias", b(H)
        yield p + "mlp.linear_fc1.weight", w(I, H)
        yield p + "mlp.linear_fc1.bias", b(I)
        yield p + "mlp.linear_fc2.weight", w(H, I)
        yield p + "mlp.linear_fc2.bias", b(H)
    yield "merger.norm.weight", ln(H)
    yield "merger.norm.bias", b(H)
    yield "merger.linear_fc1.weight", w(mh, mh)
    yield "merger.linear_fc1.bias", b(mh)
    yield "merger.linear_fc2.weight", w(L, mh)
    yield "merger.linear_fc2.bias", b(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--config", default="27b")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--depth", type=int, default=0, help="override the config's depth")
    a = ap.parse_args()
    if a.config in CONFIGS:
        c = dict(CONFIGS[a.config], **COMMON)
    else:
        d, h, nh, i, o = (int(v) for v in a.config.split("x"))
        c = dict(depth=d, hidden_size=h, num_heads=nh, intermediate_size=i, out_hidden_size=o,
                 num_position_embeddings=2304, **COMMON)
    if a.depth > 0:
        c["depth"] = a.depth
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    hdr, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors(c, rng):
        raw = bf16_bytes(t)
        hdr["model.visual." + name] = dict(dtype="BF16", shape=list(t.shape),
                                           data_offsets=[off, off + len(raw)])
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for raw in blobs:
            f.write(raw)
    vc = dict(c, initializer_range=0.02, model_type="qwen3_5", deepstack_visual_indexes=[])
    conf = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
            "vision_config": vc,
            "mvembed_note": f"random-initialised test tower (numpy), config {a.config}, seed {a.seed}"}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
    print(f"make_random_tower: {a.config} depth {c['depth']} seed {a.seed} -> {a.out}")


if __name__ == "__main__":
    main()
