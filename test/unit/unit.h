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
#endif
