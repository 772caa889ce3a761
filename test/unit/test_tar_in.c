/* test_tar_in.c - unit tests for reading WebDataset shards (src/input/tar_in.c) against GNU tar as the
 * oracle: members in archive order, only media members, bytes equal to the files tar packed,
 * compressed tars, a truncated archive. Metadata members (.json, .txt, .cls) are never inputs. */
#define _GNU_SOURCE
#include "mv_tar_in.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void put(const char *rel, size_t n, unsigned seed)
{
    char p[512];
    snprintf(p, sizeof p, "%s/src/%s", dir, rel);
    FILE *f = fopen(p, "wb");
    if (!f) {
        perror(p);
        exit(2);
    }
    for (size_t i = 0; i < n; i++)
        fputc((int)((i * 2654435761u + seed) >> 13) & 0xff, f);
    fclose(f);
}

static int same_as_file(int fd, const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/src/%s", dir, rel);
    FILE *a = fopen(p, "rb"), *b = fdopen(dup(fd), "rb");
    int same = a && b;
    while (same) {
        int x = fgetc(a), y = fgetc(b);
        if (x != y)
            same = 0;
        if (x == EOF || y == EOF)
            break;
    }
    if (a)
        fclose(a);
    if (b)
        fclose(b);
    return same;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/mv_tar_in_%d", (int)getpid());
    char p[512];
    snprintf(p, sizeof p, "%s/src/sub", dir);
    char mk[2048];
    snprintf(mk, sizeof mk, "mkdir -p %s", p);
    if (system(mk) != 0)
        return 2;
    put("00000.jpg", 1000, 1);
    snprintf(p, sizeof p, "%s/src/00000.json", dir);
    FILE *jf = fopen(p, "w");
    if (!jf || fputs("{\"caption\": \"a\"}\n", jf) < 0 || fclose(jf) != 0)
        return 2;
    put("00001.png", 70000, 3);
    put("00001.txt", 5, 4);
    put("sub/clip.mp4", 131072, 5);
    put("empty.webp", 0, 6);
    put("notes.md", 30, 7);
    const char *order[] = {"00000.jpg", "00000.json", "00001.png", "00001.txt", "sub/clip.mp4", "empty.webp",
                           "notes.md"};
    const char *all[] = {"00000.jpg", "00001.png", "sub/clip.mp4", "empty.webp", "notes.md"};
    char files[512] = "";
    for (int i = 0; i < 7; i++) {
        strcat(files, " ");
        strcat(files, order[i]);
    }
    snprintf(mk, sizeof mk, "tar -C %s/src -cf %s/a.tar%s && tar -C %s/src -czf %s/a.tar.gz%s", dir, dir, files,
             dir, dir, files);
    CHECK(system(mk) == 0, "GNU tar packs the fixture files");

    const char *names[] = {"a.tar", "a.tar.gz"};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        mv_tar_in *t;
        mv_err e;
        CHECK(mv_tar_in_open(p, 0, 0, &t, &e) == MV_OK, "%s opens", names[k]);
        const char *want[] = {"00000.jpg", "00001.png", "sub/clip.mp4", "empty.webp"};
        int n = 0, ok = 1;
        const char *nm, *err;
        int fd, r;
        while ((r = mv_tar_in_next(t, &nm, &fd, &err, &e)) == 1) {
            ok &= n < 4 && !strcmp(nm, want[n]) && fd >= 0 && !err && same_as_file(fd, want[n]);
            if (fd >= 0)
                close(fd);
            n++;
        }
        CHECK(r == 0 && n == 4 && ok, "%s: the 4 media members in archive order, bytes as packed (%d)", names[k], n);
        mv_tar_in_close(t);
        CHECK(mv_tar_in_open(p, 1, 0, &t, &e) == MV_OK, "%s opens (all files)", names[k]);
        n = 0;
        while ((r = mv_tar_in_next(t, &nm, &fd, &err, &e)) == 1) {
            ok &= n < 5 && !strcmp(nm, all[n]) && same_as_file(fd, all[n]);
            close(fd);
            n++;
        }
        CHECK(r == 0 && n == 5 && ok, "%s with all_files: every regular member but the metadata ones", names[k]);
        mv_tar_in_close(t);
    }
    /* a tar cut in the middle of the big member */
    snprintf(mk, sizeof mk, "head -c 40000 %s/a.tar > %s/cut.tar", dir, dir);
    CHECK(system(mk) == 0, "truncated copy made");
    snprintf(p, sizeof p, "%s/cut.tar", dir);
    mv_tar_in *t;
    mv_err e;
    int r = 0, n = 0, fd, errs = 0;
    const char *nm, *err;
    if (mv_tar_in_open(p, 0, 0, &t, &e) == MV_OK) {
        while ((r = mv_tar_in_next(t, &nm, &fd, &err, &e)) == 1) {
            n++;
            errs += err != NULL;
            if (fd >= 0)
                close(fd);
        }
        mv_tar_in_close(t);
    }
    CHECK(r == -1 || errs > 0, "a truncated tar ends in an error naming it (r=%d, %d member errors): %s", r, errs,
          r == -1 ? e.msg : "");
    CHECK(r != -1 || strstr(e.msg, "cut.tar") != NULL, "the error names the tar");
    snprintf(p, sizeof p, "%s/src/00000.json", dir);
    CHECK(mv_tar_in_open(p, 0, 0, &t, &e) != MV_OK && strstr(e.msg, "00000.json"), "a non-tar is refused: %s", e.msg);
    snprintf(mk, sizeof mk, "rm -rf %s", dir);
    if (system(mk) != 0)
        return 2;
    return UNIT_DONE();
}
