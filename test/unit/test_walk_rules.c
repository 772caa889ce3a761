/* test_walk_rules.c - unit tests for src/input/walk_rules.c: hidden components of a listed path
 * ("." and ".." are not hidden), and whether a directory written in the path is a given one (the
 * filesystem's stat is the oracle: the directory's st_dev/st_ino), the memo of the last answer
 * included. */
#include "mv_walk_rules.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
    CHECK(mv_path_hidden("data/.thumbs/x.jpg"), "a hidden folder");
    CHECK(mv_path_hidden(".x.jpg"), "a hidden file");
    CHECK(mv_path_hidden("/a//.b/c.jpg"), "doubled slashes");
    CHECK(!mv_path_hidden("./a/../b/c.jpg"), ". and .. are not hidden");
    CHECK(!mv_path_hidden("a.b/c..jpg"), "dots inside names are not");
    CHECK(!mv_path_hidden("/abs/x.jpg") && !mv_path_hidden(""), "plain paths");

    char top[] = "/tmp/test_walk_rules.XXXXXX";
    if (!mkdtemp(top))
        return 2;
    char out[300], p[600];
    snprintf(out, sizeof out, "%s/data/emb", top);
    snprintf(p, sizeof p, "mkdir -p '%s/sub' '%s/data/other'", out, top);
    if (system(p) != 0)
        return 2;
    struct stat sb;
    if (stat(out, &sb) != 0)
        return 2;
    mv_dir_memo m = {0};
    snprintf(p, sizeof p, "%s/sub/x.jpg", out);
    CHECK(mv_path_in_dir(&m, p, sb.st_dev, sb.st_ino) == 1, "a file two levels below OUT");
    snprintf(p, sizeof p, "%s/sub/y.jpg", out); /* the memo's directory */
    CHECK(mv_path_in_dir(&m, p, sb.st_dev, sb.st_ino) == 1, "its neighbour (memo)");
    snprintf(p, sizeof p, "%s/x.jpg", out);
    CHECK(mv_path_in_dir(&m, p, sb.st_dev, sb.st_ino) == 1, "a file in OUT");
    snprintf(p, sizeof p, "%s/data/other/x.jpg", top);
    CHECK(mv_path_in_dir(&m, p, sb.st_dev, sb.st_ino) == 0, "a file beside OUT");
    snprintf(p, sizeof p, "%s//data//emb//z.jpg", top);
    CHECK(mv_path_in_dir(&m, p, sb.st_dev, sb.st_ino) == 1, "doubled slashes");
    if (chdir(out) != 0)
        return 2;
    CHECK(mv_path_in_dir(&m, "x.jpg", sb.st_dev, sb.st_ino) == 0,
          "a bare name: the current directory is not written in it, so it is not OUT's");
    CHECK(mv_path_in_dir(&m, "../emb/x.jpg", sb.st_dev, sb.st_ino) == 1, "../emb is OUT");
    mv_dir_memo_free(&m);
    snprintf(p, sizeof p, "rm -rf '%s'", top);
    if (chdir("/") != 0 || system(p) != 0)
        return 2;
    return UNIT_DONE();
}
