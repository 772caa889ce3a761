/* test_claims.c - output-name claims (src/output/claims.c) between processes and threads sharing
 * one OUT: a name claimed by another process waits for it and then sees its manifest line (the
 * later input fails "already holds"), while a name in another slot is taken at once, and a run
 * starting meanwhile opens its claims at once; threads of one process claiming one name take
 * turns, names in different slots do not wait. The kernel's own view of the lock (F_OFD_GETLK
 * from another open file) is the oracle for which bytes are held. A wait is proven by a claim
 * still pending after 300 ms and finishing once released. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mv_claims.h"
#include "mv_manifest.h"
#include "unit.h"

static char out_dir[256];

/* A name whose slot differs from every slot in avoid[0..n) */
static void name_not_in(char *buf, size_t cap, const int *avoid, int n)
{
    for (int i = 0;; i++) {
        snprintf(buf, cap, "other-%d.jpg.npy.zst", i);
        int s = mv_claims_slot(buf), clash = 0;
        for (int k = 0; k < n; k++)
            clash |= s == avoid[k];
        if (!clash)
            return;
    }
}

/* 1 when some other open file holds a write lock on byte `byte` of OUT's lock file */
static int byte_locked(int byte)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s", out_dir, MV_CLAIMS_LOCK);
    int fd = open(p, O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
    int r = fd >= 0 ? fcntl(fd, F_OFD_GETLK, &fl) : -1;
    if (fd >= 0)
        close(fd);
    return r == 0 && fl.l_type != F_UNLCK;
}

typedef struct {
    mv_claims *c;
    const char *input, *name;
    atomic_int done;
    mv_status st;
    char msg[1200];
    int hold_ms; /* keep the claim this long before releasing it */
} claimer;

static void *claim_main(void *arg)
{
    claimer *k = arg;
    int may, slot;
    mv_err e = {0};
    k->st = mv_claims_take(k->c, k->input, NULL, NULL, k->name, &may, &slot, NULL, 0, &e);
    snprintf(k->msg, sizeof k->msg, "%s", k->st ? e.msg : "");
    if (!k->st) {
        unit_sleep_ms(k->hold_ms);
        mv_claims_release(k->c, slot);
    }
    atomic_store(&k->done, 1);
    return NULL;
}

/* waits up to ms for k to finish: 1 when it did */
static int finished_within(claimer *k, int ms) { return unit_wait_flag(&k->done, ms); }

typedef struct {
    mv_claims *c;
    mv_status st;
    atomic_int done;
} opener;

static void *open_main(void *arg)
{
    opener *o = arg;
    int no_locks;
    mv_err e;
    o->st = mv_claims_open(out_dir, "manifest.jsonl", NULL, &o->c, &no_locks, &e);
    atomic_store(&o->done, 1);
    return NULL;
}

static int opened_within(opener *o, int ms) { return unit_wait_flag(&o->done, ms); }

/* The other process: claims a.jpg.npy.zst for in/a, says so on `held`, waits for a byte on
 * `go`, appends its ok line and releases. */
static int child(int held, int go)
{
    mv_claims *c;
    int no_locks, may, slot;
    mv_err e;
    if (mv_claims_open(out_dir, "manifest-00000-of-00002.jsonl", NULL, &c, &no_locks, &e))
        return 10;
    if (mv_claims_take(c, "in/a", NULL, NULL, "a.jpg.npy.zst", &may, &slot, NULL, 0, &e))
        return 11;
    char b = 'h';
    if (write(held, &b, 1) != 1 || read(go, &b, 1) != 1)
        return 12;
    char mp[400];
    snprintf(mp, sizeof mp, "%s/manifest-00000-of-00002.jsonl", out_dir);
    mv_manifest *m;
    mv_record r = {.input = "in/a", .output = "a.jpg.npy.zst", .ok = 1};
    if (mv_manifest_open(mp, &m, &e) || mv_manifest_append(m, &r, &e) || mv_manifest_close(m, &e))
        return 13;
    mv_claims_release(c, slot);
    mv_claims_close(c);
    return 0;
}

