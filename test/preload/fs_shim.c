/* fs_shim.c - an LD_PRELOAD shim for tests: the file systems OUT may be on that lack locks or
 * renameat2's flags (NFS clients, some FUSE and network file systems), on a local disk. What it
 * takes away is chosen by environment variables, read at each call; everything else passes
 * through to the real calls:
 *   FS_SHIM_NOLOCK=1           fcntl's record and OFD locks fail with ENOLCK (an NFS client
 *                              mounted nolock);
 *   FS_SHIM_RENAME2=noreplace  renameat2 with RENAME_NOREPLACE fails with EINVAL;
 *   FS_SHIM_RENAME2=all        renameat2 with any flags fails with EINVAL (RENAME_EXCHANGE too);
 *   FS_SHIM_EIO=TEXT           pread / pread64 of a file whose path holds TEXT fail with EIO (a
 *                              disk's bad sector);
 *   FS_SHIM_READ_EIO=TEXT      a stream read with getline whose file's path holds TEXT reads its
 *                              first line (and the buffer read with it); its later reads fail
 *                              with EIO (its descriptor is then /proc/self/mem at address 0: a
 *                              real read error, which the stream's ferror shows);
 *   FS_SHIM_READ_EIO_SKIP=N    the first N such streams are left alone (a later reading of one
 *                              file fails);
 *   FS_SHIM_OPENDIR=TEXT       opendir of a path ending in TEXT fails with EACCES (a directory
 *                              the user may not list);
 *   FS_SHIM_LOG=FILE           each call refused appends a line to FILE (so that a test can tell
 *                              the shim was in the way);
 *   FS_SHIM_PAUSE_RENAMED=GO   after renameat2 gave a file a name shard-*.tar, FILE GO.waiting is
 *                              made and the call waits until GO exists (a writer between naming
 *                              its shard and appending the shard's lines);
 *   FS_SHIM_PAUSE_PLACED=GO    the same after renameat2 or renameat gave a file a name ending
 *                              in .npy.zst (a writer between placing an output and what follows);
 *   FS_SHIM_CLOCK_SHIFT=SECONDS the wall clock (clock_gettime's CLOCK_REALTIME, time) reads
 *                              SECONDS later (negative: earlier): a host whose clock is wrong,
 *                              or one set back since an earlier run;
 *   FS_SHIM_MMAP_LOG=FILE      each mmap of an inaccessible, unreserved range (PROT_NONE with
 *                              MAP_NORESERVE: what an address-space probe maps) appends a line
 *                              "noreserve LENGTH" to FILE; the mapping is made as asked.
 * Built by test_helper.bash's fs_shim: cc -shared -fPIC -o fs_shim.so fs_shim.c -ldl */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Appends what was refused to FS_SHIM_LOG, when set (errno kept). */
