/* test_input.c - unit tests for the input context (src/input/input.c): a file by path, a file
 * descriptor, memory and read callbacks give the same bytes and the same head as the file itself
 * (read with stdio), whatever the chunk sizes; streams go back only to their head; a stream made
 * seekable reads at random offsets; open errors and read errors name the input.
 * Oracle: the fixture files' bytes as stdio reads them. Runs from the repository root.
 */
#include "unit.h"

#include "mv_input.h"
#include "stream_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IMG "fixtures/media/images/"

/* The whole file through stdio (the oracle). */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0, k;
    uint8_t *b = malloc(cap);
    while (b && (k = fread(b + len, 1, cap - len, f)) > 0)
        if ((len += k) == cap) {
            uint8_t *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    fclose(f);
    *n = len;
    return b;
}

/* Reads in through mv_input_read in chunks of 1, 2, ... 97 bytes; 1 when it gives want[0..n). */
static int reads_back(mv_input *in, const uint8_t *want, size_t n)
{
    uint8_t *got = malloc(n + 64);
    size_t len = 0, step = 1;
    ssize_t k;
    while (got && (k = mv_input_read(in, got + len, step)) > 0) {
        len += (size_t)k;
        if (len > n) break;
        step = step % 97 + 1;
    }
    int ok = got && len == n && memcmp(got, want, n) == 0 && mv_input_read(in, got, 8) == 0;
    free(got);
    return ok;
}

static int head_is(const mv_input *in, const uint8_t *want, size_t n)
{
    size_t hn;
    const uint8_t *h = mv_input_head(in, &hn);
    size_t w = n < MV_SNIFF_BYTES ? n : MV_SNIFF_BYTES;
    return hn == w && memcmp(h, want, w) == 0;
}

static void test_sources(const char *path)
{
    size_t n = 0;
    uint8_t *want = slurp(path, &n);
    if (!want || n == 0) {
        CHECK(0, "%s: read with stdio", path);
        free(want);
        return;
    }
    mv_err e = {{0}};
    mv_input in;
    /* by path */
    mv_status st = mv_input_open_path(&in, path, &e);
    CHECK(st == MV_OK && !strcmp(in.name, path) && head_is(&in, want, n) && mv_input_size(&in) == (int64_t)n &&
              reads_back(&in, want, n),
          "%s by path: head and every byte (%s)", path, st ? e.msg : "opened");
    if (st == MV_OK) {
        CHECK(mv_input_rewind(&in) == 0 && reads_back(&in, want, n), "%s by path: rewind reads it again", path);
        mv_input_close(&in);
    }
    /* by descriptor, whatever its offset; the descriptor stays open */
    int fd = open(path, O_RDONLY);
    if (fd >= 0 && lseek(fd, 7, SEEK_SET) == 7) {
        st = mv_input_open_fd(&in, fd, "shard.tar/member", &e);
        CHECK(st == MV_OK && !strcmp(in.name, "shard.tar/member") && head_is(&in, want, n) && reads_back(&in, want, n),
              "%s by descriptor at offset 7: head and every byte from 0 (%s)", path, st ? e.msg : "opened");
        mv_input_close(&in);
        CHECK(fcntl(fd, F_GETFD) != -1, "the borrowed descriptor is still open after close");
        close(fd);
    } else {
        CHECK(0, "%s: open + lseek", path);
    }
    /* memory */
    st = mv_input_open_mem(&in, want, n, "mem", &e);
    CHECK(st == MV_OK && head_is(&in, want, n) && reads_back(&in, want, n), "%s from memory: head and every byte",
          path);
    if (st == MV_OK) {
        uint8_t b[3];
        CHECK(mv_input_pread(&in, b, 3, n - 2) == 2 && !memcmp(b, want + n - 2, 2) &&
                  mv_input_pread(&in, b, 3, n) == 0,
              "memory: pread stops at the end");
        mv_input_close(&in);
    }
    /* callbacks, with short reads of 1, 3 and 4096 bytes */
    static const size_t chunks[] = {1, 3, 4096};
    for (size_t c = 0; c < 3; c++) {
        stream s = {want, n, 0, chunks[c], -1, 0};
        st = mv_input_open_io(&in, &stream_io, &s, "io", &e);
        int ok = st == MV_OK && head_is(&in, want, n) && mv_input_size(&in) == -1 && reads_back(&in, want, n);
        CHECK(ok && s.calls_after_end <= 1, "%s from callbacks, %zu bytes a read: head and every byte, "
              "read once (%d calls past the end)", path, chunks[c], s.calls_after_end);
        mv_input_close(&in);
    }
    free(want);
}

