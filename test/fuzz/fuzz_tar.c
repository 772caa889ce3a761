/* fuzz_tar.c - libFuzzer harness for the tar reader (src/input/tar_in.c, tar_meta.c): the input is
 * a tar file (any bytes). Every member handed out must be an input member with a name, a memfd,
 * a stream or a one-line reason; the reader must end (0 or -1 with a message) within a bounded
 * number of members. And the record of each member with sample metadata (mv_tar_in_meta), made
 * by mv_manifest_format, must be one line that jansson, which reads the manifest back for resume
 * and merge, reads as an object whose input_key, txt and cls are what the metadata held: a .json
 * the reader accepted can never make a manifest line that does not read back. Not here: decoding
 * the members (fuzz_image, fuzz_video). */
#include "fuzz_util.h"
#include "mv_manifest.h"
#include "mv_tar_in.h"

#include <jansson.h>

static void check_record(const char *name, const mv_tar_meta *m)
{
    mv_record r = {0};
    r.input = name;
    r.ok = 1;
    r.input_key = m->key;
    r.json = m->json;
    r.txt = m->txt;
    r.txt_len = m->txt_len;
    r.cls = m->cls;
    r.cls_len = m->cls_len;
    r.has_cls_int = m->cls_is_int;
    r.cls_int = m->cls_int;
    char *line = NULL;
    size_t len = 0;
    mv_err e;
    if (mv_manifest_format(&r, &line, &len, &e) != MV_OK) {
        fz_check_msg(&e, name, "mv_manifest_format");
        return;
    }
    if (memchr(line, '\n', len))
        abort();
    json_error_t je;
    json_t *o = json_loadb(line, len, 0, &je);
    if (!json_is_object(o)) {
        fprintf(stderr, "a record with metadata does not read back: %s\n%s\n", je.text, line);
        abort();
    }
    if (m->json && !json_object_get(o, "json"))
        abort();
    if (m->cls_is_int && json_integer_value(json_object_get(o, "cls")) != m->cls_int)
        abort();
    json_t *txt = json_object_get(o, "txt");
    if (m->txt && (!json_is_string(txt) || (!json_object_get(o, "txt_b64") &&
                                            (json_string_length(txt) != m->txt_len ||
                                             memcmp(json_string_value(txt), m->txt, m->txt_len)))))
        abort();
    json_decref(o);
    free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fz_path("in.tar", path, sizeof path);
    fz_write(path, data, size);
    mv_tar_in *t;
    mv_err e;
    e.msg[0] = 0;
    if (mv_tar_in_open(path, 0, 0, &t, &e) != MV_OK) {
        fz_check_msg(&e, path, "mv_tar_in_open");
        return 0;
    }
    mv_tar_in_limits(t, 1 << 20, 1 << 16); /* small bounds: streams and over-bound members happen */
    const char *name, *err;
    int fd, r, n = 0;
    while ((r = mv_tar_in_next(t, &name, &fd, &err, &e)) == 1) {
        if (!name || (err && (!*err || strchr(err, '\n'))))
            abort();
        const mv_tar_meta *m = mv_tar_in_meta(t);
        if (m && !err)
            check_record(name, m);
        if (fd >= 0)
            close(fd);
        if (++n > 100000)
            abort(); /* a tar of this size cannot hold so many members */
    }
    if (r < 0)
        fz_check_msg(&e, path, "mv_tar_in_next");
    mv_tar_in_close(t);
    return 0;
}
