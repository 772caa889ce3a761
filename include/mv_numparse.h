/* mv_numparse.h - strict numbers from command-line text.
 *
 * A number is the whole argument: no leading space, no trailing text, within the caller's
 * bounds. "12abc", " 12", "" and values beyond the type are refused, never cut or clamped
 * (strtoll alone would take 99999999999999999999 as LLONG_MAX). Not here: what the bounds of an
 * option are (the option table of src/cli/main.c) or the wording of the usage error.
 */
#ifndef MV_NUMPARSE_H
#define MV_NUMPARSE_H

/* The decimal integer s within [lo, hi] into *out: 0; -1 when s is not a number or not within
 * [lo, hi]; -2 when it is a number beyond long long (out of range). */
int mv_parse_ll(const char *s, long long lo, long long hi, long long *out);

/* The finite real number s within [lo, hi] ((lo, hi] when open_lo) into *out: 0; -1 when s is
 * not a number (nan included) or not within the bounds; -2 when it overflows (inf included). */
int mv_parse_real(const char *s, double lo, int open_lo, double hi, double *out);

#endif
