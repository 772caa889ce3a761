/* model.c - loads a Qwen3.5 vision tower from a checkpoint directory (see mv_model.h), and the
 * output fingerprint.
 *
 * The configuration comes from model_config.c. Weights: model.safetensors, or shards listed in
 * model.safetensors.index.json; only shards holding vision tensors are opened. The key prefix is
 * detected among "model.visual.", "visual." and none. Loading takes two passes: the first checks
 * every tensor's presence and shape against the config before any weight memory is taken; the
 * second places them in one arena, where they are converted to f32 over threads, refusing
 * NaN/Inf weights. Not here: the JSON files (model_config.c), resolving a hub id (hub.c).
 */
#include "model_int.h"
#include "mv_safetensors.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A tensor taken by the loader: where it is in the checkpoint, and the weight field it fills */
typedef struct {
    const mv_st_file *f;
    const mv_st_tensor *t;
    float **field; /* its pointer in mv_model (set when the weights are f32) */
    float *dst;    /* its floats in the arena; NULL while the weights are the checkpoint's bytes */
    size_t n;
} conv_job;

typedef struct {
    mv_st_file *files; /* mapped: while the weights are the checkpoint's bytes */
    int n_files;
    float *arena;
    conv_job *jobs; /* every weight, in the order taken (MV_WEIGHTS_SOURCE: for mv_model_weight) */
    int n_jobs;
} model_storage;


