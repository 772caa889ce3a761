/* fuzz_config.c - libFuzzer harness for the model directory's JSON files as mv_model_load reads
 * them. The input is split at NUL bytes (which JSON text never contains) into up to four parts:
 * config.json, preprocessor_config.json, video_preprocessor_config.json and
 * model.safetensors.index.json; a part that is absent leaves its file out (an empty part makes an
 * empty file). The weights are the fixture's model.safetensors, unchanged. The loader must give a
 * consistent model (positive sizes, head_dim * heads == hidden, min <= max pixel budgets) or
 * refuse with one line naming the model directory. Not here: the safetensors bytes
 * (fuzz_safetensors.c). */
#include "fuzz_util.h"
#include "mv_model.h"

static const char *const names[4] = {"config.json", "preprocessor_config.json",
                                     "video_preprocessor_config.json", "model.safetensors.index.json"};

static void check_model(const mv_model *m)
{
    const mv_vision_config *c = &m->cfg;
    const mv_preproc_config *p = &m->pp;
    int bad = c->depth < 1 || c->hidden < 1 || c->heads < 1 || c->head_dim * c->heads != c->hidden ||
              c->pos_side * c->pos_side != c->num_pos || c->patch_dim != c->in_ch * c->temporal * c->patch * c->patch ||
              p->min_pixels < 1 || p->max_pixels < p->min_pixels || p->video_min_pixels < 1 ||
              p->video_max_pixels < p->video_min_pixels || !(p->fps > 0) || p->min_frames < 1 ||
              p->max_frames < p->min_frames || p->patch != c->patch || p->merge != c->merge ||
              p->temporal != c->temporal || m->fingerprint[16] != 0 || strlen(m->fingerprint) != 16;
    if (bad) {
        fprintf(stderr, "inconsistent model accepted: depth %d hidden %d heads %d head_dim %d pixels "
                "[%lld, %lld] video [%lld, %lld] fps %g frames [%d, %d]\n", c->depth, c->hidden,
                c->heads, c->head_dim, p->min_pixels, p->max_pixels, p->video_min_pixels,
                p->video_max_pixels, p->fps, p->min_frames, p->max_frames);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        fz_link_fixture("fixtures/model-tiny/model.safetensors", "model.safetensors");
        ready = 1;
    }
    size_t off = 0;
    int more = 1; /* a part starts at off */
    for (int i = 0; i < 4; i++) {
        char path[512];
        fz_path(names[i], path, sizeof path);
        if (!more) {
            unlink(path);
            continue;
        }
        const uint8_t *z = memchr(data + off, 0, size - off);
        size_t n = z ? (size_t)(z - (data + off)) : size - off;
        fz_write(path, data + off, n);
        off += n;
        more = z != NULL;
        if (more)
            off++; /* past the NUL */
    }
    mv_model *m = NULL;
    mv_err e;
    e.msg[0] = 0;
    if (mv_model_load(fz_dir(), &m, &e) == MV_OK) {
        check_model(m);
        mv_model_update_fingerprint(m, NULL);
        mv_model_free(m);
    } else {
        if (m)
            abort();
        fz_check_msg(&e, fz_dir(), "mv_model_load");
    }
    return 0;
}
