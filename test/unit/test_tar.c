/* test_tar.c - the tar layout's shard bookkeeping (mv_tar.h): --shard-size parsing, shard
 * numbering above what OUT holds, which temporary shards a new run removes, and that lines are
 * committed only once the shard has its final name. The archive bytes themselves are checked
 * against tar, Python's tarfile and numpy in test/bats/62-tar-layout.bats. */
#include "mv_tar.h"
#include "mv_names.h" /* mv_hash64 */
#include "unit.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int exists(const char *dir, const char *name)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return stat(p, &sb) == 0;
}

static void touch(const char *dir, const char *name)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
}

typedef struct {
    const char *dir;
    char shard_seen[200]; /* was the shard named in the line there when the line came? */
    int final_existed, calls;
    char text[4096];
} commit_log;

static mv_status commit(void *ud, const char *text, size_t len, mv_err *e)
{
    (void)e;
    commit_log *c = ud;
    c->calls++;
    snprintf(c->text, sizeof c->text, "%.*s", (int)len, text);
    const char *s = strstr(c->text, "\"shard\":\"");
    if (s) {
        s += 9;
        snprintf(c->shard_seen, sizeof c->shard_seen, "%.*s", (int)(strchr(s, '"') - s), s);
        c->final_existed = exists(c->dir, c->shard_seen);
    }
    return MV_OK;
}

int main(void)
{
    long long b;
    CHECK(mv_tar_parse_size("1000", &b) == 0 && b == 1000, "plain bytes");
    CHECK(mv_tar_parse_size("64K", &b) == 0 && b == 65536, "64K");
    CHECK(mv_tar_parse_size("512M", &b) == 0 && b == 512LL << 20, "512M");
    CHECK(mv_tar_parse_size("1G", &b) == 0 && b == 1LL << 30, "1G");
    CHECK(mv_tar_parse_size("1GiB", &b) == 0 && b == 1LL << 30, "1GiB");
    CHECK(mv_tar_parse_size("2gb", &b) == 0 && b == 2LL << 30, "2gb");
    CHECK(mv_tar_parse_size("0", &b) != 0 && mv_tar_parse_size("-1K", &b) != 0 &&
              mv_tar_parse_size("1X", &b) != 0 && mv_tar_parse_size("", &b) != 0 &&
              mv_tar_parse_size("1Gx", &b) != 0 && mv_tar_parse_size("99999999999G", &b) != 0,
          "bad sizes refused");

    char dir[] = "/tmp/mv_test_tar_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return UNIT_DONE();
    }
    /* a pid that surely exists no more: a child that has exited and been reaped */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    char hn[256] = "";
    gethostname(hn, sizeof hn - 1);
    char host[17], other[] = "0123456789abcdef", t1[300], t2[300], t3[300];
    snprintf(host, sizeof host, "%016llx", (unsigned long long)mv_hash64(hn, strlen(hn)));
    if (!strcmp(host, other))
        other[0] = '1';
    touch(dir, "shard-00004.tar");
    touch(dir, "shard-00001-of-00002-00020.tar"); /* another naming: not counted */
    snprintf(t1, sizeof t1, ".tmp-tar-%ld-%s-shard-00007.tar", (long)dead, host);
    snprintf(t2, sizeof t2, ".tmp-tar-%ld-%s-shard-00009.tar", (long)dead, other);
    snprintf(t3, sizeof t3, ".tmp-tar-%ld-%s-shard-00005.tar", (long)getppid(), host);
    touch(dir, t1);
    touch(dir, t2);
    touch(dir, t3);
    commit_log log = {.dir = dir};
    mv_tar_set *s;
    mv_err e;
    CHECK(mv_tar_set_open(dir, 0, 1, 1 << 20, 0, commit, &log, &s, &e) == MV_OK, "set open");
    CHECK(!exists(dir, t1), "a dead process's temporary shard of this host is removed");
    CHECK(exists(dir, t2), "another host's temporary shard is kept (its pid means nothing here)");
    CHECK(exists(dir, t3), "a live process's temporary shard is kept");

    mv_tar_shard *sh = NULL;
    float data[2 * 3] = {1, 2, 3, 4, 5, 6};
    mv_record r = {.input = "in/a.png", .ok = 1, .has_shape = 1, .shape = {2, 3}, .dtype = "f32"};
    CHECK(mv_tar_add(s, &sh, &r, MV_DT_F32, 2, 3, data, &e) == MV_OK, "add a sample");
    CHECK(r.shard && !strcmp(r.shard, "shard-00010.tar"),
          "numbering starts above every number in OUT, temporary ones of others included: %s",
          r.shard ? r.shard : "(null)");
    CHECK(r.key && !strcmp(r.key, "00010-000000") && !strchr(r.key, '.'), "key %s", r.key ? r.key : "");
    CHECK(r.has_offset && r.offset % 64 == 0 && r.offset >= 512, "offset %lld", (long long)r.offset);
    CHECK(log.calls == 0 && !exists(dir, "shard-00010.tar"), "nothing committed or final while open");
    CHECK(mv_tar_close(s, sh, &e) == MV_OK, "close");
    CHECK(log.calls == 1 && !strcmp(log.shard_seen, "shard-00010.tar") && log.final_existed,
          "the line comes once the shard has its final name");
    CHECK(strstr(log.text, "\"input\":\"in/a.png\"") && log.text[strlen(log.text) - 1] == '\n',
          "the committed text is the record's line: %s", log.text);

    /* a full shard is completed before the next sample: 2 samples of ~1 KB, target 2.5 KB */
    mv_tar_set_free(s);
    CHECK(mv_tar_set_open(dir, 0, 1, 2560, 0, commit, &log, &s, &e) == MV_OK, "set open, small");
    sh = NULL;
    log.calls = 0;
    mv_record r2 = r;
    CHECK(mv_tar_add(s, &sh, &r2, MV_DT_F32, 2, 3, data, &e) == MV_OK, "first sample");
    mv_record r3 = r;
    CHECK(mv_tar_add(s, &sh, &r3, MV_DT_F32, 2, 3, data, &e) == MV_OK, "second sample");
    CHECK(log.calls == 1 && !strcmp(log.shard_seen, "shard-00011.tar") && !strcmp(r3.shard, "shard-00012.tar"),
          "the second sample opened shard 12 after completing 11 (%s)", r3.shard);
    mv_tar_abandon(sh);
    CHECK(!exists(dir, "shard-00012.tar") && log.calls == 1, "an abandoned shard leaves nothing");
    mv_tar_set_free(s);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", dir);
    return UNIT_DONE();
}
