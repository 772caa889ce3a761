/* stdfds.c - /dev/null on closed standard descriptors at start (see mv_stdfds.h).
 *
 * open() returns the lowest free descriptor, so opening /dev/null while 0, 1 or 2 is closed fills
 * that number; a descriptor that is open (whatever it is: a file, a pipe, a terminal) is left
 * alone. The guard runs before any other open, so the descriptor it gets is always the one that
 * was closed, which is checked all the same.
 */
#include "mv_stdfds.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static int closed_at_start; /* bit fd: descriptor fd was closed when the guard ran */

int mv_stdfds_was_closed(int fd) { return fd >= 0 && fd <= 2 && (closed_at_start >> fd) & 1; }

int mv_stdfds_guard(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        closed_at_start |= 1 << fd;
        int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (n < 0)
            return -1;
        if (n != fd) { /* cannot happen while fd is the lowest closed one; never keep a stray */
            close(n);
            errno = EBADF;
            return -1;
        }
    }
    return 0;
}
