/* test_run_options.c - mv_run_unused_options (include/mv_run.h), the list behind the line a run
 * prints when it is given options its backend does not use: from main.c's defaults nothing is
 * named; each CUDA-only option given alone is named for the CPU backend and never for the CUDA
 * one, each CPU-tower option alone for the CUDA backend and never for the CPU one; options both
 * use (--jobs, --writers, --batch-tokens, --precision) for neither; --inflight and --devices
 * not where the CPU test devices (fake > 1) take them; several join with ", " in a fixed order;
 * a short buffer is cut, NUL-terminated, and the count stays. That the named options change no
 * output byte is shown elsewhere: 35-cli.bats (the CPU backend, cmp against a run without them)
 * and test/cuda/test_cuda_ops (the CUDA tower's bits and settings). */
#include <string.h>

#include "mv_run.h"
#include "unit.h"

static void defaults(mv_run_opts *o) /* as src/cli/main.c's */
{
    memset(o, 0, sizeof *o);
    o->bopts.precision = MV_PREC_BF16;
    o->bopts.cpu_gemm = MV_CPU_GEMM_AUTO;
}

int main(void)
{
    mv_run_opts o;
    char buf[128];
    defaults(&o);
    CHECK(mv_run_unused_options(&o, 0, 1, buf, sizeof buf) == 0 && !buf[0] &&
              mv_run_unused_options(&o, 1, 1, buf, sizeof buf) == 0 && !buf[0],
          "the defaults: nothing named for either backend");

    /* each option alone: k-th of the table, its name, which backend ignores it (1: the CPU one) */
    static const struct {
        const char *name;
        int cuda_only;
    } opt[] = {{"--inflight", 1},      {"--devices", 1}, {"--gpu", 1},      {"--attention", 1},
               {"--cuda-residual", 1}, {"--cudnn-graph", 1}, {"--threads", 0}, {"--cpu-gemm", 0},
               {"--jobs", -1},         {"--writers", -1}, {"--batch-tokens", -1}, {"--precision", -1}};
    const int n_opt = (int)(sizeof opt / sizeof opt[0]);
    for (int k = 0; k < n_opt; k++) {
        defaults(&o);
        switch (k) {
        case 0: o.inflight = 3; break;
        case 1: o.n_devices = 1, o.devices[0] = 0; break;
        case 2: o.bopts.device = 1; break;
        case 3: o.bopts.attention = MV_ATTN_CUDNN; break;
        case 4: o.bopts.residual = MV_RESIDUAL_BF16; break;
        case 5: o.bopts.cudnn_graph = MV_CUDNN_GRAPH_RAGGED; break;
        case 6: o.bopts.threads = 3; break;
        case 7: o.bopts.cpu_gemm = MV_CPU_GEMM_F32; break;
        case 8: o.jobs = 3; break;
        case 9: o.writers = 3; break;
        case 10: o.bopts.batch_tokens = 4096; break;
        default: o.bopts.precision = MV_PREC_F32; break;
        }
        char cpu[128], cuda[128];
        int ncpu = mv_run_unused_options(&o, 0, 1, cpu, sizeof cpu);
        int ncuda = mv_run_unused_options(&o, 1, 1, cuda, sizeof cuda);
        if (opt[k].cuda_only == 1)
            CHECK(ncpu == 1 && !strcmp(cpu, opt[k].name) && ncuda == 0 && !cuda[0],
                  "%s alone: named for the CPU backend (\"%s\"), not for the CUDA one (\"%s\")", opt[k].name, cpu,
                  cuda);
        else if (opt[k].cuda_only == 0)
            CHECK(ncuda == 1 && !strcmp(cuda, opt[k].name) && ncpu == 0 && !cpu[0],
                  "%s alone: named for the CUDA backend (\"%s\"), not for the CPU one (\"%s\")", opt[k].name, cuda,
                  cpu);
        else
            CHECK(ncpu == 0 && ncuda == 0, "%s alone: both backends use it, neither names it (\"%s\", \"%s\")",
                  opt[k].name, cpu, cuda);
    }

    defaults(&o);
    o.inflight = 3;
    o.n_devices = 2;
    o.bopts.attention = MV_ATTN_FA3;
    CHECK(mv_run_unused_options(&o, 0, 2, buf, sizeof buf) == 1 && !strcmp(buf, "--attention"),
          "the CPU test devices (fake 2) take --inflight and --devices: only \"%s\" named", buf);
    CHECK(mv_run_unused_options(&o, 0, 1, buf, sizeof buf) == 3 && !strcmp(buf, "--inflight, --devices, --attention"),
          "three CUDA options for the CPU backend, joined in order: \"%s\"", buf);
    defaults(&o);
    o.bopts.threads = 2;
    o.bopts.cpu_gemm = MV_CPU_GEMM_BF16X6;
    CHECK(mv_run_unused_options(&o, 1, 1, buf, sizeof buf) == 2 && !strcmp(buf, "--threads, --cpu-gemm"),
          "both CPU-tower options for the CUDA backend: \"%s\"", buf);
    char small[8];
    memset(small, 'x', sizeof small);
    CHECK(mv_run_unused_options(&o, 1, 1, small, sizeof small) == 2 && memchr(small, 0, sizeof small) &&
              !strncmp(small, "--threa", 7),
          "a short buffer: cut and terminated (\"%s\"), the count stays 2", small);
    return UNIT_DONE();
}
