#!/usr/bin/python3
"""make_fixture_formats.py - writes the crafted GIF, BMP and TIFF fixtures.

  fixtures/formats/      files mvembed decodes; test/bats/32-formats.bats compares each with
                         PIL's Image.open + exif_transpose + convert("RGB"), byte for byte, and
                         scripts/device-refs.sh makes HF references of them (fixtures/ref/formats)
  fixtures/unsupported/  valid files that some Pillow version reads but mvembed refuses with a
                         message (README.md there says which and why)
  fixtures/bad/          truncated.{gif,bmp,tif} and bomb_*.{gif,bmp,tif} (fixtures/bad/README.md)

With --flat DIR W H it writes instead DIR/flat.gif, flat.bmp and flat.tif: one colour each, W x H
pixels, small files that take seconds to decode when large (test/bats/72-decode-limits.bats times
them out): the GIF's LZW data is what a greedy encoder makes of a flat image (after each clear
code, runs of 1, 2, 3 ... pixels until the table is full), the BMP is RLE8 runs of 255, the TIFF
is RGB deflate strips of zeros.

Needs python3-pil (Debian: PIL writes the GIFs it compresses itself and checks every file it can
open), numpy, and tiffcp from libtiff-tools (compressions, tiles, byte orders, BigTIFF, pages).
The other files are written byte by byte here (struct), so that every header field is the one
named: GIF blocks, BMP headers and RLE streams, TIFF directories. Re-runnable; two runs with the
same tool versions give the same bytes. This is not a test: it only writes files (and asserts
that each one is what its name says).
  Usage: /usr/bin/python3 scripts/make_fixture_formats.py [--flat DIR W H]
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import zlib

import numpy as np
from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FMT = os.path.join(ROOT, "fixtures", "formats")
UNS = os.path.join(ROOT, "fixtures", "unsupported")
BAD = os.path.join(ROOT, "fixtures", "bad")
TMP = None  # main's scratch directory


def rgb_pattern(w, h, seed):
    """Smooth colour ramps plus noise: every channel differs, compresses a little."""
    r = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 7) % 256], -1)
    a = a + r.randint(-12, 13, size=a.shape)
    return np.clip(a, 0, 255).astype(np.uint8)


def index_pattern(w, h, n, seed):
    r = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = (x // 3 + y // 2 + r.randint(0, 3, size=(h, w))) % n
    return a.astype(np.uint8)


def palette(n, seed):
    r = np.random.RandomState(seed)
    return [tuple(int(v) for v in r.randint(0, 256, 3)) for _ in range(n)]


def put(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ------------------------------------------------------------------------------------------------
# GIF
# ------------------------------------------------------------------------------------------------

def sub_blocks(b):
    out = b""
    for i in range(0, len(b), 255):
        out += bytes([len(b[i:i + 255])]) + b[i:i + 255]
    return out + b"\0"


def lzw_literal(indices, code_size):
    """LZW data of literal codes only: a clear code before every run short enough that the decoder's
    table never widens the codes (an 'uncompressed' GIF, valid for every decoder)."""
    clear, eoi, width = 1 << code_size, (1 << code_size) + 1, code_size + 1
    run = max((1 << code_size) - 3, 1)
    bits = nbits = 0
    out = bytearray()

    def emit(c):
        nonlocal bits, nbits
        bits |= c << nbits
        nbits += width
        while nbits >= 8:
            out.append(bits & 255)
            bits >>= 8
            nbits -= 8
    for i in range(0, len(indices), run):
        emit(clear)
        for v in indices[i:i + run]:
            emit(int(v))
    emit(eoi)
    if nbits:
        out.append(bits & 255)
    return bytes([code_size]) + sub_blocks(bytes(out))


def color_table(pal, bits):
    pal = list(pal) + [(0, 0, 0)] * ((1 << bits) - len(pal))
    return b"".join(bytes(c) for c in pal)


def gif(screen, global_pal, frames, version=b"GIF89a", pre=b""):
    """frames: dicts with x, y, idx (2-D array), optional pal, trans, interlace, code_size."""
    sw, sh = screen
    flags, gct = 0, b""
    if global_pal is not None:
        bits = max(1, (len(global_pal) - 1).bit_length())
        flags = 0x80 | (bits - 1)
        gct = color_table(global_pal, bits)
    out = version + struct.pack("<HHBBB", sw, sh, flags, 0, 0) + gct + pre
    for f in frames:
        if "trans" in f:
            out += b"\x21\xf9\x04" + struct.pack("<BHB", 1, 10, f["trans"]) + b"\0"
        idx = f["idx"]
        h, w = idx.shape
        lflags, lct = 0, b""
        if f.get("pal") is not None:
            bits = max(1, (len(f["pal"]) - 1).bit_length())
            lflags = 0x80 | (bits - 1)
            lct = color_table(f["pal"], bits)
        rows = list(range(h))
        if f.get("interlace"):
            lflags |= 0x40
            rows = list(range(0, h, 8)) + list(range(4, h, 8)) + list(range(2, h, 4)) + list(range(1, h, 2))
        out += b"\x2c" + struct.pack("<HHHHB", f["x"], f["y"], w, h, lflags) + lct
        out += lzw_literal(idx[rows].ravel(), f.get("code_size", 8))
    return out + b"\x3b"


def make_gifs():
    # PIL's own encoder (real LZW: the table fills and is cleared): a 256-colour noisy image
    a = rgb_pattern(120, 90, 1)
    im = Image.fromarray(a).quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    im.save(os.path.join(FMT, "gif_lzw_256colours_120x90.gif"), interlace=False)
    # interlaced (PIL writes GIFs interlaced by default), odd height
    im = Image.fromarray(rgb_pattern(99, 45, 2)).quantize(64, dither=Image.Dither.NONE)
    im.save(os.path.join(FMT, "gif_interlaced_99x45.gif"), interlace=True)
    # a transparent index whose palette colour is bright: convert("RGB") shows that colour
    pal = palette(16, 3)
    pal[5] = (250, 20, 200)
    idx = index_pattern(76, 52, 16, 3)
    put(FMT, "gif_transparent_76x52.gif", gif((76, 52), pal, [dict(x=0, y=0, idx=idx, trans=5, code_size=4)]))
    # animated: three frames, the later ones with their own palettes; frame 0 is the image
    frames = [Image.fromarray(rgb_pattern(64, 48, s)).quantize(32, dither=Image.Dither.NONE) for s in (4, 5, 6)]
    frames[0].save(os.path.join(FMT, "gif_animated_3frames_64x48.gif"), save_all=True,
                   append_images=frames[1:], duration=100, loop=0, interlace=False)
    # a global colour table that is the grey ramp (PIL drops it: mode L)
    ramp = [(i, i, i) for i in range(256)]
    idx = index_pattern(80, 40, 256, 7)
    put(FMT, "gif_grey_ramp_80x40.gif", gif((80, 40), ramp, [dict(x=0, y=0, idx=idx)]))
    # no colour table at all: the indices are grey levels
    idx = index_pattern(56, 36, 200, 8)
    put(FMT, "gif_no_colour_table_56x36.gif", gif((56, 36), None, [dict(x=0, y=0, idx=idx)]))
    # frame 0 smaller than the screen, at an offset: the rest is the transparent index ...
    pal = palette(16, 9)
    idx = index_pattern(40, 30, 16, 9)
    put(FMT, "gif_offset_frame_transparent_70x50.gif",
        gif((70, 50), pal, [dict(x=13, y=9, idx=idx, trans=5, code_size=4)]))
    # ... or index 0 without transparency
    put(FMT, "gif_offset_frame_70x50.gif", gif((70, 50), pal, [dict(x=13, y=9, idx=idx, code_size=4)]))
    # frame 0 reaching past the logical screen: the canvas grows (40x24 screen, 48x32 image)
    idx = index_pattern(38, 26, 16, 10)
    put(FMT, "gif_frame_past_screen_48x32.gif", gif((40, 24), pal, [dict(x=10, y=6, idx=idx, code_size=4)]))
    # a local colour table under a global one, interlaced, odd size
    gpal, lpal = palette(32, 11), palette(64, 12)
    idx = index_pattern(61, 43, 64, 12)
    put(FMT, "gif_local_table_interlaced_61x43.gif",
        gif((61, 43), gpal, [dict(x=0, y=0, idx=idx, pal=lpal, interlace=True, code_size=6)]))
    # GIF87a, two colours, code size 2
    idx = index_pattern(33, 17, 2, 13)
    put(FMT, "gif87a_2colours_33x17.gif",
        gif((33, 17), [(10, 200, 30), (240, 240, 5)], [dict(x=0, y=0, idx=idx, code_size=2)], version=b"GIF87a"))
    # blocks before the image that PIL reads past: a comment, NETSCAPE2.0, a plain-text extension,
    # two graphic control extensions (the second one's index counts) and stray bytes between blocks
    pre = (b"\x21\xfe" + sub_blocks(b"a comment") +
           b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00" +
           b"\x21\x01" + sub_blocks(b"\x00" * 12 + b"text") +
           b"\x21\xf9\x04\x01\x00\x00\x03\x00" + b"\x00\x07" +
           b"\x21\xf9\x04\x05\x00\x00\x09\x00")
    idx = index_pattern(40, 30, 16, 14)
    body = gif((40, 30), palette(16, 14), [dict(x=4, y=3, idx=idx[:24, :32], code_size=4)], pre=pre)
    put(FMT, "gif_extensions_stray_bytes_40x30.gif", body)

    # refused: an index past the 4-colour table
    idx = index_pattern(30, 20, 8, 15)
    put(UNS, "gif_index_past_table.gif", gif((30, 20), palette(4, 15), [dict(x=0, y=0, idx=idx, code_size=3)]))
    # refused: a local grey-ramp table under a global one
    idx = index_pattern(30, 20, 16, 16)
    put(UNS, "gif_local_grey_ramp_under_global.gif",
        gif((30, 20), palette(16, 16), [dict(x=0, y=0, idx=idx, pal=[(i, i, i) for i in range(16)], code_size=4)]))
    # refused: a graphic control extension whose first sub-block is empty
    put(UNS, "gif_empty_graphic_control.gif",
        gif((30, 20), palette(16, 17), [dict(x=0, y=0, idx=index_pattern(30, 20, 16, 17), code_size=4)],
            pre=b"\x21\xf9\x00"))

    src = open(os.path.join(FMT, "gif_lzw_256colours_120x90.gif"), "rb").read()
    put(BAD, "truncated.gif", src[: len(src) * 6 // 10])
    # a 7-byte-per-row LZW-free header claiming a 65535x65535 screen and frame
    put(BAD, "bomb_65535x65535.gif",
        b"GIF89a" + struct.pack("<HHBBB", 65535, 65535, 0x80, 0, 0) + b"\0\0\0\xff\xff\xff" +
        b"\x2c" + struct.pack("<HHHHB", 0, 0, 65535, 65535, 0) + b"\x02\x02\x4c\x01\x00\x3b")


# ------------------------------------------------------------------------------------------------
# BMP
# ------------------------------------------------------------------------------------------------

def bmp(w, h, bits, pixels, pal=None, comp=0, header=40, masks=None, topdown=False, colors=None,
        offset=None, pal_bytes=4):
    """pixels: the pixel data as stored (rows already in file order, padded, or RLE bytes)."""
    if pal is not None:
        pal_data = b"".join(bytes((c[2], c[1], c[0])) + (b"\0" if pal_bytes == 4 else b"") for c in pal)
    else:
        pal_data = b""
    mask_data = b""
    if header == 12:
        info = struct.pack("<IHHHH", 12, w, h, 1, bits)
    else:
        hh = (1 << 32) - h if topdown else h
        ncol = colors if colors is not None else (len(pal) if pal is not None and len(pal) != (1 << bits) else 0)
        info = struct.pack("<IIIHHIIiiII", header, w, hh, 1, bits, comp, len(pixels), 2835, 2835, ncol, 0)
        if header == 40:
            if masks:
                mask_data = struct.pack("<III", *masks[:3])
        else:
            m = list(masks or (0, 0, 0, 0)) + [0] * 4
            info += struct.pack("<IIII", *m[:4])
            info = (info + b"\0" * header)[:header]
    off = 14 + len(info) + len(mask_data) + len(pal_data)
    if offset is None:
        offset = off
    body = info + mask_data + pal_data
    gap = b"\0" * (offset - off) if offset > off else b""
    fh = b"BM" + struct.pack("<IHHI", 14 + len(body) + len(gap) + len(pixels), 0, 0, offset)
    return fh + body + gap + pixels


def bmp_rows(a, bits, topdown=False):
    """Rows of a 2-D index array or a 3-D byte array (already in stored byte order) for BI_RGB."""
    h, w = a.shape[:2]
    stride = ((w * bits + 31) >> 3) & ~3
    out = b""
    rows = range(h) if topdown else range(h - 1, -1, -1)
    for y in rows:
        if bits < 8:
            per = 8 // bits
            r = bytearray((w + per - 1) // per)
            for x in range(w):
                r[x // per] |= int(a[y, x]) << (8 - bits * (x % per + 1))
            r = bytes(r)
        else:
            r = a[y].tobytes()
        out += r + b"\0" * (stride - len(r))
    return out


def rle8_rows(idx, topdown=False):
    """RLE8: runs of equal indices as encoded runs, other stretches as absolute runs (lengths >= 3,
    odd ones padded to a word), an end of line after every row, an end of bitmap at the end."""
    out = bytearray()
    h, w = idx.shape
    for y in (range(h) if topdown else range(h - 1, -1, -1)):
        row = [int(v) for v in idx[y]]
        x = 0
        while x < w:
            n = 1
            while x + n < w and row[x + n] == row[x] and n < 255:
                n += 1
            if n >= 2 or w - x < 3:
                out += bytes((n, row[x]))
                x += n
                continue
            m = 0
            while x + m < w and m < 255 and not (x + m + 1 < w and row[x + m + 1] == row[x + m]):
                m += 1
            m = max(m, 3) if w - x >= 3 else m
            m = min(m, w - x)
            out += bytes((0, m)) + bytes(row[x:x + m])
            if m % 2:
                out += b"\0"
            x += m
        out += b"\0\0"
    return bytes(out[:-2]) + b"\0\1"


def rle4_rows(idx):
    """RLE4: encoded runs (of one or two alternating nibbles) and even-length absolute runs."""
    out = bytearray()
    h, w = idx.shape
    for y in range(h - 1, -1, -1):
        row = [int(v) for v in idx[y]]
        x = 0
        while x < w:
            if w - x >= 8 and x % 16 == 0:      # an absolute run of 8 nibbles (4 bytes)
                out += bytes((0, 8)) + bytes((row[x + i] << 4 | row[x + i + 1]) for i in range(0, 8, 2))
                x += 8
                continue
            a, b = row[x], row[x + 1] if x + 1 < w else 0
            n = 1
            while x + n < w and n < 255 and row[x + n] == (a if n % 2 == 0 else b):
                n += 1
            out += bytes((n, a << 4 | b))
            x += n
        out += b"\0\0"
    return bytes(out) + b"\0\1"


def make_bmps():
    p2 = [(200, 30, 40), (20, 220, 90)]
    a = index_pattern(77, 45, 2, 20)
    put(FMT, "bmp_1bit_palette_77x45.bmp", bmp(77, 45, 1, bmp_rows(a, 1), pal=p2))
    a = index_pattern(70, 33, 2, 21)
    put(FMT, "bmp_1bit_black_white_70x33.bmp", bmp(70, 33, 1, bmp_rows(a, 1), pal=[(0, 0, 0), (255, 255, 255)]))
    a = index_pattern(75, 41, 16, 22)
    put(FMT, "bmp_4bit_75x41.bmp", bmp(75, 41, 4, bmp_rows(a, 4), pal=palette(16, 22)))
    a = index_pattern(43, 21, 10, 23)
    put(FMT, "bmp_4bit_10colours_43x21.bmp", bmp(43, 21, 4, bmp_rows(a, 4), pal=palette(10, 23)))
    a = index_pattern(73, 39, 256, 24)
    put(FMT, "bmp_8bit_73x39.bmp", bmp(73, 39, 8, bmp_rows(a, 8), pal=palette(256, 24)))
    a = index_pattern(57, 29, 256, 25)
    put(FMT, "bmp_8bit_topdown_57x29.bmp", bmp(57, 29, 8, bmp_rows(a, 8, True), pal=palette(256, 25), topdown=True))
    # a grey ramp palette: PIL reads the indices as grey levels ("L")
    a = index_pattern(66, 34, 256, 26)
    put(FMT, "bmp_8bit_grey_ramp_66x34.bmp", bmp(66, 34, 8, bmp_rows(a, 8), pal=[(i, i, i) for i in range(256)]))
    # ... also a 100-entry ramp with indices past it (grey levels there too, in every Pillow)
    a = index_pattern(50, 30, 256, 27)
    put(FMT, "bmp_8bit_grey_ramp_100colours_50x30.bmp",
        bmp(50, 30, 8, bmp_rows(a, 8), pal=[(i, i, i) for i in range(100)]))
    # pixel offset 0 (PIL reads from the end of the palette) and an offset pointing at the palette
    # (PIL skips 4 bytes a colour)
    a = index_pattern(45, 23, 64, 28)
    put(FMT, "bmp_8bit_offset_zero_45x23.bmp", bmp(45, 23, 8, bmp_rows(a, 8), pal=palette(64, 28), offset=0))
    full = bmp(45, 23, 8, bmp_rows(a, 8), pal=palette(64, 29))
    full = full[:10] + struct.pack("<I", 14 + 40) + full[14:]
    put(FMT, "bmp_8bit_offset_at_palette_45x23.bmp", full)
    # 16 bits: 5-5-5 as BI_RGB, 5-6-5 and 5-5-5 as BI_BITFIELDS (masks after a 40-byte header, in V4)
    r = np.random.RandomState(30)
    a16 = r.randint(0, 1 << 15, size=(25, 47)).astype("<u2")
    put(FMT, "bmp_16bit_555_47x25.bmp", bmp(47, 25, 16, bmp_rows(a16, 16)))
    a16 = r.randint(0, 1 << 16, size=(23, 45)).astype("<u2")
    put(FMT, "bmp_16bit_565_bitfields_45x23.bmp",
        bmp(45, 23, 16, bmp_rows(a16, 16), comp=3, masks=(0xF800, 0x7E0, 0x1F)))
    a16 = r.randint(0, 1 << 16, size=(21, 43)).astype("<u2")
    put(FMT, "bmp_16bit_555_bitfields_v4_43x21.bmp",
        bmp(43, 21, 16, bmp_rows(a16, 16), comp=3, header=108,
            masks=(0x7C00, 0x3E0, 0x1F, 0x8000)))
    # 24 bits: bottom-up, top-down, OS/2 header, V4 BI_BITFIELDS
    rgb = rgb_pattern(45, 23, 31)
    put(FMT, "bmp_24bit_45x23.bmp", bmp(45, 23, 24, bmp_rows(rgb[..., ::-1].copy(), 24)))
    rgb = rgb_pattern(43, 21, 32)
    put(FMT, "bmp_24bit_topdown_43x21.bmp", bmp(43, 21, 24, bmp_rows(rgb[..., ::-1].copy(), 24, True), topdown=True))
    rgb = rgb_pattern(41, 19, 33)
    put(FMT, "bmp_24bit_os2_41x19.bmp", bmp(41, 19, 24, bmp_rows(rgb[..., ::-1].copy(), 24), header=12))
    rgb = rgb_pattern(39, 17, 34)
    put(FMT, "bmp_24bit_bitfields_v4_39x17.bmp",
        bmp(39, 17, 24, bmp_rows(rgb[..., ::-1].copy(), 24), comp=3, header=108, masks=(0xFF0000, 0xFF00, 0xFF, 0)))
    a = index_pattern(61, 27, 256, 35)
    put(FMT, "bmp_8bit_os2_61x27.bmp", bmp(61, 27, 8, bmp_rows(a, 8), pal=palette(256, 35), header=12, pal_bytes=3))
    # 32 bits: BI_RGB (the fourth byte is ignored), and the BI_BITFIELDS layouts PIL knows
    r = np.random.RandomState(36)

    def px32(w, h, order):
        rgb = rgb_pattern(w, h, w)
        al = r.randint(0, 256, size=(h, w, 1)).astype(np.uint8)
        ch = {"R": rgb[..., 0:1], "G": rgb[..., 1:2], "B": rgb[..., 2:3], "A": al, "X": al}
        return np.concatenate([ch[c] for c in order], -1)
    put(FMT, "bmp_32bit_bgrx_59x27.bmp", bmp(59, 27, 32, bmp_rows(px32(59, 27, "BGRX"), 32)))
    put(FMT, "bmp_32bit_bgra_v5_58x26.bmp", bmp(58, 26, 32, bmp_rows(px32(58, 26, "BGRA"), 32), comp=3, header=124,
                                                 masks=(0xFF0000, 0xFF00, 0xFF, 0xFF000000)))
    put(FMT, "bmp_32bit_rgba_v4_57x25.bmp", bmp(57, 25, 32, bmp_rows(px32(57, 25, "RGBA"), 32), comp=3, header=108,
                                                 masks=(0xFF, 0xFF00, 0xFF0000, 0xFF000000)))
    put(FMT, "bmp_32bit_xbgr_v4_56x24.bmp", bmp(56, 24, 32, bmp_rows(px32(56, 24, "XBGR"), 32), comp=3, header=108,
                                                 masks=(0xFF000000, 0xFF0000, 0xFF00, 0)))
    put(FMT, "bmp_32bit_abgr_v4_55x23.bmp", bmp(55, 23, 32, bmp_rows(px32(55, 23, "ABGR"), 32), comp=3, header=108,
                                                 masks=(0xFF000000, 0xFF0000, 0xFF00, 0xFF)))
    put(FMT, "bmp_32bit_zero_masks_v4_54x22.bmp", bmp(54, 22, 32, bmp_rows(px32(54, 22, "BGRA"), 32), comp=3,
                                                       header=108, masks=(0, 0, 0, 0)))
    put(FMT, "bmp_32bit_bgrx_bitfields_53x21.bmp", bmp(53, 21, 32, bmp_rows(px32(53, 21, "BGRX"), 32), comp=3,
                                                        masks=(0xFF0000, 0xFF00, 0xFF)))
    # RLE8: encoded and absolute runs (odd ones padded), an end of line per row; top-down too
    a = index_pattern(79, 43, 256, 37)
    a[:, 30:50] = a[:, 30:31]                          # long encoded runs
    put(FMT, "bmp_rle8_79x43.bmp", bmp(79, 43, 8, rle8_rows(a), pal=palette(256, 37), comp=1))
    a = index_pattern(45, 25, 32, 38)
    put(FMT, "bmp_rle8_topdown_45x25.bmp", bmp(45, 25, 8, rle8_rows(a, True), pal=palette(32, 38), comp=1, topdown=True))
    # RLE8 as PIL reads past the rules: an encoded run longer than the row is cut, a literal run
    # spills into the next row, a row without an end of line, the end of bitmap when full
    d = bytes((3, 1, 250, 2)) + b"\0\0" + bytes((0, 24)) + bytes(range(24)) + bytes((4, 5)) + b"\0\0"
    d += bytes((20, 6)) + bytes((20, 7)) + bytes((20, 8)) + b"\0\0" + bytes((20, 9)) * 2 + b"\0\1"
    put(FMT, "bmp_rle8_overruns_20x5.bmp", bmp(20, 5, 8, d, pal=palette(32, 39), comp=1))
    # RLE4: alternating-nibble encoded runs, even absolute runs
    a = index_pattern(81, 47, 16, 40)
    put(FMT, "bmp_rle4_81x47.bmp", bmp(81, 47, 4, rle4_rows(a), pal=palette(16, 40), comp=2))

    # refused: RLE8 delta escape; RLE4 literal run of odd length; a 52-byte header; BGXR masks;
    # an index past the palette; an OS/2 pixel offset at the palette; a 16-entry grey ramp on 4 bits
    d = bytes((4, 1)) + b"\0\2" + bytes((2, 1)) + bytes((3, 2)) + b"\0\0" + bytes((10, 3)) * 4 + b"\0\1"
    put(UNS, "bmp_rle8_delta.bmp", bmp(10, 4, 8, d, pal=palette(8, 41), comp=1))
    d = (bytes((0, 3, 0x12, 0x30)) + bytes((7, 0x45)) + b"\0\0") * 3 + b"\0\1"
    put(UNS, "bmp_rle4_odd_literal.bmp", bmp(10, 3, 4, d, pal=palette(16, 42), comp=2))
    rgb = rgb_pattern(20, 10, 43)
    put(UNS, "bmp_header52.bmp", bmp(20, 10, 24, bmp_rows(rgb[..., ::-1].copy(), 24), header=52, comp=0))
    put(UNS, "bmp_32bit_bgxr_masks.bmp", bmp(20, 10, 32, bmp_rows(px32(20, 10, "BGXR"), 32), comp=3, header=108,
                                              masks=(0xFF000000, 0xFF00, 0xFF, 0)))
    a = index_pattern(20, 10, 16, 44)
    a[3, 5] = 20
    put(UNS, "bmp_8bit_index_past_palette.bmp", bmp(20, 10, 8, bmp_rows(a, 8), pal=palette(16, 44)))
    a = index_pattern(20, 10, 16, 45)
    full = bmp(20, 10, 8, bmp_rows(a, 8), pal=palette(256, 45), header=12, pal_bytes=3)
    put(UNS, "bmp_os2_offset_at_palette.bmp", full[:10] + struct.pack("<I", 26) + full[14:])
    put(UNS, "bmp_4bit_grey16.bmp", bmp(20, 10, 4, bmp_rows(index_pattern(20, 10, 16, 46), 4),
                                        pal=[(i, i, i) for i in range(16)]))

    src = open(os.path.join(FMT, "bmp_24bit_45x23.bmp"), "rb").read()
    put(BAD, "truncated.bmp", src[: len(src) * 6 // 10])
    hdr = bmp(1, 1, 24, b"\0\0\0\0")
    put(BAD, "bomb_100000x100000.bmp", hdr[:18] + struct.pack("<II", 100000, 100000) + hdr[26:])


# ------------------------------------------------------------------------------------------------
# TIFF
# ------------------------------------------------------------------------------------------------

TYPES = {1: "B", 2: "s", 3: "H", 4: "I", 7: "B"}


def tiff(w, h, spp, bps, photometric, data_rows, extra=None, colormap=None, be=False, rows_per_strip=None,
         orientation=None, more=(), nophoto=False, compression=1, strips=False):
    """A classic TIFF, strips of rows_per_strip rows (data_rows: bytes per row; with strips, the
    strips themselves, already compressed as compression says)."""
    e = ">" if be else "<"
    rps = rows_per_strip or h
    if not strips:
        strips = [b"".join(data_rows[y:y + rps]) for y in range(0, h, rps)]
    else:
        strips = data_rows
    tags = {256: (4, [w]), 257: (4, [h]), 258: (3, [bps] * spp), 259: (3, [compression]), 277: (3, [spp]),
            278: (4, [rps]), 279: (4, [len(s) for s in strips]), 284: (3, [1])}
    if not nophoto:
        tags[262] = (3, [photometric])
    if extra is not None:
        tags[338] = (3, list(extra))
    if colormap is not None:
        tags[320] = (3, colormap)
    if orientation is not None:
        tags[274] = (3, orientation if isinstance(orientation, list) else [orientation])
    for t, ty, v in more:
        tags[t] = (ty, v)
    n = len(tags) + 1                                   # + StripOffsets
    ifd_size = 2 + 12 * n + 4
    extra_area = b""
    entries = []
    base = 8 + ifd_size
    tags[273] = (4, [0] * len(strips))
    blobs = {}
    for t in sorted(tags):
        ty, v = tags[t]
        if ty == 2:
            raw = v if isinstance(v, bytes) else v.encode()
            count = len(raw)
        elif ty == 7:
            raw = bytes(v)
            count = len(raw)
        else:
            raw = struct.pack(e + TYPES[ty] * len(v), *v)
            count = len(v)
        blobs[t] = (ty, count, raw)
    # lay out out-of-line values, then the strips
    for t in sorted(blobs):
        ty, count, raw = blobs[t]
        if len(raw) > 4:
            blobs[t] = (ty, count, raw, base + len(extra_area))
            extra_area += raw + (b"\0" if len(raw) % 2 else b"")
        else:
            blobs[t] = (ty, count, raw, None)
    data_off = base + len(extra_area)
    offs, o = [], data_off
    for s in strips:
        offs.append(o)
        o += len(s)
    raw = struct.pack(e + "I" * len(offs), *offs)
    if len(raw) > 4:
        # the offsets array sits where it was laid out (same length as the placeholder)
        at = blobs[273][3]
        extra_area = extra_area[:at - base] + raw + extra_area[at - base + len(raw):]
        blobs[273] = (4, len(offs), raw, at)
    else:
        blobs[273] = (4, 1, raw, None)
    for t in sorted(blobs):
        ty, count, raw, at = blobs[t]
        val = struct.pack(e + "I", at) if at is not None else raw + b"\0" * (4 - len(raw))
        entries.append(struct.pack(e + "HHI", t, ty, count) + val)
    head = (b"MM\0*" if be else b"II*\0") + struct.pack(e + "I", 8)
    ifd = struct.pack(e + "H", n) + b"".join(entries) + struct.pack(e + "I", 0)
    return head + ifd + extra_area + b"".join(strips)


def rows_of(a):
    return [a[y].tobytes() for y in range(a.shape[0])]


def packed_rows(idx, bits):
    h, w = idx.shape
    out = []
    per = 8 // bits
    for y in range(h):
        r = bytearray((w + per - 1) // per)
        for x in range(w):
            r[x // per] |= int(idx[y, x]) << (8 - bits * (x % per + 1))
        out.append(bytes(r))
    return out


def tiffcp(*args):
    """tiffcp OPTIONS... INPUT... OUTPUT, options first: args are inputs, the output, then options."""
    files = [a for a in args if not a.startswith("-") and (os.sep in a)]
    opts = [a for a in args if a not in files]
    subprocess.run(["tiffcp", *opts, *files], check=True)


class Bits:
    """LSB-first codes of given widths, as GIF's LZW packs them."""

    def __init__(self):
        self.out, self.bits, self.n = bytearray(), 0, 0

    def emit(self, code, width):
        self.bits |= code << self.n
        self.n += width
        while self.n >= 8:
            self.out.append(self.bits & 255)
            self.bits >>= 8
            self.n -= 8

    def done(self):
        return bytes(self.out) + (bytes([self.bits & 255]) if self.n else b"")


