/* mv_safetensors.h - read-only access to .safetensors files (mmapped). Validates the header:
 * JSON via jansson, dtype known, offsets inside the file, sizes matching shapes, no overlaps. */
#ifndef MV_SAFETENSORS_H
#define MV_SAFETENSORS_H

#include "mv_common.h"

typedef enum { MV_ST_F32 = 0, MV_ST_F16, MV_ST_BF16, MV_ST_OTHER } mv_st_dtype;

typedef struct {
    char *name;
    mv_st_dtype dtype;
    char dtype_name[16];
    int ndim;
    int64_t shape[8];
    const uint8_t *data; /* into the mapping */
    size_t nbytes;
} mv_st_tensor;

typedef struct {
    char *path;
    uint8_t *map;
    size_t map_len;
    mv_st_tensor *tensors;
    int n_tensors;
} mv_st_file;

mv_status mv_st_open(const char *path, mv_st_file *f, mv_err *e);
void mv_st_close(mv_st_file *f);
const mv_st_tensor *mv_st_find(const mv_st_file *f, const char *name);
/* Converts a BF16/F16/F32 tensor to f32 (count = product of shape elements). */
mv_status mv_st_to_f32(const mv_st_file *f, const mv_st_tensor *t, float *dst, mv_err *e);
/* The same for its elements [first, first + n) only, into dst[0..n) (the caller keeps the range
 * inside the tensor); threads may convert disjoint ranges of one tensor at once. */
mv_status mv_st_to_f32_range(const mv_st_file *f, const mv_st_tensor *t, size_t first, size_t n, float *dst,
                             mv_err *e);

#endif
