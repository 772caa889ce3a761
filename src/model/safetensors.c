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

mv_status mv_st_open(const char *path, mv_st_file *f, mv_err *e)
{
    memset(f, 0, sizeof *f);
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
    f->path = strdup(path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | f->map[i];
    mv_status st = MV_OK;
    json_t *root = NULL;
    mv_st_tensor **order = NULL;
    if (hlen > f->map_len - 8) {
        st = mv_fail(e, MV_ERR_FORMAT, "%s: truncated safetensors file (header of %llu bytes, file of %zu)",
                     path, (unsigned long long)hlen, f->map_len);
        goto fail;
    }
    json_error_t je;
    root = json_loadb((const char *)f->map + 8, hlen, 0, &je);
    if (!root || !json_is_object(root)) {
        st = mv_fail(e, MV_ERR_FORMAT, "%s: bad safetensors header JSON: %s", path,
                     root ? "not an object" : mv_printable(je.text));
        goto fail;
    }
    size_t data_len = f->map_len - 8 - hlen;
    const uint8_t *base = f->map + 8 + hlen;
    f->tensors = calloc(json_object_size(root) + 1, sizeof *f->tensors);
    if (!f->tensors) {
        st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__"))
            continue;
        char kesc[256], desc[64]; /* names from the file, escaped for messages */
        mv_escape(key, kesc, sizeof kesc);
        mv_st_tensor *t = &f->tensors[f->n_tensors];
        json_t *jd = json_object_get(val, "dtype"), *js = json_object_get(val, "shape"),
               *jo = json_object_get(val, "data_offsets");
        if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) ||
            json_array_size(jo) != 2 || json_array_size(js) > 8) {
            st = mv_fail(e, MV_ERR_FORMAT, "%s: tensor '%s': malformed header entry", path, kesc);
            goto fail;
        }
        size_t esize;
        snprintf(t->dtype_name, sizeof t->dtype_name, "%s", json_string_value(jd));
        if (dtype_of(t->dtype_name, &t->dtype, &esize)) {
            st = mv_fail(e, MV_ERR_UNSUPPORTED, "%s: tensor '%s': unknown dtype '%s'", path, kesc,
                         mv_escape(t->dtype_name, desc, sizeof desc));
            goto fail;
        }
        uint64_t count = 1;
        t->ndim = (int)json_array_size(js);
        for (int i = 0; i < t->ndim; i++) {
            json_t *d = json_array_get(js, i);
            if (!json_is_integer(d) || json_integer_value(d) < 0 ||
                json_integer_value(d) > (1LL << 40)) {
                st = mv_fail(e, MV_ERR_FORMAT, "%s: tensor '%s': bad shape", path, kesc);
                goto fail;
            }
            t->shape[i] = json_integer_value(d);
            count *= (uint64_t)t->shape[i];
            if (count > (1ULL << 40)) {
                st = mv_fail(e, MV_ERR_FORMAT, "%s: tensor '%s': shape too large", path, kesc);
                goto fail;
            }
        }
        json_t *b0 = json_array_get(jo, 0), *b1 = json_array_get(jo, 1);
        if (!json_is_integer(b0) || !json_is_integer(b1)) {
            st = mv_fail(e, MV_ERR_FORMAT, "%s: tensor '%s': bad data_offsets", path, kesc);
            goto fail;
        }
        json_int_t o0 = json_integer_value(b0), o1 = json_integer_value(b1);
        if (o0 < 0 || o1 < o0 || (uint64_t)o1 > data_len) {
            st = mv_fail(e, MV_ERR_FORMAT,
                         "%s: tensor '%s': data offsets [%lld, %lld] outside the file's %zu data "
                         "bytes (truncated file?)",
                         path, kesc, (long long)o0, (long long)o1, data_len);
            goto fail;
        }
        if ((uint64_t)(o1 - o0) != count * esize) {
            st = mv_fail(e, MV_ERR_FORMAT, "%s: tensor '%s': %lld data bytes for a shape of %llu %s elements",
                         path, kesc, (long long)(o1 - o0), (unsigned long long)count, t->dtype_name);
            goto fail;
        }
        t->data = base + o0;
        t->nbytes = (size_t)(o1 - o0);
        t->name = strdup(key);
        f->n_tensors++;
    }
    /* refuse overlapping tensors */
    order = malloc((f->n_tensors + 1) * sizeof *order);
    if (!order) {
        st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (int i = 0; i < f->n_tensors; i++)
        order[i] = &f->tensors[i];
    qsort(order, f->n_tensors, sizeof *order, cmp_off);
    for (int i = 1; i < f->n_tensors; i++)
        if (order[i]->data < order[i - 1]->data + order[i - 1]->nbytes) {
            st = mv_fail(e, MV_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap", path,
                         order[i - 1]->name, order[i]->name);
            goto fail;
        }
    free(order);
    json_decref(root);
    return MV_OK;
fail:
    free(order);
    if (root)
        json_decref(root);
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

mv_status mv_st_to_f32(const mv_st_file *f, const mv_st_tensor *t, float *dst, mv_err *e)
{
    size_t n;
    switch (t->dtype) {
    case MV_ST_F32:
        memcpy(dst, t->data, t->nbytes);
        return MV_OK;
    case MV_ST_BF16:
        n = t->nbytes / 2;
        for (size_t i = 0; i < n; i++)
            dst[i] = mv_bf16_to_f32((uint16_t)(t->data[2 * i] | t->data[2 * i + 1] << 8));
        return MV_OK;
    case MV_ST_F16:
        n = t->nbytes / 2;
        for (size_t i = 0; i < n; i++)
            dst[i] = mv_f16_to_f32((uint16_t)(t->data[2 * i] | t->data[2 * i + 1] << 8));
        return MV_OK;
    case MV_ST_OTHER:
        break;
    }
    return mv_fail(e, MV_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not supported (BF16, F16, F32 are)",
                   f->path, t->name, t->dtype_name);
}
