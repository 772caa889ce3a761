/* tar_unzip.c - a tar file's bytes as libarchive reads them (tar_int.h): a gzip, zstd or xz
 * compressed tar is decompressed here as it is read, so that every byte before damage in the
 * compressed stream reaches the tar reader, and the damage is then named (the stream truncated,
 * or corrupt at a compressed byte). libarchive's own filters fail without handing out the last
 * block they decoded (up to 64 KiB, so a small shard fails whole). Other files (a plain tar,
 * bzip2, lz4 ...) go to libarchive's filters as they are.
 */
#include "tar_int.h"

#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

enum { SRC_GZIP = 1, SRC_ZSTD, SRC_XZ };
static const char *const src_name[] = {"", "gzip", "zstd", "xz"};

struct mv_tar_src {
    int fd, kind;
    int at_end;          /* between gzip members or zstd frames: the end, unless another follows */
    int failed;
    int in_eof;          /* the file has no more bytes */
    size_t in_len, in_pos;
    long long in_off;    /* the file offset of in[0] */
    z_stream z;
    ZSTD_DStream *zs;
    lzma_stream x;
    char err[256];
    unsigned char in[1 << 16], out[1 << 16];
};

/* The kind of compression that the first bytes h[0..n) start (0: none of ours). */
static int sniff(const unsigned char *h, size_t n)
{
    if (n >= 2 && h[0] == 0x1f && h[1] == 0x8b)
        return SRC_GZIP;
    if (n >= 4 && ((h[0] == 0x28 && h[1] == 0xb5 && h[2] == 0x2f && h[3] == 0xfd) ||
                   ((h[0] & 0xf0) == 0x50 && h[1] == 0x2a && h[2] == 0x4d && h[3] == 0x18)))
        return SRC_ZSTD;
    if (n >= 6 && !memcmp(h, "\xfd" "7zXZ\0", 6))
        return SRC_XZ;
    return 0;
}

/* More compressed bytes after those not yet used; 0, or -1 with s->err set. */
static int fill(mv_tar_src *s)
{
    memmove(s->in, s->in + s->in_pos, s->in_len - s->in_pos);
    s->in_off += (long long)s->in_pos;
    s->in_len -= s->in_pos;
    s->in_pos = 0;
    while (!s->in_eof && s->in_len < sizeof s->in) {
        ssize_t k = read(s->fd, s->in + s->in_len, sizeof s->in - s->in_len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            snprintf(s->err, sizeof s->err, "cannot read the tar: %s", strerror(errno));
            return -1;
        }
        s->in_eof = k == 0;
        s->in_len += (size_t)k;
        break;
    }
    return 0;
}

/* One decoding step into s->out: *n bytes made; 1 at the end of a stream (gzip member, zstd
 * frame, the xz file), 0 otherwise, -1 with s->err set (corrupt data, or truncated: no input left
 * and nothing more to make). */
static int step(mv_tar_src *s, size_t *n)
{
    size_t avail = s->in_len - s->in_pos;
    long long at = s->in_off + (long long)s->in_pos;
    const char *lib = NULL;
    int end = 0;
    *n = 0;
    if (s->kind == SRC_GZIP) {
        s->z.next_in = s->in + s->in_pos;
        s->z.avail_in = (uInt)avail;
        s->z.next_out = s->out;
        s->z.avail_out = sizeof s->out;
        int r = inflate(&s->z, Z_NO_FLUSH);
        s->in_pos += avail - s->z.avail_in;
        *n = sizeof s->out - s->z.avail_out;
        end = r == Z_STREAM_END;
        if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR)
            lib = s->z.msg ? s->z.msg : "zlib error";
    } else if (s->kind == SRC_ZSTD) {
        ZSTD_inBuffer ib = {s->in + s->in_pos, avail, 0};
        ZSTD_outBuffer ob = {s->out, sizeof s->out, 0};
        size_t r = ZSTD_decompressStream(s->zs, &ob, &ib);
        s->in_pos += ib.pos;
        *n = ob.pos;
        if (ZSTD_isError(r))
            lib = ZSTD_getErrorName(r);
        end = !lib && r == 0;
    } else {
        s->x.next_in = s->in + s->in_pos;
        s->x.avail_in = avail;
        s->x.next_out = s->out;
        s->x.avail_out = sizeof s->out;
        lzma_ret r = lzma_code(&s->x, s->in_eof && !avail ? LZMA_FINISH : LZMA_RUN);
        s->in_pos += avail - s->x.avail_in;
        *n = sizeof s->out - s->x.avail_out;
        end = r == LZMA_STREAM_END;
        if (r != LZMA_OK && r != LZMA_STREAM_END && r != LZMA_BUF_ERROR)
            lib = r == LZMA_MEM_ERROR ? "out of memory" : r == LZMA_FORMAT_ERROR ? "not xz data" : "corrupt data";
    }
    if (lib) {
        snprintf(s->err, sizeof s->err, "%s data corrupt at or before compressed byte %lld (%s)",
                 src_name[s->kind], at, lib);
        return -1;
    }
    if (!*n && !end && s->in_eof && s->in_pos == s->in_len) { /* nothing more will come */
        snprintf(s->err, sizeof s->err, "%s stream truncated: the file ends at byte %lld, inside the "
                 "compressed stream", src_name[s->kind], s->in_off + (long long)s->in_len);
        return -1;
    }
    return end;
}

