/* hub.c - --model REPO_ID[@REVISION] resolved offline in the Hugging Face cache (see mv_hub.h).
 * Only path logic and small reads of refs/ files: no network, no writes, no model parsing
 * (src/model/model.c loads whatever directory this returns). */
#include "mv_hub.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_word(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* huggingface_hub's repo-id rule: ^(\b[\w\-.]+\b/)?\b[\w\-.]+\b$, no "--" or "..", <= 96 chars */
static int valid_part(const char *s, size_t n)
{
    if (!n || !is_word(s[0]) || !is_word(s[n - 1]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_word(s[i]) && s[i] != '-' && s[i] != '.')
            return 0;
    return 1;
}

static int valid_repo_id(const char *id, size_t n)
{
    if (!n || n > 96)
        return 0;
    for (size_t i = 0; i + 1 < n; i++)
        if ((id[i] == '-' && id[i + 1] == '-') || (id[i] == '.' && id[i + 1] == '.'))
            return 0;
    const char *slash = memchr(id, '/', n);
    if (!slash)
        return valid_part(id, n);
    size_t a = (size_t)(slash - id);
    return valid_part(id, a) && valid_part(slash + 1, n - a - 1);
}

static int is_commit_hash(const char *s)
{
    size_t n = strlen(s);
    if (n != 40)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

/* A revision is a branch, tag, "refs/pr/N" or commit: relative, no "." / ".." component, no
 * control bytes (it becomes a path under refs/). */
static int valid_revision(const char *r)
{
    if (!*r || *r == '/' || r[strlen(r) - 1] == '/')
        return 0;
    for (const char *p = r; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return 0;
    const char *c = r;
    while (*c) {
        size_t l = strcspn(c, "/");
        if (!l || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
            return 0;
        c += l;
        if (*c == '/')
            c++;
    }
    return 1;
}

/* a variable's value, or NULL when it is unset or empty */
static const char *set(const char *v) { return v && *v ? v : NULL; }

/* The cache root into root[cap]; *why names the variable (or rule) that chose it. */
static mv_status cache_root(const mv_hub_env *env, char *root, size_t cap, const char **why, mv_err *e)
{
    static const mv_hub_env none;
    if (!env)
        env = &none;
    const char *home = set(env->home);
    const char *v, *tail = "";
    if ((v = set(env->hf_hub_cache)))
        *why = "$HF_HUB_CACHE";
    else if ((v = set(env->huggingface_hub_cache)))
        *why = "$HUGGINGFACE_HUB_CACHE";
    else if ((v = set(env->hf_home)))
        *why = "$HF_HOME/hub", tail = "/hub";
    else if ((v = set(env->xdg_cache_home)))
        *why = "$XDG_CACHE_HOME/huggingface/hub", tail = "/huggingface/hub";
    else if (home)
        v = "~", *why = "the default ~/.cache/huggingface/hub", tail = "/.cache/huggingface/hub";
    else
        return mv_fail(e, MV_ERR_MODEL, "no Hugging Face cache: none of HF_HUB_CACHE, HF_HOME, "
                                        "XDG_CACHE_HOME, HOME is set");
    int n;
    if (v[0] == '~' && (v[1] == 0 || v[1] == '/') && home)
        n = snprintf(root, cap, "%s%s%s", home, v + 1, tail);
    else
        n = snprintf(root, cap, "%s%s", v, tail);
    if (n < 0 || (size_t)n >= cap)
        return mv_fail(e, MV_ERR_USAGE, "Hugging Face cache path from %s is too long", *why);
    return MV_OK;
}

/* Reads refs/REVISION: its first line, trimmed. 1 when found and usable; 0 when missing or not a
 * commit (why[cap] says which); -1 when it is there but no regular file, or unreadable (why says
 * so): only a regular file is read (mv_open_regular), since a FIFO there would block for ever. */
static int read_ref(const char *path, char *out, size_t cap, char *why, size_t why_cap)
{
    int fd;
    mv_err oe;
    errno = 0;
    if (mv_open_regular(path, &fd, &oe)) {
        size_t n = strlen(path); /* oe names the path: keep the reason after "PATH: " */
        snprintf(why, why_cap, "%s", strncmp(oe.msg, path, n) || oe.msg[n] != ':' ? oe.msg : oe.msg + n + 2);
        return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
    }
    ssize_t n = read(fd, out, cap - 1);
    int er = errno;
    close(fd);
    if (n < 0) {
        snprintf(why, why_cap, "read error: %s", strerror(er));
        return -1;
    }
    out[n] = 0;
    out[strcspn(out, "\r\n")] = 0;
    n = (ssize_t)strlen(out);
    while (n && isspace((unsigned char)out[n - 1]))
        out[--n] = 0;
    if (!n || strchr(out, '/') || !strcmp(out, ".") || !strcmp(out, "..")) {
        snprintf(why, why_cap, "not a usable commit");
        return 0;
    }
    return 1;
}

mv_status mv_hub_resolve(const char *arg, const mv_hub_env *env, char *dir, size_t cap, mv_err *e)
{
    struct stat sb;
    const char *at = strchr(arg, '@');
    size_t idlen = at ? (size_t)(at - arg) : strlen(arg);
    if (stat(arg, &sb) == 0 || !valid_repo_id(arg, idlen)) {
        if (snprintf(dir, cap, "%s", arg) >= (int)cap)
            return mv_fail(e, MV_ERR_USAGE, "model path too long: %.200s...", arg);
        return MV_OK;
    }
    const char *rev = at ? at + 1 : "main";
    if (!valid_revision(rev))
        return mv_fail(e, MV_ERR_USAGE, "model '%s': bad revision '%s' (a branch, tag or commit hash)",
                       arg, rev);
    char root[4096], repo[4300], ref[4600], snap[4700], commit[256];
    const char *why = NULL;
    mv_status st = cache_root(env, root, sizeof root, &why, e);
    if (st)
        return st;
    /* models--ORG--NAME */
    int n = snprintf(repo, sizeof repo, "%s/models--", root);
    for (size_t i = 0; i < idlen && n + 3 < (int)sizeof repo; i++) {
        if (arg[i] == '/') {
            repo[n++] = '-';
            repo[n++] = '-';
        } else {
            repo[n++] = arg[i];
        }
    }
    repo[n] = 0;
    snprintf(ref, sizeof ref, "%s/refs/%s", repo, rev);
    char tried_ref[4800], ref_why[1024] = "";
    int got = read_ref(ref, commit, sizeof commit, ref_why, sizeof ref_why);
    if (got < 0)
        return mv_fail(e, MV_ERR_MODEL, "model '%s': %s: %s (the Hugging Face cache's refs/ holds regular files)",
                       arg, ref, ref_why);
    if (got) {
        snprintf(tried_ref, sizeof tried_ref, "%s (-> %s), ", ref, commit);
    } else if (is_commit_hash(rev)) {
        snprintf(commit, sizeof commit, "%s", rev);
        snprintf(tried_ref, sizeof tried_ref, "%s (%s; '%s' is a commit hash), ", ref, ref_why, rev);
    } else {
        return mv_fail(e, MV_ERR_MODEL,
                       "model '%s' not found: looked for the local directory '%s' (no such file or "
                       "directory) and in the Hugging Face cache %s (from %s) at %s (%s); mvembed "
                       "never downloads: fetch it first, e.g. hf download %.*s%s%s",
                       arg, arg, root, why, ref, ref_why, (int)idlen, arg, at ? " --revision " : "",
                       at ? rev : "");
    }
    snprintf(snap, sizeof snap, "%s/snapshots/%s", repo, commit);
    if (stat(snap, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        int err = errno;
        return mv_fail(e, MV_ERR_MODEL,
                       "model '%s' not found: looked for the local directory '%s' (no such file or "
                       "directory) and in the Hugging Face cache %s (from %s) at %s%s (%s); mvembed "
                       "never downloads: fetch it first, e.g. hf download %.*s%s%s",
                       arg, arg, root, why, tried_ref, snap,
                       stat(snap, &sb) == 0 ? "not a directory" : strerror(err), (int)idlen, arg,
                       at ? " --revision " : "", at ? rev : "");
    }
    if (snprintf(dir, cap, "%s", snap) >= (int)cap)
        return mv_fail(e, MV_ERR_USAGE, "model '%s': snapshot path too long", arg);
    return MV_OK;
}