def flat(d, w, h):
    os.makedirs(d, exist_ok=True)
    # GIF: index 1, or the table's run of r pixels (code 256 + r); codes widen as the table grows
    b, left = Bits(), w * h
    while left:
        b.emit(256, 9)                                   # clear: codes are 9 bits again
        width, j = 9, 1
        while left:
            r = min(j, left)
            b.emit(1 if r == 1 else 256 + r, width)
            left -= r
            if j >= 2 and 257 + j == 1 << width and width < 12:
                width += 1
            if 257 + j == 4095:                          # the table is full
                break
            j += 1
        if not left:
            b.emit(257, width)                           # end of information
    put(d, "flat.gif", b"GIF89a" + struct.pack("<HHBBB", w, h, 0xF7, 0, 0) + color_table([(0, 0, 0), (30, 144, 255)], 8) +
        b"\x2c" + struct.pack("<HHHHB", 0, 0, w, h, 0) + b"\x08" + sub_blocks(b.done()) + b"\x3b")
    # BMP: RLE8 rows of 255-pixel runs of index 1
    row = b"\xff\x01" * (w // 255) + (bytes((w % 255, 1)) if w % 255 else b"") + b"\0\0"
    put(d, "flat.bmp", bmp(w, h, 8, row * h + b"\0\1", pal=[(0, 0, 0), (32, 64, 240)], comp=1))
    # TIFF: 64-row deflate strips of zeros, all but the last one the same bytes
    rps = 64
    ns = (h + rps - 1) // rps
    strip = zlib.compress(bytes(w * 3 * rps), 9)
    last = zlib.compress(bytes(w * 3 * (h - (ns - 1) * rps)), 9)
    put(d, "flat.tif", tiff(w, h, 3, 8, 2, [strip] * (ns - 1) + [last], compression=8, rows_per_strip=rps,
                            strips=True))


def make_tiffs():
    t = lambda n: os.path.join(TMP, n)
    f = lambda n: os.path.join(FMT, n)
    rgb = rgb_pattern(45, 29, 50)
    put(TMP, "rgb.tif", tiff(45, 29, 3, 8, 2, rows_of(rgb), rows_per_strip=7))
    shutil.copy(t("rgb.tif"), f("tif_rgb_strips_45x29.tif"))
    for name, c in [("lzw", "lzw"), ("lzw_predictor", "lzw:2"), ("deflate", "zip"),
                    ("deflate_predictor", "zip:2"), ("packbits", "packbits")]:
        tiffcp(t("rgb.tif"), f(f"tif_rgb_{name}_45x29.tif"), "-c", c, "-r", "9")
    # tiles with partial edge tiles: uncompressed (PIL reads those itself), LZW, deflate
    tiffcp(t("rgb.tif"), f("tif_rgb_tiles_45x29.tif"), "-t", "-w", "16", "-l", "16", "-c", "none")
    tiffcp(t("rgb.tif"), f("tif_rgb_tiles_lzw_45x29.tif"), "-t", "-w", "32", "-l", "16", "-c", "lzw:2")
    tiffcp(t("rgb.tif"), f("tif_rgb_tiles_deflate_45x29.tif"), "-t", "-w", "16", "-l", "32", "-c", "zip")
    tiffcp(t("rgb.tif"), f("tif_rgb_bigendian_lzw_45x29.tif"), "-B", "-c", "lzw")
    tiffcp(t("rgb.tif"), f("tif_rgb_bigtiff_deflate_45x29.tif"), "-8", "-c", "zip")
    # extra samples: unassociated alpha, premultiplied (associated) alpha, unspecified, none declared
    r = np.random.RandomState(51)
    base = rgb_pattern(37, 23, 51)
    al = r.randint(0, 256, size=(23, 37, 1)).astype(np.uint8)
    al[0, :8] = 0
    al[1, :8] = 255
    pm = (base.astype(np.int32) * al // 255).astype(np.uint8)   # a valid premultiplied image
    put(FMT, "tif_rgba_37x23.tif", tiff(37, 23, 4, 8, 2, rows_of(np.concatenate([base, al], -1)), extra=[2]))
    put(TMP, "pm.tif", tiff(37, 23, 4, 8, 2, rows_of(np.concatenate([pm, al], -1)), extra=[1]))
    tiffcp(t("pm.tif"), f("tif_rgba_premultiplied_lzw_37x23.tif"), "-c", "lzw")
    put(FMT, "tif_rgbx_37x23.tif", tiff(37, 23, 4, 8, 2, rows_of(np.concatenate([base, al], -1)), extra=[0]))
    put(FMT, "tif_rgba_no_extrasamples_37x23.tif", tiff(37, 23, 4, 8, 2, rows_of(np.concatenate([base, al], -1))))
    put(FMT, "tif_rgb_2extra_37x23.tif",
        tiff(37, 23, 5, 8, 2, rows_of(np.concatenate([base, al, al[..., ::-1]], -1)), extra=[2, 0]))
    # grey: 8-bit BlackIsZero / WhiteIsZero / no PhotometricInterpretation (PIL: WhiteIsZero),
    # 4-, 2- and 1-bit, grey + alpha
    g = rgb_pattern(53, 29, 52)[..., 1].copy()
    put(TMP, "g8.tif", tiff(53, 29, 1, 8, 1, rows_of(g), rows_per_strip=5))
    tiffcp(t("g8.tif"), f("tif_grey8_deflate_53x29.tif"), "-c", "zip")
    put(FMT, "tif_grey8_miniswhite_53x29.tif", tiff(53, 29, 1, 8, 0, rows_of(g)))
    put(FMT, "tif_grey8_no_photometric_53x29.tif", tiff(53, 29, 1, 8, 1, rows_of(g), nophoto=True))
    for bits in (4, 2):
        q = (g >> (8 - bits)).astype(np.uint8)
        put(FMT, f"tif_grey{bits}_53x29.tif", tiff(53, 29, 1, bits, 1, packed_rows(q, bits)))
    q = (g >> 7).astype(np.uint8)
    put(TMP, "g1.tif", tiff(53, 29, 1, 1, 1, packed_rows(q, 1)))
    tiffcp(t("g1.tif"), f("tif_bilevel_packbits_53x29.tif"), "-c", "packbits")
    put(FMT, "tif_bilevel_miniswhite_53x29.tif", tiff(53, 29, 1, 1, 0, packed_rows(q, 1)))
    put(FMT, "tif_grey4_miniswhite_53x29.tif", tiff(53, 29, 1, 4, 0, packed_rows((g >> 4).astype(np.uint8), 4)))
    put(FMT, "tif_grey_alpha_53x29.tif",
        tiff(53, 29, 2, 8, 1, rows_of(np.stack([g, 255 - g], -1)), extra=[2]))
    # palette: 8- and 4-bit colour maps with low bytes set (PIL keeps the high byte), + alpha
    cm8 = [int(v) for v in np.random.RandomState(53).randint(0, 65536, 3 * 256)]
    idx = index_pattern(47, 31, 256, 53)
    put(TMP, "p8.tif", tiff(47, 31, 1, 8, 3, rows_of(idx), colormap=cm8))
    tiffcp(t("p8.tif"), f("tif_palette8_lzw_47x31.tif"), "-c", "lzw")
    cm4 = [int(v) for v in np.random.RandomState(54).randint(0, 65536, 3 * 16)]
    idx4 = index_pattern(45, 29, 16, 54)
    put(FMT, "tif_palette4_45x29.tif", tiff(45, 29, 1, 4, 3, packed_rows(idx4, 4), colormap=cm4))
    put(FMT, "tif_palette_alpha_47x31.tif",
        tiff(47, 31, 2, 8, 3, rows_of(np.stack([idx, 255 - idx], -1)), extra=[2], colormap=cm8))
    # CMYK: 8-bit (LZW, and with an unspecified extra sample), 16-bit little-endian
    cmyk = np.concatenate([rgb_pattern(33, 21, 55), rgb_pattern(33, 21, 56)[..., :1]], -1)
    put(TMP, "cmyk.tif", tiff(33, 21, 4, 8, 5, rows_of(cmyk)))
    tiffcp(t("cmyk.tif"), f("tif_cmyk_lzw_33x21.tif"), "-c", "lzw")
    put(FMT, "tif_cmyk_extra_33x21.tif",
        tiff(33, 21, 5, 8, 5, rows_of(np.concatenate([cmyk, cmyk[..., :1]], -1)), extra=[0]))
    c16 = (cmyk.astype("<u2") * 257 + np.random.RandomState(57).randint(0, 256, cmyk.shape)).astype("<u2")
    put(FMT, "tif_cmyk16_33x21.tif", tiff(33, 21, 4, 16, 5, rows_of(c16.view(np.uint8).reshape(21, -1))))
    # 16 bits: RGB both byte orders, RGBA, premultiplied RGBA; grey (scaled v >> 8, see the man page)
    r16 = np.random.RandomState(58).randint(0, 65536, size=(19, 29, 3)).astype("<u2")
    put(FMT, "tif_rgb16_29x19.tif", tiff(29, 19, 3, 16, 2, rows_of(r16.view(np.uint8).reshape(19, -1))))
    put(FMT, "tif_rgb16_bigendian_29x19.tif",
        tiff(29, 19, 3, 16, 2, rows_of(r16.astype(">u2").view(np.uint8).reshape(19, -1)), be=True))
    a16 = np.random.RandomState(59).randint(0, 65536, size=(19, 29, 1)).astype("<u2")
    a16[0, :6] = 0
    a16[1, :6] = 65535
    put(FMT, "tif_rgba16_29x19.tif",
        tiff(29, 19, 4, 16, 2, rows_of(np.concatenate([r16, a16], -1).view(np.uint8).reshape(19, -1)), extra=[2]))
    pm16 = (r16.astype(np.int64) * a16 // 65535).astype("<u2")
    put(FMT, "tif_rgba16_premultiplied_29x19.tif",
        tiff(29, 19, 4, 16, 2, rows_of(np.concatenate([pm16, a16], -1).view(np.uint8).reshape(19, -1)), extra=[1]))
    g16 = np.random.RandomState(60).randint(0, 65536, size=(19, 29)).astype("<u2")
    put(TMP, "g16.tif", tiff(29, 19, 1, 16, 1, rows_of(g16.view(np.uint8).reshape(19, -1))))
    tiffcp(t("g16.tif"), f("tif_grey16_lzw_29x19.tif"), "-c", "lzw:2")
    put(FMT, "tif_grey16_bigendian_29x19.tif",
        tiff(29, 19, 1, 16, 1, rows_of(g16.astype(">u2").view(np.uint8).reshape(19, -1)), be=True))
    # three pages: page 0 is the image
    for i in range(3):
        put(TMP, f"page{i}.tif", tiff(30 + i, 20, 3, 8, 2, rows_of(rgb_pattern(30 + i, 20, 61 + i))))
    tiffcp(t("page0.tif"), t("page1.tif"), t("page2.tif"), f("tif_multipage_30x20.tif"), "-c", "lzw")
    # orientation (tag 274), applied once; a two-value tag is ignored
    o = rgb_pattern(37, 23, 64)
    for v in (2, 3, 4, 5, 6, 7, 8):
        put(FMT, f"tif_orientation{v}_37x23.tif", tiff(37, 23, 3, 8, 2, rows_of(o), orientation=v))
    put(TMP, "o6.tif", tiff(37, 23, 3, 8, 2, rows_of(o), orientation=6))
    tiffcp(t("o6.tif"), f("tif_orientation6_tiles_lzw_37x23.tif"), "-t", "-w", "16", "-l", "16", "-c", "lzw")
    put(FMT, "tif_orientation_two_values_37x23.tif", tiff(37, 23, 3, 8, 2, rows_of(o), orientation=[6, 6]))

    # refused
    xmp = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description tiff:Orientation="6"/></rdf:RDF></x:xmpmeta>'
    put(UNS, "tif_orientation_only_in_xmp.tif", tiff(37, 23, 3, 8, 2, rows_of(o), more=[(700, 7, list(xmp))]))
    tiffcp(t("rgb.tif"), os.path.join(UNS, "tif_jpeg.tif"), "-c", "jpeg:r:90", "-r", "16")
    tiffcp(t("rgb.tif"), os.path.join(UNS, "tif_separate_planes.tif"), "-p", "separate")
    put(UNS, "tif_cmyk16_bigendian.tif",
        tiff(33, 21, 4, 16, 5, rows_of(c16.astype(">u2").view(np.uint8).reshape(21, -1)), be=True))
    fl = np.random.RandomState(65).rand(20, 30).astype("<f4")
    put(UNS, "tif_float32.tif", tiff(30, 20, 1, 32, 1, rows_of(fl.view(np.uint8).reshape(20, -1)),
                                     more=[(339, 3, [3])]))
    put(UNS, "tif_fillorder2.tif", tiff(30, 20, 3, 8, 2, rows_of(rgb_pattern(30, 20, 66)), more=[(266, 3, [2])]))

    src = open(f("tif_rgb_strips_45x29.tif"), "rb").read()       # its directory comes first
    put(BAD, "truncated.tif", src[: len(src) * 6 // 10])
    put(BAD, "bomb_100000x100000.tif", tiff(100000, 100000, 1, 8, 1, [b"\0" * 16]))


def check():
    """Every file in fixtures/formats opens in PIL; every bad file does not decode."""
    for n in sorted(os.listdir(FMT)):
        im = Image.open(os.path.join(FMT, n))
        im.load()
    for n in ("truncated.gif", "truncated.bmp", "truncated.tif"):
        try:
            Image.open(os.path.join(BAD, n)).load()
        except Exception:
            continue
        sys.exit(f"make_fixture_formats: PIL decodes {n}")


def main():
    global TMP
    if sys.argv[1:2] == ["--flat"]:
        flat(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    TMP = tempfile.mkdtemp()
    for d in (FMT, UNS, BAD):
        os.makedirs(d, exist_ok=True)
    for d in (FMT, UNS):
        for n in os.listdir(d):
            if n != "README.md":
                os.remove(os.path.join(d, n))
    try:
        make_gifs()
        make_bmps()
        make_tiffs()
        check()
    finally:
        shutil.rmtree(TMP)
    total = sum(os.path.getsize(os.path.join(FMT, n)) for n in os.listdir(FMT))
    print(f"make_fixture_formats: {len(os.listdir(FMT))} files ({total} bytes) in fixtures/formats, "
          f"{len(os.listdir(UNS))} in fixtures/unsupported")


if __name__ == "__main__":
    main()
