/* run.c - one mvembed run: load the model, apply the command line's preprocessing overrides,
 * make the backends (one per GPU, or the CPU), choose the shard, then hand over to the pipeline
 * (pipeline.c) and write the run record (run_record.c), or, for parity work, run the tower alone
 * on given pixel_values (--pixels/--grid).
 * Decides nothing about the process: returns a status and counts (mv_run.h); main.c picks the
 * exit status.
 */
#include "mv_run.h"

#include "mv_item.h"
#include "mv_manifest.h"
#include "mv_names.h"
#include "mv_output.h"
#include "mv_pipeline.h"
#include "mv_plan.h"
#include "mv_pool.h"
#include "mv_preprocess.h"
#include "mv_run_record.h"
#include "mv_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The manifest's model fingerprint: weights, preprocessing and the settings that change an
 * output's bytes, with the backend that computes it and what its settings resolved to here. */
static void fingerprint(const mv_run_opts *o, mv_model *m, const mv_backend *be)
{
    mv_run_settings rs = {.num_frames = o->num_frames, .out_dtype = (int)o->out_dtype,
                          .backend = be->name, .precision = (int)o->bopts.precision, .pool = o->pool,
                          .settings = mv_backend_settings(be)};
    mv_model_update_fingerprint(m, &rs);
}

/* A lower bound over its upper bound, each named as its option with its value and, when not
 * given, where it came from: "--min-frames 4 (the model's default) must not exceed --max-frames 2". */
static mv_status clash(mv_err *e, const char *what, const char *pre, long long lo, long long lo_given,
                       long long hi, long long hi_given)
{
    return mv_fail(e, MV_ERR_USAGE, "--%smin-%s %lld%s must not exceed --%smax-%s %lld%s", pre, what, lo,
                   lo_given ? "" : " (the model's default)", pre, what, hi,
                   hi_given ? "" : " (the model's default)");
}

static mv_status apply_overrides(const mv_run_opts *o, mv_model *m, mv_err *e)
{
    mv_preproc_config *pp = &m->pp;
    if (o->min_pixels)
        pp->min_pixels = o->min_pixels;
    if (o->max_pixels)
        pp->max_pixels = o->max_pixels;
    if (o->video_min_pixels)
        pp->video_min_pixels = o->video_min_pixels;
    if (o->video_max_pixels)
        pp->video_max_pixels = o->video_max_pixels;
    if (o->fps > 0)
        pp->fps = o->fps;
    if (o->min_frames)
        pp->min_frames = o->min_frames;
    if (o->max_frames)
        pp->max_frames = o->max_frames;
    if (o->video_frame_cap) {
        pp->video_frame_cap = o->video_frame_cap > 0;
        pp->video_frame_cap_src = MV_CAP_FROM_OPTION;
    }
    if (o->max_video_tokens)
        pp->max_video_tokens = o->max_video_tokens;
    if (pp->min_pixels > pp->max_pixels)
        return clash(e, "pixels", "", pp->min_pixels, o->min_pixels, pp->max_pixels, o->max_pixels);
    if (pp->video_min_pixels > pp->video_max_pixels)
        return clash(e, "pixels", "video-", pp->video_min_pixels, o->video_min_pixels,
                     pp->video_max_pixels, o->video_max_pixels);
    if (pp->min_frames > pp->max_frames)
        return clash(e, "frames", "", pp->min_frames, o->min_frames, pp->max_frames, o->max_frames);
    return MV_OK; /* the fingerprint follows once the backend is known (mv_run) */
}

static int parse_grid(const char *s, int32_t **grid, int *n)
{
    int cap = 8, cnt = 0;
    int32_t *g = malloc(cap * 3 * sizeof *g);
    const char *p = s;
    while (g && *p) {
        int t, h, w, used;
        if (sscanf(p, "%d,%d,%d%n", &t, &h, &w, &used) != 3) {
            free(g);
            return -1;
        }
        if (cnt == cap) {
            int32_t *ng = realloc(g, (cap *= 2) * 3 * sizeof *g);
            if (!ng) {
                free(g);
                return -1;
            }
            g = ng;
        }
        g[3 * cnt] = t;
        g[3 * cnt + 1] = h;
        g[3 * cnt + 2] = w;
        cnt++;
        p += used;
        if (*p == ';')
            p++;
        else if (*p) {
            free(g);
            return -1;
        }
    }
    if (!g || !cnt) {
        free(g);
        return -1;
    }
    *grid = g;
    *n = cnt;
    return 0;
}