/* Lists the weight files: the index's shards that hold vision tensors, or model.safetensors. */
static mv_status list_shards(const char *dir, char ***files, int *n, mv_err *e)
{
    char path[4200];
    *files = NULL;
    *n = 0;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (access(path, F_OK) == 0) {
        mv_status st;
        json_t *j = mv_model_read_json(path, e, &st);
        if (!j)
            return st;
        json_t *wm = json_object_get(j, "weight_map");
        if (!json_is_object(wm)) {
            json_decref(j);
            return mv_fail(e, MV_ERR_MODEL, "%s: no \"weight_map\" object", path);
        }
        char **list = calloc(json_object_size(wm) + 1, sizeof *list);
        int cnt = 0;
        const char *key;
        json_t *val;
        json_object_foreach(wm, key, val) {
            if (!json_is_string(val)) {
                for (int i = 0; i < cnt; i++)
                    free(list[i]);
                free(list);
                char esc[256]; /* key lives in j: the message first */
                mv_fail(e, MV_ERR_MODEL, "%s: weight_map entry '%s' is not a file name", path,
                        mv_escape(key, esc, sizeof esc));
                json_decref(j);
                return MV_ERR_MODEL;
            }
            /* vision tensors only: the language model's shards are never opened */
            int vision = !strncmp(key, "model.visual.", 13) || !strncmp(key, "visual.", 7) ||
                         !strncmp(key, "patch_embed.", 12) || !strncmp(key, "blocks.", 7) ||
                         !strncmp(key, "merger.", 7) || !strncmp(key, "pos_embed.", 10);
            if (!vision)
                continue;
            const char *fn = json_string_value(val);
            if (strchr(fn, '/') || !strcmp(fn, "..")) {
                for (int i = 0; i < cnt; i++)
                    free(list[i]);
                free(list);
                char esc[256]; /* fn lives in j: the message first */
                mv_fail(e, MV_ERR_MODEL, "%s: shard name '%s' must be a plain file name", path,
                        mv_escape(fn, esc, sizeof esc));
                json_decref(j);
                return MV_ERR_MODEL;
            }
            int seen = 0;
            for (int i = 0; i < cnt && !seen; i++)
                seen = !strcmp(list[i], fn);
            if (!seen)
                list[cnt++] = strdup(fn);
        }
        json_decref(j);
        if (!cnt) {
            free(list);
            return mv_fail(e, MV_ERR_MODEL, "%s: no vision tensors in the weight map", path);
        }
        *files = list;
        *n = cnt;
        return MV_OK;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (access(path, F_OK) != 0)
        return mv_fail(e, MV_ERR_MODEL, "%s: no model.safetensors or model.safetensors.index.json",
                       dir);
    *files = calloc(2, sizeof **files);
    (*files)[0] = strdup("model.safetensors");
    *n = 1;
    return MV_OK;
}

typedef struct {
    model_storage *s;
    const char *prefix;
    const char *dir;
    float *next; /* arena cursor */
    uint64_t hash;
    int check_only; /* first pass: presence and shapes only, counting the floats needed */
    int source;     /* second pass, MV_WEIGHTS_SOURCE: the tensors are recorded, not placed */
    size_t need;
    conv_job *jobs; /* second pass: the tensors in the order taken */
    int n_jobs, cap_jobs;
} loader;

static uint64_t mix64(uint64_t h, const uint8_t *p, size_t n)
{
    /* 64-bit multiply-xor over 8-byte words (fingerprint only, not cryptographic) */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* Finds tensor prefix+name in the open shards, checks its shape and dtype, and records it (with
 * its field, out), placed in the arena unless L->source (convert_jobs converts it there). */
static mv_status take(loader *L, const char *name, int ndim, const int64_t *shape, float **out,
                      mv_err *e)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", L->prefix, name);
    for (int i = 0; i < L->s->n_files; i++) {
        const mv_st_tensor *t = mv_st_find(&L->s->files[i], full);
        if (!t)
            continue;
        int ok = t->ndim == ndim;
        for (int d = 0; ok && d < ndim; d++)
            ok = t->shape[d] == shape[d];
        if (!ok) {
            char got[128] = "", want[128] = "";
            for (int d = 0; d < t->ndim; d++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "," : "",
                         (long long)t->shape[d]);
            for (int d = 0; d < ndim; d++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? "," : "",
                         (long long)shape[d]);
            return mv_fail(e, MV_ERR_MODEL, "%s: tensor '%s' has shape [%s], config.json implies [%s]",
                           L->s->files[i].path, full, got, want);
        }
        int64_t cnt = 1;
        for (int d = 0; d < ndim; d++)
            cnt *= shape[d];
        L->need += (size_t)cnt;
        if (L->check_only)
            return MV_OK;
        if (t->dtype == MV_ST_OTHER) /* the conversion's own refusal, in tensor order */
            return mv_st_to_f32(&L->s->files[i], t, L->next, e);
        if (L->n_jobs == L->cap_jobs) {
            int cap = L->cap_jobs ? 2 * L->cap_jobs : 64;
            conv_job *j = realloc(L->jobs, (size_t)cap * sizeof *j);
            if (!j)
                return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", L->dir);
            L->jobs = j;
            L->cap_jobs = cap;
        }
        L->jobs[L->n_jobs++] = (conv_job){&L->s->files[i], t, out, L->source ? NULL : L->next, (size_t)cnt};
        if (!L->source) {
            *out = L->next;
            L->next += cnt;
        }
        return MV_OK;
    }
    return mv_fail(e, MV_ERR_MODEL, "%s: missing tensor '%s'", L->dir, full);
}

/* Non-finite values among elements [first, first + n) of a BF16/F16/F32 tensor as stored */
static size_t count_nonfinite_src(const mv_st_tensor *t, size_t first, size_t n)
{
    size_t bad = 0;
    if (t->dtype == MV_ST_F32) {
        for (size_t i = first; i < first + n; i++) {
            uint32_t u;
            memcpy(&u, t->data + 4 * i, 4);
            bad += (u & 0x7f800000u) == 0x7f800000u;
        }
        return bad;
    }
    const uint16_t mask = t->dtype == MV_ST_BF16 ? 0x7f80 : 0x7c00; /* an exponent of all ones */
    for (size_t i = first; i < first + n; i++) {
        uint16_t u = (uint16_t)(t->data[2 * i] | t->data[2 * i + 1] << 8);
        bad += (u & mask) == mask;
    }
    return bad;
}

/* Converts the jobs' tensors into their places in the arena (with src, the checkpoint's bytes
 * are only checked), in pieces of CONV_PIECE floats over the OpenMP threads (the arena's first
 * touch, the kernel zeroing its pages, is most of a load's time: 1.8 GB for the 27B tower),
 * while one thread hashes the raw bytes in tensor order for the fingerprint into *hash (NULL: no
 * hash; the same chain as one thread alone). One NaN/Inf weight makes every embedding NaN: each
 * piece is counted as it is converted, and the first tensor in order that holds one is refused.
 * Small models stay on one thread. */
#define CONV_PIECE ((size_t)1 << 20)
static mv_status convert_jobs(const conv_job *jobs, int n_jobs, int src, size_t need, uint64_t *hash,
                              const char *dir, mv_err *e)
{
    size_t np = 0;
    for (int j = 0; j < n_jobs; j++)
        np += (jobs[j].n + CONV_PIECE - 1) / CONV_PIECE;
    struct piece {
        int job;
        size_t first, n, bad;
    } *pc = malloc((np ? np : 1) * sizeof *pc);
    if (!pc)
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory", dir);
    size_t k = 0;
    for (int j = 0; j < n_jobs; j++)
        for (size_t f = 0; f < jobs[j].n; f += CONV_PIECE)
            pc[k++] = (struct piece){j, f, jobs[j].n - f < CONV_PIECE ? jobs[j].n - f : CONV_PIECE, 0};
    uint64_t h = hash ? *hash : 0;
#pragma omp parallel if (need >= 16 * CONV_PIECE && mv_omp_region(0))
    {
#pragma omp single nowait
        for (int j = 0; hash && j < n_jobs; j++)
            h = mix64(h, jobs[j].t->data, jobs[j].t->nbytes);
#pragma omp for schedule(dynamic, 1)
        for (size_t i = 0; i < np; i++) {
            const conv_job *J = &jobs[pc[i].job];
            if (src) {
                pc[i].bad = count_nonfinite_src(J->t, pc[i].first, pc[i].n);
                continue;
            }
            float *d = J->dst + pc[i].first;
            mv_err ignored; /* the dtype was checked when the tensor was taken */
            mv_st_to_f32_range(J->f, J->t, pc[i].first, pc[i].n, d, &ignored);
            pc[i].bad = mv_count_nonfinite(d, pc[i].n);
        }
    }
    if (hash)
        *hash = h;
    mv_status st = MV_OK;
    for (size_t i = 0; i < np && !st; i++) {
        if (!pc[i].bad)
            continue;
        const conv_job *J = &jobs[pc[i].job];
        size_t bad = 0, at = 0;
        for (size_t q = i; q < np && pc[q].job == pc[i].job; q++)
            bad += pc[q].bad;
        while (count_nonfinite_src(J->t, at, 1) == 0)
            at++;
        st = mv_fail(e, MV_ERR_MODEL,
                     "%s: tensor '%s' holds %zu NaN/Inf values (the first at flat index %zu): "
                     "the checkpoint is corrupt", J->f->path, J->t->name, bad, at);
    }
    free(pc);
    return st;
}

/* Takes every tensor of the tower in order: with L->check_only, checks presence and shapes and
 * counts the floats they need (L->need); otherwise places them in the arena for convert_all. */
static mv_status take_all(loader *L, mv_model *m, mv_err *e)
{
    const mv_vision_config *c = &m->cfg;
    int64_t H = c->hidden, I = c->inter, out_w = c->out_hidden;
    int64_t MH = H * c->merge * c->merge; /* merger width 4H */
    mv_block scratch;
    mv_status st;
    int64_t pshape[5] = {H, c->in_ch, c->temporal, c->patch, c->patch};
    int64_t sh_h[1] = {H}, sh_pos[2] = {c->num_pos, H};
    if ((st = take(L, "patch_embed.proj.weight", 5, pshape, &m->patch_w, e)) ||
        (st = take(L, "patch_embed.proj.bias", 1, sh_h, &m->patch_b, e)) ||
        (st = take(L, "pos_embed.weight", 2, sh_pos, &m->pos_embed, e)))
        return st;
    for (int b = 0; b < c->depth; b++) {
        mv_block *B = L->check_only ? &scratch : &m->blocks[b];
        char n[96];
        int64_t s3hh[2] = {3 * H, H}, s3h[1] = {3 * H}, shh[2] = {H, H}, sih[2] = {I, H},
                si[1] = {I}, shi[2] = {H, I};
#define TAKE(field, nm, nd, shp)                                           \
    snprintf(n, sizeof n, "blocks.%d." nm, b);                             \
    if ((st = take(L, n, nd, shp, &B->field, e)))                         \
        return st;
        TAKE(norm1_w, "norm1.weight", 1, sh_h)
        TAKE(norm1_b, "norm1.bias", 1, sh_h)
        TAKE(norm2_w, "norm2.weight", 1, sh_h)
        TAKE(norm2_b, "norm2.bias", 1, sh_h)
        TAKE(qkv_w, "attn.qkv.weight", 2, s3hh)
        TAKE(qkv_b, "attn.qkv.bias", 1, s3h)
        TAKE(proj_w, "attn.proj.weight", 2, shh)
        TAKE(proj_b, "attn.proj.bias", 1, sh_h)
        TAKE(fc1_w, "mlp.linear_fc1.weight", 2, sih)
        TAKE(fc1_b, "mlp.linear_fc1.bias", 1, si)
        TAKE(fc2_w, "mlp.linear_fc2.weight", 2, shi)
        TAKE(fc2_b, "mlp.linear_fc2.bias", 1, sh_h)
#undef TAKE
    }
    int64_t smh[2] = {MH, MH}, smh1[1] = {MH}, slm[2] = {out_w, MH}, sl[1] = {out_w};
    if ((st = take(L, "merger.norm.weight", 1, sh_h, &m->mnorm_w, e)) ||
        (st = take(L, "merger.norm.bias", 1, sh_h, &m->mnorm_b, e)) ||
        (st = take(L, "merger.linear_fc1.weight", 2, smh, &m->mfc1_w, e)) ||
        (st = take(L, "merger.linear_fc1.bias", 1, smh1, &m->mfc1_b, e)) ||
        (st = take(L, "merger.linear_fc2.weight", 2, slm, &m->mfc2_w, e)) ||
        (st = take(L, "merger.linear_fc2.bias", 1, sl, &m->mfc2_b, e)))
        return st;
    return MV_OK;
}

int mv_fingerprint_hashes_key(const char *key) { return strcmp(key, "gpu") != 0; }

/* Mixes in the hashed "key=value" pairs of a backend settings line, each pair with its length so
 * that no two lines of pairs mix alike. */
static uint64_t mix_settings(uint64_t h, const char *line)
{
    for (const char *p = line; *p;) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        const char *eq = memchr(p, '=', n);
        char key[64];
        snprintf(key, sizeof key, "%.*s", eq ? (int)(eq - p) : 0, p);
        if (n && mv_fingerprint_hashes_key(key)) {
            uint64_t len = n;
            h = mix64(h, (const uint8_t *)&len, sizeof len);
            h = mix64(h, (const uint8_t *)p, n);
        }
        p += n;
    }
    return h;
}

