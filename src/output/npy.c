/* npy.c - NPY v1.0 reading and writing (see mv_npy.h). Reads v1/v2/v3 headers, little-endian
 * C-order only; .zst files are decompressed with libzstd first. Not a general pickle reader. */
#include "mv_npy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

size_t mv_dtype_size(mv_dtype t)
{
    switch (t) {
    case MV_DT_F32: return 4;
    case MV_DT_F64: return 8;
    case MV_DT_F16: return 2;
    case MV_DT_I64: return 8;
    case MV_DT_I32: return 4;
    case MV_DT_U8: return 1;
    case MV_DT_BF16: return 2;
    case MV_DT_AUTO: return 0;
    }
    return 0;
}

const char *mv_dtype_descr(mv_dtype t)
{
    switch (t) {
    case MV_DT_F32: return "<f4";
    case MV_DT_F64: return "<f8";
    case MV_DT_F16: return "<f2";
    case MV_DT_I64: return "<i8";
    case MV_DT_I32: return "<i4";
    case MV_DT_U8: return "|u1";
    case MV_DT_BF16: return "<u2";
    case MV_DT_AUTO: return "?";
    }
    return "?";
}

static int parse_descr(const char *d, mv_dtype *t)
{
    static const struct { const char *s; mv_dtype t; } tab[] = {
        {"<f4", MV_DT_F32}, {"<f8", MV_DT_F64}, {"<f2", MV_DT_F16}, {"<i8", MV_DT_I64},
        {"<i4", MV_DT_I32}, {"|u1", MV_DT_U8},  {"<u1", MV_DT_U8},  {"|i1", MV_DT_U8},
        {"<u2", MV_DT_BF16},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(d, tab[i].s)) {
            *t = tab[i].t;
            return 0;
        }
    return -1;
}

/* Finds 'key': in the header dict and returns a pointer just after the colon. */
static const char *dict_value(const char *hdr, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p)
        return NULL;
    p = strchr(p + strlen(pat), ':');
    if (!p)
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

mv_status mv_npy_parse(const uint8_t *buf, size_t len, const char *name, mv_array *a, mv_err *e)
{
    memset(a, 0, sizeof *a);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return mv_fail(e, MV_ERR_FORMAT, "%s: not an NPY file (bad magic)", name);
    int major = buf[6];
    size_t hlen, hoff;
    if (major == 1) {
        hlen = buf[8] | (size_t)buf[9] << 8;
        hoff = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return mv_fail(e, MV_ERR_FORMAT, "%s: truncated NPY header", name);
        hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        hoff = 12;
    } else {
        return mv_fail(e, MV_ERR_FORMAT, "%s: unsupported NPY version %d", name, major);
    }
    if (hoff + hlen > len)
        return mv_fail(e, MV_ERR_FORMAT, "%s: truncated NPY header", name);
    char *hdr = malloc(hlen + 1);
    if (!hdr)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", name);
    memcpy(hdr, buf + hoff, hlen);
    hdr[hlen] = 0;
    mv_status st = MV_OK;
    const char *v = dict_value(hdr, "descr");
    char descr[16] = {0};
    if (!v || *v != '\'' || sscanf(v + 1, "%15[^']", descr) != 1 || parse_descr(descr, &a->dtype)) {
        for (char *c = descr; *c; c++) /* file bytes never reach the message unfiltered */
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                *c = '?';
        st = mv_fail(e, MV_ERR_UNSUPPORTED, "%s: unsupported NPY dtype '%s'", name, descr);
        goto out;
    }
    v = dict_value(hdr, "fortran_order");
    if (!v || strncmp(v, "False", 5) != 0) {
        st = mv_fail(e, MV_ERR_UNSUPPORTED, "%s: Fortran-order NPY arrays are not supported", name);
        goto out;
    }
    v = dict_value(hdr, "shape");
    if (!v || *v != '(') {
        st = mv_fail(e, MV_ERR_FORMAT, "%s: NPY header has no shape", name);
        goto out;
    }
    v++;
    a->count = 1;
    while (*v && *v != ')') {
        while (*v == ' ' || *v == ',')
            v++;
        if (*v == ')')
            break;
        char *end;
        long long d = strtoll(v, &end, 10);
        if (end == v || d < 0 || a->ndim >= MV_NPY_MAXDIM) {
            st = mv_fail(e, MV_ERR_FORMAT, "%s: bad NPY shape", name);
            goto out;
        }
        a->shape[a->ndim++] = d;
        if (d && a->count > INT64_MAX / d) {
            st = mv_fail(e, MV_ERR_FORMAT, "%s: NPY shape overflows", name);
            goto out;
        }
        a->count *= d;
        v = end;
    }
    if ((uint64_t)a->count > SIZE_MAX / mv_dtype_size(a->dtype)) {
        st = mv_fail(e, MV_ERR_FORMAT, "%s: NPY shape too large", name);
        goto out;
    }
    size_t need = (size_t)a->count * mv_dtype_size(a->dtype);
    if (len - hoff - hlen < need) {
        st = mv_fail(e, MV_ERR_FORMAT, "%s: NPY data truncated (%zu of %zu bytes)", name,
                     len - hoff - hlen, need);
        goto out;
    }
    a->data = malloc(need ? need : 1);
    if (!a->data) {
        st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", name);
        goto out;
    }
    memcpy(a->data, buf + hoff + hlen, need);
out:
    free(hdr);
    return st;
}

