/* test_beneath.c - unit tests for src/output/beneath.c: directories made beneath a root, symbolic
 * links inside it that lead out refused (openat2's RESOLVE_BENEATH, and the O_NOFOLLOW walk of
 * kernels without it, forced by the test hook), a file in the way, a root that does not exist
 * yet. The filesystem is the oracle: stat and readlink of what was (not) made. */
#define _GNU_SOURCE
#include "mv_beneath.h"
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[256];

static int is_dir(const char *rel)
{
    char p[1024];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", top, rel);
    return lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int empty_dir(const char *rel)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s/%s')\"", top, rel);
    return system(cmd) == 0;
}

static void mode(int no_openat2)
{
    const char *m = no_openat2 ? "O_NOFOLLOW walk" : "openat2";
    char root[300], p[600];
    mv_beneath_test_no_openat2(no_openat2);
    snprintf(root, sizeof root, "%s/out%d", top, no_openat2);
    mv_err e = {{0}};
    int fd = -1;
    /* root missing: made; nested components made beneath it */
    mv_status s = mv_beneath_dir(root, "a/b/c", 1, &fd, &e);
    CHECK(s == MV_OK && fd >= 0, "%s: root and a/b/c made (%s)", m, s ? e.msg : "ok");
    if (fd >= 0)
        close(fd);
    snprintf(p, sizeof p, "out%d/a/b/c", no_openat2);
    CHECK(is_dir(p), "%s: %s is a directory", m, p);
    /* "" is the root itself */
    s = mv_beneath_dir(root, "", 0, &fd, &e);
    CHECK(s == MV_OK && fd >= 0, "%s: \"\" opens the root", m);
    if (fd >= 0)
        close(fd);
    /* a relative link up and out, an absolute link: refused, nothing made outside */
    snprintf(p, sizeof p, "%s/outside%d", top, no_openat2);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/d", root);
    CHECK(symlink(no_openat2 ? "../outside1" : "../outside0", p) == 0, "%s: link d made", m);
    s = mv_beneath_dir(root, "d/x", 1, &fd, &e);
    CHECK(s == MV_ERR_OUTPUT && fd < 0 && (errno == EXDEV || errno == ELOOP) &&
              strstr(e.msg, "a symbolic link (to ../outside"),
          "%s: d -> ../outside refused: %s", m, e.msg);
    snprintf(p, sizeof p, "outside%d", no_openat2);
    CHECK(empty_dir(p), "%s: nothing made outside", m);
    snprintf(p, sizeof p, "%s/a/abs", root);
    CHECK(symlink(top, p) == 0, "%s: link a/abs made", m);
    s = mv_beneath_dir(root, "a/abs/y", 1, &fd, &e);
    CHECK(s == MV_ERR_OUTPUT && fd < 0, "%s: an absolute link is refused: %s", m, e.msg);
    CHECK(!is_dir("y"), "%s: no y made at the link's target", m);
    /* a link that stays beneath: followed by openat2, refused by the O_NOFOLLOW walk */
    snprintf(p, sizeof p, "%s/in", root);
    CHECK(symlink("a/b", p) == 0, "%s: link in -> a/b made", m);
    s = mv_beneath_dir(root, "in/z", 1, &fd, &e);
    if (no_openat2)
        CHECK(s == MV_ERR_OUTPUT && errno == ELOOP, "%s: in -> a/b not followed: %s", m, e.msg);
    else
        CHECK(s == MV_OK, "%s: in -> a/b stays beneath and is followed (%s)", m, s ? e.msg : "ok");
    if (fd >= 0)
        close(fd);
    fd = -1;
    /* ".." steps up and out (with openat2 the kernel refuses it; the walk must too) */
    snprintf(p, sizeof p, "a/../../outside%d", no_openat2);
    s = mv_beneath_dir(root, p, 0, &fd, &e);
    CHECK(s == MV_ERR_OUTPUT && fd < 0, "%s: %s refused: %s", m, p, e.msg);
    if (fd >= 0)
        close(fd);
    fd = -1;
    /* a file in the way */
    snprintf(p, sizeof p, "%s/file", root);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
    s = mv_beneath_dir(root, "file/q", 1, &fd, &e);
    CHECK(s == MV_ERR_OUTPUT && errno == ENOTDIR && fd < 0, "%s: a file in the way: %s", m, e.msg);
    /* create off: a missing directory is ENOENT, not made */
    s = mv_beneath_dir(root, "nope", 0, &fd, &e);
    CHECK(s != MV_OK && errno == ENOENT, "%s: create off: %s", m, e.msg);
    snprintf(p, sizeof p, "out%d/nope", no_openat2);
    CHECK(!is_dir(p), "%s: create off makes nothing", m);
}

int main(void)
{
    snprintf(top, sizeof top, "/tmp/test_beneath.XXXXXX");
    if (!mkdtemp(top))
        return 2;
    mode(0);
    mode(1);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    if (system(cmd) != 0)
        return 2;
    return UNIT_DONE();
}
