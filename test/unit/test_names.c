/* test_names.c - the naming rules (src/common/names.c): output names of paths, FNV-1a 64 against
 * its published test vectors, and the kinds of names by extension. */
#include "mv_names.h"
#include "unit.h"

#include <string.h>

int main(void)
{
    /* mv_output_name: one rule for every path */
    static const char *const names[][2] = {
        {"./a/b.jpg", "a/b.jpg"},       {"a//b.jpg", "a/b.jpg"},   {"/data/x.jpg", "data/x.jpg"},
        {"../x.jpg", "__/x.jpg"},       {"a/../../b", "a/__/__/b"}, {"__/x.jpg", "___/x.jpg"},
        {"___", "____"},                {"_/x_", "_/x_"},          {".", ""},
        {"/", ""},                      {"a/b/", "a/b"},           {"a/./b/.", "a/b"},
        {"..a/b..", "..a/b.."},         {"x", "x"},                {"//a///b//", "a/b"},
    };
    int names_ok = 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char buf[64];
        size_t n = mv_output_name(names[i][0], buf);
        if (strcmp(buf, names[i][1]) != 0 || n != strlen(buf) ||
            n + 1 > mv_output_name_cap(strlen(names[i][0]))) {
            printf("# mv_output_name(\"%s\") = \"%s\", want \"%s\"\n", names[i][0], buf, names[i][1]);
            names_ok = 0;
        }
    }
    /* worst case growth: every component "__" gets one more byte */
    char grow[64] = "__/__/__/__/__", gbuf[64];
    size_t gn = mv_output_name(grow, gbuf);
    CHECK(names_ok && gn == 19 && gn + 1 <= mv_output_name_cap(strlen(grow)),
          "mv_output_name: '.', '//' and a leading '/' dropped, '..' -> '__', '_'-only names get one more '_'");

    /* FNV-1a 64: the test vectors of the FNV reference (isthe.com/chongo/tech/comp/fnv) */
    CHECK(mv_hash64("", 0) == 0xcbf29ce484222325ULL && mv_hash64("a", 1) == 0xaf63dc4c8601ec8cULL &&
              mv_hash64("foobar", 6) == 0x85944171f73967e8ULL,
          "mv_hash64 is FNV-1a 64 (known vectors)");

    /* kinds by extension */
    CHECK(mv_name_is_media("X.MKV") && mv_name_is_media("a.b.m2ts") && !mv_name_is_media(".jpg") &&
              !mv_name_is_media("jpg") && !mv_name_is_media("a.jpg.txt") && !mv_name_is_media("dir.jpg/x"),
          "media extension matching");
    CHECK(mv_name_kind_of("d/x.JPG") == MV_NAME_IMAGE && mv_name_kind_of("x.webp") == MV_NAME_IMAGE &&
              mv_name_kind_of("x.3gp") == MV_NAME_VIDEO && mv_name_kind_of("x.Mp4") == MV_NAME_VIDEO &&
              mv_name_kind_of("x.gif") == MV_NAME_OTHER && mv_name_kind_of("x.") == MV_NAME_OTHER,
          "images and videos by extension");
    CHECK(mv_name_kind_of("x.tar") == MV_NAME_TAR && mv_name_kind_of("X.TAR.GZ") == MV_NAME_TAR &&
              mv_name_kind_of("a.tgz") == MV_NAME_TAR && mv_name_kind_of("d/a.tar.zst") == MV_NAME_TAR &&
              mv_name_kind_of("tar") != MV_NAME_TAR && mv_name_kind_of(".tar") != MV_NAME_TAR &&
              mv_name_kind_of("x.tar.npy") != MV_NAME_TAR && !mv_name_is_media("x.tar"),
          "tar names by extension");
    return UNIT_DONE();
}
