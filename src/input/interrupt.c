/* interrupt.c - the run's interrupt flag for the decoders (see mv_interrupt.h): one pointer,
 * set before the decode threads start, read atomically by them. */
#include "mv_interrupt.h"

#include <stddef.h>

static const volatile sig_atomic_t *watched;

void mv_interrupt_watch(const volatile sig_atomic_t *flag)
{
    __atomic_store_n(&watched, flag, __ATOMIC_RELEASE);
}

int mv_interrupt_watched(void) { return __atomic_load_n(&watched, __ATOMIC_ACQUIRE) != NULL; }

int mv_interrupted(void)
{
    const volatile sig_atomic_t *f = __atomic_load_n(&watched, __ATOMIC_ACQUIRE);
    return f && *f;
}
