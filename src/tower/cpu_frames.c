/* cpu_frames.c - the CPU backend's uint8 frames to pixel values: each entry's resized frames, as
 * the pipeline hands them to a forward (mv_forward_req.frames), through mv_patchify (the CPU twin
 * of cu/patchify.cu) into one pixel_values tensor. Not here: the resize (the decode threads, or
 * cpu_hooks.c's test hook), the tower (tower_cpu.c). */
#include "tower_cpu_int.h"

#include "mv_plan.h"
#include "mv_preprocess.h"

#include <omp.h>
#include <stdlib.h>

/* mv_patchify (the CPU twin of cu/patchify.cu) of every entry's frames (src, laid out as req
 * says) into one pixel_values tensor *pixp [N, patch_dim] (malloc'ed). */
mv_status mv_cpu_patchify_frames(const mv_model *m, int threads, const mv_forward_req *req, const uint8_t *src,
                                 float **pixp, mv_err *e)
{
    const mv_vision_config *c = &m->cfg;
    const mv_preproc_config *pp = &m->pp;
    const int32_t *n_frames = req->n_frames, *grid = req->grid;
    int n_entries = req->n_entries;
    int64_t N;
    mv_status st = mv_frames_check(m, n_frames, grid, n_entries, &N, NULL, e);
    if (st)
        return st;
    int max_nf = 0;
    for (int i = 0; i < n_entries; i++)
        max_nf = n_frames[i] > max_nf ? n_frames[i] : max_nf;
    float *pix = malloc((size_t)N * c->patch_dim * sizeof(float));
    const uint8_t **fp = malloc((size_t)(max_nf ? max_nf : 1) * sizeof *fp);
    if (!pix || !fp) {
        free(pix);
        free(fp);
        return mv_fail(e, MV_ERR_NOMEM, "cpu tower: out of memory for %lld x %d pixel values",
                       (long long)N, c->patch_dim);
    }
    omp_set_num_threads(threads); /* mv_patchify's loop: this backend's threads */
    int64_t row = 0;
    for (int i = 0; i < n_entries; i++) {
        int h = grid[3 * i + 1] * c->patch, w = grid[3 * i + 2] * c->patch;
        size_t fsz = (size_t)h * w * 3;
        for (int f = 0; f < n_frames[i]; f++)
            fp[f] = src + fsz * f;
        int32_t g[3];
        mv_patchify(fp, n_frames[i], h, w, pp, pix + row * c->patch_dim, g);
        src += fsz * n_frames[i];
        row += (int64_t)g[0] * g[1] * g[2];
    }
    free(fp);
    *pixp = pix;
    return MV_OK;
}
