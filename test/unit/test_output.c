/* test_output.c - unit tests for the atomic .npy.zst writer (src/output/output.c).
 * Oracle: the `zstd` CLI decompresses and /usr/bin/python3 numpy.load reads the result, compared
 * with the same floats written raw (f16 checked bit for bit against numpy's astype(float16)).
 * Also: one frame with content size + checksum, no temp file left, failures (unwritable
 * directory, a file in the way, a write that fails midway) clean up and name the file; which
 * failures are the disk's (MV_ERR_IO) and which this output's (MV_ERR_OUTPUT); NaN/Inf refused;
 * the size reported is stat's; the temp-file sweep spares a file another process holds a lock on
 * (the lock taken by a child with fcntl) and removes unlocked abandoned ones, once per run (per
 * mv_output_swept); mv_escape. */
#include "mv_output.h"
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader */
#include <zstd.h>

static char dir[256];

static int count_temps(const char *d)
{
    DIR *dd = opendir(d);
    if (!dd)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dd)))
        n += strncmp(de->d_name, ".tmp-", 5) == 0;
    closedir(dd);
    return n;
}

static int write_raw(const char *path, const float *v, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(v, sizeof *v, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* zstd -d the file, numpy.load it, compare with raw f32 (as dtype) bit for bit. */
static int numpy_check(const char *zpath, const char *raw, const char *dtype, long rows, long cols)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "zstd -q -d -c '%s' > '%s/check.npy' && /usr/bin/python3 -c 'import numpy as np,sys\n"
             "import warnings; warnings.simplefilter(\"ignore\")  # f16 overflow to inf is intended\n"
             "a=np.load(sys.argv[1])\n"
             "b=np.fromfile(sys.argv[2],dtype=\"<f4\").reshape(%ld,%ld).astype(sys.argv[3])\n"
             "assert a.dtype==np.dtype(sys.argv[3]) and a.shape==b.shape,(a.dtype,a.shape)\n"
             "u=\"<u2\" if sys.argv[3]==\"<f2\" else \"<u4\"\n"
             "assert np.array_equal(a.view(u),b.view(u)),np.nonzero(a.view(u)!=b.view(u))\n"
             "' '%s/check.npy' '%s' '%s'",
             zpath, dir, rows, cols, dir, raw, dtype);
    return system(cmd);
}

