/* test_model_weights.c - a model held as its checkpoint's bytes (mv_model_load_mode with
 * MV_WEIGHTS_SOURCE, include/mv_model.h; what a run that may use CUDA loads) against the same
 * model converted to f32 at load: the same fingerprint; every weight's bytes, read through
 * mv_model_weight and mv_weight_view_f32, equal to the f32 load's values bit for bit, and so
 * after mv_model_weights_f32; nothing held once dropped; a NaN weight (written by Python into a
 * copy of the checkpoint) refused at load with the f32 load's message, which names the tensor and
 * numpy's count and first index. Model: fixtures/model-tiny (bf16). */
#include "mv_model.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* every weight field of m, in the loader's order, into f[] (the count) */
static int fields(mv_model *m, float **f[], int cap)
{
    int n = 0;
#define F(x)                                                                                       \
    if (n < cap) f[n++] = &(x);
    F(m->patch_w) F(m->patch_b) F(m->pos_embed)
    for (int b = 0; b < m->cfg.depth; b++) {
        mv_block *B = &m->blocks[b];
        F(B->norm1_w) F(B->norm1_b) F(B->norm2_w) F(B->norm2_b) F(B->qkv_w) F(B->qkv_b) F(B->proj_w)
        F(B->proj_b) F(B->fc1_w) F(B->fc1_b) F(B->fc2_w) F(B->fc2_b)
    }
    F(m->mnorm_w) F(m->mnorm_b) F(m->mfc1_w) F(m->mfc1_b) F(m->mfc2_w) F(m->mfc2_b)
#undef F
    return n;
}

int main(void)
{
    mv_model *mf = NULL, *ms = NULL;
    mv_err e;
    if (mv_model_load("fixtures/model-tiny", &mf, &e) != MV_OK ||
        mv_model_load_mode("fixtures/model-tiny", MV_WEIGHTS_SOURCE, &ms, &e) != MV_OK) {
        printf("# %s\n", e.msg);
        return 2;
    }
    CHECK(!strcmp(mf->fingerprint, ms->fingerprint) && mf->weights_hash == ms->weights_hash,
          "the same fingerprint either way (%s, %s)", mf->fingerprint, ms->fingerprint);
    float **ff[512], **fs[512];
    int n = fields(mf, ff, 512);
    fields(ms, fs, 512);
    int views = 0, same = 0, nulls = 0;
    size_t values = 0, cnt[512] = {0};
    for (int i = 0; i < n; i++) {
        mv_weight_view v, w;
        nulls += *fs[i] == NULL;
        if (!mv_model_weight(ms, fs[i], &v) || !v.tensor || v.f32 || v.tensor->dtype != MV_ST_BF16 || !v.tensor->name)
            continue;
        views++;
        cnt[i] = v.n;
        mv_model_weight(mf, ff[i], &w);
        float *got = malloc(v.n * sizeof(float));
        if (!got)
            return 2;
        mv_weight_view_f32(&v, got);
        same += w.f32 && !memcmp(got, w.f32, v.n * sizeof(float));
        values += v.n;
        free(got);
    }
    CHECK(n == 3 + 12 * mf->cfg.depth + 6 && views == n && nulls == n && same == n,
          "each of %d weights held as bf16 bytes (%d views, %d NULL pointers) converts to the f32 load's "
          "values bit for bit (%d of them, %zu values)", n, views, nulls, same, values);
    mv_status st = mv_model_weights_f32(ms, &e);
    int after = 0;
    for (int i = 0; i < n; i++) {
        mv_weight_view v;
        after += st == MV_OK && *fs[i] && mv_model_weight(ms, fs[i], &v) && v.f32 == *fs[i] && !v.tensor;
    }
    int eq = 0;
    for (int i = 0; i < n && after == n; i++)
        eq += cnt[i] && !memcmp(*fs[i], *ff[i], cnt[i] * sizeof(float));
    CHECK(st == MV_OK && after == n && eq == n,
          "mv_model_weights_f32: every pointer set to the f32 load's values (%d, %d of %d), the views f32 alone",
          after, eq, n);
    mv_model_drop_weights(ms);
    int held = 0;
    for (int i = 0; i < n; i++) {
        mv_weight_view v;
        held += mv_model_weight(ms, fs[i], &v);
    }
    CHECK(held == 0, "dropped: no weight held (%d)", held);
    mv_model_free(ms);

    /* a NaN at flat index 37 of one tensor, written by Python */
    char dir[] = "/tmp/mvweights-XXXXXX", cmd[2048];
    if (!mkdtemp(dir))
        return 2;
    snprintf(cmd, sizeof cmd,
             "set -e; cp -r fixtures/model-tiny/. '%s/'; /usr/bin/python3 - '%s' <<'PY'\n"
             "import sys, struct\n"
             "sys.path.insert(0, 'test/bats')\n"
             "from st_tool import read, write\n"
             "p = sys.argv[1] + '/model.safetensors'\n"
             "hdr, data = read(p)\n"
             "a, b = hdr['model.visual.blocks.1.attn.qkv.weight']['data_offsets']\n"
             "raw = bytearray(data)\n"
             "for i in (37, 41): struct.pack_into('<H', raw, a + 2 * i, 0xff80)  # bf16 -Inf\n"
             "write(p, hdr, bytes(raw))\n"
             "PY",
             dir, dir);
    CHECK(system(cmd) == 0, "python wrote a checkpoint with two -Inf in one tensor");
    mv_model *bad = NULL;
    mv_err ef, es;
    mv_status sf = mv_model_load(dir, &bad, &ef);
    mv_model_free(bad);
    bad = NULL;
    mv_status ss = mv_model_load_mode(dir, MV_WEIGHTS_SOURCE, &bad, &es);
    mv_model_free(bad);
    CHECK(sf == MV_ERR_MODEL && ss == MV_ERR_MODEL && !strcmp(ef.msg, es.msg) &&
              strstr(es.msg, "tensor 'model.visual.blocks.1.attn.qkv.weight' holds 2 NaN/Inf values (the first "
                             "at flat index 37)"),
          "refused at load either way, with one message: %s", es.msg);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    mv_model_free(mf);
    return UNIT_DONE();
}
