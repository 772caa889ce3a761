/* test_manifest.c - unit tests for the manifest (src/output/manifest.c): exact line format and field
 * order, non-UTF-8 paths through input_b64, resume set with torn/garbage lines, and two processes
 * appending concurrently. Python's json module (/usr/bin/python3) re-checks every line. */
#include "mv_manifest.h"
#include "unit.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static void append_raw(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s)) {
        perror(path);
        exit(2);
    }
    close(fd);
}

static int append(mv_manifest *m, const char *input, const char *output, int ok)
{
    mv_record r = {0};
    r.input = input;
    r.output = output;
    r.ok = ok;
    r.error = ok ? NULL : "decode failed";
    mv_err e = {{0}};
    mv_status s = mv_manifest_append(m, &r, &e);
    if (s != MV_OK)
        printf("# append: %s\n", e.msg);
    return s == MV_OK;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/mvmanifest-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    mv_err e = {{0}};

    /* 1. exact line, every field, field order */
    int64_t fi[3] = {0, 15, 30};
    double ts[3] = {0.0, 0.5005, 1.0 / 3.0};
    mv_record r = {0};
    r.input = "media/clip \"1\".mp4";
    r.output = "clip \"1\".mp4.npy.zst";
    r.ok = 1;
    r.kind = "video";
    r.has_size = 1;
    r.width = 1920;
    r.height = 1080;
    r.has_resized = 1;
    r.resized[0] = 448;
    r.resized[1] = 256;
    r.has_grid = 1;
    r.grid_thw[0] = 2;
    r.grid_thw[1] = 16;
    r.grid_thw[2] = 28;
    r.has_shape = 1;
    r.shape[0] = 224;
    r.shape[1] = 1152;
    r.dtype = "f16";
    r.has_bytes = 1;
    r.bytes = 123456;
    r.model = "qwen3.5-vit:abc123";
    r.frame_indices = fi;
    r.n_frame_indices = 3;
    r.timestamps = ts;
    r.n_timestamps = 3;
    r.has_fps = 1;
    r.fps = 29.97;
    r.has_duration = 1;
    r.duration = 0.1;
    r.has_rotation = 1;
    r.rotation = -90;
    r.has_seconds = 1;
    r.seconds = 1.23456789;
    char *line;
    size_t len;
    mv_status s = mv_manifest_format(&r, &line, &len, &e);
    const char *want =
        "{\"input\":\"media/clip \\\"1\\\".mp4\",\"output\":\"clip \\\"1\\\".mp4.npy.zst\","
        "\"status\":\"ok\",\"kind\":\"video\",\"width\":1920,\"height\":1080,"
        "\"resized\":[448,256],\"grid_thw\":[2,16,28],\"shape\":[224,1152],\"dtype\":\"f16\","
        "\"bytes\":123456,\"model\":\"qwen3.5-vit:abc123\",\"frame_indices\":[0,15,30],"
        "\"timestamps\":[0.0,0.5005,0.3333333333333333],\"fps\":29.97,\"duration\":0.1,"
        "\"rotation\":-90,\"seconds\":1.234568}";
    CHECK(s == MV_OK && len == strlen(want) && strcmp(line, want) == 0,
          "full record: exact line, field order, shortest round-trip numbers");
    if (s == MV_OK && strcmp(line, want) != 0)
        printf("# got:  %s\n# want: %s\n", line, want);
    free(line);

    /* 2. error record, non-UTF-8 paths, control chars, NaN */
    mv_record r2 = {0};
    r2.input = "in/\xff\xc3(x\x01.jpg";
    r2.output = "\xc3\xa9t\xe9.jpg.npy.zst";
    r2.error = "bad \xfe byte\n";
    r2.has_fps = 1;
    r2.fps = 0.0 / 0.0;
    s = mv_manifest_format(&r2, &line, &len, &e);
    want = "{\"input\":\"in/\xef\xbf\xbd\xef\xbf\xbd(x\\u0001.jpg\",\"input_b64\":\"aW4v/8MoeAEuanBn\","
           "\"output\":\"\xc3\xa9t\xef\xbf\xbd.jpg.npy.zst\",\"output_b64\":\"w6l06S5qcGcubnB5LnpzdA==\","
           "\"status\":\"error\",\"error\":\"bad \xef\xbf\xbd byte\\n\"}";
    CHECK(s == MV_OK && strcmp(line, want) == 0,
          "non-UTF-8 paths: U+FFFD per bad byte plus *_b64; control chars escaped; a NaN field left out");
    if (s == MV_OK && strcmp(line, want) != 0)
        printf("# got:  %s\n# want: %s\n", line, want);
    free(line);

    /* 2b. reals as Python's repr writes them (the strings are Python 3's repr of each value) */
    double reals[] = {30.0, 1e-05, 1.5e20, 1e16, 0.0001, 123456.5, 9999999999999998.0, -0.0, 5e-324,
                      1.7976931348623157e308, 0.1 + 0.2};
    mv_record r3 = {0};
    r3.input = "x";
    r3.timestamps = reals;
    r3.n_timestamps = sizeof reals / sizeof reals[0];
    s = mv_manifest_format(&r3, &line, &len, &e);
    want = "{\"input\":\"x\",\"status\":\"error\",\"timestamps\":[30.0,1e-05,1.5e+20,1e+16,0.0001,"
           "123456.5,9999999999999998.0,-0.0,5e-324,1.7976931348623157e+308,0.30000000000000004]}";
    CHECK(s == MV_OK && strcmp(line, want) == 0, "reals: Python's repr, always a fraction or an exponent");
    if (s == MV_OK && strcmp(line, want) != 0)
        printf("# got:  %s\n# want: %s\n", line, want);
    free(line);

    /* 3. base64 round trips */
    int b64ok = 1;
    unsigned char raw[7] = {0xff, 0x00, 0x10, 0x80, 'a', 0xfe, 0x7f};
    for (size_t n = 0; n <= sizeof raw; n++) {
        char *enc = mv_base64_encode(raw, n);
        size_t m = 99;
        uint8_t *dec = enc ? mv_base64_decode(enc, &m) : NULL;
        if (!dec || m != n || memcmp(dec, raw, n) != 0)
            b64ok = 0;
        free(enc);
        free(dec);
    }
    size_t m;
    CHECK(b64ok && !mv_base64_decode("abc", &m) && !mv_base64_decode("a=bc", &m) &&
              !mv_base64_decode("ab!c", &m),
          "base64 encode/decode round trip for lengths 0..7; malformed input refused");

    /* 4. append + resume with torn and garbage lines */
    char path[512];
    snprintf(path, sizeof path, "%s/manifest.jsonl", dir);
    mv_manifest *mf;
    s = mv_manifest_open(path, &mf, &e);
    CHECK(s == MV_OK, "open manifest for append");
    if (s != MV_OK)
        return UNIT_DONE();
    const char *weird = "dir/caf\xe9/\x80.png";
    int ok = append(mf, "a.jpg", "a.jpg.npy.zst", 1) && append(mf, "b.jpg", NULL, 0) &&
             append(mf, "c.jpg", "c.jpg.npy.zst", 1) && append(mf, "c.jpg", NULL, 0) &&
             append(mf, "d.jpg", NULL, 0) && append(mf, "d.jpg", "d2.jpg.npy.zst", 1) &&
             append(mf, weird, "caf\xe9/\x80.png.npy.zst", 1);
    append_raw(path, "not json at all\n[1,2]\n{\"status\":\"ok\"}\n");
    ok = ok && append(mf, "e.jpg", "e.jpg.npy.zst", 1);
    append_raw(path, "{\"input\":\"torn.jpg\",\"output\":\"torn.jpg.np"); /* killed mid-line */
    CHECK(ok, "appends succeed");
    mv_done *d;
    size_t nl = 0, nb = 0;
    if (mv_done_create(&d, &e) != MV_OK)
        return 2;
    s = mv_manifest_load_done(path, d, &nl, &nb, &e);
    const char *wo = mv_done_lookup(d, weird);
    CHECK(s == MV_OK && mv_done_count(d) == 4 && nl == 12 && nb == 4,
          "load_done: 4 done (count %zu), 12 lines (%zu), 4 bad skipped incl. torn (%zu)",
          mv_done_count(d), nl, nb);
    CHECK(mv_done_lookup(d, "a.jpg") && strcmp(mv_done_lookup(d, "a.jpg"), "a.jpg.npy.zst") == 0 &&
              !mv_done_lookup(d, "b.jpg") && !mv_done_lookup(d, "c.jpg") &&
              mv_done_lookup(d, "d.jpg") && strcmp(mv_done_lookup(d, "d.jpg"), "d2.jpg.npy.zst") == 0 &&
              !mv_done_lookup(d, "torn.jpg") && !mv_done_lookup(d, "zzz"),
          "latest status wins: ok->error dropped, error->ok kept, torn line ignored");
    CHECK(wo && strcmp(wo, "caf\xe9/\x80.png.npy.zst") == 0,
          "non-UTF-8 input and output recovered byte-exact through *_b64");
    mv_done_free(d);

    /* 5. appending after a torn line starts a fresh line */
    ok = append(mf, "f.jpg", "f.jpg.npy.zst", 1);
    s = mv_manifest_close(mf, &e);
    CHECK(ok && s == MV_OK, "append after a torn line, close");
    if (mv_done_create(&d, &e) != MV_OK)
        return 2;
    s = mv_manifest_load_done(path, d, &nl, &nb, &e);
    CHECK(s == MV_OK && mv_done_lookup(d, "f.jpg") && mv_done_count(d) == 5 && nb == 4,
          "the line after the torn one is intact (done %zu, bad %zu)", mv_done_count(d), nb);
    mv_done_free(d);

    /* 6. missing manifest: empty set, no error; unopenable path: error naming it */
    if (mv_done_create(&d, &e) != MV_OK)
        return 2;
    char nope[600];
    snprintf(nope, sizeof nope, "%s/none.jsonl", dir);
    s = mv_manifest_load_done(nope, d, &nl, &nb, &e);
    CHECK(s == MV_OK && mv_done_count(d) == 0 && nl == 0, "missing manifest loads as empty");
    mv_done_free(d);
    snprintf(nope, sizeof nope, "%s/no/such/dir/m.jsonl", dir);
    s = mv_manifest_open(nope, &mf, &e);
    CHECK(s == MV_ERR_IO && strstr(e.msg, nope) && strstr(e.msg, "No such file"),
          "open in a missing directory fails: %s", e.msg);

    /* 7. two processes x 500 appends at once -> 1000 whole lines */
    char cpath[512];
    snprintf(cpath, sizeof cpath, "%s/concurrent.jsonl", dir);
    fflush(stdout);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            mv_manifest *cm;
            mv_err ce;
            if (mv_manifest_open(cpath, &cm, &ce) != MV_OK)
                _exit(1);
            char in[64], out[64], err[300];
            memset(err, 'x', sizeof err - 1); /* long lines make interleaving visible */
            err[sizeof err - 1] = 0;
            for (int i = 0; i < 500; i++) {
                snprintf(in, sizeof in, "p%d/%04d.jpg", k, i);
                snprintf(out, sizeof out, "p%d/%04d.jpg.npy.zst", k, i);
                mv_record cr = {0};
                cr.input = in;
                cr.output = out;
                cr.ok = 1;
                cr.error = err;
                if (mv_manifest_append(cm, &cr, &ce) != MV_OK)
                    _exit(1);
            }
            _exit(mv_manifest_close(cm, &ce) == MV_OK ? 0 : 1);
        }
    }
    int kids_ok = 1;
    for (int k = 0; k < 2; k++) {
        int ws;
        if (waitpid(kids[k], &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            kids_ok = 0;
    }
    if (mv_done_create(&d, &e) != MV_OK)
        return 2;
    s = mv_manifest_load_done(cpath, d, &nl, &nb, &e);
    int all = 1;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 500; i++) {
            char in[64];
            snprintf(in, sizeof in, "p%d/%04d.jpg", k, i);
            if (!mv_done_lookup(d, in))
                all = 0;
        }
    CHECK(kids_ok && s == MV_OK && nl == 1000 && nb == 0 && mv_done_count(d) == 1000 && all,
          "2 processes x 500 concurrent appends: 1000 valid lines (%zu lines, %zu bad)", nl, nb);
    mv_done_free(d);

    /* 8. oracle: Python's json reads every line of the concurrent file and the format lines */
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import json,sys,base64\n"
             "ls=open(sys.argv[1],\"rb\").read().split(b\"\\n\")\n"
             "assert ls[-1]==b\"\"\n"
             "rs=[json.loads(l) for l in ls[:-1]]\n"
             "assert len(rs)==1000 and all(r[\"status\"]==\"ok\" for r in rs)\n"
             "ls=open(sys.argv[2],\"rb\").read().split(b\"\\n\")\n"
             "w=[json.loads(l) for l in ls if l.startswith(b\"{\\\"input\\\":\\\"dir/\")][0]\n"
             "assert base64.b64decode(w[\"input_b64\"])==b\"dir/caf\\xe9/\\x80.png\", w\n"
             "assert list(w)==[\"input\",\"input_b64\",\"output\",\"output_b64\",\"status\",\"schema\",\"run\",\"seq\",\"time\"], list(w)\n"
             "' '%s' '%s'",
             cpath, path);
    CHECK(system(cmd) == 0, "python json parses all lines; input_b64 decodes to the raw bytes");

    /* 9. owners of output names: held by the latest ok line; non-canonical outputs never held */
    char opath[600];
    snprintf(opath, sizeof opath, "%s/owners.jsonl", dir);
    FILE *of = fopen(opath, "w");
    if (!of)
        return 2;
    fputs("{\"input\":\"cam1/IMG_1.jpg\",\"output\":\"IMG_1.jpg.npy.zst\",\"status\":\"ok\",\"bytes\":5,\"model\":\"aaaa\"}\n"
          "{\"input\":\"x.jpg\",\"output\":\"../escape.npy.zst\",\"status\":\"ok\"}\n"
          "{\"input\":\"y.jpg\",\"output\":\"/abs.npy.zst\",\"status\":\"ok\"}\n"
          "{\"input\":\"w.jpg\",\"output\":\"a//w.npy.zst\",\"status\":\"ok\"}\n"
          "{\"input\":\"z.jpg\",\"output\":\"z.jpg.npy.zst\",\"status\":\"ok\",\"bytes\":-3}\n"
          "{\"input\":\"z.jpg\",\"status\":\"error\",\"error\":\"later\"}\n"
          "{\"input\":\"m.jpg\",\"output\":\"old.npy.zst\",\"status\":\"ok\"}\n"
          "{\"input\":\"m.jpg\",\"output\":\"new.npy.zst\",\"status\":\"ok\"}\n"
          "{\"input\":\"u.jpg\",\"output\":\"__/___/u.npy.zst\",\"status\":\"ok\"}\n",
          of);
    fclose(of);
    if (mv_done_create(&d, &e) != MV_OK)
        return 2;
    s = mv_manifest_load_done(opath, d, &nl, &nb, &e);
    mv_done_owner w1 = {0}, w2 = {0}, w3 = {0}, w4 = {0};
    int h1 = mv_done_owner_of(d, "IMG_1.jpg.npy.zst", &w1);
    CHECK(s == MV_OK && h1 && strcmp(w1.input, "cam1/IMG_1.jpg") == 0 && strcmp(w1.model, "aaaa") == 0 &&
              w1.bytes == 5 && w1.ok == 1,
          "owner_of: input, model and bytes of the ok line that named the output");
    mv_done_owner wx;
    CHECK(!mv_done_owner_of(d, "../escape.npy.zst", &wx) && !mv_done_owner_of(d, "escape.npy.zst", &wx) &&
              !mv_done_owner_of(d, "/abs.npy.zst", &wx) && !mv_done_owner_of(d, "abs.npy.zst", &wx) &&
              !mv_done_owner_of(d, "a//w.npy.zst", &wx) && !mv_done_owner_of(d, "a/w.npy.zst", &wx) &&
              mv_done_lookup(d, "x.jpg") && strcmp(mv_done_lookup(d, "x.jpg"), "../escape.npy.zst") == 0,
          "outputs with '..', a leading '/' or '//' are never held (lookup by input still reports them)");
    int h2 = mv_done_owner_of(d, "z.jpg.npy.zst", &w2);
    CHECK(h2 && strcmp(w2.input, "z.jpg") == 0 && w2.ok == 0 && w2.bytes == -1 && !mv_done_lookup(d, "z.jpg"),
          "a later error line: not done, but the name stays held by its input; negative bytes ignored");
    int h3 = mv_done_owner_of(d, "new.npy.zst", &w3);
    CHECK(h3 && strcmp(w3.input, "m.jpg") == 0 && !mv_done_owner_of(d, "old.npy.zst", &w3) &&
              w3.model[0] == 0 && w3.bytes == -1,
          "an input that moved to another name no longer holds the old one");
    CHECK(mv_done_owner_of(d, "__/___/u.npy.zst", &w4) && strcmp(w4.input, "u.jpg") == 0 &&
              mv_done_count(d) == 6,
          "escaped names ('__', '___') are canonical and held; 6 done");
    mv_done_free(d);

    /* 10. mv_done_output_intact against frames made by the zstd CLI (the oracle) */
    char od[300], real_od[4096], cmd2[4096];
    snprintf(od, sizeof od, "%s/out", dir);
    snprintf(cmd2, sizeof cmd2,
             "set -e; mkdir -p '%1$s/sub' '%2$s/outside'; cd '%1$s'; "
             "head -c 400000 /dev/urandom > raw; zstd -q raw -o big.zst; "
             "head -c 300000 /dev/zero | zstd -q --no-check -o sub/zeros.zst; "
             "printf 'hello' | zstd -q -o small.zst; "
             "head -c 100 big.zst > cut.zst; head -c $(( $(stat -c %%s big.zst) - 1 )) big.zst > minus1.zst; "
             "cat small.zst > extra.zst; printf x >> extra.zst; : > empty.zst; "
             "cp big.zst '%2$s/outside/o.zst'; ln -s '%2$s/outside/o.zst' link.zst; ln -s sub/zeros.zst in.zst; "
             "stat -c %%s big.zst > big.size",
             od, dir);
    CHECK(system(cmd2) == 0, "zstd CLI frames prepared");
    if (!realpath(od, real_od))
        return 2;
    char why[1200], szs[64] = "", szpath[400];
    snprintf(szpath, sizeof szpath, "%s/big.size", od);
    FILE *sf = fopen(szpath, "r");
    if (!sf || !fgets(szs, sizeof szs, sf))
        return 2;
    fclose(sf);
    int64_t bsz = atoll(szs);
    CHECK(mv_done_output_intact(real_od, "big.zst", -1, why, sizeof why) &&
              mv_done_output_intact(real_od, "sub/zeros.zst", -1, why, sizeof why) &&
              mv_done_output_intact(real_od, "small.zst", -1, why, sizeof why) &&
              mv_done_output_intact(real_od, "in.zst", -1, why, sizeof why) &&
              mv_done_output_intact(real_od, "big.zst", bsz, why, sizeof why),
          "whole frames (multi-block, RLE/no checksum, one block, a symlink inside OUT) pass");
    int bad_ok = 1;
    const char *bads[] = {"cut.zst", "minus1.zst", "extra.zst", "empty.zst", "link.zst", "missing.zst", "raw", "sub"};
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++)
        if (mv_done_output_intact(real_od, bads[i], -1, why, sizeof why)) {
            printf("# %s passed as whole\n", bads[i]);
            bad_ok = 0;
        }
    mv_done_output_intact(real_od, "link.zst", -1, why, sizeof why);
    CHECK(bad_ok && strstr(why, "outside the output directory") &&
              !mv_done_output_intact(real_od, "big.zst", bsz + 1, why, sizeof why) && strstr(why, "manifest says"),
          "head -c 100, one byte short, a trailing byte, empty, a symlink out, missing, not zstd, a "
          "directory, and a size other than 'bytes' all fail");

    /* 11. the same input: normalised path, or the same file now */
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd) || chdir(od) != 0)
        return 2;
    char absraw[4200];
    snprintf(absraw, sizeof absraw, "%s/raw", real_od);
    CHECK(mv_done_same_input("a/b.jpg", "./a//b.jpg") && mv_done_same_input("raw", absraw) &&
              mv_done_same_input("in.zst", "sub/zeros.zst") && !mv_done_same_input("/nope/b.jpg", "nope/b.jpg") &&
              !mv_done_same_input("raw", "big.zst") && !mv_done_same_input("gone.jpg", "raw"),
          "same input: normalised alike, or the same file (absolute, symlink); else not");
    if (chdir(cwd) != 0)
        return 2;

    /* 12. the newest line wins whatever order the manifests are read in */
    char newer[600], older[600];
    snprintf(newer, sizeof newer, "%s/newer.jsonl", dir);
    snprintf(older, sizeof older, "%s/older.jsonl", dir);
    fclose(fopen(newer, "w"));
    fclose(fopen(older, "w"));
    append_raw(newer, "{\"input\":\"o/a.jpg\",\"status\":\"error\",\"error\":\"x\",\"schema\":2,"
                      "\"run\":\"b\",\"seq\":1,\"time\":2000.5}\n"
                      "{\"input\":\"o/b.jpg\",\"output\":\"o/b.jpg.npy.zst\",\"status\":\"ok\",\"schema\":2,"
                      "\"run\":\"b\",\"seq\":2,\"time\":2000.5}\n");
    append_raw(older, "{\"input\":\"o/a.jpg\",\"output\":\"o/a.jpg.npy.zst\",\"status\":\"ok\",\"schema\":2,"
                      "\"run\":\"a\",\"seq\":9,\"time\":1000}\n"
                      "{\"input\":\"o/b.jpg\",\"status\":\"error\",\"error\":\"y\"}\n");
    int order_ok = 1;
    for (int k = 0; k < 2; k++) {
        if (mv_done_create(&d, &e) != MV_OK)
            return 2;
        order_ok &= mv_manifest_load_done(k ? older : newer, d, NULL, NULL, &e) == MV_OK;
        order_ok &= mv_manifest_load_done(k ? newer : older, d, NULL, NULL, &e) == MV_OK;
        mv_done_owner w;
        order_ok &= !mv_done_lookup(d, "o/a.jpg") && mv_done_lookup(d, "o/b.jpg") &&
                    mv_done_owner_of(d, "o/a.jpg.npy.zst", &w) && !w.ok && mv_done_count(d) == 1;
        mv_done_free(d);
    }
    mv_line_order o1 = {.time = 5, .seq = 3, .run = "r", .pos = 9}, o2 = {.time = 4, .seq = 4, .run = "r", .pos = 1};
    mv_line_order o3 = {.time = 4, .seq = 1, .run = "s", .pos = 2}, o0 = {.pos = 10};
    CHECK(order_ok && mv_line_order_cmp(&o1, &o2) < 0 && mv_line_order_cmp(&o1, &o3) > 0 &&
              mv_line_order_cmp(&o0, &o3) < 0,
          "the newest line of an input wins in either load order; one run by seq, runs by time, "
          "unordered lines oldest");

    /* 13. a manifest of many lines, which the resume set's load parses in batches over threads:
     * each input's newest line as Python's json module reads the file (the oracle: the last line
     * of each input, half of them without run/seq/time, so that the order the lines are recorded
     * in decides), and every entry the same as the one-line-at-a-time reader
     * (mv_manifest_load_done_at) makes */
    char big[600], wantp[600], pycmd[8192];
    snprintf(big, sizeof big, "%s/big.jsonl", dir);
    snprintf(wantp, sizeof wantp, "%s/big.want", dir);
    snprintf(pycmd, sizeof pycmd,
             "/usr/bin/python3 - '%s' '%s' <<'PY'\n"
             "import base64, json, random, sys\n"
             "rnd = random.Random(7)\n"
             "newest = {}\n"
             "with open(sys.argv[1], 'w') as f:\n"
             "    for i in range(40000):\n"
             "        if rnd.random() < 0.01:\n"
             "            f.write(rnd.choice(['garbage', '[1]', '{\\\"status\\\":\\\"ok\\\"}']) + '\\n')\n"
             "            continue\n"
             "        k = rnd.randrange(12000)\n"
             "        raw = ('in/%%d.jpg' %% k).encode() if k %% 97 else b'in/caf\\xe9-%%d.png' %% k\n"
             "        ok = rnd.random() < 0.8\n"
             "        d = {'input': raw.decode('latin-1'), 'status': 'ok' if ok else 'error', 'schema': 3}\n"
             "        if k %% 2: d.update(run='r', seq=i + 1, time=1000.5)  # else the file's order decides\n"
             "        if k %% 97 == 0: d['input_b64'] = base64.b64encode(raw).decode()\n"
             "        if ok:\n"
             "            d.update(output='o/%%d-%%d.npy.zst' %% (k, rnd.randrange(3)), model='%%016x' %% rnd.getrandbits(64),\n"
             "                     bytes=rnd.randrange(1, 10**9), offset=rnd.randrange(10**6), shape=[rnd.randrange(1, 900), 5120],\n"
             "                     dtype=rnd.choice(['f32', 'f16', 'bf16']), xxh64='%%016x' %% rnd.getrandbits(64))\n"
             "            if rnd.random() < 0.5: d.update(shard='s.tar', key='k%%d' %% k)\n"
             "        else:\n"
             "            d['error'] = 'decode failed'\n"
             "        f.write(json.dumps(d) + '\\n')\n"
             "        newest[raw] = d\n"
             "with open(sys.argv[2], 'w') as f:\n"
             "    for raw, d in newest.items():\n"
             "        f.write('%%s %%s %%s\\n' %% (base64.b64encode(raw).decode(), d['status'], d.get('output', '-')))\n"
             "PY",
             big, wantp);
    CHECK(system(pycmd) == 0, "python wrote a manifest of 40000 lines and each input's newest line");
    mv_done *dp, *ds;
    size_t nlp = 0, nbp = 0, nls = 0, nbs = 0;
    int64_t off = 0;
    if (mv_done_create(&dp, &e) != MV_OK || mv_done_create(&ds, &e) != MV_OK)
        return 2;
    mv_status sp = mv_manifest_load_done(big, dp, &nlp, &nbp, &e);
    mv_status ss = mv_manifest_load_done_at(big, ds, &off, 1, &nls, &nbs, &e);
    CHECK(sp == MV_OK && ss == MV_OK && nlp == 40000 && nls == 40000 && nbp == nbs && nbp > 300 && nbp < 500,
          "both readers read 40000 lines, the same %zu / %zu not records", nbp, nbs);
    FILE *wf = fopen(wantp, "r");
    size_t n_want = 0, n_ok = 0, agree = 0;
    char wb[8192];
    while (wf && fgets(wb, sizeof wb, wf)) {
        char b64[4096], stat[16], outp[4096];
        if (sscanf(wb, "%4095s %15s %4095s", b64, stat, outp) != 3)
            break;
        size_t rl;
        char *raw = (char *)mv_base64_decode(b64, &rl);
        if (!raw)
            break;
        n_want++;
        const char *got = mv_done_lookup(dp, raw);
        int okl = !strcmp(stat, "ok");
        n_ok += okl;
        agree += okl ? (got && !strcmp(got, outp)) : !got;
        free(raw);
    }
    if (wf)
        fclose(wf);
    CHECK(n_want > 10000 && agree == n_want && mv_done_count(dp) == n_ok && mv_done_inputs(dp) == mv_done_inputs(ds),
          "each of %zu inputs as its newest line says (%zu agree), %zu done as Python counts (%zu)", n_want, agree,
          n_ok, mv_done_count(dp));
    size_t same = 0, ni = mv_done_inputs(dp);
    for (size_t i = 0; i < ni; i++) {
        const char *ip, *is;
        mv_done_sample a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        int ka = mv_done_entry(dp, i, &ip, &a), kb = mv_done_entry(ds, i, &is, &b);
        mv_done_owner wa, wb2;
        int oa = a.output && mv_done_owner_of(dp, a.output, &wa), ob = b.output && mv_done_owner_of(ds, b.output, &wb2);
        int fields = !ka || ((a.output == NULL) == (b.output == NULL) && (!a.output || !strcmp(a.output, b.output)) &&
                             !strcmp(a.model, b.model) && a.bytes == b.bytes && a.offset == b.offset &&
                             a.data_len == b.data_len && a.has_xxh64 == b.has_xxh64 && a.xxh64 == b.xxh64 &&
                             a.tar == b.tar);
        same += ka == kb && !strcmp(ip, is) && fields && oa == ob &&
                (!oa || (!strcmp(wa.input, wb2.input) && wa.ok == wb2.ok));
    }
    CHECK(ni > 10000 && same == ni, "every entry (%zu of %zu) as the one-line-at-a-time reader makes it", same, ni);
    mv_done_free(dp);
    mv_done_free(ds);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return UNIT_DONE();
}
