/* test_names.c - the naming rules (src/common/names.c): output names of paths and files, the
 * checks of names read back, FNV-1a 64 against its published test vectors and the shard rule on
 * them, the kinds of names by extension, and shard manifests and tar shards as the man page
 * names them, each parsed back. */
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

    char buf[64];
    CHECK(mv_name_output_file(buf, sizeof buf, "a/b.jpg") == 15 && !strcmp(buf, "a/b.jpg.npy.zst"),
          "output file of a/b.jpg: %s", buf);
    CHECK(mv_name_output_file(buf, 8, "a/b.jpg") == 15 && !strcmp(buf, "a/b.jpg"), "cut at the buffer");

    /* names read back (a manifest's "output", a writer's rel): canonical or not, and why */
    static const char *const good[] = {"a", "a/b.npy.zst", "..a/b..", "___/x", "a b/\x01"};
    static const char *const bad[][2] = {
        {"", "is not a relative path"}, {"/a", "is not a relative path"},
        {"a//b", "has an empty, '.' or '..' component"}, {"./a", "has an empty, '.' or '..' component"},
        {"a/..", "has an empty, '.' or '..' component"}, {"a/", "ends with '/'"},
    };
    int flaw_ok = 1;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (mv_name_flaw(good[i])) {
            printf("# mv_name_flaw(\"%s\") = %s\n", good[i], mv_name_flaw(good[i]));
            flaw_ok = 0;
        }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *f = mv_name_flaw(bad[i][0]);
        if (!f || strcmp(f, bad[i][1])) {
            printf("# mv_name_flaw(\"%s\") = %s, want %s\n", bad[i][0], f ? f : "NULL", bad[i][1]);
            flaw_ok = 0;
        }
    }
    CHECK(flaw_ok, "mv_name_flaw: canonical names pass, the others say why");

    /* FNV-1a 64: the test vectors of the FNV reference (isthe.com/chongo/tech/comp/fnv) */
    CHECK(mv_hash64("", 0) == 0xcbf29ce484222325ULL && mv_hash64("a", 1) == 0xaf63dc4c8601ec8cULL &&
              mv_hash64("foobar", 6) == 0x85944171f73967e8ULL,
          "mv_hash64 is FNV-1a 64 (known vectors)");
    /* the shard rule (man page, --shard): FNV-1a 64 of the output name mod N */
    int k_a = (int)(0xaf63dc4c8601ec8cULL % 7), k_foobar = (int)(0x85944171f73967e8ULL % 100000);
    int shard_ok = 1;
    for (int k = 0; k < 7; k++)
        shard_ok &= mv_name_in_shard("a", k, 7) == (k == k_a);
    CHECK(shard_ok && mv_name_in_shard("foobar", k_foobar, 100000) && !mv_name_in_shard("foobar", k_foobar + 1, 100000) &&
              mv_name_in_shard("a", 0, 1) && mv_name_in_shard("a", 0, 0),
          "shard rule: hash mod N (\"a\" in shard %d of 7), every input when N <= 1", k_a);

    /* kinds by extension */
    CHECK(mv_name_is_media("X.MKV") && mv_name_is_media("a.b.m2ts") && !mv_name_is_media(".jpg") &&
              !mv_name_is_media("jpg") && !mv_name_is_media("a.jpg.txt") && !mv_name_is_media("dir.jpg/x"),
          "media extension matching");
    CHECK(mv_name_kind_of("d/x.JPG") == MV_NAME_IMAGE && mv_name_kind_of("x.webp") == MV_NAME_IMAGE &&
              mv_name_kind_of("x.3gp") == MV_NAME_VIDEO && mv_name_kind_of("x.Mp4") == MV_NAME_VIDEO &&
              mv_name_kind_of("x.gif") == MV_NAME_IMAGE && mv_name_kind_of("x.BMP") == MV_NAME_IMAGE &&
              mv_name_kind_of("x.tif") == MV_NAME_IMAGE && mv_name_kind_of("d/x.Tiff") == MV_NAME_IMAGE &&
              mv_name_kind_of("x.heic") == MV_NAME_OTHER && mv_name_kind_of("x.") == MV_NAME_OTHER,
          "images and videos by extension");
    CHECK(mv_name_kind_of("x.tar") == MV_NAME_TAR && mv_name_kind_of("X.TAR.GZ") == MV_NAME_TAR &&
              mv_name_kind_of("a.tgz") == MV_NAME_TAR && mv_name_kind_of("d/a.tar.zst") == MV_NAME_TAR &&
              mv_name_kind_of("tar") != MV_NAME_TAR && mv_name_kind_of(".tar") != MV_NAME_TAR &&
              mv_name_kind_of("x.tar.npy") != MV_NAME_TAR && !mv_name_is_media("x.tar"),
          "tar names by extension");
    /* shard manifests (man page, --shard): built, and parsed back for any N */
    char m[128];
    int k = -1, n = -1;
    mv_name_manifest(m, sizeof m, "OUT", 0, 1);
    CHECK(!strcmp(m, "OUT/manifest.jsonl"), "unsharded manifest %s", m);
    mv_name_manifest(m, sizeof m, "OUT", 3, 16);
    CHECK(!strcmp(m, "OUT/manifest-00003-of-00016.jsonl") && mv_name_manifest_parse(m + 4, &k, &n) && k == 3 &&
              n == 16, "shard manifest %s, parsed back: %d of %d", m, k, n);
    mv_name_manifest(m, sizeof m, "OUT", 99999, 100000);
    CHECK(!strcmp(m, "OUT/manifest-99999-of-100000.jsonl") && mv_name_manifest_parse(m + 4, &k, &n) &&
              k == 99999 && n == 100000, "past 99999 shards: %s, parsed back: %d of %d", m, k, n);
    CHECK(!mv_name_manifest_parse("manifest.jsonl", &k, &n) && !mv_name_manifest_parse("manifest--of-2.jsonl", &k, &n) &&
              !mv_name_manifest_parse("manifest-1-of-2.jsonl.tmp", &k, &n) &&
              !mv_name_manifest_parse("manifest-+1-of-2.jsonl", &k, &n) &&
              !mv_name_manifest_parse("manifest-1-of-99999999999.jsonl", &k, &n) &&
              !mv_name_manifest_parse("xmanifest-1-of-2.jsonl", &k, &n),
          "other names are no shard manifests");

    /* tar shards (mv_tar.h's format) */
    char t[96];
    mv_name_tar_shard(t, sizeof t, 0, 1, 3);
    CHECK(!strcmp(t, "shard-00003.tar") && mv_name_tar_shard_parse(t, 0, 1) == 3, "unsharded name %s", t);
    mv_name_tar_shard(t, sizeof t, 1, 4, 12);
    CHECK(!strcmp(t, "shard-00001-of-00004-00012.tar") && mv_name_tar_shard_parse(t, 1, 4) == 12 &&
              mv_name_tar_shard_parse(t, 0, 1) == -1 && mv_name_tar_shard_parse(t, 2, 4) == -1,
          "sharded name %s, parsed back under its own naming only", t);
    mv_name_tar_shard(t, sizeof t, 0, 1, 1234567);
    CHECK(mv_name_tar_shard_parse(t, 0, 1) == 1234567 && mv_name_tar_shard_parse("shard-0003.tar", 0, 1) == -1 &&
              mv_name_tar_shard_parse("shard-00003.tar.tmp", 0, 1) == -1,
          "%s parsed back; fewer than 5 digits or another suffix are not shards", t);
    return UNIT_DONE();
}