void mv_model_update_fingerprint(mv_model *m, const mv_run_settings *rs)
{
    /* everything that changes an output's bytes; each value is hashed as a fixed-width field */
    const mv_preproc_config *pp = &m->pp;
    uint64_t h = m->weights_hash;
    long long ll[4] = {pp->min_pixels, pp->max_pixels, pp->video_min_pixels, pp->video_max_pixels};
    h = mix64(h, (const uint8_t *)ll, sizeof ll);
    h = mix64(h, (const uint8_t *)pp->mean, sizeof pp->mean);
    h = mix64(h, (const uint8_t *)pp->std, sizeof pp->std);
    double dd[2] = {pp->rescale, pp->fps};
    h = mix64(h, (const uint8_t *)dd, sizeof dd);
    int32_t ii[5] = {pp->patch, pp->merge, pp->temporal, pp->min_frames, pp->max_frames};
    h = mix64(h, (const uint8_t *)ii, sizeof ii);
    if (rs) {
        int cuda = rs->backend && strcmp(rs->backend, "cuda") == 0;
        int32_t run[4] = {rs->num_frames, rs->out_dtype, cuda, cuda ? rs->precision : -1};
        h = mix64(h, (const uint8_t *)run, sizeof run);
        if (rs->pool) { /* a pooled vector is another output than the tokens */
            int32_t pool = rs->pool;
            h = mix64(h, (const uint8_t *)&pool, sizeof pool);
        }
    }
    if (rs && rs->settings)
        h = mix_settings(h, rs->settings);
    /* the per-frame cap rule and its token limit, only when on: uncapped runs keep the
     * fingerprint they had before the cap existed (max_video_tokens changes nothing then) */
    if (pp->video_frame_cap) {
        long long cap[2] = {1, pp->max_video_tokens};
        h = mix64(h, (const uint8_t *)cap, sizeof cap);
    }
    snprintf(m->fingerprint, sizeof m->fingerprint, "%016llx", (unsigned long long)h);
}

