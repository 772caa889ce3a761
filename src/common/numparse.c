/* numparse.c - strict numbers from command-line text (see mv_numparse.h): strtoll and strtod
 * with every byte consumed, errno's ERANGE, nan/inf and hexadecimal turned into refusals. */
#include "mv_numparse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

int mv_parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || isspace((unsigned char)*s) || *end)
        return -1;
    if (errno == ERANGE)
        return -2;
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int mv_parse_real(const char *s, double lo, int open_lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* decimal only: strtod also reads hexadecimal ("0x10" = 16), which no option means */
    const char *d = s + (*s == '+' || *s == '-');
    if (d[0] == '0' && (d[1] == 'x' || d[1] == 'X'))
        return -1;
    if (!*s || isspace((unsigned char)*s) || *end || isnan(v))
        return -1;
    if (errno == ERANGE || !isfinite(v))
        return -2;
    if (v < lo || v > hi || (open_lo && v == lo))
        return -1;
    *out = v;
    return 0;
}
