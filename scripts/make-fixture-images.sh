#!/usr/bin/env bash
# make-fixture-images.sh - regenerates the small fixture images under fixtures/media/images/ and the
# corrupt image files under fixtures/bad/. Re-runnable: every output is overwritten.
#
# Needs: ffmpeg (lavfi testsrc2/mandelbrot/gradients sources; png and libwebp encoders), ImageMagick 6
# (JPEG variants: progressive, grayscale, CMYK/YCCK; interlaced PNG), exiftool (EXIF orientation),
# /usr/bin/python3 (zlib/struct only: palette+tRNS PNGs, the bomb PNG, the broken-Huffman JPEG).
# Debian packages: ffmpeg imagemagick libimage-exiftool-perl python3. Pass --install to apt-get them.
#
# This is not a test: it only writes files, and two runs with the same tool versions give the same
# bytes. The generated files are committed. The unit tests pin hashes of what PIL / HF made of the
# committed bytes (test/unit/test_decode_image.c, test_preprocess.c): regenerating the fixtures with
# other ffmpeg/ImageMagick versions can change the bytes, and then those hashes must be redone.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--install" ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        ffmpeg imagemagick libimage-exiftool-perl python3 >/dev/null
fi

# /usr/local/bin may hold a stand-in "convert"; use ImageMagick's real binary.
IM=""
for c in /usr/bin/convert-im6.q16 /usr/bin/convert-im6 /usr/bin/magick /usr/bin/convert; do
    if [ -x "$c" ] && "$c" -version 2>/dev/null | grep -q ImageMagick; then IM=$c; break; fi