/* Unmaps the checkpoint's files (the weights are f32 now, or dropped) */
static void close_files(model_storage *s)
{
    for (int i = 0; i < s->n_files; i++)
        mv_st_close(&s->files[i]);
    s->n_files = 0;
    free(s->jobs);
    s->jobs = NULL;
    s->n_jobs = 0;
}

int mv_model_weight(const mv_model *m, float *const *field, mv_weight_view *v)
{
    const model_storage *s = m->storage;
    memset(v, 0, sizeof *v);
    for (int j = 0; s && j < s->n_jobs; j++)
        if (s->jobs[j].field == field) {
            v->f32 = *field;
            v->file = s->jobs[j].f;
            v->tensor = s->jobs[j].t;
            v->n = s->jobs[j].n;
            return 1;
        }
    v->f32 = *field; /* f32 weights: their pointer alone */
    return *field != NULL;
}

void mv_weight_view_f32(const mv_weight_view *v, float *dst)
{
    if (v->f32 || !v->tensor) {
        if (v->f32)
            memcpy(dst, v->f32, v->n * sizeof(float));
        return;
    }
    const long np = (long)((v->n + CONV_PIECE - 1) / CONV_PIECE);
#pragma omp parallel for schedule(static) if (np > 1 && mv_omp_region(0))
    for (long i = 0; i < np; i++) {
        const size_t first = (size_t)i * CONV_PIECE, n = v->n - first < CONV_PIECE ? v->n - first : CONV_PIECE;
        mv_err ignored; /* the dtype was checked when the tensor was taken */
        mv_st_to_f32_range(v->file, v->tensor, first, n, dst + first, &ignored);
    }
}