mv_status mv_npy_load(const char *path, mv_array *a, mv_err *e)
{
    uint8_t *buf;
    size_t len;
    mv_status st = mv_read_file(path, &buf, &len, e);
    if (st)
        return st;
    size_t pl = strlen(path);
    if (pl > 4 && !strcmp(path + pl - 4, ".zst")) {
        unsigned long long n = ZSTD_getFrameContentSize(buf, len);
        if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN) {
            free(buf);
            return mv_fail(e, MV_ERR_FORMAT, "%s: not a zstd frame with a content size", path);
        }
        uint8_t *raw = malloc(n ? n : 1);
        if (!raw) {
            free(buf);
            return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
        }
        size_t r = ZSTD_decompress(raw, n, buf, len);
        free(buf);
        if (ZSTD_isError(r)) {
            free(raw);
            return mv_fail(e, MV_ERR_FORMAT, "%s: zstd: %s", path, ZSTD_getErrorName(r));
        }
        buf = raw;
        len = r;
    }
    st = mv_npy_parse(buf, len, path, a, e);
    free(buf);
    return st;
}

mv_status mv_npy_load_f32(const char *path, mv_array *a, mv_err *e)
{
    mv_status st = mv_npy_load(path, a, e);
    if (st || a->dtype == MV_DT_F32)
        return st;
    float *f = malloc((size_t)(a->count ? a->count : 1) * sizeof *f);
    if (!f) {
        mv_array_free(a);
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int64_t i = 0; i < a->count; i++) {
        switch (a->dtype) {
        case MV_DT_F64: f[i] = (float)((double *)a->data)[i]; break;
        case MV_DT_F16: f[i] = mv_f16_to_f32(((uint16_t *)a->data)[i]); break;
        case MV_DT_I64: f[i] = (float)((int64_t *)a->data)[i]; break;
        case MV_DT_I32: f[i] = (float)((int32_t *)a->data)[i]; break;
        case MV_DT_U8: f[i] = ((uint8_t *)a->data)[i]; break;
        case MV_DT_BF16: f[i] = mv_bf16_to_f32(((uint16_t *)a->data)[i]); break;
        case MV_DT_F32: case MV_DT_AUTO: break;
        }
    }
    free(a->data);
    a->data = f;
    a->dtype = MV_DT_F32;
    return MV_OK;
}

void mv_array_free(mv_array *a)
{
    if (a) {
        free(a->data);
        a->data = NULL;
    }
}

