/* claims_int.h - what claims.c and claims_commit.c share: the claims structure, the lock file's
 * bytes and the OFD lock on one of them. Not part of the library's interface (mv_claims.h is).
 */
#ifndef MV_CLAIMS_INT_H
#define MV_CLAIMS_INT_H

#include "mv_claims.h"
#include "mv_manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/types.h>

typedef struct {
    char *name; /* file name in OUT */
    ino_t ino;
    int64_t off;  /* read up to here */
    int64_t off0; /* where its whole lines ended when first noted (0: made since, or replaced) */
} seen_file;

/* Claims are taken per name slot: byte SLOT_BYTE0 + slot of the lock file, slot =
 * mv_hash64(name) mod CLAIM_SLOTS, so that writers of different names (in one process or
 * several) rename, fsync and append their lines side by side (one lock for all made the
 * directory fsyncs of every writer wait in one line), while two claims of one name still wait
 * for each other. Byte 1 keeps the list of manifests: opening runs take it one at a time; claims
 * never wait for it (so a run starting beside busy ones is never starved) and read the list as
 * it is (a line being written is not a manifest's name yet). */
#define CLAIM_SLOTS MV_CLAIM_SLOTS
#define LIST_BYTE 1
#define SLOT_BYTE0 2
#define FILES_BYTE (SLOT_BYTE0 + CLAIM_SLOTS) /* held shared by files-layout runs */
#define LIVE_BYTE0 MV_CLAIMS_LIVE_BYTE0        /* + a live run's slot: held shared while it runs */
#define LIVE_SLOTS 10000                       /* its four digits */
#define INPUT_BYTE0 (LIVE_BYTE0 + LIVE_SLOTS)  /* + an input's slot (input_slot): held around a claim */
#define COMMIT_BYTE (INPUT_BYTE0 + CLAIM_SLOTS) /* a tar shard's commit, whatever its naming */

struct mv_claims {
    char *out_dir;
    int fd;
    int no_locks;
    /* this process's threads share one open file description, whose OFD locks never exclude
     * each other: a slot's mutex keeps them apart, and `mu` guards the view below */
    pthread_mutex_t slot_mu[CLAIM_SLOTS], input_mu[CLAIM_SLOTS];
    pthread_mutex_t mu;
    mv_done *seen;      /* the lines read since open */
    seen_file *files;
    size_t n_files;
};

/* OFD lock of type (F_RDLCK, F_WRLCK, F_UNLCK) on byte `byte` of fd: 0, or -1 with errno. */
static inline int ofd_lock(int fd, short type, off_t byte, int wait)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
    int r;
    do
        r = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
    while (r != 0 && errno == EINTR);
    return r;
}

/* Reads the registered manifests' lines appended since the last look into c->seen (c->mu held). */
mv_status mv_claims_read_on(mv_claims *c, mv_err *e);

/* 1 when a registered manifest other than mine (a file name in OUT) ends elsewhere than where
 * the last look read it to (grew, was replaced, or is new since), or the list cannot be read;
 * only stats, no lines read (c->mu held). */
int mv_claims_others_moved(mv_claims *c, const char *mine);

#endif
