/* mv_busy.h - how long a device was busy: the union of time intervals (a GPU's forwards, from CUDA
 * events, overlapping when several are in flight), kept in bounded memory for runs of any length.
 * Not here: where the intervals come from (mv_backend.gpu_t0/t1) or printing (runner.c, -v). */
#ifndef MV_BUSY_H
#define MV_BUSY_H

#include <stddef.h>

/* At most MV_BUSY_MAX intervals are kept: when full they are merged into disjoint ones and all but
 * the newest MV_BUSY_KEEP are folded into a sum of seconds. Intervals are expected roughly in time
 * order: one added later may overlap only the last MV_BUSY_KEEP disjoint intervals (a forward in
 * flight queued behind at most the device's few other forwards in flight). */
#define MV_BUSY_MAX 4096
#define MV_BUSY_KEEP 64

typedef struct {
    double (*iv)[2]; /* [n][t0, t1] */
    size_t n, cap;
    double folded; /* seconds of the intervals folded away */
    double first, last; /* the earliest start and the latest end added (when n or folded) */
} mv_busy;

/* Adds [t0, t1] (t1 > t0). Returns 0, or -1 without memory (the interval is then not counted). */
int mv_busy_add(mv_busy *b, double t0, double t1);
/* Seconds covered by the union of every interval added so far. */
double mv_busy_seconds(mv_busy *b);
void mv_busy_free(mv_busy *b);

#endif