size_t mv_npy_header(mv_dtype t, int ndim, const int64_t *shape, uint8_t hdr[MV_NPY_HEADER_MAX])
{
    char d[256];
    int n = snprintf(d, sizeof d, "{'descr': '%s', 'fortran_order': False, 'shape': (", mv_dtype_descr(t));
    for (int i = 0; i < ndim; i++)
        n += snprintf(d + n, sizeof d - n, "%lld%s", (long long)shape[i],
                      ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
    n += snprintf(d + n, sizeof d - n, "), }");
    /* pad with spaces so that 10 + header length (incl. '\n') is a multiple of 64 */
    size_t total_hdr = 10 + (size_t)n + 1;
    size_t pad = (64 - total_hdr % 64) % 64;
    size_t hlen = (size_t)n + pad + 1;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = hlen & 0xff;
    hdr[9] = (hlen >> 8) & 0xff;
    memcpy(hdr + 10, d, n);
    memset(hdr + 10 + n, ' ', pad);
    hdr[10 + hlen - 1] = '\n';
    return 10 + hlen;
}

mv_status mv_npy_encode(mv_dtype t, int ndim, const int64_t *shape, const void *data,
                        uint8_t **out, size_t *outlen, mv_err *e)
{
    uint8_t hdr[MV_NPY_HEADER_MAX];
    size_t hl = mv_npy_header(t, ndim, shape, hdr);
    int64_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= shape[i];
    size_t payload = (size_t)count * mv_dtype_size(t);
    uint8_t *buf = malloc(hl + payload);
    if (!buf)
        return mv_fail(e, MV_ERR_NOMEM, "npy: out of memory for %zu bytes", payload);
    memcpy(buf, hdr, hl);
    if (payload)
        memcpy(buf + hl, data, payload);
    *out = buf;
    *outlen = hl + payload;
    return MV_OK;
}

mv_status mv_npy_save(const char *path, mv_dtype t, int ndim, const int64_t *shape,
                      const void *data, mv_err *e)
{
    uint8_t *buf;
    size_t len;
    mv_status st = mv_npy_encode(t, ndim, shape, data, &buf, &len, e);
    if (st)
        return mv_fail_prefix(e, st, "%s", path);
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(buf);
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    }
    size_t w = fwrite(buf, 1, len, f);
    int cerr = fclose(f);
    free(buf);
    if (w != len || cerr)
        return mv_fail(e, MV_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return MV_OK;
}

uint16_t mv_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xff;
    uint32_t man = x & 0x7fffff;
    if (exp == 0xff) /* inf / nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* subnormal half or zero */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent, which is correct (up to inf) */
    return (uint16_t)half;
}

/* F16C's conversion rounds to nearest even and handles subnormals, overflow and infinities as
 * mv_f32_to_f16 does (NaN payloads may differ: outputs never hold NaN). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx,f16c"))) static void f16_n_f16c(const float *x, uint16_t *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++)
        y[i] = mv_f32_to_f16(x[i]);
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
/* F16C (CPUID.1:ECX bit 29) with the OS saving AVX state (what __builtin_cpu_supports("avx")
 * checks); clang's __builtin_cpu_supports has no "f16c" */
static int have_f16c(void)
{
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}
#endif

void mv_f32_to_f16_n(const float *x, uint16_t *y, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_f16c()) {
        f16_n_f16c(x, y, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        y[i] = mv_f32_to_f16(x[i]);
}

float mv_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t x;
    if (exp == 0) {
        if (man == 0) {
            x = sign;
        } else { /* subnormal */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            x = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 0x1f) {
        x = sign | 0x7f800000 | man << 13;
    } else {
        x = sign | (exp - 15 + 127) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t mv_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

void mv_f32_to_bf16_n(const float *x, uint16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = mv_f32_to_bf16(x[i]);
}

void mv_f32_to_bf16_par(const float *x, uint16_t *y, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= ((size_t)1 << 20) && mv_omp_region(0))
    for (size_t i = 0; i < n; i++)
        y[i] = mv_f32_to_bf16(x[i]);
}

/* x (the bits of a float) is bf16 (low half zero) and zero or in f16's normal range
 * [2^-14, 65504]: f16's 10 mantissa bits hold bf16's 7 */
int mv_f16_fits_n(const float *x, size_t n)
{
    int fits = 1;
    for (size_t i = 0; i < n; i++) { /* branch-free: vectorises */
        uint32_t u;
        memcpy(&u, x + i, 4);
        fits &= (u & 0x7fffffff) < 0x477ff000; /* |x| < 65520: rounds to at most 65504; not NaN */
    }
    return fits;
}

float mv_bf16_to_f32(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

mv_status mv_npy_encode_f32_as(mv_dtype dt, int64_t rows, int64_t cols, const float *data,
                               uint8_t **buf, size_t *len, mv_err *e)
{
    if (dt != MV_DT_F32 && dt != MV_DT_F16 && dt != MV_DT_BF16)
        return mv_fail(e, MV_ERR_UNSUPPORTED, "outputs are stored as f32, f16 or bf16");
    size_t count = (size_t)rows * (size_t)cols;
    uint16_t *half = NULL;
    const void *payload = data;
    if (dt != MV_DT_F32) {
        if (!(half = malloc(count * sizeof *half + 1)))
            return mv_fail(e, MV_ERR_NOMEM, "out of memory converting to %s",
                           dt == MV_DT_F16 ? "f16" : "bf16");
        if (dt == MV_DT_F16)
            mv_f32_to_f16_n(data, half, count);
        else
            mv_f32_to_bf16_n(data, half, count);
        payload = half;
    }
    int64_t shape[2] = {rows, cols};
    mv_status st = mv_npy_encode(dt, 2, shape, payload, buf, len, e);
    free(half);
    return st;
}
