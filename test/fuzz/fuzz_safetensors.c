/* fuzz_safetensors.c - libFuzzer harness for the safetensors reader and the model loader's use of
 * it. The input is a whole .safetensors file: mv_st_open must accept it with every tensor inside
 * the mapping and no two tensors overlapping, or refuse it with one line naming the file. Then
 * the same bytes are loaded as model.safetensors beside a miniature config.json (MINI_CONFIG below:
 * 1 block, hidden 8, 19 tensors, about 4 KB of weights, so that seeds stay small and mutations
 * fast; test/fuzz/seed-corpora.sh writes matching seeds): mv_model_load must load it or refuse
 * with one line naming the directory. Not fuzzed here: config parsing (fuzz_config.c), the tower. */
#include "fuzz_util.h"
#include "mv_model.h"
#include "mv_safetensors.h"

#define MINI_CONFIG                                                                              \
    "{\"vision_config\": {\"depth\": 1, \"hidden_size\": 8, \"num_heads\": 2, "                   \
    "\"intermediate_size\": 8, \"out_hidden_size\": 8, \"patch_size\": 2, "                      \
    "\"spatial_merge_size\": 2, \"temporal_patch_size\": 1, \"in_channels\": 3, "                \
    "\"num_position_embeddings\": 4, \"hidden_act\": \"gelu_pytorch_tanh\"}}\n"

static size_t elem_size(const mv_st_tensor *t)
{
    return t->dtype == MV_ST_F32 ? 4 : 2;
}

static void check_file(const mv_st_file *f)
{
    const uint8_t *lo = f->map + 8, *hi = f->map + f->map_len;
    for (int i = 0; i < f->n_tensors; i++) {
        const mv_st_tensor *t = &f->tensors[i];
        if (!t->name || t->data < lo || t->data > hi || t->nbytes > (size_t)(hi - t->data)) {
            fprintf(stderr, "tensor %d ('%s') lies outside the file\n", i, t->name ? t->name : "?");
            abort();
        }
        if (t->ndim < 0 || t->ndim > 8) {
            fprintf(stderr, "tensor '%s': ndim %d\n", t->name, t->ndim);
            abort();
        }
        uint64_t count = 1;
        for (int d = 0; d < t->ndim; d++)
            count *= (uint64_t)t->shape[d];
        if (t->dtype != MV_ST_OTHER && count * elem_size(t) != t->nbytes) {
            fprintf(stderr, "tensor '%s': %zu bytes for %llu elements\n", t->name, t->nbytes,
                    (unsigned long long)count);
            abort();
        }
        for (int j = 0; j < f->n_tensors; j++) {
            const mv_st_tensor *u = &f->tensors[j];
            if (j == i || !t->nbytes || !u->nbytes)
                continue;
            if (t->data < u->data + u->nbytes && u->data < t->data + t->nbytes) {
                fprintf(stderr, "tensors '%s' and '%s' overlap but were accepted\n", t->name, u->name);
                abort();
            }
        }
        if (mv_st_find(f, t->name) == NULL)
            abort();
        fz_touch(t->data, t->nbytes);
        if (t->dtype != MV_ST_OTHER && t->nbytes <= (64u << 20)) {
            float *dst = malloc((t->nbytes / elem_size(t) + 1) * sizeof *dst);
            mv_err e;
            if (!dst)
                abort();
            if (mv_st_to_f32(f, t, dst, &e) != MV_OK)
                fz_check_msg(&e, f->path, "mv_st_to_f32");
            free(dst);
        } else if (t->dtype == MV_ST_OTHER) {
            mv_err e;
            float dummy;
            if (mv_st_to_f32(f, t, &dummy, &e) == MV_OK) {
                fprintf(stderr, "tensor '%s' of dtype %s converted\n", t->name, t->dtype_name);
                abort();
            }
            fz_check_msg(&e, f->path, "mv_st_to_f32");
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    char st_path[512];
    fz_path("model.safetensors", st_path, sizeof st_path);
    if (!ready) {
        char cfg[512];
        fz_write(fz_path("config.json", cfg, sizeof cfg), (const uint8_t *)MINI_CONFIG,
                 strlen(MINI_CONFIG));
        ready = 1;
    }
    fz_write(st_path, data, size);

    mv_st_file f;
    mv_err e;
    e.msg[0] = 0;
    if (mv_st_open(st_path, &f, &e) == MV_OK) {
        check_file(&f);
        mv_st_close(&f);
    } else {
        fz_check_msg(&e, st_path, "mv_st_open");
    }

    mv_model *m = NULL;
    e.msg[0] = 0;
    if (mv_model_load(fz_dir(), &m, &e) == MV_OK) {
        if (!m || m->cfg.depth < 1 || !m->blocks)
            abort();
        mv_model_free(m);
    } else {
        if (m)
            abort();
        fz_check_msg(&e, fz_dir(), "mv_model_load");
    }
    return 0;
}
