/* test_backend_settings.c - mv_backend_settings of the CPU backend (include/mv_backend.h), the text
 * an output fingerprint hashes: --cpu-gemm f32 says gemm=f32; auto says bf16x6 exactly where
 * /proc/cpuinfo lists amx_tile and amx_bf16 (the oracle 27-cpu-gemm.bats uses; MV_NO_AMX set
 * in the environment stands for a CPU without them) and f32 elsewhere; bf16x6 says bf16x6 where
 * it is created at all; the line is backend, gemm, gemm_lib in that order, key=value pairs whose
 * values hold no spaces; gemm_lib names the build's library (oneDNN with MV_HAVE_DNNL, else
 * OpenBLAS); two backends with the same options say the same. The CPU backend does not own the
 * model's weights; mv_model_drop_weights frees them and keeps config, fingerprint and hash.
 * Model: fixtures/model-tiny. */
#include "mv_backend.h"
#include "mv_model.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

/* 1 when /proc/cpuinfo's flags list both words */
static int cpuinfo_has_amx(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    int tile = 0, bf16 = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5))
            continue;
        for (char *t = strtok(line, " \t\n"); t; t = strtok(NULL, " \t\n")) {
            tile |= !strcmp(t, "amx_tile");
            bf16 |= !strcmp(t, "amx_bf16");
        }
        break;
    }
    if (f)
        fclose(f);
    return tile && bf16;
}

/* the value of key in settings text s (into v), or -1 */
static int value_of(const char *s, const char *key, char *v, size_t n)
{
    size_t kl = strlen(key);
    for (const char *p = s; p && *p; p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL)
        if (!strncmp(p, key, kl) && p[kl] == '=') {
            size_t l = strcspn(p + kl + 1, " ");
            snprintf(v, n, "%.*s", (int)(l < n ? l : n - 1), p + kl + 1);
            return 0;
        }
    return -1;
}

/* tokens of s are key=value with the keys in order, no empty value */
static int well_formed(const char *s, const char *const *keys, int nk)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    int k = 0;
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " "), k++) {
        char *eq = strchr(t, '=');
        if (k >= nk || !eq || eq[1] == 0 || (size_t)(eq - t) != strlen(keys[k]) || strncmp(t, keys[k], eq - t))
            return 0;
    }
    return k == nk;
}

static void check_mode(const mv_model *m, mv_cpu_gemm mode, const char *mode_name, int amx)
{
    mv_backend_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 1;
    o.cpu_gemm = mode;
    mv_backend *b = NULL, *b2 = NULL;
    mv_err e;
    mv_status st = mv_backend_cpu_create(m, &o, &b, &e);
    if (mode == MV_CPU_GEMM_BF16X6 && !amx) {
        CHECK(st == MV_ERR_UNSUPPORTED, "--cpu-gemm bf16x6 without AMX: refused (%s)", st ? e.msg : "created");
        if (b)
            b->destroy(b);
        return;
    }
    CHECK(st == MV_OK, "cpu backend, --cpu-gemm %s: %s", mode_name, st ? e.msg : "created");
    if (st)
        return;
    const char *s = mv_backend_settings(b);
    static const char *const keys[] = {"backend", "gemm", "gemm_lib"};
    char gemm[32] = "", lib[256] = "";
    const int wf = s && well_formed(s, keys, 3);
    value_of(s ? s : "", "gemm", gemm, sizeof gemm);
    value_of(s ? s : "", "gemm_lib", lib, sizeof lib);
    const char *want = mode == MV_CPU_GEMM_F32 ? "f32" : mode == MV_CPU_GEMM_BF16X6 || amx ? "bf16x6" : "f32";
    CHECK(wf && !strncmp(s, "backend=cpu ", 12) && !strcmp(gemm, want),
          "--cpu-gemm %s on a CPU %s AMX: \"%s\" (gemm %s, want %s)", mode_name, amx ? "with" : "without",
          s ? s : "(null)", gemm, want);
    CHECK(strstr(lib, MV_HAVE_DNNL ? "oneDNN" : "OpenBLAS") != NULL, "gemm_lib names the build's library: %s", lib);
    st = mv_backend_cpu_create(m, &o, &b2, &e);
    CHECK(st == MV_OK && !strcmp(mv_backend_settings(b2), s), "a second backend says the same: \"%s\"",
          st ? e.msg : mv_backend_settings(b2));
    if (b2)
        b2->destroy(b2);
    b->destroy(b);
}

int main(void)
{
    mv_model *m = NULL;
    mv_err e;
    if (mv_model_load("fixtures/model-tiny", &m, &e) != MV_OK) {
        CHECK(0, "fixtures/model-tiny loads: %s", e.msg);
        return UNIT_DONE();
    }
    const char *no = getenv("MV_NO_AMX");
    const int amx = cpuinfo_has_amx() && !(no && strcmp(no, "0"));
    printf("# /proc/cpuinfo: %s\n", cpuinfo_has_amx() ? "amx_tile and amx_bf16" : "no AMX");
    check_mode(m, MV_CPU_GEMM_F32, "f32", amx);
    check_mode(m, MV_CPU_GEMM_AUTO, "auto", amx);
    check_mode(m, MV_CPU_GEMM_BF16X6, "bf16x6", amx);
    mv_backend *b = NULL;
    mv_backend_opts o = {.cpu_gemm = MV_CPU_GEMM_F32};
    if (mv_backend_cpu_create(m, &o, &b, &e) == MV_OK) {
        CHECK(!b->own_weights, "the CPU backend reads the model's weights at every forward: it owns none");
        b->destroy(b);
    }
    char fp[17];
    memcpy(fp, m->fingerprint, sizeof fp);
    uint64_t wh = m->weights_hash;
    mv_vision_config cfg = m->cfg;
    mv_model_drop_weights(m);
    int none = !m->patch_w && !m->patch_b && !m->pos_embed && !m->mnorm_w && !m->mfc1_w && !m->mfc2_b;
    for (int i = 0; i < cfg.depth; i++)
        none &= !m->blocks[i].qkv_w && !m->blocks[i].norm1_w && !m->blocks[i].fc2_b;
    CHECK(none, "mv_model_drop_weights: every weight pointer is NULL");
    CHECK(!memcmp(fp, m->fingerprint, sizeof fp) && wh == m->weights_hash && !memcmp(&cfg, &m->cfg, sizeof cfg),
          "and the config, fingerprint %s and weights hash stay", m->fingerprint);
    mv_model_free(m);
    return UNIT_DONE();
}
