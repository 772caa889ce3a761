/* mv_stdfds.h - the standard descriptors made safe before a program opens anything.
 *
 * A process started with 0, 1 or 2 closed (`2>&-`, `<&-`) would hand those numbers to the first
 * files it opens: the manifest would then receive stderr's messages, or be read back as the path
 * list of "-". mv_stdfds_guard gives every closed one of them /dev/null instead. Call it first
 * thing in main, before any open. Not here: signal dispositions (main.c).
 */
#ifndef MV_STDFDS_H
#define MV_STDFDS_H

/* Opens /dev/null on each of descriptors 0, 1, 2 that is closed (0 read-only, 1 and 2
 * write-only). 0, or -1 with errno when /dev/null cannot be opened (the caller exits: it can
 * write no message, and must not open anything else). */
int mv_stdfds_guard(void);

/* 1 when descriptor fd (0, 1 or 2) was closed when mv_stdfds_guard ran (and now reads or writes
 * /dev/null): a command whose product is its standard output refuses to run then. */
int mv_stdfds_was_closed(int fd);

#endif
