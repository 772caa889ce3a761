/* mv_hashset.h - a set of byte strings, each key with one size_t value for its owner: the one
 * hash table of the library (resume's indexes, merge's table, the names used in a run, the
 * directories swept of temp files).
 *
 * Open addressing with linear probing on mv_hash64 (FNV-1a 64), never more than half full: the
 * table doubles before an add would pass that. Keys are copied into storage of the set's own that
 * never moves, so a key pointer (entry->key) stays valid until mv_hashset_free, while an entry
 * pointer stays valid only until the next add. Nothing is ever removed. A zero-initialised
 * mv_hashset is an empty set; its fields are the set's own. Not thread-safe: a set shared by
 * threads needs the caller's lock. Memory: the keys, and 2 to 4 slots of 32 bytes per key.
 */
#ifndef MV_HASHSET_H
#define MV_HASHSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *key; /* the set's copy, NUL-terminated (len does not count the NUL); NULL: empty slot */
    size_t len;
    size_t value;    /* the caller's; 0 when the key is added */
    uint64_t hash;
} mv_hashset_entry;

typedef struct mv_hashset_block mv_hashset_block;

typedef struct {
    mv_hashset_entry *slots; /* [cap], cap a power of two (0 while empty) */
    size_t cap, n;
    mv_hashset_block *blocks; /* the keys' storage */
} mv_hashset;

/* The entry of key[0..len), or NULL when it is not in s. */
mv_hashset_entry *mv_hashset_find(const mv_hashset *s, const void *key, size_t len);

/* The entry of key[0..len), added (with value 0) when it was not in s; *added (may be NULL) says
 * which. NULL when out of memory (s is unchanged). */
mv_hashset_entry *mv_hashset_add(mv_hashset *s, const void *key, size_t len, int *added);

/* Frees every key and slot; s is an empty set again. */
void mv_hashset_free(mv_hashset *s);

#endif
