/* test_fingerprint.c - the output fingerprint over what the backend's settings resolved to
 * (mv_model_update_fingerprint with mv_run_settings.settings, include/mv_model.h), with
 * hand-built CUDA settings lines as tower_cuda.cu's make_settings writes them (a CPU-only CI
 * cannot make a CUDA backend): every key but gpu (the device's name) changes the fingerprint,
 * fa3_table included; the name alone does not; CPU lines likewise (gemm, gemm_lib); no settings
 * line gives the fingerprint of the run settings alone. Model: fixtures/model-tiny. */
#include "mv_model.h"
#include "unit.h"

#include <stdio.h>
#include <string.h>

static const char *base_cuda =
    "backend=cuda gpu=NVIDIA_H200 sm=90 sms=132 cublaslt=120800 precision=bf16 attention=fa3 "
    "fa3_table=3 residual=bf16 cudnn_graph=- gelu=epilogue";

/* the fingerprint of m under settings line (NULL: none) */
static void fp_of(mv_model *m, const char *backend, const char *line, char out[17])
{
    mv_run_settings rs = {.out_dtype = 0, .backend = backend, .precision = 0, .settings = line};
    mv_model_update_fingerprint(m, &rs);
    memcpy(out, m->fingerprint, 17);
}

/* base_cuda with key's value replaced by value, into buf */
static void with(const char *key, const char *value, char *buf, size_t cap)
{
    char k[64];
    snprintf(k, sizeof k, " %s=", key);
    const char *at = strstr(base_cuda, k);
    size_t pre = (size_t)(at - base_cuda) + strlen(k);
    const char *rest = at + strlen(k) + strcspn(at + strlen(k), " ");
    snprintf(buf, cap, "%.*s%s%s", (int)pre, base_cuda, value, rest);
}

int main(void)
{
    mv_model *m;
    mv_err e;
    if (mv_model_load("fixtures/model-tiny", &m, &e) != MV_OK) {
        printf("# %s\n", e.msg);
        return 2;
    }
    char f0[17], f1[17], line[512];
    fp_of(m, "cuda", base_cuda, f0);
    with("gpu", "NVIDIA_H100_80GB_HBM3", line, sizeof line);
    fp_of(m, "cuda", line, f1);
    CHECK(!strcmp(f0, f1), "another GPU name with the same sm, sms and libraries: the same fingerprint");
    static const struct {
        const char *key, *value;
    } changed[] = {{"sm", "100"}, {"sms", "114"}, {"cublaslt", "120900"}, {"precision", "tf32"},
                   {"attention", "cudnn-9.10.2"}, {"fa3_table", "4"}, {"residual", "f32"},
                   {"cudnn_graph", "ragged"}, {"gelu", "kernel"}};
    for (size_t i = 0; i < sizeof changed / sizeof changed[0]; i++) {
        with(changed[i].key, changed[i].value, line, sizeof line);
        fp_of(m, "cuda", line, f1);
        CHECK(strcmp(f0, f1) != 0, "%s=%s changes the fingerprint (%s vs %s)", changed[i].key,
              changed[i].value, f0, f1);
    }
    char c0[17], c1[17], c2[17], none[17];
    fp_of(m, "cpu", "backend=cpu gemm=f32 gemm_lib=oneDNN_3.0_f32_(brg:avx512_core)", c0);
    fp_of(m, "cpu", "backend=cpu gemm=bf16x6 gemm_lib=oneDNN_3.0_f32_(brg:avx512_core)", c1);
    fp_of(m, "cpu", "backend=cpu gemm=f32 gemm_lib=OpenBLAS_0.3.21_Haswell", c2);
    fp_of(m, "cpu", NULL, none);
    CHECK(strcmp(c0, c1) && strcmp(c0, c2) && strcmp(c1, c2) && strcmp(c0, none),
          "CPU: --cpu-gemm's resolution and the GEMM library each change it; no line differs too");
    char a[17], b[17];
    fp_of(m, "cpu", "backend=cpu gemm=f32 gemm_lib=x", a);
    fp_of(m, "cpu", "backend=cpu gemm=f32g emm_lib=x", b);
    CHECK(strcmp(a, b) != 0, "pairs are hashed with their lengths: moving a space changes it");
    CHECK(!mv_fingerprint_hashes_key("gpu") && mv_fingerprint_hashes_key("fa3_table") &&
              mv_fingerprint_hashes_key("some_future_key"),
          "only gpu is left out; keys the fingerprint does not know are hashed");
    mv_model_free(m);
    return UNIT_DONE();
}
