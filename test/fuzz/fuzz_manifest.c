/* fuzz_manifest.c - libFuzzer harness for the manifest reader used by resume
 * (mv_manifest_load_done) and the writer it must agree with (mv_manifest_format).
 * Two checks per input:
 *  1. the input is a manifest file as found on disk (torn lines, garbage, any bytes): loading must
 *     succeed (bad lines are skipped and counted, never fatal) and every lookup must be safe;
 *  2. a round trip: the input's first bytes become an input path (raw bytes, any encoding, no NUL)
 *     and an output name; a record written by mv_manifest_format for them, followed by the input
 *     as garbage, then the same record again, must load back as done with exactly that output
 *     (later lines win, garbage in between must not hide it). Not here: append's locking and
 *     fsync (test/unit/test_manifest.c covers those). */
#include "fuzz_util.h"
#include "mv_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fz_path("manifest.jsonl", path, sizeof path);

    /* 1. arbitrary file */
    fz_write(path, data, size);
    mv_done *d = NULL;
    mv_err e;
    e.msg[0] = 0;
    if (mv_done_create(&d, &e) != MV_OK)
        abort();
    size_t nl = 0, nb = 0;
    if (mv_manifest_load_done(path, d, &nl, &nb, &e) != MV_OK) {
        fprintf(stderr, "mv_manifest_load_done failed on a readable file: %s\n", e.msg);
        abort();
    }
    if (nb > nl || mv_done_count(d) > nl)
        abort();
    mv_done_lookup(d, "");
    mv_done_lookup(d, "a.jpg");
    mv_done_free(d);

    /* 2. round trip of a record with arbitrary path bytes */
    if (size < 2)
        return 0;
    size_t n_in = data[0] % 64 + 1, n_out = data[1] % 32 + 1;
    if (size < 2 + n_in + n_out)
        return 0;
    char in[80], out[48];
    memcpy(in, data + 2, n_in);
    in[n_in] = 0;
    memcpy(out, data + 2 + n_in, n_out);
    out[n_out] = 0;
    if (strlen(in) != n_in || strlen(out) != n_out)
        return 0; /* paths cannot hold NUL */
    mv_record r = {0};
    r.input = in;
    r.output = out;
    r.ok = 1;
    r.kind = "image";
    r.error = NULL;
    char *line = NULL;
    size_t len = 0;
    if (mv_manifest_format(&r, &line, &len, &e) != MV_OK || !line || strlen(line) != len ||
        memchr(line, '\n', len)) {
        fprintf(stderr, "mv_manifest_format: bad line for a valid record\n");
        abort();
    }
    size_t total = 2 * (len + 1) + size + 1;
    uint8_t *file = malloc(total);
    if (!file)
        abort();
    size_t off = 0;
    memcpy(file + off, line, len), off += len, file[off++] = '\n';
    memcpy(file + off, data, size), off += size, file[off++] = '\n';
    memcpy(file + off, line, len), off += len, file[off++] = '\n';
    free(line);
    fz_write(path, file, off);
    free(file);
    if (mv_done_create(&d, &e) != MV_OK || mv_manifest_load_done(path, d, &nl, &nb, &e) != MV_OK)
        abort();
    const char *got = mv_done_lookup(d, in);
    if (!got || strcmp(got, out) != 0) {
        fprintf(stderr, "round trip lost the record: input of %zu bytes, output '%s', got %s%s%s\n",
                n_in, out, got ? "'" : "", got ? got : "nothing", got ? "'" : "");
        abort();
    }
    mv_done_free(d);

    /* and a later error line for the same input removes it from the done set */
    r.ok = 0;
    r.output = NULL;
    r.error = "fuzz: later failure";
    char *eline = NULL;
    if (mv_manifest_format(&r, &eline, &len, &e) != MV_OK)
        abort();
    FILE *f = fopen(path, "ab");
    if (!f)
        abort();
    fwrite(eline, 1, len, f);
    fputc('\n', f);
    fclose(f);
    free(eline);
    if (mv_done_create(&d, &e) != MV_OK || mv_manifest_load_done(path, d, &nl, &nb, &e) != MV_OK)
        abort();
    if (mv_done_lookup(d, in)) {
        fprintf(stderr, "an input whose latest line is an error is still listed as done\n");
        abort();
    }
    mv_done_free(d);
    return 0;
}