/* Tower-only entry: embeds given pixel_values. */
static mv_status run_pixels(const mv_run_opts *o, mv_model *m, mv_backend *be, mv_err *e)
{
    int32_t *grid;
    int n;
    if (parse_grid(o->grid ? o->grid : "", &grid, &n)) {
        return mv_fail(e, MV_ERR_USAGE, "--grid must be T,H,W[;T,H,W...] (in patches)");
    }
    mv_array a;
    mv_status st = MV_ERR_INTERNAL;
    float *out = NULL;
    if ((st = mv_npy_load_f32(o->pixels, &a, e)))
        goto done;
    int64_t N;
    if ((st = mv_grid_check(&m->cfg, grid, n, &N, e)))
        goto done_a;
    if (a.ndim != 2 || a.shape[0] != N || a.shape[1] != m->cfg.patch_dim) {
        st = mv_fail(e, MV_ERR_USAGE, "%s: shape must be [%lld, %d] for grid %s", o->pixels, (long long)N,
                m->cfg.patch_dim, o->grid);
        goto done_a;
    }
    int64_t rows = N / (m->cfg.merge * m->cfg.merge);
    out = malloc(rows * m->cfg.out_hidden * sizeof(float));
    if (!out) {
        st = mv_fail(e, MV_ERR_NOMEM, "out of memory");
        goto done_a;
    }
    const char *base = strrchr(o->pixels, '/');
    base = base ? base + 1 : o->pixels;
    char name[1024];
    snprintf(name, sizeof name, "%s", base);
    size_t nl = strlen(name);
    if (nl > 4 && !strcmp(name + nl - 4, ".npy"))
        name[nl - 4] = 0;
    mv_dump_ctx dc = {""};
    if (o->dump_dir) {
        snprintf(dc.dir, sizeof dc.dir, "%s/%s", o->dump_dir, name);
        if ((st = mv_mkdirs(dc.dir, e)))
            goto done_a;
    }
    mv_forward_req req = {.pixels = a.data, .grid = grid, .n_entries = n, .out = out,
                          .dump = o->dump_dir ? mv_dump_stage : NULL, .dump_ud = &dc};
    if ((st = be->forward(be, &req, NULL, e)))
        goto done_a;
    char final_path[8400];
    if (o->out_dir) {
        mv_output_writer *w; /* one output: its own writer, which sweeps its directory */
        if (!(st = mv_output_writer_new(NULL, &w, e)))
            st = mv_output_write(w, o->out_dir, name,
                                 mv_output_dtype(o->out_dtype, out, (size_t)rows * m->cfg.out_hidden),
                                 rows, m->cfg.out_hidden, out,
                                 o->zstd_level, final_path, sizeof final_path, NULL, e);
        mv_output_writer_free(w);
        if (st)
            goto done_a;
    }
    if (!o->quiet && o->out_dir)
        fprintf(stderr, "mvembed: %s -> %s [%lld x %d]\n", o->pixels, final_path, (long long)rows,
                m->cfg.out_hidden);
    st = MV_OK;
done_a:
    mv_array_free(&a);
done:
    free(out);
    free(grid);
    return st;
}

/* Test hook o->test_cpu_devices = N (2..MV_TEST_CPU_DEVICES_MAX): the CPU backend as N "devices"
 * of --inflight (default 2) backends each, laid out as CUDA's below (device i's k-th forward in
 * flight at be[k * N + i]), so that the pipeline's many-device scheduling (a tower thread per
 * backend, per-device busy time, outputs and the manifest from many threads at once) runs and is
 * tested where there is no GPU (test/bats/37-fake-devices.bats, scripts/tsan-check.sh). Every CPU
 * backend is a whole tower of its own; an input that is its own forward gets the same bytes
 * whichever runs it. 0: one backend. */
