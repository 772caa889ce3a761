/* cpu_hooks.c - the CPU backend's test hooks, which make it look like the CUDA backend to the
 * pipeline where there is no GPU (tower_cpu_int.h): test_out_bf16 rounds a forward's tokens to
 * bf16 (mv_backend.out_bf16), test_resizes takes decoded frames with mv_forward_req.src_size and
 * resizes them here (mv_backend.resizes), with the CPU's resize, before the usual patchify. They
 * change what the pipeline does, never the tower's arithmetic. Not a feature: the CLI sets them
 * from MVEMBED_TEST_OUT_BF16 / MVEMBED_TEST_CPU_RESIZES only.
 */
#include "tower_cpu_int.h"

#include "mv_npy.h"
#include "mv_preprocess.h"

#include <stdlib.h>

void mv_cpu_hook_round_out(const mv_forward_req *req, const mv_vision_config *c)
{
    int64_t n = 0;
    for (int i = 0; i < req->n_entries; i++)
        n += (int64_t)req->grid[3 * i] * req->grid[3 * i + 1] * req->grid[3 * i + 2] / (c->merge * c->merge);
    for (int64_t k = 0; k < n * c->out_hidden; k++)
        req->out[k] = mv_round_bf16(req->out[k]);
}

mv_status mv_cpu_hook_resize(const mv_forward_req *req, const mv_vision_config *c, uint8_t **out, mv_err *e)
{
    size_t bytes = 0;
    for (int i = 0; i < req->n_entries; i++)
        bytes += (size_t)req->n_frames[i] * req->grid[3 * i + 1] * req->grid[3 * i + 2] * c->patch * c->patch * 3;
    uint8_t *dst = malloc(bytes ? bytes : 1);
    if (!(*out = dst))
        return mv_fail(e, MV_ERR_NOMEM, "cpu tower: out of memory resizing %zu bytes of frames", bytes);
    const uint8_t *src = req->frames;
    for (int i = 0; i < req->n_entries; i++) {
        int sw = req->src_size[2 * i], sh = req->src_size[2 * i + 1];
        int dw = req->grid[3 * i + 2] * c->patch, dh = req->grid[3 * i + 1] * c->patch;
        for (int f = 0; f < req->n_frames[i]; f++, src += (size_t)sw * sh * 3, dst += (size_t)dw * dh * 3)
            if (mv_resize_bicubic_aa_u8(src, sw, sh, dst, dw, dh) != MV_OK) {
                free(*out);
                *out = NULL;
                return mv_fail(e, MV_ERR_USAGE, "cpu tower: entry %d: cannot resize %dx%d to %dx%d", i, sw, sh,
                               dw, dh);
            }
    }
    return MV_OK;
}
