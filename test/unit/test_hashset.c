/* test_hashset.c - the library's hash table (src/common/hashset.c): every key added is found with
 * its value and none other is, through many doublings; keys are bytes (NULs, the empty key);
 * key pointers survive growth; adding a key again finds the first. The expected contents are the
 * keys the test itself adds. */
#include "mv_hashset.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

enum { N = 100000 };

/* key i: "k<i>" for even i, 8 raw bytes holding a NUL for odd i */
static size_t key_of(int i, char *buf)
{
    if (i % 2 == 0)
        return (size_t)snprintf(buf, 32, "k%d", i);
    memcpy(buf, &i, sizeof i);
    buf[4] = 0;
    memcpy(buf + 5, "\xff\x01z", 3);
    return 8;
}

int main(void)
{
    mv_hashset s = {0};
    char k[32];
    CHECK(mv_hashset_find(&s, "x", 1) == NULL, "an empty set finds nothing");

    const char **keys = malloc(N * sizeof *keys);
    int ok_add = keys != NULL;
    for (int i = 0; ok_add && i < N; i++) {
        size_t len = key_of(i, k);
        int added = -1;
        mv_hashset_entry *en = mv_hashset_add(&s, k, len, &added);
        if (!en || added != 1 || en->value != 0 || en->len != len || memcmp(en->key, k, len) || en->key[len])
            ok_add = 0;
        else {
            en->value = (size_t)i * 3 + 1;
            keys[i] = en->key;
        }
    }
    CHECK(ok_add && s.n == N, "%d distinct keys added (%zu in the set, %zu slots)", N, s.n, s.cap);

    int ok_find = ok_add, ok_ptr = ok_add;
    for (int i = 0; ok_find && i < N; i++) {
        size_t len = key_of(i, k);
        mv_hashset_entry *en = mv_hashset_find(&s, k, len);
        ok_find = en && en->value == (size_t)i * 3 + 1 && en->len == len;
        ok_ptr = ok_ptr && en && en->key == keys[i] && !memcmp(keys[i], k, len);
    }
    CHECK(ok_find, "every key found with its value after the table doubled");
    CHECK(ok_ptr, "key pointers from the first add are still the keys");
    CHECK(s.cap >= 2 * s.n && (s.cap & (s.cap - 1)) == 0, "at most half full (%zu of %zu)", s.n, s.cap);

    int added = -1;
    size_t len = key_of(4242, k);
    mv_hashset_entry *again = mv_hashset_add(&s, k, len, &added);
    CHECK(again && added == 0 && again->value == 4242 * 3 + 1 && s.n == N, "adding a key again finds it");
    CHECK(!mv_hashset_find(&s, "k1", 2) && !mv_hashset_find(&s, "k100000", 7) &&
              !mv_hashset_find(&s, "k4242\0", 6) && !mv_hashset_find(&s, "", 0),
          "keys never added are not found (an odd number as text, N, a trailing NUL, the empty key)");

    mv_hashset_entry *empty = mv_hashset_add(&s, "", 0, &added);
    CHECK(empty && added == 1 && empty->key[0] == 0 && mv_hashset_find(&s, "", 0) == empty, "the empty key is a key");
    mv_hashset_entry *big = NULL;
    char *long_key = malloc(200000);
    if (long_key) {
        memset(long_key, 'q', 200000);
        big = mv_hashset_add(&s, long_key, 200000, &added);
    }
    CHECK(big && added && mv_hashset_find(&s, long_key, 200000) == big && !memcmp(big->key, long_key, 200000),
          "a key larger than a storage block");
    free(long_key);

    mv_hashset_free(&s);
    CHECK(s.n == 0 && s.cap == 0 && !mv_hashset_find(&s, "k0", 2), "freed: an empty set again");
    CHECK(mv_hashset_add(&s, "k0", 2, &added) && added == 1, "and usable again");
    mv_hashset_free(&s);
    free(keys);
    return UNIT_DONE();
}