static mv_status test_cpu_devices(const mv_run_opts *o, int *n, mv_err *e)
{
    int k = o->test_cpu_devices;
    *n = k ? k : 1;
    if (k < 0 || k == 1 || k > MV_TEST_CPU_DEVICES_MAX)
        return mv_fail(e, MV_ERR_USAGE, "test_cpu_devices %d: a test hook; 0 or 2..%d", o->test_cpu_devices,
                       MV_TEST_CPU_DEVICES_MAX);
    return MV_OK;
}

int mv_run_unused_options(const mv_run_opts *o, int cuda, int fake, char *buf, size_t n)
{
    const mv_backend_opts *b = &o->bopts;
    const char *set[6];
    int k = 0;
    if (cuda) {
        if (b->threads > 0)
            set[k++] = "--threads";
        if (b->cpu_gemm != MV_CPU_GEMM_AUTO)
            set[k++] = "--cpu-gemm";
    } else {
        if (o->inflight > 0 && fake <= 1)
            set[k++] = "--inflight";
        if (o->n_devices > 0 && fake <= 1)
            set[k++] = "--devices";
        if (b->device != 0)
            set[k++] = "--gpu";
        if (b->attention != MV_ATTN_AUTO)
            set[k++] = "--attention";
        if (b->residual != MV_RESIDUAL_F32)
            set[k++] = "--cuda-residual";
        if (b->cudnn_graph != MV_CUDNN_GRAPH_AUTO)
            set[k++] = "--cudnn-graph";
    }
    if (n)
        buf[0] = 0;
    for (int i = 0; i < k && n; i++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", i ? ", " : "", set[i]);
    return k;
}

/* One line naming the options given that the backend the run uses does not use (none of them
 * changes its bytes), unless -q (mv_run_unused_options). */
static void note_unused_options(const mv_run_opts *o, int cuda, int fake)
{
    char list[128];
    int k = mv_run_unused_options(o, cuda, fake, list, sizeof list);
    if (k && !o->quiet)
        fprintf(stderr, "mvembed: the %s backend does not use %s (%s option%s)\n", cuda ? "CUDA" : "CPU", list,
                cuda ? "CPU" : "CUDA", k > 1 ? "s" : "");
}

/* The backends, and the number of devices they are spread over (*n_devp: be[i] on i % n). */
static mv_status make_backends(const mv_run_opts *o, mv_model *m, mv_backend ***bep, int *n_bep,
                               int *n_devp, mv_err *e)
{
    *n_devp = 1;
    int use_cuda = o->device == MV_DEV_CUDA || (o->device == MV_DEV_AUTO && mv_cuda_available());
    /* CUDA: `inflight` backends per GPU, each with its own stream, buffers and tower thread, so
     * the GPU computes one forward while another thread packs, uploads or copies out the next */
    int nd = o->n_devices > 0 ? o->n_devices : 1, per = o->inflight > 0 ? o->inflight : 2;
    int fake = 1;
    mv_status hs = test_cpu_devices(o, &fake, e);
    if (hs)
        return hs;
    if (use_cuda && nd * per > MV_PIPELINE_MAX_TOWERS) /* a tower thread per backend */
        return mv_fail(e, MV_ERR_USAGE, "%d GPUs x --inflight %d = %d forwards in flight: at most %d", nd, per,
                       nd * per, MV_PIPELINE_MAX_TOWERS);
    mv_backend **be = calloc((size_t)(nd > fake ? nd : fake) * per, sizeof *be);
    int n_be = 0;
    if (!be)
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    *bep = be;
    if (use_cuda) {
        mv_status st = MV_OK;
        for (int k = 0; k < per && !st; k++)
            for (int i = 0; i < nd && !st; i++) {
                mv_backend_opts bo = o->bopts;
                if (o->n_devices > 0)
                    bo.device = o->devices[i];
                bo.weights_from = k > 0 ? be[i] : NULL; /* the device's first backend: one upload */
                double tb = mv_now();
                st = mv_backend_cuda_create(m, &bo, &be[n_be], e);
                if (!st && o->verbose)
                    fprintf(stderr, "mvembed: cuda: device %d: backend %d made in %.2fs\n", bo.device, n_be,
                            mv_now() - tb);
                if (!st)
                    n_be++;
            }
        if (!st) {
            if (!o->quiet)
                fprintf(stderr, "mvembed: using the CUDA backend on %d GPU%s, %d forward%s in flight each\n",
                        nd, nd > 1 ? "s" : "", per, per > 1 ? "s" : "");
            note_unused_options(o, 1, fake);
            *n_bep = n_be;
            *n_devp = nd;
            return MV_OK;
        }
        if (o->device == MV_DEV_CUDA) {
            *n_bep = n_be; /* the caller destroys those made */
            return st;
        }
        for (int i = 0; i < n_be; i++)
            be[i]->destroy(be[i]);
        n_be = 0;
        if (!o->quiet)
            fprintf(stderr, "mvembed: CUDA backend unavailable (%s); using the CPU\n", e->msg);
    } else if (o->device == MV_DEV_AUTO && !o->quiet) {
        fprintf(stderr, "mvembed: no usable GPU; using the CPU backend\n");
    }
    note_unused_options(o, 0, fake);
    const int n_cpu = fake > 1 ? fake * per : 1;
    mv_status st = mv_model_weights_f32(m, e); /* the CPU tower reads f32 weights */
    for (; n_be < n_cpu && !st; n_be++)
        if ((st = mv_backend_cpu_create(m, &o->bopts, &be[n_be], e)))
            break;
    if (!st && fake > 1) {
        *n_devp = fake;
        if (!o->quiet)
            fprintf(stderr, "mvembed: using the CPU backend as %d test devices (MVEMBED_TEST_CPU_DEVICES), %d "
                    "forward%s in flight each\n", fake, per, per > 1 ? "s" : "");
    }
    *n_bep = n_be;
    return st;
}


static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)(ts.tv_nsec / 1000) * 1e-6;
}

