/* test_walk.c - unit tests for the PATH walker (src/input/walk.c): order, rel names, filters,
 * symlinks (to files, dangling, loops), non-UTF-8 names, explicit arguments, stdin lists. */
#define _GNU_SOURCE
#include "mv_walk.h"
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[256];

static void touch(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    if (!f) {
        perror(p);
        exit(2);
    }
    fputs("x", f);
    fclose(f);
}

static void mkd(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    if (mkdir(p, 0755) != 0) {
        perror(p);
        exit(2);
    }
}

static void lnk(const char *target, const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    if (symlink(target, p) != 0) {
        perror(p);
        exit(2);
    }
}

/* Walks and renders every item as "path|rel" or "path|rel|ERR:error" lines into a string. */
static char *walk_all(char *const *args, int n, const mv_walk_opts *o, FILE *in, int *status)
{
    mv_err e = {{0}};
    mv_walk *w;
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(1, cap);
    *status = 0;
    if (mv_walk_open(args, n, o, in, &w, &e) != MV_OK) {
        *status = -1;
        snprintf(out, cap, "open failed: %s", e.msg);
        return out;
    }
    mv_walk_item it;
    int r;
    while ((r = mv_walk_next(w, &it, &e)) == 1) {
        char line[2048];
        int k;
        if (it.error)
            k = snprintf(line, sizeof line, "%s|%s|ERR:%s\n", it.path, it.rel, it.error);
        else
            k = snprintf(line, sizeof line, "%s|%s\n", it.path, it.rel);
        if (len + (size_t)k + 1 > cap) {
            cap *= 2;
            out = realloc(out, cap);
        }
        memcpy(out + len, line, (size_t)k + 1);
        len += (size_t)k;
    }
    if (r < 0)
        *status = -1;
    mv_walk_close(w);
    return out;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/mvwalk-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 2;
    }
    touch("b.png");
    touch("a.JPG");
    touch("notes.txt");
    touch(".hidden.jpg");
    mkd(".hdir");
    touch(".hdir/x.jpg");
    mkd("sub");
    touch("sub/c.mp4");
    mkd("sub/deeper");
    touch("sub/deeper/d.webp");
    lnk("..", "sub/loop");
    mkd("z");
    touch("z/\xff\xfe.jpg");
    lnk("b.png", "link.jpg");
    lnk("does-not-exist", "dangling.jpg");
    lnk("does-not-exist", "dangling.txt");
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/pipe.jpg", root);
    if (mkfifo(fifo, 0644) != 0) {
        perror("mkfifo");
        return 2;
    }

    /* 1. a directory argument with a trailing slash, default options */
    char rs[300], expect[8192];
    snprintf(rs, sizeof rs, "%s/", root);
    char *args1[] = {rs};
    int st;
    char *got = walk_all(args1, 1, NULL, NULL, &st);
    snprintf(expect, sizeof expect,
             "%1$s/a.JPG|a.JPG\n"
             "%1$s/b.png|b.png\n"
             "%1$s/dangling.jpg|dangling.jpg|ERR:a dangling symbolic link (to does-not-exist, which does not exist)\n"
             "%1$s/link.jpg|link.jpg\n"
             "%1$s/sub/c.mp4|sub/c.mp4\n"
             "%1$s/sub/deeper/d.webp|sub/deeper/d.webp\n"
             "%1$s/sub/loop|sub/loop|ERR:symlink loop: leads back to directory '%1$s' already "
             "being walked\n"
             "%1$s/z/\xff\xfe.jpg|z/\xff\xfe.jpg\n",
             root);
    CHECK(st == 0 && strcmp(got, expect) == 0,
          "directory walk: sorted depth-first order, rel names, hidden/non-media/fifo skipped, "
          "dangling link and loop reported, non-UTF-8 name kept");
    if (strcmp(got, expect) != 0)
        printf("# got:\n%s# expected:\n%s", got, expect);
    free(got);

    /* 2. "." from inside the tree: paths "./x", rel without "./" */
    char cwd[512];
    if (!getcwd(cwd, sizeof cwd) || chdir(root) != 0) {
        perror("chdir");
        return 2;
    }
    char dot[] = ".";
    char *args2[] = {dot};
    got = walk_all(args2, 1, NULL, NULL, &st);
    CHECK(st == 0 && strncmp(got, "./a.JPG|a.JPG\n./b.png|b.png\n", 28) == 0,
          "'.' gives paths ./a.JPG and rel a.JPG");
    free(got);

    /* 3. hidden + all_files */
    mv_walk_opts o = {.hidden = 1, .all_files = 1};
    char hdir_parent[] = "./";
    char *args3[] = {hdir_parent};
    got = walk_all(args3, 1, &o, NULL, &st);
    CHECK(st == 0 && strstr(got, "./.hdir/x.jpg|.hdir/x.jpg\n") &&
              strstr(got, "./.hidden.jpg|.hidden.jpg\n") && strstr(got, "./notes.txt|notes.txt\n") &&
              strstr(got, "./dangling.txt|dangling.txt|ERR:") && !strstr(got, "pipe.jpg"),
          "hidden and all_files options take hidden entries and every regular file, not FIFOs");
    free(got);
    got = walk_all(args3, 1, NULL, NULL, &st);
    CHECK(st == 0 && !strstr(got, "dangling.txt") && !strstr(got, "notes.txt") &&
              !strstr(got, ".hdir"),
          "by default a dangling non-media symlink, non-media and hidden files are skipped");
    free(got);

    /* 4. explicit arguments: a non-media file, a missing one, a FIFO, a relative directory */
    char notes[] = "notes.txt", missing[] = "nope/missing.jpg", pipe_[] = "pipe.jpg",
         deeper[] = "sub/deeper/";
    char *args4[] = {notes, missing, pipe_, deeper};
    got = walk_all(args4, 4, NULL, NULL, &st);
    const char *exp4 = "notes.txt|notes.txt\n"
                       "nope/missing.jpg|nope/missing.jpg|ERR:No such file or directory\n"
                       "pipe.jpg|pipe.jpg|ERR:not a regular file\n"
                       "sub/deeper/d.webp|d.webp\n";
    CHECK(st == 0 && strcmp(got, exp4) == 0,
          "explicit args: non-media file taken with its path as given, missing and FIFO reported, "
          "'sub/deeper/' walked without a doubled slash");
    if (strcmp(got, exp4) != 0)
        printf("# got:\n%s", got);
    free(got);

    /* 5. stdin, newline separated, with CRLF, empty lines, and a directory */
    char dash[] = "-";
    char *args5[] = {dash};
    char list[] = "b.png\r\n\nz\nsub/c.mp4";
    FILE *in = fmemopen(list, strlen(list), "r");
    got = walk_all(args5, 1, NULL, in, &st);
    fclose(in);
    const char *exp5 = "b.png|b.png\n"
                       "z/\xff\xfe.jpg|\xff\xfe.jpg\n"
                       "sub/c.mp4|sub/c.mp4\n";
    CHECK(st == 0 && strcmp(got, exp5) == 0,
          "stdin lines: CR stripped, empty lines skipped, directory walked, last line without "
          "newline taken");
    if (strcmp(got, exp5) != 0)
        printf("# got:\n%s", got);
    free(got);

    /* 6. stdin NUL separated (find -print0), a name with a newline in it */
    touch("new\nline.jpg");
    char list0[] = "new\nline.jpg\0b.png\0";
    in = fmemopen(list0, sizeof list0 - 1, "r");
    mv_walk_opts o0 = {.null_sep = 1};
    char zdir[] = "z";
    char *args6[] = {zdir, dash};
    got = walk_all(args6, 2, &o0, in, &st);
    fclose(in);
    CHECK(st == 0 && count_lines(got) == 5 &&
              strcmp(got, "z/\xff\xfe.jpg|\xff\xfe.jpg\nnew\nline.jpg|new\nline.jpg\nb.png|b.png\n") == 0,
          "stdin NUL-separated after a directory argument, newline inside a name kept");
    if (count_lines(got) != 5)
        printf("# got:\n%s", got);
    free(got);

    /* 6b. stdin paths keep their folders: same base name in two folders, "./" and "//" dropped */
    mkd("cam1");
    mkd("cam2");
    touch("cam1/IMG_1.jpg");
    touch("cam2/IMG_1.jpg");
    char list6b[] = "./cam1/IMG_1.jpg\0cam2//IMG_1.jpg\0";
    in = fmemopen(list6b, sizeof list6b - 1, "r");
    char *args6b[] = {dash};
    got = walk_all(args6b, 1, &o0, in, &st);
    fclose(in);
    CHECK(st == 0 && strcmp(got, "./cam1/IMG_1.jpg|cam1/IMG_1.jpg\ncam2//IMG_1.jpg|cam2/IMG_1.jpg\n") == 0,
          "stdin paths: cam1/IMG_1.jpg and cam2/IMG_1.jpg keep distinct names");
    free(got);

    /* 6c. the output directory is never walked into, also when reached through a symlink */
    mkd("in");
    touch("in/p.jpg");
    mkd("in/out");
    touch("in/out/q.jpg");
    lnk("out", "in/viaLink");
    struct stat osb;
    if (stat("in/out", &osb) != 0)
        perror("stat");
    mv_walk_opts os = {.all_files = 1, .has_skip = 1, .skip_dev = osb.st_dev, .skip_ino = osb.st_ino};
    char indir[] = "in", outdir[] = "in/out";
    char *args6c[] = {indir, outdir};
    got = walk_all(args6c, 2, &os, NULL, &st);
    CHECK(st == 0 && strcmp(got, "in/p.jpg|p.jpg\n") == 0,
          "OUT inside the input directory (directly, through a symlink, as an argument) is skipped");
    if (strcmp(got, "in/p.jpg|p.jpg\n") != 0)
        printf("# got:\n%s", got);
    free(got);

    /* 7. "-" with no stdin stream is a usage error */
    mv_walk *w;
    mv_err e = {{0}};
    CHECK(mv_walk_open(args5, 1, NULL, NULL, &w, &e) == MV_ERR_USAGE && strstr(e.msg, "'-'"),
          "'-' without a stdin stream refused: %s", e.msg);

    /* 8. an unreadable directory is an error item; as root the check runs in a child that
     * drops to uid/gid 65534 (root reads any directory) */
    mkd("locked");
    touch("locked/q.jpg");
    if (chmod(".", 0755) != 0 || chmod("locked", 0) != 0)
        perror("chmod");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(3);
        char lk[] = "locked";
        char *args8[] = {lk};
        got = walk_all(args8, 1, NULL, NULL, &st);
        _exit(st == 0 && strcmp(got, "locked|locked|ERR:cannot open directory: Permission denied\n") == 0
                  ? 0 : 1);
    }
    int ws = -1;
    waitpid(pid, &ws, 0);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
          "unreadable directory argument yields an error item (child exit %d)",
          WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    chmod("locked", 0755);

    /* 9. a large flat directory comes back complete and sorted */
    mkd("many");
    char nm[64];
    for (int i = 2999; i >= 0; i--) {
        snprintf(nm, sizeof nm, "many/f%05d.png", i);
        touch(nm);
    }
    char many[] = "many";
    char *args9[] = {many};
    got = walk_all(args9, 1, NULL, NULL, &st);
    int sorted = 1;
    const char *p = got;
    for (int i = 0; i < 3000 && sorted; i++) {
        char want[64];
        int k = snprintf(want, sizeof want, "many/f%05d.png|f%05d.png\n", i, i);
        if (strncmp(p, want, (size_t)k) != 0)
            sorted = 0;
        p += k;
    }
    CHECK(st == 0 && sorted && *p == 0, "3000 files in one directory: all, in byte order");
    free(got);

    if (chdir(cwd) != 0)
        perror("chdir back");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return UNIT_DONE();
}