/* Streams: back to the start only within the head; made seekable they read anywhere. */
static void test_stream_positions(void)
{
    size_t n = 0;
    uint8_t *want = slurp(IMG "png_rgb_320x256.png", &n);
    if (!want || n < 3 * MV_SNIFF_BYTES) {
        CHECK(0, "fixture read");
        free(want);
        return;
    }
    mv_err e = {{0}};
    mv_input in;
    stream s = {want, n, 0, 100, -1, 0};
    uint8_t buf[2 * MV_SNIFF_BYTES];
    if (mv_input_open_io(&in, &stream_io, &s, "io", &e) != MV_OK) {
        CHECK(0, "open io: %s", e.msg);
        free(want);
        return;
    }
    CHECK(mv_input_read(&in, buf, 10) == 10 && mv_input_rewind(&in) == 0 && mv_input_read(&in, buf, sizeof buf) ==
              (ssize_t)sizeof buf && !memcmp(buf, want, sizeof buf),
          "a stream read within its head goes back to the start");
    CHECK(mv_input_rewind(&in) == -1 && mv_input_pread(&in, buf, 4, 0) == -1,
          "past its head a stream cannot go back, nor pread");
    mv_input_close(&in);

    s = (stream){want, n, 0, 100, -1, 0};
    mv_status st = mv_input_open_io(&in, &stream_io, &s, "io", &e);
    if (st == MV_OK) st = mv_input_make_seekable(&in, &e);
    CHECK(st == MV_OK && mv_input_size(&in) == (int64_t)n && mv_input_pread(&in, buf, 5, n - 5) == 5 &&
              !memcmp(buf, want + n - 5, 5) && mv_input_pread(&in, buf, 4, 1) == 4 && !memcmp(buf, want + 1, 4) &&
              reads_back(&in, want, n),
          "a stream made seekable: its size, pread anywhere, and read from the start (%s)", st ? e.msg : "ok");
    mv_input_close(&in);
    free(want);
}

/* Read errors name the input and give the callbacks' reason. */
static void test_read_errors(void)
{
    size_t n = 0;
    uint8_t *want = slurp(IMG "jpeg_gray_200x149.jpg", &n);
    if (!want) {
        CHECK(0, "fixture read");
        return;
    }
    mv_err e = {{0}};
    mv_input in;
    stream s = {want, n, 0, 64, 1000, 0};
    mv_status st = mv_input_open_io(&in, &stream_io, &s, "shard.tar/a.jpg", &e);
    uint8_t *buf = malloc(n);
    ssize_t k = st == MV_OK ? mv_input_read(&in, buf, n) : 0;
    mv_status f = mv_input_fail(&in, &e);
    CHECK(st == MV_OK && k == -1 && f == MV_ERR_IO && mv_input_read(&in, buf, 1) == -1 &&
              !strcmp(e.msg, "shard.tar/a.jpg: read error: member data unreadable: damaged archive"),
          "a failing stream: read returns -1 from then on, the message names it: %s", e.msg);
    mv_input_close(&in);
    s = (stream){want, n, 0, 64, 100, 0};
    st = mv_input_open_io(&in, &stream_io, &s, "shard.tar/b.jpg", &e);
    CHECK(st == MV_ERR_IO && !strcmp(e.msg, "shard.tar/b.jpg: read error: member data unreadable: damaged archive"),
          "a stream failing within its head fails the open: %s", e.msg);
    free(buf);
    free(want);
}

static void test_open_errors(void)
{
    mv_err e = {{0}};
    mv_input in;
    mv_status st = mv_input_open_path(&in, "fixtures/bad/no_such_file.png", &e);
    CHECK(st == MV_ERR_IO && !strcmp(e.msg, "fixtures/bad/no_such_file.png: No such file or directory"),
          "missing file: %s", e.msg);
    st = mv_input_open_path(&in, "fixtures", &e);
    CHECK(st == MV_ERR_IO && !strcmp(e.msg, "fixtures: not a regular file"), "directory: %s", e.msg);
    char fifo[64];
    snprintf(fifo, sizeof fifo, "build/test_input_fifo_%d", (int)getpid());
    if (mkfifo(fifo, 0600) == 0) {
        char want[128];
        snprintf(want, sizeof want, "%s: not a regular file", fifo);
        st = mv_input_open_path(&in, fifo, &e); /* no writer: an open would block */
        CHECK(st == MV_ERR_IO && !strcmp(e.msg, want), "FIFO refused without blocking: %s", e.msg);
        int fd = open(fifo, O_RDONLY | O_NONBLOCK);
        st = fd >= 0 ? mv_input_open_fd(&in, fd, "pipe", &e) : MV_OK;
        CHECK(fd >= 0 && st == MV_ERR_IO && !strcmp(e.msg, "pipe: not a regular file"), "FIFO descriptor: %s",
              e.msg);
        if (fd >= 0) close(fd);
        unlink(fifo);
    } else {
        CHECK(0, "mkfifo %s: %s", fifo, strerror(errno));
    }
    st = mv_input_open_mem(&in, NULL, 0, NULL, &e);
    size_t hn = 1;
    mv_input_head(&in, &hn);
    uint8_t b;
    CHECK(st == MV_OK && hn == 0 && !strcmp(in.name, "<memory>") && mv_input_read(&in, &b, 1) == 0,
          "empty memory: no head, nothing to read");
    mv_input_close(&in);
}

int main(void)
{
    test_sources(IMG "png_rgb_320x256.png");
    test_sources(IMG "jpeg_exif6_168x104.jpg");
    test_sources("fixtures/bad/x.jpg"); /* shorter than the head */
    test_stream_positions();
    test_read_errors();
    test_open_errors();
    return UNIT_DONE();
}