/* Writes the run record once the pipeline ran (st: its status, e its error): after a fatal
 * error too, when OUT takes it (that error stays the run's; the record's own failure then goes
 * to res->after_fatal, told after it); then, for a run that went through every input it owns,
 * the completion marker. */
static mv_status write_run_record(mv_run_info *ri, mv_run_result *res, mv_status st, mv_err *e)
{
    const mv_run_opts *o = ri->o;
    struct stat sb; /* OUT not a directory (a file, a dangling link): the run's error says so */
    if (stat(o->out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(o->out_dir, W_OK) != 0)
        return st;
    ri->t_end = mv_now();
    ri->fatal = st ? e->msg : NULL;
    mv_err re;
    char path[4200];
    mv_status rs = mv_run_record_write(ri, path, sizeof path, &re);
    if (rs && st) { /* the run's own error is the one returned, and told first (main.c) */
        snprintf(res->after_fatal, sizeof res->after_fatal, "%s", re.msg);
        return st;
    }
    if (rs) {
        *e = re;
        return rs;
    }
    if (o->verbose)
        fprintf(stderr, "mvembed: run record %s\n", path);
    /* the manifest was synced when it closed, the outputs before their lines: the marker last */
    if (!st && mv_run_marks(ri)) {
        if ((st = mv_run_marker_write(ri, path, sizeof path, e)))
            return st;
        if (o->verbose)
            fprintf(stderr, "mvembed: completion marker %s\n", path);
    } else if (!st && mv_run_complete(ri) && !o->quiet)
        fprintf(stderr, "mvembed: no completion marker: %d other run%s still writ%s into %s (%s); the "
                "last run to get through writes it\n", ri->res->others_live, ri->res->others_live > 1 ? "s" : "",
                ri->res->others_live > 1 ? "e" : "es", o->out_dir, ri->res->live_other);
    return st;
}

/* The CUDA driver and the run's GPUs' contexts, started beside the model's load (prewarm_start) */
static void *prewarm_main(void *arg)
{
    const mv_run_opts *o = arg;
    for (int i = 0; i < (o->n_devices > 0 ? o->n_devices : 1); i++)
        mv_cuda_prewarm(o->n_devices > 0 ? o->devices[i] : o->bopts.device);
    return NULL;
}

/* 1 when a thread now starts the CUDA driver for a run that may use it (*t: join it) */
static int prewarm_start(const mv_run_opts *o, pthread_t *t)
{
    return o->device != MV_DEV_CPU && mv_thread_create(t, prewarm_main, (void *)o) == 0;
}

mv_status mv_run(const mv_run_opts *o, mv_run_result *res, mv_err *e)
{
    memset(res, 0, sizeof *res);
    mv_model *m = NULL;
    mv_backend **be = NULL;
    int n_be = 0;
    double tl = mv_now();
    pthread_t pw;
    int prewarm = prewarm_start(o, &pw);
    char dir[4096]; /* o->model_dir itself, or its snapshot in the Hugging Face cache */
    mv_status st = mv_hub_resolve(o->model_dir, &o->hub, dir, sizeof dir, e);
    /* a run that may use CUDA keeps the checkpoint's bytes until its backends have copied
     * them (f32 is made only for a CPU backend: make_backends) */
    if (!st)
        st = mv_model_load_mode(dir, o->device == MV_DEV_CPU ? MV_WEIGHTS_F32 : MV_WEIGHTS_SOURCE, &m, e);
    if (prewarm)
        pthread_join(pw, NULL);
    if (st)
        return st;
    tl = mv_now() - tl;
    int n_dev = 1;
    if ((st = apply_overrides(o, m, e)) || (st = make_backends(o, m, &be, &n_be, &n_dev, e)))
        goto out;
    /* backends with their own copy of the weights (CUDA): the host's copy (the checkpoint's
     * mapped bytes, or 1.8 GB of f32 for the 27B layout) is not kept for the whole run */
    int own = n_be > 0;
    for (int i = 0; i < n_be; i++)
        own &= be[i]->own_weights;
    if (own)
        mv_model_drop_weights(m);
    /* --out-dtype auto: f16 for the bf16 tower's tokens (per output: f32 where one is past f16's
     * range, mv_output_dtype); an f32 tower or pooled means get f32, whose precision f16 would not
     * keep (the run's fingerprint then stays f32's) */
    mv_run_opts ro = *o;
    if (ro.out_dtype == MV_DT_AUTO && (!be[0]->out_bf16 || o->pool != MV_POOL_NONE))
        ro.out_dtype = MV_DT_F32;
    o = &ro;
    fingerprint(o, m, be[0]); /* the backend that really runs (AUTO may fall back to the CPU) */
    if (o->verbose) {
        char rule[512];
        mv_video_rule_describe(&m->pp, rule, sizeof rule);
        fprintf(stderr, "mvembed: model %s: depth %d hidden %d heads %d out %d (%.2fs), fingerprint %s\n"
                "mvembed: %s\n", o->model_dir, m->cfg.depth, m->cfg.hidden, m->cfg.heads,
                m->cfg.out_hidden, tl, m->fingerprint, rule);
    }
    if (o->pixels) {
        st = run_pixels(o, m, be[0], e);
        if (!st)
            res->ok = 1;
        goto out;
    }
    /* make_backends puts one backend per device first, then the next forward in flight of each
     * (n_dev <= n_be: every device has all its forwards in flight) */
    int shard_k, shard_n;
    if ((st = mv_shard_resolve(o, &shard_k, &shard_n, e)))
        goto out;
    mv_run_info ri = {.o = o, .model_dir = dir, .fingerprint = m->fingerprint,
                      .settings = mv_backend_settings(be[0]), .shard_k = shard_k, .shard_n = shard_n,
                      .t_start = mv_now(), .started_at = wall_now(), .res = res};
    char mpath[4200];
    struct stat sb;
    mv_name_manifest(mpath, sizeof mpath, o->out_dir, shard_k, shard_n);
    ri.manifest_start = stat(mpath, &sb) == 0 ? (int64_t)sb.st_size : 0;
    st = mv_pipeline_run(o, m, be, n_be, n_dev, shard_k, shard_n, res, e);
    st = write_run_record(&ri, res, st, e);
out:;
    double td = mv_now();
    for (int i = 0; i < n_be; i++)
        be[i]->destroy(be[i]);
    if (n_be && o->verbose)
        fprintf(stderr, "mvembed: backends closed in %.2fs\n", mv_now() - td);
    free(be);
    mv_model_free(m);
    return st;
}
