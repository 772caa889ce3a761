#!/usr/bin/python3
"""st_tool.py - edits safetensors files for mvembed's model-loading tests (stdlib only).

  st_tool.py drop IN OUT NAME              remove tensor NAME
  st_tool.py shape IN OUT NAME d0,d1,..    rewrite NAME's header shape (same byte count)
  st_tool.py dtype IN OUT NAME DTYPE       rewrite NAME's header dtype string
  st_tool.py overlap IN OUT NAME           make NAME's data_offsets overlap the previous tensor
  st_tool.py prefix IN OUT OLD NEW         rename keys starting with OLD to start with NEW
  st_tool.py reshard IN OUTDIR N           split into N shards + model.safetensors.index.json, and
                                           list a language-model shard that holds garbage
"""
import json
import os
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    return hdr, data


def write(path, hdr, data):
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def main():
    op = sys.argv[1]
    hdr, data = read(sys.argv[2])
    if op == "drop":
        del hdr[sys.argv[4]]
        write(sys.argv[3], hdr, data)
    elif op == "shape":
        hdr[sys.argv[4]]["shape"] = [int(x) for x in sys.argv[5].split(",")]
        write(sys.argv[3], hdr, data)
    elif op == "dtype":
        hdr[sys.argv[4]]["dtype"] = sys.argv[5]
        write(sys.argv[3], hdr, data)
    elif op == "overlap":
        t = hdr[sys.argv[4]]
        a, b = t["data_offsets"]
        if a == 0:
            sys.exit("pick a tensor that does not start the data")
        t["data_offsets"] = [a - 2, b - 2]
        write(sys.argv[3], hdr, data)
    elif op == "prefix":
        old, new = sys.argv[4], sys.argv[5]
        hdr = {(new + k[len(old):] if k.startswith(old) else k): v for k, v in hdr.items()}
        write(sys.argv[3], hdr, data)
    elif op == "reshard":
        out, n = sys.argv[3], int(sys.argv[4])
        os.makedirs(out, exist_ok=True)
        names = sorted(k for k in hdr if k != "__metadata__")
        per = (len(names) + n - 1) // n
        wm = {}
        for i in range(n):
            fn = f"model-{i + 1:05d}-of-{n + 1:05d}.safetensors"
            part, blob = {}, b""
            for k in names[i * per:(i + 1) * per]:
                a, b = hdr[k]["data_offsets"]
                part[k] = dict(hdr[k], data_offsets=[len(blob), len(blob) + b - a])
                blob += data[a:b]
                wm[k] = fn
            write(os.path.join(out, fn), part, blob)
        lm = f"model-{n + 1:05d}-of-{n + 1:05d}.safetensors"
        with open(os.path.join(out, lm), "wb") as f:
            f.write(b"this shard holds the language model and must never be read")
        wm["model.language_model.embed_tokens.weight"] = lm
        wm["lm_head.weight"] = lm
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": wm}, f, indent=1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
