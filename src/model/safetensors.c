/* safetensors.c - mmapped .safetensors reader (see mv_safetensors.h). The header is parsed with
 * jansson; every tensor's offsets and size are checked against the file before any access. */
#include "mv_safetensors.h"
#include "mv_npy.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int dtype_of(const char *s, mv_st_dtype *d, size_t *size)
{
    if (!strcmp(s, "F32")) { *d = MV_ST_F32; *size = 4; return 0; }
    if (!strcmp(s, "F16")) { *d = MV_ST_F16; *size = 2; return 0; }
    if (!strcmp(s, "BF16")) { *d = MV_ST_BF16; *size = 2; return 0; }
    static const char *other[] = {"F64", "I64", "I32", "I16", "I8", "U8", "BOOL", "U16", "U32",
                                  "U64", "F8_E4M3", "F8_E5M2"};
    static const size_t osz[] = {8, 8, 4, 2, 1, 1, 1, 2, 4, 8, 1, 1};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (!strcmp(s, other[i])) { *d = MV_ST_OTHER; *size = osz[i]; return 0; }
    return -1;
}

static int cmp_off(const void *a, const void *b)
{
    const mv_st_tensor *x = *(const mv_st_tensor *const *)a, *y = *(const mv_st_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

/* Maps path whole (a regular file of 8 bytes at least) into f->map. */
static mv_status map_file(const char *path, mv_st_file *f, mv_err *e)
{
    int fd; /* a FIFO would block open() and cannot be mapped: only regular files */
    mv_status ost = mv_open_regular(path, &fd, e);
    if (ost != MV_OK)
        return ost;
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        close(fd);
        return mv_fail(e, MV_ERR_IO, "%s: %s", path, strerror(errno));
    }
    if (sb.st_size < 8) {
        close(fd);
        return mv_fail(e, MV_ERR_FORMAT, "%s: truncated safetensors file (%lld bytes)", path,
                       (long long)sb.st_size);
    }
    void *map = mmap(NULL, sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return mv_fail(e, MV_ERR_IO, "%s: mmap: %s", path, strerror(errno));
    f->map = map;
    f->map_len = sb.st_size;
    if (!(f->path = strdup(path)))
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
    return MV_OK;
}

/* The JSON header (8-byte little-endian length, then the object) into *root, its length *hlen. */
static mv_status load_header(const mv_st_file *f, json_t **root, uint64_t *hlen, mv_err *e)
{
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | f->map[i];
    if (n > f->map_len - 8)
        return mv_fail(e, MV_ERR_FORMAT, "%s: truncated safetensors file (header of %llu bytes, file of %zu)",
                       f->path, (unsigned long long)n, f->map_len);
    json_error_t je;
    *root = json_loadb((const char *)f->map + 8, n, 0, &je);
    if (!*root || !json_is_object(*root))
        return mv_fail(e, MV_ERR_FORMAT, "%s: bad safetensors header JSON: %s", f->path,
                       *root ? "not an object" : mv_printable(je.text));
    *hlen = n;
    return MV_OK;
}

/* The dtype and shape of header entry val into t; *count = its elements, *esize = bytes each. */
static mv_status entry_type(const mv_st_file *f, const char *kesc, json_t *val, mv_st_tensor *t,
                            uint64_t *count, size_t *esize, mv_err *e)
{
    char desc[64];
    json_t *jd = json_object_get(val, "dtype"), *js = json_object_get(val, "shape"),
           *jo = json_object_get(val, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) || json_array_size(jo) != 2 ||
        json_array_size(js) > 8)
        return mv_fail(e, MV_ERR_FORMAT, "%s: tensor '%s': malformed header entry", f->path, kesc);
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", json_string_value(jd));
    if (dtype_of(t->dtype_name, &t->dtype, esize))
        return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: tensor '%s': unknown dtype '%s'", f->path, kesc,
                       mv_escape(t->dtype_name, desc, sizeof desc));
    *count = 1;
    t->ndim = (int)json_array_size(js);
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (1LL << 40))
            return mv_fail(e, MV_ERR_FORMAT, "%s: tensor '%s': bad shape", f->path, kesc);
        t->shape[i] = json_integer_value(d);
        *count *= (uint64_t)t->shape[i];
        if (*count > (1ULL << 40))
            return mv_fail(e, MV_ERR_FORMAT, "%s: tensor '%s': shape too large", f->path, kesc);
    }
    return MV_OK;
}

