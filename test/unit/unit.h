/* unit.h - a tiny TAP unit-test harness: CHECK prints "ok N - what" / "not ok N - what".
 * main() returns non-zero when any check failed. scripts/run-tests.sh sums the lines. */
#ifndef MV_UNIT_H
#define MV_UNIT_H
#include <stdio.h>
#include <math.h>

static int unit_n, unit_failed;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        int ok_ = !!(cond);                                                                \
        unit_n++;                                                                          \
        if (!ok_) unit_failed++;                                                           \
        printf("%s %d - ", ok_ ? "ok" : "not ok", unit_n);                                \
        printf(__VA_ARGS__);                                                               \
        printf("\n");                                                                      \
        if (!ok_) printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);         \
    } while (0)

#define CHECK_INT_EQ(a, b, what)                                                           \
    do {                                                                                   \
        long long a_ = (long long)(a), b_ = (long long)(b);                                \
        CHECK(a_ == b_, "%s (%lld == %lld)", what, a_, b_);                                \
    } while (0)

#define UNIT_DONE() (printf("1..%d\n", unit_n), unit_failed ? 1 : 0)

/* Threaded C tests: a sleep, and a wait of up to ms for a flag another thread sets (1 once set).
 * Not for test/cuda's C++, which includes this header too. */
#ifndef __cplusplus
#include <stdatomic.h>
#include <time.h>
static inline void unit_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
static inline int unit_wait_flag(atomic_int *flag, int ms)
{
    for (int t = 0; t < ms && !atomic_load(flag); t += 5)
        unit_sleep_ms(5);
    return atomic_load(flag);
}
#endif
#endif