static la_ssize_t src_read(struct archive *a, void *user, const void **buf)
{
    mv_tar_src *s = user;
    *buf = s->out;
    while (!s->failed) {
        if (s->in_len - s->in_pos < 6 && !s->in_eof && fill(s)) {
            s->failed = 1;
            break;
        }
        if (s->at_end) { /* another gzip member or zstd frame, or the end (trailing bytes ignored) */
            if (s->kind == SRC_XZ) /* its decoder reads concatenated streams itself */
                return 0;
            if (s->in_len - s->in_pos < 6 && !s->in_eof)
                continue;
            if (sniff(s->in + s->in_pos, s->in_len - s->in_pos) != s->kind)
                return 0;
            if (s->kind == SRC_GZIP)
                inflateReset(&s->z);
            s->at_end = 0;
        }
        size_t n;
        int r = step(s, &n);
        if (r < 0) {
            s->failed = 1;
            break;
        }
        s->at_end = r == 1;
        if (n)
            return (la_ssize_t)n;
    }
    archive_set_error(a, EIO, "%s", s->err);
    return ARCHIVE_FATAL;
}

void mv_tar_src_free(mv_tar_src *s)
{
    if (!s)
        return;
    if (s->kind == SRC_GZIP)
        inflateEnd(&s->z);
    ZSTD_freeDStream(s->zs);
    if (s->kind == SRC_XZ)
        lzma_end(&s->x);
    if (s->fd >= 0)
        close(s->fd);
    free(s);
}

const char *mv_tar_src_why(struct archive *a, const mv_tar_src *s)
{
    return s && s->failed ? s->err : archive_error_string(a);
}

struct archive *mv_tar_reader(const char *path, mv_tar_src **src, char *err, size_t cap)
{
    struct archive *a = archive_read_new();
    mv_tar_src *s = calloc(1, sizeof *s);
    int oerr = 0; /* open's errno */
    *src = NULL;
    if (s)
        s->fd = -1;
    if (!a || !s) {
        snprintf(err, cap, "out of memory");
        goto fail;
    }
    archive_read_support_format_tar(a);
    archive_read_support_format_gnutar(a);
    if ((s->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fill(s)) {
        oerr = s->fd < 0 ? errno : 0;
        snprintf(err, cap, "%s", s->fd < 0 ? strerror(errno) : s->err);
        goto fail;
    }
    s->kind = sniff(s->in, s->in_len);
    if (!s->kind) { /* libarchive reads it, with its own filters */
        mv_tar_src_free(s);
        archive_read_support_filter_all(a);
        if (archive_read_open_filename(a, path, 1 << 16) == ARCHIVE_OK)
            return a;
        snprintf(err, cap, "%s", archive_error_string(a));
        oerr = archive_errno(a);
        archive_read_free(a);
        errno = oerr;
        return NULL;
    }
    int ok = s->kind == SRC_GZIP   ? inflateInit2(&s->z, 16 + MAX_WBITS) == Z_OK
             : s->kind == SRC_ZSTD ? (s->zs = ZSTD_createDStream()) != NULL
                                   : lzma_stream_decoder(&s->x, UINT64_MAX, LZMA_CONCATENATED) == LZMA_OK;
    if (!ok) {
        snprintf(err, cap, "cannot start a %s decoder: out of memory", src_name[s->kind]);
        s->kind = 0; /* no decoder to end */
        goto fail;
    }
    if (archive_read_open(a, s, NULL, src_read, NULL) != ARCHIVE_OK) {
        snprintf(err, cap, "%s", mv_tar_src_why(a, s));
        goto fail;
    }
    *src = s;
    return a;
fail:
    if (a)
        archive_read_free(a);
    mv_tar_src_free(s);
    errno = oerr;
    return NULL;
}