mv_status mv_model_weights_f32(mv_model *m, mv_err *e)
{
    model_storage *s = m->storage;
    if (!s || s->arena || !s->n_jobs)
        return MV_OK;
    size_t need = 0;
    for (int j = 0; j < s->n_jobs; j++)
        need += s->jobs[j].n;
    if (!(s->arena = malloc((need ? need : 1) * sizeof(float))))
        return mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for %zu weights", m->dir, need);
    float *next = s->arena;
    for (int j = 0; j < s->n_jobs; j++) {
        s->jobs[j].dst = next;
        next += s->jobs[j].n;
    }
    mv_status st = convert_jobs(s->jobs, s->n_jobs, 0, need, NULL, m->dir, e); /* checked at load */
    if (st)
        return st;
    for (int j = 0; j < s->n_jobs; j++)
        *s->jobs[j].field = s->jobs[j].dst;
    close_files(s);
    return MV_OK;
}

void mv_model_drop_weights(mv_model *m)
{
    model_storage *s = m->storage;
    if (s) {
        free(s->arena);
        s->arena = NULL;
        close_files(s);
    }
    m->patch_w = m->patch_b = m->pos_embed = NULL;
    m->mnorm_w = m->mnorm_b = m->mfc1_w = m->mfc1_b = m->mfc2_w = m->mfc2_b = NULL;
    if (m->blocks)
        memset(m->blocks, 0, (size_t)m->cfg.depth * sizeof *m->blocks);
}

void mv_model_free(mv_model *m)
{
    if (!m)
        return;
    model_storage *s = m->storage;
    if (s) {
        close_files(s);
        free(s->files);
        free(s->arena);
        free(s);
    }
    free(m->blocks);
    free(m);
}

mv_status mv_model_load(const char *dir, mv_model **out, mv_err *e)
{
    return mv_model_load_mode(dir, MV_WEIGHTS_F32, out, e);
}