done
[ -n "$IM" ] || { echo "make-fixture-images: ImageMagick not found (apt-get install imagemagick, or pass --install)" >&2; exit 1; }
command -v ffmpeg >/dev/null || { echo "make-fixture-images: ffmpeg not found" >&2; exit 1; }
command -v exiftool >/dev/null || { echo "make-fixture-images: exiftool not found (apt-get install libimage-exiftool-perl)" >&2; exit 1; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

OUT=fixtures/media/images
BAD=fixtures/bad
mkdir -p "$OUT" "$BAD"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

ff() { ffmpeg -hide_banner -loglevel error -nostdin -y "$@"; }
# One frame of a lavfi graph into a file: lav GRAPH OUTFILE [encoder options...]
lav() { local g=$1 o=$2; shift 2; ff -f lavfi -i "$g" -frames:v 1 "$@" "$o"; }
# ImageMagick without timestamps or colour-management chunks (deterministic output).
im() { "$IM" "$@"; }
PNGDEF=(-define png:exclude-chunks=date,time,gAMA,cHRM,bKGD,sRGB,iCCP,tEXt,zTXt,pHYs)

# --- sources (PPM, exact 8-bit RGB) ------------------------------------------------------------
lav "testsrc2=s=320x240" "$TMP/t320x240.ppm" -pix_fmt rgb24
lav "testsrc2=s=256x160" "$TMP/t256x160.ppm" -pix_fmt rgb24
lav "mandelbrot=s=200x150:maxiter=64,format=rgb24" "$TMP/m200x150.ppm" -pix_fmt rgb24
lav "testsrc2=s=168x104" "$TMP/t168x104.ppm" -pix_fmt rgb24
lav "testsrc2=s=120x200" "$TMP/t120x200.ppm" -pix_fmt rgb24
lav "gradients=s=224x128:c0=red:c1=blue:c2=yellow:nb_colors=3:seed=7,format=rgb24" "$TMP/g224x128.ppm" -pix_fmt rgb24

# --- JPEG ----------------------------------------------------------------------------------------
JQ=(-strip -quality 90)
# baseline 4:2:0
im "$TMP/t320x240.ppm" "${JQ[@]}" -sampling-factor 2x2 -interlace none "$OUT/jpeg_baseline_420_320x240.jpg"
# progressive 4:2:2 (horizontal-only chroma subsampling)
im "$TMP/t256x160.ppm" "${JQ[@]}" -sampling-factor 2x1 -interlace JPEG "$OUT/jpeg_progressive_422_256x160.jpg"
# grayscale (one component), odd height
im "$TMP/m200x150.ppm" "${JQ[@]}" -crop 200x149+0+0 +repage -colorspace Gray -type Grayscale "$OUT/jpeg_gray_200x149.jpg"
# CMYK as Photoshop writes it: Adobe APP14 marker, transform YCCK, inverted CMYK samples
lav "testsrc2=s=160x120" "$TMP/t160x120.ppm" -pix_fmt rgb24
im "$TMP/t160x120.ppm" "${JQ[@]}" -colorspace CMYK "$OUT/jpeg_cmyk_ycck_adobe_160x120.jpg"
# EXIF orientation 6 (rotate 90 CW to display), stored 168x104 -> displayed 104x168; 4:4:4
im "$TMP/t168x104.ppm" "${JQ[@]}" -sampling-factor 1x1 "$OUT/jpeg_exif6_168x104.jpg"
# EXIF orientation 3 (rotate 180), 4:2:0, odd size
im "$TMP/t120x200.ppm" "${JQ[@]}" -crop 117x199+0+0 +repage -sampling-factor 2x2 "$OUT/jpeg_exif3_117x199.jpg"
# EXIF orientation 8 (rotate 270 CW), 4:2:0
im "$TMP/t256x160.ppm" "${JQ[@]}" -sampling-factor 2x2 "$OUT/jpeg_exif8_256x160.jpg"
exiftool -q -overwrite_original -n -Orientation=6 "$OUT/jpeg_exif6_168x104.jpg"
exiftool -q -overwrite_original -n -Orientation=3 "$OUT/jpeg_exif3_117x199.jpg"
exiftool -q -overwrite_original -n -Orientation=8 "$OUT/jpeg_exif8_256x160.jpg"
# non-multiple-of-16 4:2:0 JPEG from a smooth gradient
im "$TMP/g224x128.ppm" "${JQ[@]}" -crop 221x127+0+0 +repage -sampling-factor 2x2 "$OUT/jpeg_gradient_420_221x127.jpg"

# --- PNG -----------------------------------------------------------------------------------------
# 8-bit RGB, exactly a multiple of 32 and >= min_pixels (65536): no resize
lav "testsrc2=s=320x256" "$OUT/png_rgb_320x256.png" -pix_fmt rgb24
# odd, non-square size that needs the min_pixels upscale
lav "mandelbrot=s=173x97:maxiter=48,format=rgb24" "$OUT/png_rgb_odd_173x97.png" -pix_fmt rgb24
# wide image
lav "testsrc2=s=400x60" "$OUT/png_rgb_wide_400x60.png" -pix_fmt rgb24
# RGBA: alpha varies over the whole range, including 0, with colour under transparent pixels
lav "testsrc2=s=160x120,format=rgba,geq=r='r(X,Y)':g='g(X,Y)':b='b(X,Y)':a='mod(X*7+Y*3,256)'" \
    "$OUT/png_rgba_160x120.png" -pix_fmt rgba
# palette + tRNS: ImageMagick and ffmpeg only write binary palette alpha, so these are written
# directly: an 8-bit palette of 64 entries whose first 48 carry alpha 0..188 (tRNS shorter than
# PLTE), and a 4-bit (packed) palette of 16 entries with 5 alpha values.
"$PY" - "$OUT/png_palette_trns_144x96.png" "$OUT/png_palette4_trns_90x60.png" <<'PYEOF'
import struct, sys, zlib
def chunk(t, p):
    return struct.pack('>I', len(p)) + t + p + struct.pack('>I', zlib.crc32(t + p) & 0xffffffff)
def palette_png(path, w, h, depth, n, nalpha, index):
    plte = b''.join(bytes(((i * 37) % 256, (i * 91 + 40) % 256, (255 - i * 13) % 256)) for i in range(n))
    trns = bytes((i * 4 * 64 // n) % 256 for i in range(nalpha))
    per = 8 // depth
    raw = b''
    for y in range(h):
        row = [index(x, y) for x in range(w)]
        row += [0] * (-len(row) % per)
        packed = bytes(sum(row[k + j] << (8 - depth * (j + 1)) for j in range(per))
                       for k in range(0, len(row), per))
        raw += b'\x00' + packed
    png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, depth, 3, 0, 0, 0))
    png += chunk(b'PLTE', plte) + chunk(b'tRNS', trns) + chunk(b'IDAT', zlib.compress(raw, 9))
    png += chunk(b'IEND', b'')
    open(path, 'wb').write(png)
palette_png(sys.argv[1], 144, 96, 8, 64, 48, lambda x, y: (x // 6 + (y // 6) * 7) % 64)
palette_png(sys.argv[2], 90, 60, 4, 16, 5, lambda x, y: (x // 5 + y // 4) % 16)
PYEOF
# 16-bit RGB with non-trivial low bytes
lav "testsrc2=s=96x64,format=gbrp16le,geq=r='r(X,Y)*257+X*13':g='g(X,Y)*251+Y*7':b='mod(X*Y*37,65536)'" \
    "$OUT/png_rgb16_96x64.png" -pix_fmt rgb48be
# 16-bit grayscale
lav "mandelbrot=s=96x64:maxiter=48,format=gray16le,geq=lum='mod(lum(X,Y)+X*211+Y*3,65536)'" \
    "$OUT/png_gray16_96x64.png" -pix_fmt gray16be
# 8-bit grayscale + alpha
lav "testsrc2=s=112x80,format=ya8,geq=lum='lum(X,Y)':a='mod(X*5+Y*9,256)'" "$OUT/png_graya_112x80.png" -pix_fmt ya8
# 8-bit grayscale
lav "testsrc2=s=128x72" "$OUT/png_gray_128x72.png" -pix_fmt gray
# Adam7 interlaced RGB
im "$TMP/t256x160.ppm" -crop 131x87+0+0 +repage -interlace PNG "${PNGDEF[@]}" "PNG24:$OUT/png_interlaced_131x87.png"

# --- WebP ----------------------------------------------------------------------------------------
lav "testsrc2=s=192x128" "$OUT/webp_lossy_192x128.webp" -c:v libwebp -lossless 0 -quality 80 -pix_fmt yuv420p
lav "testsrc2=s=120x90,format=rgba,geq=r='r(X,Y)':g='g(X,Y)':b='b(X,Y)':a='mod(X*3+Y*11,256)'" \
    "$OUT/webp_lossless_alpha_120x90.webp" -c:v libwebp -lossless 1 -pix_fmt bgra

# --- bad files -----------------------------------------------------------------------------------
: > "$BAD/empty.jpg"
printf 'this is a text file, not a JPEG\n' > "$BAD/x.jpg"
src=$OUT/jpeg_baseline_420_320x240.jpg
head -c $(( $(stat -c %s "$src") * 6 / 10 )) "$src" > "$BAD/truncated.jpg"
src=$OUT/png_rgb_320x256.png
head -c $(( $(stat -c %s "$src") * 6 / 10 )) "$src" > "$BAD/truncated.png"
"$PY" - "$OUT/jpeg_baseline_420_320x240.jpg" "$BAD/bad_huffman.jpg" "$BAD/bomb_100000x100000.png" <<'EOF'
import struct, sys, zlib
src, huff_out, bomb_out = sys.argv[1:4]
# bad_huffman.jpg: in the first DHT segment, move two codes of the first table into the 1-bit length
# slot (BITS[0] = 3). The symbol count is unchanged, so the segment still parses, but three 1-bit
# codes cannot exist: libjpeg fails with "Bogus Huffman table definition".
d = bytearray(open(src, 'rb').read())
i = d.find(b'\xff\xc4')
assert i > 0, 'no DHT'
bits = i + 5                     # FFC4, length(2), Tc/Th(1), then BITS[16]
counts = list(d[bits:bits + 16])
moved = 0
for k in range(15, 0, -1):
    take = min(counts[k], 3 - counts[0] - moved) if counts[0] + moved < 3 else 0
    counts[k] -= take
    moved += take
counts[0] += moved
assert counts[0] >= 3 and sum(counts) == sum(d[bits:bits + 16])
d[bits:bits + 16] = bytes(counts)
open(huff_out, 'wb').write(d)
# bomb: a valid PNG header that claims 100000 x 100000 RGB, then one tiny IDAT and IEND.
def chunk(t, p):
    return struct.pack('>I', len(p)) + t + p + struct.pack('>I', zlib.crc32(t + p) & 0xffffffff)
png = b'\x89PNG\r\n\x1a\n'
png += chunk(b'IHDR', struct.pack('>IIBBBBB', 100000, 100000, 8, 2, 0, 0, 0))
png += chunk(b'IDAT', zlib.compress(b'\x00' * 301))
png += chunk(b'IEND', b'')
open(bomb_out, 'wb').write(png)
EOF

total=$(cat "$OUT"/* | wc -c)
echo "make-fixture-images: $(ls "$OUT" | wc -l) images ($total bytes) in $OUT, $(ls "$BAD" | wc -l) files in $BAD"
