/* fuzz_npy.c - libFuzzer harness for the NPY reader and writer. Two checks per input:
 *  1. the input as an .npy file: mv_npy_parse must refuse it with one line naming it, or give an
 *     array whose count equals the product of its shape and whose count * element size payload
 *     bytes are all readable; re-encoding that array with mv_npy_encode and parsing it again must
 *     give the same dtype, shape and payload;
 *  2. the writer round trip: the input's first bytes choose a dtype and a shape (up to 4 dims,
 *     payload up to 64 KiB), the rest fills the payload; mv_npy_encode's file must be NPY v1.0 with
 *     a 64-byte aligned header ending in '\n', and mv_npy_parse must give back the same array.
 * Not here: the zstd layer and atomic writes of OUT files (mv_output.h, test/unit/test_output.c). */
#include "fuzz_util.h"
#include "mv_npy.h"

#define FZ_NAME "fuzz-input.npy"

static void same_array(const mv_array *a, mv_dtype t, int ndim, const int64_t *shape, const void *data,
                       const char *what)
{
    int ok = a->dtype == t && a->ndim == ndim;
    int64_t count = 1;
    for (int i = 0; ok && i < ndim; i++) {
        ok = a->shape[i] == shape[i];
        count *= shape[i];
    }
    ok = ok && a->count == count &&
         (count == 0 || memcmp(a->data, data, (size_t)count * mv_dtype_size(t)) == 0);
    if (!ok) {
        fprintf(stderr, "%s: NPY round trip changed the array\n", what);
        abort();
    }
}

static void check_encoded(const uint8_t *buf, size_t len)
{
    if (len < 10 || memcmp(buf, "\x93NUMPY\x01\x00", 8) != 0)
        abort();
    size_t hlen = buf[8] | (size_t)buf[9] << 8;
    if ((10 + hlen) % 64 != 0 || 10 + hlen > len || buf[10 + hlen - 1] != '\n') {
        fprintf(stderr, "encoded NPY header of %zu bytes is not 64-aligned / newline-terminated\n", hlen);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mv_err e;
    mv_array a;

    /* 1. parse arbitrary bytes */
    e.msg[0] = 0;
    if (mv_npy_parse(data, size, FZ_NAME, &a, &e) == MV_OK) {
        size_t es = mv_dtype_size(a.dtype);
        int64_t count = 1;
        int overflow = 0;
        for (int i = 0; i < a.ndim; i++) {
            if (a.shape[i] < 0)
                abort();
            if (a.shape[i] && count > INT64_MAX / a.shape[i])
                overflow = 1;
            else
                count *= a.shape[i];
        }
        if (a.ndim < 0 || a.ndim > MV_NPY_MAXDIM || overflow || count != a.count || es == 0 ||
            (uint64_t)a.count > SIZE_MAX / es || (size_t)a.count * es > size) {
            fprintf(stderr, "mv_npy_parse accepted count %lld of %zu-byte elements (ndim %d) from a "
                    "%zu-byte file\n", (long long)a.count, es, a.ndim, size);
            abort();
        }
        fz_touch(a.data, (size_t)a.count * es);
        uint8_t *buf = NULL;
        size_t len = 0;
        if (mv_npy_encode(a.dtype, a.ndim, a.shape, a.data, &buf, &len, &e) != MV_OK)
            abort();
        check_encoded(buf, len);
        mv_array b;
        if (mv_npy_parse(buf, len, "re-encoded", &b, &e) != MV_OK) {
            fprintf(stderr, "re-encoded array does not parse: %s\n", e.msg);
            abort();
        }
        same_array(&b, a.dtype, a.ndim, a.shape, a.data, "parse -> encode -> parse");
        mv_array_free(&b);
        free(buf);
        mv_array_free(&a);
    } else {
        fz_check_msg(&e, FZ_NAME, "mv_npy_parse");
    }

    /* 2. encode -> parse round trip of an array built from the input */
    if (size < 2)
        return 0;
    static const mv_dtype dts[] = {MV_DT_F32, MV_DT_F64, MV_DT_F16, MV_DT_I64, MV_DT_I32, MV_DT_U8};
    mv_dtype t = dts[data[0] % 6];
    int ndim = data[1] % 5; /* 0..4; 0 is a scalar */
    size_t off = 2;
    int64_t shape[4];
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        shape[i] = off < size ? data[off] % 17 : 1; /* zero-sized dims included */
        off++;
        count *= (size_t)shape[i];
    }
    size_t es = mv_dtype_size(t);
    if (count * es > (64u << 10))
        return 0;
    uint8_t *payload = calloc(count * es + 1, 1);
    if (!payload)
        abort();
    if (off < size)
        memcpy(payload, data + off, size - off < count * es ? size - off : count * es);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (mv_npy_encode(t, ndim, shape, payload, &buf, &len, &e) != MV_OK)
        abort();
    check_encoded(buf, len);
    if (len < count * es || (count && memcmp(buf + len - count * es, payload, count * es) != 0)) {
        fprintf(stderr, "mv_npy_encode: the payload is not the file's tail\n");
        abort();
    }
    e.msg[0] = 0;
    if (mv_npy_parse(buf, len, "encoded", &a, &e) != MV_OK) {
        fprintf(stderr, "mv_npy_parse refused mv_npy_encode's output: %s\n", e.msg);
        abort();
    }
    same_array(&a, t, ndim, shape, payload, "encode -> parse");
    mv_array_free(&a);
    free(buf);
    free(payload);
    return 0;
}
