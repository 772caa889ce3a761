/* mv_npy.h - NPY v1.0 files: read (.npy, and .npy.zst), encode, save.
 * Little-endian C-order arrays only; dtypes <f4 <f8 <f2 <i8 <i4 |u1, and bfloat16 stored as its
 * bit patterns under <u2 (numpy has no bfloat16: a <u2 file is read as bfloat16). */
#ifndef MV_NPY_H
#define MV_NPY_H

#include "mv_common.h"

/* MV_DT_AUTO is no array's type: the output writers' per-output choice (mv_output_dtype). */
typedef enum {
    MV_DT_F32 = 0, MV_DT_F64, MV_DT_F16, MV_DT_I64, MV_DT_I32, MV_DT_U8, MV_DT_BF16, MV_DT_AUTO
} mv_dtype;

#define MV_NPY_MAXDIM 8

typedef struct {
    mv_dtype dtype;
    int ndim;
    int64_t shape[MV_NPY_MAXDIM];
    int64_t count; /* product of shape */
    void *data;    /* malloc'd */
} mv_array;

size_t mv_dtype_size(mv_dtype t);
const char *mv_dtype_descr(mv_dtype t); /* "<f4" ... */

/* Parses NPY bytes (copying the payload). */
mv_status mv_npy_parse(const uint8_t *buf, size_t len, const char *name, mv_array *a, mv_err *e);
/* Loads path; a name ending in .zst is zstd-decompressed first. */
mv_status mv_npy_load(const char *path, mv_array *a, mv_err *e);
/* Loads and converts to f32 (a->dtype becomes MV_DT_F32). */
mv_status mv_npy_load_f32(const char *path, mv_array *a, mv_err *e);
void mv_array_free(mv_array *a);

/* The NPY v1.0 header (magic, version, length, dict padded so the data starts 64-byte aligned)
 * for an array of t with ndim <= 8 dimensions; returns its length (at most MV_NPY_HEADER_MAX). */
#define MV_NPY_HEADER_MAX 384
size_t mv_npy_header(mv_dtype t, int ndim, const int64_t *shape, uint8_t hdr[MV_NPY_HEADER_MAX]);
/* Encodes a complete NPY v1.0 file into a malloc'd buffer. */
mv_status mv_npy_encode(mv_dtype t, int ndim, const int64_t *shape, const void *data,
                        uint8_t **buf, size_t *len, mv_err *e);
/* The NPY v1.0 file of f32 data [rows, cols] stored as dt: MV_DT_F32 as is, MV_DT_F16 or
 * MV_DT_BF16 rounded to nearest even (what outputs are written as, in files and in tar shards). */
mv_status mv_npy_encode_f32_as(mv_dtype dt, int64_t rows, int64_t cols, const float *data,
                               uint8_t **buf, size_t *len, mv_err *e);
/* Writes a plain .npy file (not atomic; used for --dump-stages and tools). */
mv_status mv_npy_save(const char *path, mv_dtype t, int ndim, const int64_t *shape,
                      const void *data, mv_err *e);

/* IEEE half <-> float (round to nearest even), and bfloat16 helpers. */
uint16_t mv_f32_to_f16(float f);
/* y[i] = mv_f32_to_f16(x[i]) for finite and infinite x, with F16C where the CPU has it. */
void mv_f32_to_f16_n(const float *x, uint16_t *y, size_t n);
float mv_f16_to_f32(uint16_t h);
uint16_t mv_f32_to_bf16(float f);
void mv_f32_to_bf16_n(const float *x, uint16_t *y, size_t n);
/* The same over the calling thread's OpenMP team: for bulk conversions made once (the CUDA
 * backend's weights at its creation), not from threads that run beside a team (the writers). */
void mv_f32_to_bf16_par(const float *x, uint16_t *y, size_t n);
float mv_bf16_to_f32(uint16_t b);
/* 1 when every x[i] is finite and inside f16's range once rounded (|x| < 65520, which rounds to
 * at most 65504): mv_f32_to_f16 makes no Inf of any of them. */
int mv_f16_fits_n(const float *x, size_t n);
static inline float mv_round_bf16(float f) { return mv_bf16_to_f32(mv_f32_to_bf16(f)); }

#endif
