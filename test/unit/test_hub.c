/* test_hub.c - unit tests for src/model/hub.c: a repo id resolved in a Hugging Face cache laid out as
 * huggingface_hub lays it out (models--ORG--NAME/{refs,snapshots}), the cache-root variables'
 * precedence (passed in as an mv_hub_env, as main.c reads them), local paths winning, and the
 * not-found message naming every place looked at. */
#define _GNU_SOURCE
#include "mv_hub.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define C1 "0123456789abcdef0123456789abcdef01234567"
#define C2 "fedcba9876543210fedcba9876543210fedcba98"

static char root[256];
static mv_hub_env env; /* the variables as the program would have read them */

static void mkp(const char *rel)
{
    char p[1024], *s;
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        *s = 0;
        mkdir(p, 0755);
        *s = '/';
    }
    mkdir(p, 0755);
}

static void put(const char *rel, const char *text)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    if (!f) {
        perror(p);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

/* 1 when ARG resolves to ROOT/EXPECT, or to EXPECT+1 when EXPECT starts with '=' (as given) */
static int resolves_to(const char *arg, const char *expect)
{
    char dir[4096], want[1024];
    mv_err e = {{0}};
    if (mv_hub_resolve(arg, &env, dir, sizeof dir, &e)) {
        printf("#   %s: %s\n", arg, e.msg);
        return 0;
    }
    if (expect[0] == '=')
        snprintf(want, sizeof want, "%s", expect + 1);
    else
        snprintf(want, sizeof want, "%s/%s", root, expect);
    if (strcmp(dir, want))
        printf("#   %s -> %s, want %s\n", arg, dir, want);
    return !strcmp(dir, want);
}

/* the variables' values: one buffer each, under root */
static char home[512], xdg[512], hf_home[512], legacy[512], hc[512];

static void clear_env(void) { env = (mv_hub_env){.home = home}; }

int main(void)
{
    snprintf(root, sizeof root, "/tmp/mv_test_hub_XXXXXX");
    if (!mkdtemp(root))
        return 2;
    /* one cache tree per root variable, each holding Org/Tiny at a different commit */
    const char *caches[] = {"hc", "legacy", "home/hub", "xdg/huggingface/hub", "h/.cache/huggingface/hub"};
    for (int i = 0; i < 5; i++) {
        char rel[256], commit[64];
        snprintf(commit, sizeof commit, "%.39s%d", C1, i);
        snprintf(rel, sizeof rel, "%s/models--Org--Tiny/snapshots/%s", caches[i], commit);
        mkp(rel);
        snprintf(rel, sizeof rel, "%s/models--Org--Tiny/refs", caches[i]);
        mkp(rel);
        snprintf(rel, sizeof rel, "%s/models--Org--Tiny/refs/main", caches[i]);
        put(rel, commit);
    }
    /* extra revisions in the first cache */
    mkp("hc/models--Org--Tiny/snapshots/" C2);
    mkp("hc/models--Org--Tiny/refs/refs/pr");
    put("hc/models--Org--Tiny/refs/v2", C2 "\n");
    put("hc/models--Org--Tiny/refs/refs/pr/1", C2);
    mkp("hc/models--solo/snapshots/" C2);
    mkp("hc/models--solo/refs");
    put("hc/models--solo/refs/main", C2);
    mkp("hc/models--Org--Dangling/refs");
    put("hc/models--Org--Dangling/refs/main", C1);

    snprintf(home, sizeof home, "%s/h", root);
    snprintf(xdg, sizeof xdg, "%s/xdg", root);
    snprintf(hf_home, sizeof hf_home, "%s/home", root);
    snprintf(legacy, sizeof legacy, "%s/legacy", root);
    snprintf(hc, sizeof hc, "%s/hc", root);
    clear_env();
    CHECK(resolves_to("Org/Tiny", "h/.cache/huggingface/hub/models--Org--Tiny/snapshots/0123456789abcdef0123456789abcdef01234564"),
          "no variable: $HOME/.cache/huggingface/hub");
    env.xdg_cache_home = xdg;
    CHECK(resolves_to("Org/Tiny", "xdg/huggingface/hub/models--Org--Tiny/snapshots/0123456789abcdef0123456789abcdef01234563"),
          "$XDG_CACHE_HOME/huggingface/hub over the default");
    env.hf_home = hf_home;
    CHECK(resolves_to("Org/Tiny", "home/hub/models--Org--Tiny/snapshots/0123456789abcdef0123456789abcdef01234562"),
          "$HF_HOME/hub over $XDG_CACHE_HOME");
    env.huggingface_hub_cache = legacy;
    CHECK(resolves_to("Org/Tiny", "legacy/models--Org--Tiny/snapshots/0123456789abcdef0123456789abcdef01234561"),
          "$HUGGINGFACE_HUB_CACHE over $HF_HOME");
    env.hf_hub_cache = hc;
    CHECK(resolves_to("Org/Tiny", "hc/models--Org--Tiny/snapshots/0123456789abcdef0123456789abcdef01234560"),
          "$HF_HUB_CACHE over everything");
    env.hf_hub_cache = "";
    CHECK(resolves_to("Org/Tiny", "legacy/models--Org--Tiny/snapshots/0123456789abcdef0123456789abcdef01234561"),
          "an empty $HF_HUB_CACHE counts as unset");
    clear_env();
    env.hf_hub_cache = "~/../hc";
    CHECK(resolves_to("Org/Tiny", "h/../hc/models--Org--Tiny/snapshots/0123456789abcdef0123456789abcdef01234560"),
          "a leading ~ is $HOME");
    env.hf_hub_cache = hc;
    mv_err ne = {{0}};
    char nd[4096];
    CHECK(mv_hub_resolve("Org/Tiny", NULL, nd, sizeof nd, &ne) == MV_ERR_MODEL &&
              strstr(ne.msg, "none of HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, HOME is set"),
          "no variable at all (env NULL): no cache, said so: %s", ne.msg);

    CHECK(resolves_to("Org/Tiny@v2", "hc/models--Org--Tiny/snapshots/" C2), "@v2 through refs/v2 (trailing newline)");
    CHECK(resolves_to("Org/Tiny@refs/pr/1", "hc/models--Org--Tiny/snapshots/" C2), "@refs/pr/1 through refs/refs/pr/1");
    CHECK(resolves_to("Org/Tiny@" C2, "hc/models--Org--Tiny/snapshots/" C2), "@COMMIT without a ref: the snapshot itself");
    CHECK(resolves_to("solo", "hc/models--solo/snapshots/" C2), "a repo id without an organisation");

    /* local paths win; non-repo-shaped arguments pass through untouched */
    if (chdir(root))
        return 2;
    mkp("Org/Tiny");
    CHECK(resolves_to("Org/Tiny", "=Org/Tiny"), "an existing local directory wins over the cache");
    CHECK(resolves_to("./nowhere/x", "=./nowhere/x"), "./path is not a repo id: passed through");
    CHECK(resolves_to("/abs/model", "=/abs/model"), "/path is not a repo id: passed through");
    CHECK(resolves_to("a/b/c", "=a/b/c"), "a/b/c is not a repo id: passed through");
    CHECK(resolves_to("Org/a--b", "=Org/a--b"), "'--' in a name is not a repo id: passed through");

    mv_err e = {{0}};
    char dir[4096];
    mv_status st = mv_hub_resolve("Org/Missing@v9", &env, dir, sizeof dir, &e);
    char want[1024];
    snprintf(want, sizeof want, "%s/hc/models--Org--Missing/refs/v9", root);
    CHECK(st == MV_ERR_MODEL && strstr(e.msg, "'Org/Missing@v9' not found") &&
              strstr(e.msg, "local directory 'Org/Missing@v9'") && strstr(e.msg, "(from $HF_HUB_CACHE)") &&
              strstr(e.msg, want),
          "not found: the message names the local path, the cache and its variable, the ref: %s", e.msg);
    st = mv_hub_resolve("Org/Dangling", &env, dir, sizeof dir, &e);
    snprintf(want, sizeof want, "%s/hc/models--Org--Dangling/snapshots/" C1, root);
    CHECK(st == MV_ERR_MODEL && strstr(e.msg, "refs/main (-> " C1 ")") && strstr(e.msg, want),
          "a ref to a missing snapshot names the ref, the commit and the snapshot: %s", e.msg);
    st = mv_hub_resolve("Org/Missing@" C1, &env, dir, sizeof dir, &e);
    snprintf(want, sizeof want, "%s/hc/models--Org--Missing/snapshots/" C1, root);
    CHECK(st == MV_ERR_MODEL && strstr(e.msg, want), "a missing commit names its snapshot path: %s", e.msg);
    st = mv_hub_resolve("Org/Tiny@../../etc", &env, dir, sizeof dir, &e);
    CHECK(st == MV_ERR_USAGE && strstr(e.msg, "bad revision"), "a revision with '..' is refused: %s", e.msg);
    st = mv_hub_resolve("Org/Tiny@", &env, dir, sizeof dir, &e);
    CHECK(st == MV_ERR_USAGE, "an empty revision is refused");

    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", root);
    return UNIT_DONE();
}