mv_status mv_model_load_mode(const char *dir, mv_weights_mode mode, mv_model **out, mv_err *e)
{
    *out = NULL;
    if (strlen(dir) >= sizeof(*out)->dir)
        return mv_fail(e, MV_ERR_USAGE, "model path too long: %.200s...", dir);
    mv_model *m = calloc(1, sizeof *m);
    model_storage *s = calloc(1, sizeof *s);
    if (!m || !s) {
        free(m);
        free(s);
        return mv_fail(e, MV_ERR_NOMEM, "out of memory");
    }
    m->storage = s;
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    mv_status st;
    char **names = NULL;
    int nnames = 0;
    if ((st = mv_model_read_config(dir, &m->cfg, e)) ||
        (st = mv_model_read_preproc(dir, &m->cfg, &m->pp, e)) ||
        (st = list_shards(dir, &names, &nnames, e)))
        goto fail;
    s->files = calloc(nnames, sizeof *s->files);
    for (int i = 0; i < nnames; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if ((st = mv_st_open(path, &s->files[i], e)))
            goto fail;
        s->n_files++;
    }
    /* prefix detection */
    static const char *prefixes[] = {"model.visual.", "visual.", ""};
    const char *prefix = NULL;
    for (int p = 0; p < 3 && !prefix; p++) {
        char k[64];
        snprintf(k, sizeof k, "%spatch_embed.proj.weight", prefixes[p]);
        for (int i = 0; i < s->n_files && !prefix; i++)
            if (mv_st_find(&s->files[i], k))
                prefix = prefixes[p];
    }
    if (!prefix) {
        st = mv_fail(e, MV_ERR_MODEL,
                     "%s: missing tensor 'patch_embed.proj.weight' (looked for prefixes "
                     "'model.visual.', 'visual.' and none)", dir);
        goto fail;
    }
    const mv_vision_config *c = &m->cfg;
    /* first every tensor's presence and shape, before any weight memory is taken: a config.json
     * that claims a far larger tower than the files hold is a shape error naming the tensor, not
     * an allocation of tens of GB */
    loader Ld = {s, prefix, dir, NULL, 0xcbf29ce484222325ULL, 1, 0, 0, NULL, 0, 0};
    if ((st = take_all(&Ld, m, e)))
        goto fail;
    {
        char extra[96];
        snprintf(extra, sizeof extra, "blocks.%d.norm1.weight", c->depth);
        char full[160];
        snprintf(full, sizeof full, "%s%s", prefix, extra);
        for (int i = 0; i < s->n_files; i++)
            if (mv_st_find(&s->files[i], full)) {
                st = mv_fail(e, MV_ERR_MODEL, "%s: tensor '%s' exists but config.json says depth %d",
                             s->files[i].path, full, c->depth);
                goto fail;
            }
    }
    Ld.source = mode == MV_WEIGHTS_SOURCE;
    s->arena = Ld.source ? NULL : malloc(Ld.need * sizeof(float));
    m->blocks = calloc(c->depth, sizeof *m->blocks);
    if ((!Ld.source && !s->arena) || !m->blocks) {
        st = mv_fail(e, MV_ERR_NOMEM, "%s: out of memory for %zu weights", dir, Ld.need);
        goto fail;
    }
    Ld.next = s->arena;
    Ld.check_only = 0;
    st = take_all(&Ld, m, e);
    s->jobs = Ld.jobs; /* the storage's now: freed with it */
    s->n_jobs = Ld.n_jobs;
    if (!st)
        st = convert_jobs(Ld.jobs, Ld.n_jobs, Ld.source, Ld.need, &Ld.hash, dir, e);
    if (st)
        goto fail;
    m->weights_hash = mix64(Ld.hash, (const uint8_t *)c, sizeof *c);
    mv_model_update_fingerprint(m, NULL);
    if (!Ld.source) /* the mappings are no longer needed: weights live in the arena */
        close_files(s);
    for (int i = 0; i < nnames; i++)
        free(names[i]);
    free(names);
    *out = m;
    return MV_OK;
fail:
    for (int i = 0; i < nnames; i++)
        free(names[i]);
    free(names);
    mv_model_free(m);
    return st;
}
