/* mv_batch.h - packing ready inputs into forwards (pure functions, no threads).
 *
 * The tower thread takes a window of inputs that are ready and packs them into forwards of at
 * most `limit` patches with first-fit decreasing, so mixed sizes (a 4K photo among thumbnails,
 * videos among images) still fill each forward instead of cutting it at the first input that does
 * not fit. */
#ifndef MV_BATCH_H
#define MV_BATCH_H

#include <stdint.h>

/* tok[0..n): patches per input (>= 1). Writes bin[i], the forward input i goes to, numbered from
 * 0 in the order forwards were opened (the first holds the largest input); an input larger than
 * limit gets a forward of its own. limit <= 0 means one input per forward. bin_tokens, when not
 * NULL, receives each forward's patch count (room for n entries). Returns the number of forwards,
 * or -1 when out of memory. Deterministic: equal sizes keep their input order. */
int mv_pack_ffd(const int64_t *tok, int n, int64_t limit, int *bin, int64_t *bin_tokens);

/* Which of a window's nb forwards (bin_tokens[b] patches each) to hold back for the next window
 * instead of running now: those under half of limit, when at least one forward of the window is
 * at least half full (so every window runs something). A window of whole forwards plus a sliver
 * (the one input past two forwards' worth) would otherwise run the sliver as a forward of its
 * own, a third of the forwards at a thirtieth of the work. fixed[b] != 0: bin b holds an input
 * held back once already, which runs now. Sets keep[b] (0/1); returns how many are kept. */
int mv_pack_keep(const int64_t *bin_tokens, const unsigned char *fixed, int nb, int64_t limit,
                 unsigned char *keep);

#endif
