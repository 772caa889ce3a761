/* hashset.c - the library's hash table (see mv_hashset.h): linear probing over a power-of-two
 * slot array at most half full, keys in blocks that are never moved. */
#include "mv_hashset.h"

#include "mv_names.h" /* mv_hash64 */

#include <stdlib.h>
#include <string.h>

enum { BLOCK = 64 << 10, FIRST_CAP = 64 };

struct mv_hashset_block {
    mv_hashset_block *next;
    size_t used, cap;
    char data[];
};

/* The slot of key: its entry, or the empty slot where it would go. */
static mv_hashset_entry *probe(mv_hashset_entry *slots, size_t cap, const void *key, size_t len, uint64_t h)
{
    size_t i = (size_t)h & (cap - 1);
    while (slots[i].key &&
           !(slots[i].hash == h && slots[i].len == len && memcmp(slots[i].key, key, len) == 0))
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

mv_hashset_entry *mv_hashset_find(const mv_hashset *s, const void *key, size_t len)
{
    if (!s->cap)
        return NULL;
    mv_hashset_entry *en = probe(s->slots, s->cap, key, len, mv_hash64(key, len));
    return en->key ? en : NULL;
}

/* A copy of key[0..len) + NUL in the blocks, or NULL when out of memory. */
static char *store(mv_hashset *s, const void *key, size_t len)
{
    mv_hashset_block *b = s->blocks;
    if (!b || b->cap - b->used < len + 1) {
        size_t cap = len + 1 > BLOCK ? len + 1 : BLOCK;
        if (!(b = malloc(sizeof *b + cap)))
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = s->blocks;
        s->blocks = b;
    }
    char *k = b->data + b->used;
    memcpy(k, key, len);
    k[len] = 0;
    b->used += len + 1;
    return k;
}

static int grow(mv_hashset *s)
{
    size_t nc = s->cap ? s->cap * 2 : FIRST_CAP;
    mv_hashset_entry *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i].key)
            *probe(ns, nc, s->slots[i].key, s->slots[i].len, s->slots[i].hash) = s->slots[i];
    free(s->slots);
    s->slots = ns;
    s->cap = nc;
    return 0;
}

mv_hashset_entry *mv_hashset_add(mv_hashset *s, const void *key, size_t len, int *added)
{
    uint64_t h = mv_hash64(key, len);
    mv_hashset_entry *en = s->cap ? probe(s->slots, s->cap, key, len, h) : NULL;
    if (en && en->key) {
        if (added)
            *added = 0;
        return en;
    }
    if ((s->n + 1) * 2 > s->cap) {
        if (grow(s))
            return NULL;
        en = probe(s->slots, s->cap, key, len, h);
    }
    const char *k = store(s, key, len);
    if (!k)
        return NULL;
    *en = (mv_hashset_entry){.key = k, .len = len, .value = 0, .hash = h};
    s->n++;
    if (added)
        *added = 1;
    return en;
}

void mv_hashset_free(mv_hashset *s)
{
    for (mv_hashset_block *b = s->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(s->slots);
    memset(s, 0, sizeof *s);
}
