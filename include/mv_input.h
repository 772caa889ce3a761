/* mv_input.h - one input's bytes, opened once, as the decoders read them (stb_image's stbi__context
 * is the model): a regular file (a descriptor, read with pread), a memory buffer, or read callbacks
 * (a stream: a tar member as libarchive hands it out), with the name every message about the input
 * uses (its path, or "shard.tar/member") and its first MV_SNIFF_BYTES bytes, read at open for
 * sniffing.
 *
 * A decoder reads front to back from the first byte (mv_input_read); the head is served again from
 * memory, so sniffing never costs a second read or a rewind of a stream. Random access
 * (mv_input_pread, mv_input_size) is for seekable inputs, a file or memory; mv_input_make_seekable
 * reads a stream to its end into memory (FFmpeg seeks in videos). A read error is remembered and
 * mv_input_fail words it: "NAME: read error[: reason]". One thread at a time per input.
 * Not here: what the bytes are (mv_sniff.h), decoding (mv_image.h, mv_video.h).
 */
#ifndef MV_INPUT_H
#define MV_INPUT_H

#include <sys/types.h>

#include "mv_common.h"
#include "mv_sniff.h"

/* A stream source: the caller's read function over its own state (user). */
typedef struct {
    /* Up to n bytes into buf: returns how many (fewer than n is fine; 0 only at the end), or -1
     * on a read error. Called again after a short read; never after 0 or -1. */
    ssize_t (*read)(void *user, void *buf, size_t n);
    /* May be NULL: the reason of the last failed read, for messages ("member data unreadable:
     * ..."); storage owned by user. */
    const char *(*error)(void *user);
} mv_input_io;

typedef struct {
    char *name;       /* read-only: the input's name in messages (a copy, owned) */
    /* the rest is private: use the functions below */
    int kind;         /* file descriptor, memory or callbacks */
    int fd, own_fd;
    const uint8_t *mem;
    uint8_t *owned;   /* memory the input holds itself (mv_input_make_seekable) */
    int64_t size;     /* bytes; -1 for a stream */
    mv_input_io io;
    void *user;
    uint64_t pos;     /* the next byte mv_input_read delivers */
    uint64_t taken;   /* stream: bytes taken from the callbacks so far */
    int ended, failed;
    char why[256];    /* the reason of a failed read */
    uint8_t head[MV_SNIFF_BYTES];
    size_t head_len;
} mv_input;

/* Opens the file at path: stat first (a FIFO is refused without being opened), then open +
 * fstat. MV_ERR_IO "PATH: No such file or directory", "PATH: Permission denied", "PATH: not a
 * regular file", "PATH: read error". */
mv_status mv_input_open_path(mv_input *in, const char *path, mv_err *e);
/* Reads the regular file behind fd (borrowed: the caller closes it after mv_input_close), from
 * offset 0 whatever the descriptor's offset. */
mv_status mv_input_open_fd(mv_input *in, int fd, const char *name, mv_err *e);
/* Reads buf[0..len) (borrowed: it must outlive the input). */
mv_status mv_input_open_mem(mv_input *in, const uint8_t *buf, size_t len, const char *name, mv_err *e);
/* Reads a stream through io (copied) with user. */
mv_status mv_input_open_io(mv_input *in, const mv_input_io *io, void *user, const char *name,
                           mv_err *e);
/* Frees what the input holds (not a borrowed fd or buffer). Safe on a zeroed or failed input. */
void mv_input_close(mv_input *in);

/* The first bytes (at most MV_SNIFF_BYTES; fewer only when the input is that short, 0 when
 * empty), read at open. */
const uint8_t *mv_input_head(const mv_input *in, size_t *n);

/* Reads the next n bytes into buf: returns n, fewer at the end of the input, or -1 on a read
 * error (then mv_input_fail). */
ssize_t mv_input_read(mv_input *in, void *buf, size_t n);
/* Back to the first byte for the next mv_input_read: 0, or -1 when a stream has been read past
 * its head. */
int mv_input_rewind(mv_input *in);

/* A stream becomes memory (read to its end); nothing to do for a file or memory. MV_ERR_IO on a
 * read error, MV_ERR_NOMEM. */
mv_status mv_input_make_seekable(mv_input *in, mv_err *e);
/* Total bytes, -1 for a stream. */
int64_t mv_input_size(const mv_input *in);
/* Seekable inputs: up to n bytes at offset off into buf (0 at or past the end), -1 on a read
 * error or on a stream. Leaves mv_input_read's position alone. */
ssize_t mv_input_pread(mv_input *in, void *buf, size_t n, uint64_t off);

/* MV_ERR_IO "NAME: read error" (": reason" appended when there is one). */
mv_status mv_input_fail(const mv_input *in, mv_err *e);

#endif