int main(void)
{
    umask(022);
    snprintf(dir, sizeof dir, "/tmp/mvoutput-XXXXXX");
    if (!mkdtemp(dir) || chmod(dir, 0755) != 0) {
        perror("mkdtemp");
        return 2;
    }
    mv_err e = {{0}};
    char out[512], fin[1024], rawp[600];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(rawp, sizeof rawp, "%s/raw.f32", dir);
    /* one run's swept set and one writer's resources, as a writer thread of the pipeline has */
    mv_output_swept run;
    mv_output_swept_init(&run);
    mv_output_writer *w;
    if (mv_output_writer_new(&run, &w, &e) != MV_OK)
        return 2;

    /* 1. f32, nested new directories, read back by zstd + numpy */
    enum { R = 3, C = 5 };
    float v[R * C] = {0.0f, -0.0f, 1.0f, -1.5f, 3.14159265f, 1e-8f, 65504.0f, 65520.0f,
                      2049.0f, 2051.0f, 1e-7f, 6.1e-5f, -7e30f, 0.33333334f, 1e-45f};
    mv_status s = mv_output_write(w, out, "a/b/c.jpg", MV_DT_F32, R, C, v, 3, fin, sizeof fin, NULL, &e);
    char want[1024];
    snprintf(want, sizeof want, "%s/a/b/c.jpg.npy.zst", out);
    CHECK(s == MV_OK && strcmp(fin, want) == 0, "f32 write into new nested dirs: %s",
          s == MV_OK ? fin : e.msg);
    write_raw(rawp, v, R * C);
    CHECK(numpy_check(want, rawp, "<f4", R, C) == 0, "zstd -d + numpy.load gives the f32 array");
    char sub[600];
    snprintf(sub, sizeof sub, "%s/a/b", out);
    CHECK(count_temps(sub) == 0, "no temp file left behind");
    struct stat st;
    CHECK(stat(want, &st) == 0 && (st.st_mode & 0777) == 0644, "final file mode 0666 & ~umask");
    size_t bytes = 0;
    s = mv_output_write(w, out, "a/b/c.jpg", MV_DT_F32, R, C, v, 3, NULL, 0, &bytes, &e);
    CHECK(s == MV_OK && stat(want, &st) == 0 && bytes > 0 && (off_t)bytes == st.st_size,
          "*bytes is the file's size as stat sees it (%zu)", bytes);

    /* 2. the file is one zstd frame with content size and checksum */
    uint8_t *z;
    size_t zl;
    if (mv_read_file(want, &z, &zl, &e) != MV_OK)
        return 2;
    unsigned long long cs = ZSTD_getFrameContentSize(z, zl);
    size_t fl = ZSTD_findFrameCompressedSize(z, zl);
    ZSTD_frameHeader fh;
    size_t hr = ZSTD_getFrameHeader(&fh, z, zl);
    CHECK(cs == 128 + R * C * 4 && fl == zl && hr == 0 && fh.checksumFlag == 1,
          "single frame (%zu of %zu bytes), content size %llu, checksum flag %u", fl, zl, cs,
          fh.checksumFlag);
    free(z);

    /* 3. f16: round to nearest even, subnormals; checked against numpy. Values that f16 stores
     * as Inf (65520 rounds up past 65504, -7e30) are refused: the written values are checked */
    snprintf(want, sizeof want, "%s/h.png.npy.zst", out);
    s = mv_output_write(w, out, "h.png", MV_DT_F16, R, C, v, 19, fin, sizeof fin, NULL, &e);
    CHECK(s == MV_ERR_MODEL && strstr(e.msg, "2 of the embedding's 15 values are past f16's range") &&
              access(want, F_OK) != 0 && count_temps(out) == 0,
          "f16 of values past +-65504 is not written: %s", s ? e.msg : "written");
    float vin[R * C];
    memcpy(vin, v, sizeof v);
    vin[7] = 65519.0f; /* rounds down to 65504 */
    vin[12] = -65504.0f;
    write_raw(rawp, vin, R * C);
    s = mv_output_write(w, out, "h.png", MV_DT_F16, R, C, vin, 19, fin, sizeof fin, NULL, &e);
    CHECK(s == MV_OK && numpy_check(want, rawp, "<f2", R, C) == 0,
          "f16 output equals numpy astype(float16) bit for bit");

    /* 4. a larger array, overwriting an existing file; mv_npy_load reads it too */
    enum { R2 = 700, C2 = 1152 };
    float *big = malloc(sizeof(float) * R2 * C2);
    uint32_t x = 12345;
    for (size_t i = 0; i < (size_t)R2 * C2; i++) {
        x = x * 1664525u + 1013904223u;
        big[i] = (float)((int32_t)x) / 2147483648.0f * 8.0f;
    }
    s = mv_output_write(w, out, "h.png", MV_DT_F32, R2, C2, big, 1, fin, sizeof fin, NULL, &e);
    write_raw(rawp, big, (size_t)R2 * C2);
    CHECK(s == MV_OK && numpy_check(want, rawp, "<f4", R2, C2) == 0,
          "700x1152 f32 overwrites the earlier file; numpy reads the new array");
    mv_array a = {0};
    s = mv_npy_load(want, &a, &e);
    CHECK(s == MV_OK && a.dtype == MV_DT_F32 && a.ndim == 2 && a.shape[0] == R2 &&
              a.shape[1] == C2 && memcmp(a.data, big, sizeof(float) * R2 * C2) == 0,
          "mv_npy_load reads it back identical");
    mv_array_free(&a);
    CHECK(count_temps(out) == 0, "no temp file left in OUT");

    /* 4b. f16 over the whole f16 range (subnormals, ties, overflow, both signs), an odd row
     * length so the vector loop has a tail; F16C where the CPU has it, and the scalar rounding
     * (mv_f32_to_f16) gives the same bits */
    enum { C3 = 1151 };
    for (size_t i = 0; i < (size_t)R2 * C3; i++) {
        x = x * 1664525u + 1013904223u;
        uint32_t exp = 100 + (x >> 8) % 46, bits = (x & 0x80000000u) | exp << 23 | (x * 2654435761u) >> 9;
        if (i % 5 == 0)
            bits = (bits & ~0x1fffu) | 0x1000u; /* exactly halfway between two f16 values */
        memcpy(&big[i], &bits, 4);
    }
    /* written: the values f16 holds (those past its range would be refused: 3. above) */
    float *clip = malloc(sizeof(float) * R2 * C3);
    if (!clip)
        return 2;
    for (size_t i = 0; i < (size_t)R2 * C3; i++)
        clip[i] = fabsf(big[i]) >= 65520.0f ? copysignf(65504.0f, big[i]) : big[i];
    write_raw(rawp, clip, (size_t)R2 * C3);
    s = mv_output_write(w, out, "h.png", MV_DT_F16, R2, C3, clip, 1, fin, sizeof fin, NULL, &e);
    free(clip);
    CHECK(s == MV_OK && numpy_check(want, rawp, "<f2", R2, C3) == 0,
          "700x1151 f16 over the f16 range (F16C where present) equals numpy astype(float16) bit for bit");
    uint16_t *hv = malloc((size_t)R2 * C3 * sizeof *hv), *hs = malloc((size_t)R2 * C3 * sizeof *hs);
    if (!hv || !hs)
        return 2;
    mv_f32_to_f16_n(big, hv, (size_t)R2 * C3);
    size_t differ = 0;
    for (size_t i = 0; i < (size_t)R2 * C3; i++) {
        hs[i] = mv_f32_to_f16(big[i]);
        differ += hs[i] != hv[i];
    }
    CHECK(differ == 0, "the scalar rounding gives the bits of the output above (%zu differ)", differ);
    free(hv), free(hs);

    /* 5. output paths */
    char pb[64];
    CHECK(mv_output_path("o//", "x/y.jpg", pb, sizeof pb, &e) == MV_OK &&
              strcmp(pb, "o/x/y.jpg.npy.zst") == 0,
          "trailing slashes of OUT are not doubled: %s", pb);
    CHECK(mv_output_path("/", "y.jpg", pb, sizeof pb, &e) == MV_OK &&
              strcmp(pb, "/y.jpg.npy.zst") == 0, "OUT '/'");
    const char *bad[] = {"", "/abs.jpg", "a/../b.jpg", "./b.jpg", "a//b.jpg", "a/", "..", "a/."};
    int all_bad = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (mv_output_path("o", bad[i], pb, sizeof pb, &e) != MV_ERR_USAGE)
            all_bad = 0;
    CHECK(all_bad, "absolute, empty, '.', '..' and empty components refused");
    CHECK(mv_output_path("o", "a-rather-long-name.jpg", pb, 16, &e) == MV_ERR_LIMIT,
          "a buffer too small is an error: %s", e.msg);

    /* 6. a regular file where a directory should be */
    char blocker[600];
    snprintf(blocker, sizeof blocker, "%s/file", out);
    FILE *bf = fopen(blocker, "w");
    if (bf)
        fclose(bf);
    s = mv_output_write(w, out, "file/x.jpg", MV_DT_F32, R, C, v, 3, fin, sizeof fin, NULL, &e);
    CHECK(s == MV_ERR_OUTPUT && strstr(e.msg, "file/x.jpg.npy.zst") &&
              strstr(e.msg, "Not a directory"),
          "a file in the way fails this output only (MV_ERR_OUTPUT), naming the file and cause: %s",
          e.msg);

    /* 6b. other problems of one output's name or place are MV_ERR_OUTPUT, not the disk's */
    char longname[300];
    memset(longname, 'n', 248);
    strcpy(longname + 248, ".jpg"); /* 252 bytes: ".npy.zst" makes it 260, over NAME_MAX */
    s = mv_output_write(w, out, longname, MV_DT_F32, R, C, v, 3, NULL, 0, NULL, &e);
    CHECK(s == MV_ERR_OUTPUT && strstr(e.msg, "File name too long") && count_temps(out) == 0,
          "a name over NAME_MAX: MV_ERR_OUTPUT, temp removed: %.80s...", e.msg);
    char isdir[700];
    snprintf(isdir, sizeof isdir, "%s/d.jpg.npy.zst", out);
    mkdir(isdir, 0755);
    s = mv_output_write(w, out, "d.jpg", MV_DT_F32, R, C, v, 3, NULL, 0, NULL, &e);
    CHECK(s == MV_ERR_OUTPUT && strstr(e.msg, "Is a directory") && count_temps(out) == 0,
          "a directory named like the output: MV_ERR_OUTPUT: %s", e.msg);
    char deep[5000];
    int dn = 0;
    while (dn < 4200)
        dn += snprintf(deep + dn, sizeof deep - dn, "dddddddddddddddddddddddddddddd/");
    strcpy(deep + dn, "x.jpg");
    s = mv_output_write(w, out, deep, MV_DT_F32, R, C, v, 3, NULL, 0, NULL, &e);
    CHECK(s == MV_ERR_OUTPUT && strstr(e.msg, "File name too long"),
          "a path over PATH_MAX: MV_ERR_OUTPUT: %.60s...", e.msg);

    /* 6c. NaN / Inf are never written */
    float nanv[R * C];
    memcpy(nanv, v, sizeof nanv);
    nanv[7] = NAN;
    nanv[9] = -INFINITY;
    s = mv_output_write(w, out, "nan.jpg", MV_DT_F16, R, C, nanv, 3, NULL, 0, NULL, &e);
    snprintf(want, sizeof want, "%s/nan.jpg.npy.zst", out);
    CHECK(s == MV_ERR_MODEL && strstr(e.msg, "2 NaN/Inf values of 15") && access(want, F_OK) != 0,
          "data with a NaN and an Inf is refused, nothing written: %s", e.msg);
    CHECK(mv_count_nonfinite(nanv, R * C) == 2 && mv_count_nonfinite(v, R * C) == 0,
          "mv_count_nonfinite counts NaN and Inf, not huge finite values or subnormals");

    /* 7. an unwritable directory (as root, in a child that drops to uid 65534) */
    char ro[600];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    if (mkdir(ro, 0555) != 0 || chmod(ro, 0555) != 0)
        perror(ro);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(3);
        mv_err ce = {{0}};
        char cf[1024];
        mv_status cs2 = mv_output_write(w, ro, "d/x.jpg", MV_DT_F16, R, C, v, 3, cf, sizeof cf, NULL, &ce);
        int ok1 = cs2 == MV_ERR_OUTPUT && strstr(ce.msg, "Permission denied") && strstr(ce.msg, "ro/d");
        cs2 = mv_output_write(w, ro, "x.jpg", MV_DT_F16, R, C, v, 3, cf, sizeof cf, NULL, &ce);
        int ok2 = cs2 == MV_ERR_OUTPUT && strstr(ce.msg, "x.jpg.npy.zst") &&
                  strstr(ce.msg, "Permission denied");
        printf("# unwritable: %s\n", ce.msg);
        fflush(stdout);
        _exit(ok1 && ok2 ? 0 : 1);
    }
    int ws = -1;
    waitpid(pid, &ws, 0);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && count_temps(ro) == 0,
          "unwritable directory fails cleanly (mkdir and temp-file creation)");

    /* 8. a write failing midway (file size limit, like ENOSPC) removes the temp file */
    char lim[600];
    snprintf(lim, sizeof lim, "%s/lim", out);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(3);
        mv_err ce = {{0}};
        char cf[1024];
        mv_status cs2 = mv_output_write(w, lim, "big.jpg", MV_DT_F32, R2, C2, big, 1, cf, sizeof cf, NULL, &ce);
        printf("# midway: %s\n", ce.msg);
        fflush(stdout);
        _exit(cs2 == MV_ERR_IO && strstr(ce.msg, "big.jpg.npy.zst: write: File too large") ? 0 : 1);
    }
    waitpid(pid, &ws, 0);
    snprintf(want, sizeof want, "%s/big.jpg.npy.zst", lim);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && count_temps(lim) == 0 && access(want, F_OK) != 0,
          "write failing midway: error names file and cause, temp removed, no final file");

    /* 9. the sweep on the first write into a directory: an unlocked temp file of a dead pid goes;
     * an unlocked one of a running pid stays while recent and goes once older than the age
     * limit; one whose writer holds the lock stays whatever its pid (another machine's or PID
     * namespace's process: its pid means nothing here) */
    pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, &ws, 0); /* pid is now dead */
    char sw[600], t1[700], t2[700], t3[700], t4[700];
    snprintf(sw, sizeof sw, "%s/sweep", out);
    mkdir(sw, 0755);
    snprintf(t1, sizeof t1, "%s/.tmp-%ld-abcdef", sw, (long)pid);
    snprintf(t2, sizeof t2, "%s/.tmp-%ld-ghijkl", sw, (long)getppid());
    snprintf(t3, sizeof t3, "%s/.tmp-%ld-mnopqr", sw, (long)getppid());
    snprintf(t4, sizeof t4, "%s/.tmp-%ld-stuvwx", sw, (long)pid);
    const char *tn[4] = {t1, t2, t3, t4};
    for (int i = 0; i < 4; i++) {
        FILE *tf = fopen(tn[i], "w");
        if (!tf) {
            perror("temp fixtures");
            return 2;
        }
        fclose(tf);
    }
    struct timeval old_tv[2] = {{time(NULL) - MV_OUTPUT_TEMP_MAX_AGE - 3600, 0},
                                {time(NULL) - MV_OUTPUT_TEMP_MAX_AGE - 3600, 0}};
    utimes(t3, old_tv);
    utimes(t4, old_tv);
    int lk[2];
    if (pipe(lk) != 0)
        return 2;
    pid_t holder = fork();
    if (holder == 0) { /* a live writer elsewhere: holds a POSIX write lock on t4 */
        int fd = open(t4, O_RDWR);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        char c = fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0 ? 'y' : 'n';
        if (write(lk[1], &c, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char got = 0;
    if (read(lk[0], &got, 1) != 1 || got != 'y') {
        fprintf(stderr, "lock holder failed\n");
        return 2;
    }
    s = mv_output_write(w, sw, "n.jpg", MV_DT_F32, R, C, v, 3, NULL, 0, NULL, &e);
    kill(holder, SIGKILL);
    waitpid(holder, &ws, 0);
    CHECK(s == MV_OK && access(t1, F_OK) != 0, "unlocked temp file of a dead pid removed");
    CHECK(access(t2, F_OK) == 0, "unlocked recent temp file of a running pid kept");
    CHECK(access(t3, F_OK) != 0, "unlocked temp file of a running pid older than the age limit removed");
    CHECK(access(t4, F_OK) == 0, "a locked temp file (its writer alive elsewhere) kept, though its pid "
                                 "is dead here and it is old");
    CHECK(mv_output_clean_temps(sw) == 1 && access(t4, F_OK) != 0,
          "once its writer is gone, the next sweep removes it");
    unlink(t2);
    CHECK(mv_output_clean_temps("/nonexistent-dir-mv") == -1, "sweeping a missing dir says -1");
    /* a directory is swept once per run: the next abandoned file waits for the next run */
    FILE *tf = fopen(t1, "w");
    if (!tf)
        return 2;
    fclose(tf);
    s = mv_output_write(w, sw, "n2.jpg", MV_DT_F32, R, C, v, 3, NULL, 0, NULL, &e);
    CHECK(s == MV_OK && access(t1, F_OK) == 0, "the same run does not sweep a directory twice");
    mv_output_swept next;
    mv_output_swept_init(&next);
    mv_output_writer *w2;
    s = mv_output_writer_new(&next, &w2, &e);
    if (s == MV_OK)
        s = mv_output_write(w2, sw, "n3.jpg", MV_DT_F32, R, C, v, 3, NULL, 0, NULL, &e);
    CHECK(s == MV_OK && access(t1, F_OK) != 0, "the next run (its own swept set) sweeps it");
    mv_output_writer_free(w2);
    mv_output_swept_destroy(&next);

    /* 10. mv_escape */
    char eb[64];
    CHECK(!strcmp(mv_escape("a\nmvembed: x: ok\x1b[31m\\\t\x7f", eb, sizeof eb),
                  "a\\nmvembed: x: ok\\x1b[31m\\\\\\t\\x7f"),
          "newline, ESC, backslash, tab, DEL escaped: %s", eb);
    CHECK(!strcmp(mv_escape("caf\xc3\xa9 \xe2\x82\xac \xc2\x9b \xff", eb, sizeof eb),
                  "caf\xc3\xa9 \xe2\x82\xac \\xc2\\x9b \\xff"),
          "UTF-8 kept; C1 control and invalid bytes as \\xHH: %s", eb);
    char small[12];
    CHECK(!strcmp(mv_escape("0123456789abcdef", small, sizeof small), "01234567...") &&
              !strcmp(mv_escape("\n\n\n\n\n\n", small, sizeof small), "\\n\\n\\n\\n..."),
          "too long: shortened with ... within the buffer");

    free(big);
    mv_output_writer_free(w);
    mv_output_swept_destroy(&run);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return UNIT_DONE();
}