static void note(const char *what, const char *a, const char *b)
{
    const char *log = getenv("FS_SHIM_LOG");
    int saved = errno;
    int fd = log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
    if (fd >= 0) {
        char line[4200];
        int n = snprintf(line, sizeof line, "%s %s%s%s\n", what, a, b ? " -> " : "", b ? b : "");
        if (n > 0 && write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
            n = 0;
        close(fd);
    }
    errno = saved;
}

/* 1 when the last part of path is shard-*.tar */
static int is_shard(const char *path)
{
    const char *b = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(b);
    return !strncmp(b, "shard-", 6) && n > 10 && !strcmp(b + n - 4, ".tar");
}

/* 1 when path ends in .npy.zst */
static int is_output(const char *path)
{
    size_t n = strlen(path);
    return n > 8 && !strcmp(path + n - 8, ".npy.zst");
}

/* With env var set (to GO): makes GO.waiting, then waits until GO exists (at most 120 s). */
static void pause_at(const char *var)
{
    const char *go = getenv(var);
    if (!go)
        return;
    int saved = errno;
    char w[4200];
    snprintf(w, sizeof w, "%s.waiting", go);
    int fd = open(w, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 12000 && access(go, F_OK) != 0; i++)
        nanosleep(&ts, NULL);
    errno = saved;
}

static int is_lock(int cmd)
{
    return cmd == F_SETLK || cmd == F_SETLKW || cmd == F_GETLK || cmd == F_OFD_SETLK ||
           cmd == F_OFD_SETLKW || cmd == F_OFD_GETLK;
}

/* fcntl or fcntl64 (name): with FS_SHIM_NOLOCK, locks fail with ENOLCK; the rest goes to the
 * real one */
static int shim_fcntl(const char *name, int fd, int cmd, void *arg)
{
    const char *nolock = getenv("FS_SHIM_NOLOCK");
    if (nolock && !strcmp(nolock, "1") && is_lock(cmd)) {
        note(name, "lock: ENOLCK", NULL);
        errno = ENOLCK;
        return -1;
    }
    int (*real)(int, int, ...) = (int (*)(int, int, ...))dlsym(RTLD_NEXT, name);
    return real(fd, cmd, arg);
}

#define SHIM(name)                                                                                  \
    int name(int fd, int cmd, ...)                                                                  \
    {                                                                                               \
        va_list ap;                                                                                 \
        va_start(ap, cmd);                                                                          \
        void *arg = va_arg(ap, void *);                                                             \
        va_end(ap);                                                                                 \
        return shim_fcntl(#name, fd, cmd, arg);                                                     \
    }
SHIM(fcntl)
SHIM(fcntl64)

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)
{
    const char *r2 = getenv("FS_SHIM_RENAME2");
    if (r2 && (!strcmp(r2, "all") || (!strcmp(r2, "noreplace") && (flags & RENAME_NOREPLACE)))) {
        note(flags & RENAME_NOREPLACE ? "renameat2 RENAME_NOREPLACE: EINVAL" : "renameat2: EINVAL", oldpath,
             newpath);
        errno = EINVAL;
        return -1;
    }
    int (*real)(int, const char *, int, const char *, unsigned int) =
        (int (*)(int, const char *, int, const char *, unsigned int))dlsym(RTLD_NEXT, "renameat2");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    int r = real(olddirfd, oldpath, newdirfd, newpath, flags);
    if (r == 0 && is_shard(newpath))
        pause_at("FS_SHIM_PAUSE_RENAMED");
    if (r == 0 && is_output(newpath))
        pause_at("FS_SHIM_PAUSE_PLACED");
    return r;
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    int (*real)(int, const char *, int, const char *) =
        (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
    int r = real(olddirfd, oldpath, newdirfd, newpath);
    if (r == 0 && is_output(newpath))
        pause_at("FS_SHIM_PAUSE_PLACED");
    return r;
}

/* With FS_SHIM_EIO, whether fd is a file whose path (as /proc/self/fd tells it) holds that text. */
static int eio_fd(int fd)
{
    const char *t = getenv("FS_SHIM_EIO");
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = t && *t ? readlink(link, path, sizeof path - 1) : -1;
    if (n < 0)
        return 0;
    path[n] = 0;
    if (!strstr(path, t))
        return 0;
    note("pread: EIO", path, NULL);
    return 1;
}

#define SHIM_PREAD(name)                                                                            \
    ssize_t name(int fd, void *buf, size_t n, off_t off)                                            \
    {                                                                                               \
        if (eio_fd(fd)) {                                                                           \
            errno = EIO;                                                                            \
            return -1;                                                                              \
        }                                                                                           \
        ssize_t (*real)(int, void *, size_t, off_t) =                                               \
            (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, #name);                       \
        return real(fd, buf, n, off);                                                               \
    }
SHIM_PREAD(pread)
SHIM_PREAD(pread64)

/* With FS_SHIM_READ_EIO: after the first getline of a stream whose file's path holds that text
 * (past the first FS_SHIM_READ_EIO_SKIP such streams), the stream's descriptor is swapped for /proc/self/mem at offset 0, whose reads fail with EIO. */
ssize_t getline(char **line, size_t *cap, FILE *f)
{
    ssize_t (*real)(char **, size_t *, FILE *) =
        (ssize_t (*)(char **, size_t *, FILE *))dlsym(RTLD_NEXT, "getline");
    off_t at = ftello(f); /* 0: the stream's first line */
    ssize_t r = real(line, cap, f);
    const char *t = getenv("FS_SHIM_READ_EIO");
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fileno(f));
    ssize_t n = r > 0 && at == 0 && t && *t ? readlink(link, path, sizeof path - 1) : -1;
    if (n > 0) {
        path[n] = 0;
        static int seen; /* matching streams so far */
        const char *skip = getenv("FS_SHIM_READ_EIO_SKIP");
        int hit = strstr(path, t) && ++seen > (skip ? atoi(skip) : 0);
        int m = hit ? open("/proc/self/mem", O_RDONLY | O_CLOEXEC) : -1;
        if (m >= 0) {
            note("getline: later reads EIO", path, NULL);
            dup3(m, fileno(f), O_CLOEXEC);
            close(m);
        }
    }
    return r;
}

/* With FS_SHIM_OPENDIR: opendir of a path ending in that text fails with EACCES. */
DIR *opendir(const char *name)
{
    DIR *(*real)(const char *) = (DIR * (*)(const char *)) dlsym(RTLD_NEXT, "opendir");
    const char *t = getenv("FS_SHIM_OPENDIR");
    size_t n = strlen(name), tl = t ? strlen(t) : 0;
    if (tl && n >= tl && !strcmp(name + n - tl, t)) {
        note("opendir: EACCES", name, NULL);
        errno = EACCES;
        return NULL;
    }
    return real(name);
}

/* With FS_SHIM_CLOCK_SHIFT: CLOCK_REALTIME (and time) shifted by that many seconds. */
static time_t clock_shift(void)
{
    const char *t = getenv("FS_SHIM_CLOCK_SHIFT");
    return t ? (time_t)atoll(t) : 0;
}

/* The system call itself, not dlsym's next clock_gettime: dlsym allocates, and AddressSanitizer
 * reads the clock while its allocator starts (a nested error at start-up under LD_PRELOAD). */
int clock_gettime(clockid_t id, struct timespec *ts)
{
    int r = (int)syscall(SYS_clock_gettime, id, ts);
    if (r == 0 && id == CLOCK_REALTIME)
        ts->tv_sec += clock_shift();
    return r;
}

time_t time(time_t *t)
{
    struct timespec ts;
    time_t now = clock_gettime(CLOCK_REALTIME, &ts) == 0 ? ts.tv_sec : (time_t)-1;
    if (t)
        *t = now;
    return now;
}

/* The system call itself (no dlsym: allocators map memory while they start), logged with
 * FS_SHIM_MMAP_LOG (errno kept). */
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    const char *log = getenv("FS_SHIM_MMAP_LOG");
    if (log && prot == PROT_NONE && (flags & MAP_NORESERVE)) {
        const int e = errno;
        char line[64];
        const int n = snprintf(line, sizeof line, "noreserve %zu\n", len);
        const int lf = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (lf >= 0) {
            if (write(lf, line, (size_t)n) < 0) { /* the test sees a short log */
            }
            close(lf);
        }
        errno = e;
    }
    return p;
}
