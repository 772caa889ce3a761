/* test_common.c - error messages (src/common/common.c): mv_fail and mv_fail_prefix keep a long
 * message's start and its end (the cause after a long path) within mv_err, cut between UTF-8
 * sequences (libc's mbstowcs in a UTF-8 locale says whether the result is valid). */
#include "mv_common.h"
#include "unit.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *end)
{
    size_t a = strlen(s), b = strlen(end);
    return a >= b && !strcmp(s + a - b, end);
}

static int valid_utf8(const char *s) { return mbstowcs(NULL, s, 0) != (size_t)-1; }

int main(void)
{
    int utf8 = setlocale(LC_CTYPE, "C.UTF-8") != NULL;
    CHECK(utf8, "the C.UTF-8 locale is there to check UTF-8 with");
    mv_err e;
    mv_fail(&e, MV_ERR_IO, "%s: %s", "short/path.jpg", "No such file or directory");
    CHECK(!strcmp(e.msg, "short/path.jpg: No such file or directory"), "a short message as it is: %s", e.msg);

    static char path[3001];
    memset(path, 'a', 3000);
    memcpy(path, "/data/", 6);
    const char *cause = "JPEG decode failed: Premature end of JPEG file";
    mv_status st = mv_fail(&e, MV_ERR_FORMAT, "%s: %s", path, cause);
    CHECK(st == MV_ERR_FORMAT, "mv_fail returns the status");
    CHECK(strlen(e.msg) < sizeof e.msg && ends_with(e.msg, cause), "a long path keeps the cause at the end");
    CHECK(!strncmp(e.msg, "/data/aaa", 9) && strstr(e.msg, " ... "), "and the path's start, with ' ... ' between");

    /* two-byte characters all along: every cut falls between them */
    static char wide[4001];
    for (int i = 0; i < 2000; i++)
        memcpy(wide + 2 * i, "\xc3\xa9", 2);
    for (int shift = 0; shift < 3; shift++) {
        mv_fail(&e, MV_ERR_FORMAT, "%.*s%s: %s", shift, "xyz", wide, cause);
        CHECK(ends_with(e.msg, cause) && valid_utf8(e.msg), "UTF-8 path, shifted by %d: cut between characters", shift);
    }

    /* a prefix on a message that already fills e */
    mv_fail(&e, MV_ERR_FORMAT, "%s: %s", path, cause);
    mv_fail_prefix(&e, MV_ERR_FORMAT, "tar %s", "shard.tar");
    CHECK(!strncmp(e.msg, "tar shard.tar: /data/", 21) && ends_with(e.msg, cause),
          "mv_fail_prefix keeps the prefix, the start and the cause: %.40s...", e.msg);
    mv_fail(&e, MV_ERR_FORMAT, "%s", "bad header");
    mv_fail_prefix(&e, MV_ERR_FORMAT, "%s", "x.png");
    CHECK(!strcmp(e.msg, "x.png: bad header"), "a short prefixed message as it is: %s", e.msg);
    return UNIT_DONE();
}