/* Header entry key: val into t, its data offsets checked against the data_len bytes at base. */
static mv_status read_entry(const mv_st_file *f, const char *key, json_t *val, const uint8_t *base,
                            size_t data_len, mv_st_tensor *t, mv_err *e)
{
    char kesc[256]; /* names from the file, escaped for messages */
    mv_escape(key, kesc, sizeof kesc);
    uint64_t count = 0;
    size_t esize = 0;
    mv_status st = entry_type(f, kesc, val, t, &count, &esize, e);
    if (st)
        return st;
    json_t *jo = json_object_get(val, "data_offsets");
    json_t *b0 = json_array_get(jo, 0), *b1 = json_array_get(jo, 1);
    if (!json_is_integer(b0) || !json_is_integer(b1))
        return mv_fail(e, MV_ERR_FORMAT, "%s: tensor '%s': bad data_offsets", f->path, kesc);
    json_int_t o0 = json_integer_value(b0), o1 = json_integer_value(b1);
    if (o0 < 0 || o1 < o0 || (uint64_t)o1 > data_len)
        return mv_fail(e, MV_ERR_FORMAT,
                       "%s: tensor '%s': data offsets [%lld, %lld] outside the file's %zu data "
                       "bytes (truncated file?)",
                       f->path, kesc, (long long)o0, (long long)o1, data_len);
    if ((uint64_t)(o1 - o0) != count * esize)
        return mv_fail(e, MV_ERR_FORMAT, "%s: tensor '%s': %lld data bytes for a shape of %llu %s elements",
                       f->path, kesc, (long long)(o1 - o0), (unsigned long long)count, t->dtype_name);
    t->data = base + o0;
    t->nbytes = (size_t)(o1 - o0);
    if (!(t->name = strdup(key)))
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", f->path);
    return MV_OK;
}

/* Every entry of the header but __metadata__ into f->tensors. */
static mv_status read_tensors(mv_st_file *f, json_t *root, uint64_t hlen, mv_err *e)
{
    size_t data_len = f->map_len - 8 - hlen;
    const uint8_t *base = f->map + 8 + hlen;
    f->tensors = calloc(json_object_size(root) + 1, sizeof *f->tensors);
    if (!f->tensors)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", f->path);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__"))
            continue;
        mv_status st = read_entry(f, key, val, base, data_len, &f->tensors[f->n_tensors], e);
        if (st)
            return st;
        f->n_tensors++;
    }
    return MV_OK;
}

/* Refuses tensors whose bytes overlap. */
static mv_status check_overlaps(const mv_st_file *f, mv_err *e)
{
    const mv_st_tensor **order = malloc((f->n_tensors + 1) * sizeof *order);
    if (!order)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", f->path);
    for (int i = 0; i < f->n_tensors; i++)
        order[i] = &f->tensors[i];
    qsort(order, f->n_tensors, sizeof *order, cmp_off);
    mv_status st = MV_OK;
    for (int i = 1; i < f->n_tensors && !st; i++)
        if (order[i]->data < order[i - 1]->data + order[i - 1]->nbytes)
            st = mv_fail(e, MV_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap", f->path,
                         order[i - 1]->name, order[i]->name);
    free(order);
    return st;
}

mv_status mv_st_open(const char *path, mv_st_file *f, mv_err *e)
{
    memset(f, 0, sizeof *f);
    json_t *root = NULL;
    uint64_t hlen = 0;
    mv_status st = map_file(path, f, e);
    if (!st)
        st = load_header(f, &root, &hlen, e);
    if (!st)
        st = read_tensors(f, root, hlen, e);
    if (!st)
        st = check_overlaps(f, e);
    if (root)
        json_decref(root);
    if (st)
        mv_st_close(f);
    return st;
}

void mv_st_close(mv_st_file *f)
{
    for (int i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    if (f->map)
        munmap(f->map, f->map_len);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const mv_st_tensor *mv_st_find(const mv_st_file *f, const char *name)
{
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

mv_status mv_st_to_f32_range(const mv_st_file *f, const mv_st_tensor *t, size_t first, size_t n, float *dst,
                             mv_err *e)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case MV_ST_F32:
        memcpy(dst, p + 4 * first, 4 * n);
        return MV_OK;
    case MV_ST_BF16:
        p += 2 * first;
        for (size_t i = 0; i < n; i++)
            dst[i] = mv_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return MV_OK;
    case MV_ST_F16:
        p += 2 * first;
        for (size_t i = 0; i < n; i++)
            dst[i] = mv_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return MV_OK;
    case MV_ST_OTHER:
        break;
    }
    return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported (BF16, F16, F32 are)",
                   f->path, t->name, t->dtype_name);
}

mv_status mv_st_to_f32(const mv_st_file *f, const mv_st_tensor *t, float *dst, mv_err *e)
{
    return mv_st_to_f32_range(f, t, 0, t->dtype == MV_ST_F32 ? t->nbytes / 4 : t->nbytes / 2, dst, e);
}
