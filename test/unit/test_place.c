/* test_place.c - the exclusive final name (src/output/place.c, mv_place.h) on this machine's
 * file system, checked by reading the files back: a free name is taken and the temporary name
 * goes; a taken name is kept, with EEXIST, its bytes and the temporary file untouched, unless
 * MV_PLACE_REPLACE; names relative to a directory descriptor and to AT_FDCWD alike. */
#include "mv_place.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* the bytes of path (empty when missing) */
static const char *got(const char *path)
{
    static char buf[64];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    return buf;
}

int main(void)
{
    char dir[] = "/tmp/mvplace-XXXXXX", tmp[64], fin[64];
    if (!mkdtemp(dir))
        return 1;
    snprintf(tmp, sizeof tmp, "%s/.tmp-1", dir);
    snprintf(fin, sizeof fin, "%s/fin", dir);
    mv_err e;
    int err = -1;
    put(tmp, "one");
    CHECK(mv_place(AT_FDCWD, tmp, fin, 0, &err, &e) == MV_OK && err == 0 && !strcmp(got(fin), "one") &&
          access(tmp, F_OK) != 0, "a free name is taken, the temporary name is gone");
    put(tmp, "two");
    CHECK(mv_place(AT_FDCWD, tmp, fin, 0, &err, &e) == MV_ERR_IO && err == EEXIST &&
          !strcmp(got(fin), "one") && !strcmp(got(tmp), "two"), "a taken name is kept (EEXIST): %s", e.msg);
    CHECK(strstr(e.msg, fin) && strstr(e.msg, "exists already: not replaced"), "the error names the file");
    CHECK(mv_place(AT_FDCWD, tmp, fin, MV_PLACE_REPLACE | MV_PLACE_CHECK_RENAME, &err, &e) == MV_OK &&
          !strcmp(got(fin), "two") && access(tmp, F_OK) != 0, "MV_PLACE_REPLACE replaces it");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    put(tmp, "three");
    CHECK(mv_place(dfd, ".tmp-1", "fin", MV_PLACE_CHECK_RENAME, NULL, &e) == MV_ERR_IO &&
          !strcmp(got(fin), "two") && strstr(e.msg, "fin: exists already"), "relative to dfd: kept");
    CHECK(mv_place(dfd, ".tmp-1", "other", 0, NULL, &e) == MV_OK && !strcmp(got(tmp), "") &&
          access(fin, F_OK) == 0, "relative to dfd: a free name taken");
    snprintf(fin, sizeof fin, "%s/other", dir);
    CHECK(!strcmp(got(fin), "three"), "with its bytes");
    CHECK(mv_place(dfd, ".tmp-missing", "x", 0, &err, &e) == MV_ERR_IO && err == ENOENT &&
          !strncmp(e.msg, "x: ", 3) && strstr(e.msg, ".tmp-missing"), "a missing temporary file: %s", e.msg);
    close(dfd);
    unlink(fin);
    snprintf(fin, sizeof fin, "%s/fin", dir);
    unlink(fin);
    rmdir(dir);
    return UNIT_DONE();
}