int main(void)
{
    snprintf(out_dir, sizeof out_dir, "/tmp/mv-claims-XXXXXX");
    if (!mkdtemp(out_dir))
        return 1;
    mv_claims *c;
    int no_locks;
    mv_err e;
    CHECK(mv_claims_open(out_dir, "manifest-00001-of-00002.jsonl", NULL, &c, &no_locks, &e) == MV_OK && !no_locks,
          "the claims of OUT open, with locks");
    int held[2], go[2];
    if (pipe(held) || pipe(go))
        return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child(held[1], go[0]));
    char b;
    CHECK(read(held[0], &b, 1) == 1, "the other process holds its claim of a.jpg.npy.zst");
    int sa = mv_claims_slot("a.jpg.npy.zst");
    CHECK(byte_locked(2 + sa), "the kernel shows byte %d (2 + the name's slot) write-locked", 2 + sa);
    CHECK(!byte_locked(1), "and byte 1 (the list of manifests) free");

    /* a run starting now opens at once: it waits for other starting runs, never for claims */
    opener op = {0};
    pthread_t to;
    pthread_create(&to, NULL, open_main, &op);
    CHECK(opened_within(&op, 10000) && op.st == MV_OK, "a third run opens its claims while the claim is held");
    pthread_join(to, NULL);
    mv_claims_close(op.c);

    /* another slot: taken at once */
    char other[64];
    name_not_in(other, sizeof other, &sa, 1);
    claimer k1 = {.c = c, .input = "in/b", .name = other};
    pthread_t t1;
    pthread_create(&t1, NULL, claim_main, &k1);
    CHECK(finished_within(&k1, 10000) && k1.st == MV_OK, "%s (slot %d) is claimed while slot %d is held",
          other, mv_claims_slot(other), sa);
    pthread_join(t1, NULL);

    /* the same name: waits, then sees the other's line */
    claimer k2 = {.c = c, .input = "in/a-elsewhere", .name = "a.jpg.npy.zst"};
    pthread_t t2;
    pthread_create(&t2, NULL, claim_main, &k2);
    CHECK(!finished_within(&k2, 300), "a claim of the same name waits while the other process holds it");
    b = 'g';
    CHECK(write(go[1], &b, 1) == 1, "the other process is let go");
    CHECK(finished_within(&k2, 10000), "the waiting claim ends once the other process released");
    pthread_join(t2, NULL);
    CHECK(k2.st == MV_ERR_OUTPUT && strstr(k2.msg, "already holds the embedding of in/a"),
          "and it sees the line appended under the claim: %s", k2.msg);
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the other process finished cleanly (%d)", status);
    CHECK(!byte_locked(2 + sa), "byte %d is free again", 2 + sa);

    /* threads of this process: one name takes turns, another slot does not wait */
    claimer h = {.c = c, .input = "in/x", .name = "x.jpg.npy.zst", .hold_ms = 1500};
    pthread_t th;
    pthread_create(&th, NULL, claim_main, &h);
    unit_sleep_ms(100);
    int sx = mv_claims_slot("x.jpg.npy.zst");
    char y[64];
    name_not_in(y, sizeof y, &sx, 1);
    claimer ky = {.c = c, .input = "in/y", .name = y};
    claimer kx = {.c = c, .input = "in/x", .name = "x.jpg.npy.zst"};
    pthread_t ty, tx;
    pthread_create(&ty, NULL, claim_main, &ky);
    pthread_create(&tx, NULL, claim_main, &kx);
    CHECK(finished_within(&ky, 1000) && ky.st == MV_OK && !atomic_load(&h.done),
          "a thread claims %s while another thread holds x.jpg.npy.zst", y);
    CHECK(!atomic_load(&kx.done), "a second thread's claim of x.jpg.npy.zst waits for the first");
    CHECK(finished_within(&kx, 10000) && kx.st == MV_OK && atomic_load(&h.done),
          "and is taken once the first released it");
    pthread_join(th, NULL);
    pthread_join(ty, NULL);
    pthread_join(tx, NULL);
    mv_claims_close(c);

    /* a line another run was appending while this one opened (its first part written): noted
     * before it, so the next look reads it whole */
    char out2[300], mp[400];
    snprintf(out2, sizeof out2, "%s/two", out_dir);
    mkdir(out2, 0777);
    snprintf(mp, sizeof mp, "%s/manifest.jsonl", out2);
    mv_record r = {.input = "in/p", .output = "p.jpg.npy.zst", .ok = 1};
    char *line;
    size_t len;
    FILE *f = fopen(mp, "w");
    if (!f || mv_manifest_format(&r, &line, &len, &e))
        return 1;
    fwrite(line, 1, len / 2, f);
    fclose(f);
    mv_claims *c2;
    CHECK(mv_claims_open(out2, "manifest.jsonl", NULL, &c2, &no_locks, &e) == MV_OK, "claims open beside a half-written line");
    f = fopen(mp, "a");
    fwrite(line + len / 2, 1, len - len / 2, f);
    fputc('\n', f);
    fclose(f);
    free(line);
    claimer kp = {.c = c2, .input = "in/q", .name = "p.jpg.npy.zst"};
    claim_main(&kp);
    CHECK(kp.st == MV_ERR_OUTPUT && strstr(kp.msg, "already holds the embedding of in/p"),
          "the line, finished after the open, holds its name: %s", kp.msg);
    mv_claims_close(c2);

    /* live runs: one of fingerprint A holds OUT; B is refused (nothing added to the lock file),
     * another A is let in; once the As closed, B is let in and takes over a finished run's line */
    char out3[300], lp[400];
    snprintf(out3, sizeof out3, "%s/three", out_dir);
    mkdir(out3, 0777);
    snprintf(lp, sizeof lp, "%s/%s", out3, MV_CLAIMS_LOCK);
    mv_claims *a1, *a2, *b1;
    CHECK(mv_claims_open(out3, "manifest.jsonl", "aaaaaaaaaaaaaaaa", &a1, &no_locks, &e) == MV_OK,
          "a run of fingerprint A opens OUT");
    struct stat l1, l2;
    stat(lp, &l1);
    CHECK(mv_claims_open(out3, "manifest.jsonl", "bbbbbbbbbbbbbbbb", &b1, &no_locks, &e) == MV_ERR_USAGE &&
              strstr(e.msg, "another run is writing into it with other settings") &&
              strstr(e.msg, "fingerprint aaaaaaaaaaaaaaaa; this run's fingerprint is bbbbbbbbbbbbbbbb"),
          "a run of fingerprint B is refused while A is live: %s", e.msg);
    stat(lp, &l2);
    CHECK(l1.st_size == l2.st_size, "and adds nothing to the lock file (%lld, %lld bytes)", (long long)l1.st_size,
          (long long)l2.st_size);
    int lfd = open(lp, O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = MV_CLAIMS_LIVE_BYTE0, .l_len = 1};
    CHECK(lfd >= 0 && fcntl(lfd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_RDLCK, "the kernel shows A's live byte held");
    close(lfd);
    CHECK(mv_claims_open(out3, "manifest.jsonl", "aaaaaaaaaaaaaaaa", &a2, &no_locks, &e) == MV_OK,
          "a second run of A opens beside it");
    struct stat l3, l4;
    stat(lp, &l3);
    mv_claims_close(a1);
    mv_claims_close(a2);
    CHECK(mv_claims_open(out3, "manifest.jsonl", "bbbbbbbbbbbbbbbb", &b1, &no_locks, &e) == MV_OK,
          "B opens once the runs of A have ended");
    stat(lp, &l4);
    CHECK(l4.st_size == l3.st_size, "reusing their lines (%lld, %lld bytes)", (long long)l3.st_size,
          (long long)l4.st_size);
    mv_claims_close(b1);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out_dir);
    if (system(cmd) != 0)
        return 1;
    return UNIT_DONE();
}
