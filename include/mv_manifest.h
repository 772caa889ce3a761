/* mv_manifest.h - the JSON Lines manifest (OUT/manifest.jsonl or a shard's file) and resume.
 *
 * One JSON object per line, one line per input, appended safely by several processes at once
 * (O_APPEND + an exclusive flock around a single write of the whole line). Resume reads a
 * manifest back into a set keyed both by input (raw path bytes) and by output name, and checks
 * that a recorded output is still whole (mv_done_output_intact). It does not choose output names
 * (mv_output_name, mv_names.h) nor decide what a run does with a done input (pipeline.c).
 */
#ifndef MV_MANIFEST_H
#define MV_MANIFEST_H

#include "mv_common.h"

/* The version of the record's schema, written as "schema" in every line (and in the tar layout's
 * .json members). The schema is defined once, in the MANIFEST section of man/mvembed.1; a field
 * added or changed there bumps it. Lines without "schema" are version 1 (before it existed). */
#define MV_MANIFEST_SCHEMA 5

/* One manifest line (and a tar sample's .json). Zero-initialise, then set what applies; absent
 * fields are omitted. Field order in the line: input, input_b64, output, output_b64, status,
 * error, kind, width, height, resized, grid_thw, shape, dtype, bytes, model, frame_indices,
 * timestamps, fps, duration, rotation, seconds, shard, key, offset, xxh64, input_bytes,
 * input_mtime_ns, input_xxh64, input_key, json, txt, cls, input_abs, planned_output, schema, run,
 * seq, time. Paths are raw bytes: a path that is not valid UTF-8 is
 * written with each invalid byte replaced by U+FFFD, plus "<field>_b64" holding base64 of the
 * exact bytes. */
typedef struct {
    const char *input;   /* required: the path as given / walked */
    const char *output;  /* relative to OUT; NULL = omitted */
    int ok;              /* status: 1 "ok", 0 "error" */
    const char *error;   /* NULL = omitted */
    const char *kind;    /* "image" / "video"; NULL = omitted */
    int has_size;        /* width, height of the source */
    int64_t width, height;
    int has_resized;     /* resized [w, h] */
    int64_t resized[2];
    int has_grid;        /* grid_thw [t, h, w] */
    int64_t grid_thw[3];
    int has_shape;       /* shape [rows, cols] of the saved array */
    int64_t shape[2];
    const char *dtype;   /* "f32" / "f16" / "bfloat16"; NULL = omitted */
    int has_bytes;       /* bytes: size of the output file as written (resume checks it) */
    int64_t bytes;
    const char *model;   /* model fingerprint; NULL = omitted */
    const int64_t *frame_indices; /* [n_frame_indices]; NULL = omitted */
    size_t n_frame_indices;
    const double *timestamps;     /* [n_timestamps] seconds; NULL = omitted */
    size_t n_timestamps;
    int has_fps;
    double fps;
    int has_duration;
    double duration;     /* seconds */
    int has_rotation;
    int rotation;        /* degrees */
    int has_seconds;
    double seconds;      /* time spent on this input (written to the microsecond) */
    /* --layout tar (mv_tar.h): where the array is */
    const char *shard;   /* tar file relative to OUT; NULL = omitted */
    const char *key;     /* sample key in it; NULL = omitted */
    int has_offset;
    int64_t offset;      /* byte offset of the array data (after the NPY header) in the tar */
    /* the input file as it was read (resume redoes an input whose file changed since) */
    int has_input_stat;
    int64_t input_bytes;    /* its size */
    int64_t input_mtime_ns; /* its modification time, nanoseconds since the epoch (mv_time_ns:
                             * saturated outside int64; then input_mtime_s is written too) */
    int64_t input_mtime_s;  /* that time's whole seconds */
    int has_input_xxh64;     /* --input-hash: XXH64 (seed 0) of its bytes (mv_filehash.h), */
    uint64_t input_xxh64;    /* 16 lowercase hex digits in the line */
    /* order and provenance (mv_record_stamp); schema 0 omits the four */
    int schema;          /* MV_MANIFEST_SCHEMA */
    const char *run;     /* the run id (mv_manifest_run_id) */
    int64_t seq;         /* the record's number within its run, from 1 */
    double time;         /* when the record was made: seconds since the epoch (microseconds) */
    int has_xxh64;       /* xxh64: XXH64 (seed 0) of the sample's <key>.npy member, as written */
    uint64_t xxh64;      /* (16 lowercase hex digits in the line); "bytes" is that member's size */
    /* a tar input member's WebDataset sample (mv_tar_in.h's mv_tar_meta); NULL = omitted */
    const char *input_key; /* its key (raw bytes, input_key_b64 when not UTF-8) */
    const char *json;    /* its .json: JSON text on one line, written as the value as it is */
    const char *txt;     /* its .txt: bytes [txt_len], a string (txt_b64 when not UTF-8) */
    size_t txt_len;
    const char *cls;     /* its .cls, trimmed [cls_len]: the integer cls_int when has_cls_int, */
    size_t cls_len;      /* else a string (cls_b64 when not UTF-8) */
    int has_cls_int;
    int64_t cls_int;
    /* the files layout: a relative input's path from / (the run's working directory joined to
     * it), so that a run from another directory knows the input; and an error line's output name,
     * the one the input takes when it succeeds; NULL = omitted */
    const char *input_abs;
    const char *planned_output;
} mv_record;

/* This process's run id: 16 hex digits drawn at random once (thread-safe), the same in every
 * record and in the run record (mv_run.h). */
const char *mv_manifest_run_id(void);

/* Sets r's schema, run, seq (the next number of this process, thread-safe) and time (now). */
void mv_record_stamp(mv_record *r);

/* The order of records: the newest record of an input wins wherever several manifests (shards,
 * a merged one, reruns) hold lines of it. Two records of one run go by seq; of different runs by
 * time, then by pos; a line without an order (schema 1) is older than any with one, and two such
 * go by pos: the order they were read in (files in the order given, lines in file order). */
typedef struct {
    double time;  /* 0 = no order recorded */
    int64_t seq;
    char run[17];
    uint64_t pos; /* read order */
} mv_line_order;

/* <0, 0, >0 as a is older than, as old as, newer than b. */
int mv_line_order_cmp(const mv_line_order *a, const mv_line_order *b);

/* The order of a parsed line (a jansson object: "time", "run", "seq"), read pos-th. */
struct json_t;
void mv_line_order_of(struct json_t *line, uint64_t pos, mv_line_order *ord);

/* The key under which the lines of one input fold (raw[0..n), NUL-terminated): whether it is
 * absolute, then its output name (mv_output_name), so "in/a.jpg", "./in//a.jpg" are one input and
 * "/x/in/a.jpg" another until mv_line_stale: the "same path once normalised" of
 * mv_done_same_input. A path holding a NUL byte keys as it is. malloc'd, *kl its length; NULL
 * when out of memory. */
char *mv_line_input_key(const char *raw, size_t n, size_t *kl);

/* The raw path a parsed line records in field ("<field>_b64"'s bytes when a string, else field's
 * string), malloc'd; NULL when absent or malformed (bad base64, empty, a NUL byte in it), and
 * when out of memory copying field's string (*nomem then set; nomem may be NULL). */
char *mv_line_path_field(struct json_t *o, const char *field, int *nomem);

/* One line's input (raw bytes, NUL-terminated) and, for an ok line of the files layout, the
 * output file it names (NULL otherwise: error lines, tar samples, whose "output" is a shared
 * shard); whether it failed, and whether it is a tar member's (it records an "input_key"). */
typedef struct {
    char *in, *out;
    unsigned char error, member;
} mv_line_who;

/* The length of the tar PATH that a tar member's input ("<tar path>/<member>") begins with: its
 * shortest prefix ending before a '/' whose last name is a tar's (mv_name_kind_of); 0 when none. */
size_t mv_line_tar_of(const char *input);

/* 1 when a tar member's line (order member) settles its tar's error line (order tar_error: the
 * tar unreadable part way): it is newer and of another run, so a later run read that tar again
 * (a run redoes a member of a tar whose newest line failed) without meeting the damage; a run
 * that still meets it writes a newer error line of its own. */
int mv_line_settles(const mv_line_order *member, const mv_line_order *tar_error);

/* Over n lines, one per input key (ord[i], who[i]), sets stale[i] (n bytes, zeroed by the caller)
 * for each line that a newer line shows to be stale: one naming the same output file (one file,
 * one owner: the newest line naming it describes its bytes), or one whose input is now the same
 * regular file (device and inode, as mv_done_same_input: "in/a.jpg" and "/abs/in/a.jpg"), unless
 * both are ok lines naming different files (hard links: two inputs, two files), or a tar's error
 * line that a line of one of its members settles (mv_line_settles). Relative inputs resolve from
 * the current directory, as resume's do. So an error line outlives its input's older ok line,
 * whatever the spelling. 0, or -1 when out of memory. */
int mv_line_stale(size_t n, const mv_line_order *ord, const mv_line_who *who, char *stale);

typedef struct mv_manifest mv_manifest;

/* Opens (creating, mode 0666 & ~umask) path for appending. */
mv_status mv_manifest_open(const char *path, mv_manifest **m, mv_err *e);

/* Builds the line for r in memory, then under an exclusive flock: writes a '\n' first if the file
 * does not end with one (a line torn by a crash), writes the line with one write() (looping on
 * short writes), and on failure truncates back to the previous size so no torn line is left.
 * Durability: fdatasync every MV_MANIFEST_SYNC_EVERY lines and at close. */
#define MV_MANIFEST_SYNC_EVERY 64
mv_status mv_manifest_append(mv_manifest *m, const mv_record *r, mv_err *e);

/* Appends text[0..len): one or more complete lines, each ending in '\n', with one write under
 * the lock (torn-line repair and truncation on failure as above), then fdatasync: the tar
 * layout commits a completed shard's lines this way. */
mv_status mv_manifest_append_lines(mv_manifest *m, const char *text, size_t len, mv_err *e);
/* The append itself, for a caller that holds an flock of the manifest open at fd (path names it
 * in messages): text[0..len) (whole lines) at the file's end, a line torn by a crash ended first;
 * a failed write leaves no partial line. *at (may be NULL) takes the offset the lines begin at,
 * *size (may be NULL) the file's size found before (on failure too, once the fstat succeeded).
 * No fdatasync. */
mv_status mv_manifest_append_held(int fd, const char *path, const char *text, size_t len, int64_t *at,
                                  int64_t *size, mv_err *e);

/* The JSON line for r, without the trailing '\n', in a malloc'd string (used by append). */
mv_status mv_manifest_format(const mv_record *r, char **line, size_t *len, mv_err *e);

/* fdatasync + close. Returns the first error met (m is freed in any case). NULL is fine. */
mv_status mv_manifest_close(mv_manifest *m, mv_err *e);

/* --- resume ------------------------------------------------------------------------------- */

typedef struct mv_done mv_done;

mv_status mv_done_create(mv_done **d, mv_err *e);
void mv_done_free(mv_done *d);

/* Reads the manifest at path into d (several manifests, e.g. shards, may be loaded into one d;
 * the newest line of an input wins, mv_line_order_cmp, in whatever order they are loaded). A missing file is not an error. Lines that are not JSON objects with a string
 * "input" (a torn last line, garbage) are skipped and counted in *n_bad (may be NULL); *n_lines
 * (may be NULL) counts lines read. input_b64 / output_b64, when present, give the exact bytes.
 * An input whose latest status is not "ok" is not done, but still holds the output name its last
 * ok line gave it (mv_done_owner_of). Memory is proportional to the inputs, not to the files. */
mv_status mv_manifest_load_done(const char *path, mv_done *d, size_t *n_lines, size_t *n_bad,
                                mv_err *e);

/* mv_manifest_load_done from byte *offset of path on, *offset moved past the lines read. whole:
 * a last line without its '\n' is read too (else it is left for a later call: it may still be
 * being written). */
mv_status mv_manifest_load_done_at(const char *path, mv_done *d, int64_t *offset, int whole,
                                   size_t *n_lines, size_t *n_bad, mv_err *e);

/* The lines of manifest path (*n) and those of them with "status":"ok" (*ok): what compact reports. */
mv_status mv_manifest_count(const char *path, size_t *n, size_t *ok, mv_err *e);

/* The sorted file names (no directory) of out_dir's shard manifests, manifest-K-of-N.jsonl for
 * any K and N (mv_name_manifest_parse: the one lister; manifest.jsonl is not among them), into
 * *names (NULL when none), to free with mv_manifest_list_free. A run loads them all, with
 * manifest.jsonl, for its claims and for resume; merge folds them. */
mv_status mv_manifest_list(const char *out_dir, char ***names, size_t *n, mv_err *e);
void mv_manifest_list_free(char **names, size_t n);

/* The output (relative to OUT) recorded for input when its latest status is "ok", else NULL.
 * O(1) expected. The string stays valid until d changes or is freed. */
const char *mv_done_lookup(const mv_done *d, const char *input);
size_t mv_done_count(const mv_done *d);
/* Its newest ok line's "offset" (tar layout: the array data's byte offset in its shard), or -1
 * when its newest line is not ok or has none. */
int64_t mv_done_offset(const mv_done *d, const char *input);

/* The input file as an ok line recorded it (a tar member's: its tar file): -1 / "" where the
 * line has no such field. */
typedef struct {
    int64_t bytes, mtime_ns;
    int has_mtime;       /* mtime_ns was recorded (any integer: before 1970 is negative) */
    int has_mtime_s;     /* input_mtime_s too (mtime_ns saturated): compare whole seconds */
    int64_t mtime_s;
    int has_xxh64;
    uint64_t xxh64;
} mv_done_input_stat;

/* The input file as a parsed line o records it (input_bytes, input_mtime_ns, input_mtime_s,
 * input_xxh64) into *src. */
void mv_line_input_stat(struct json_t *o, mv_done_input_stat *src);

/* 1 when the input as read now (its size and mtime; mtime_s compared where both hold it) is not
 * the file rec (a line's record) describes: changed on disk since that line was written, so it
 * does not stand for the input. 0 when equal, or rec records no size or now is NULL (not known).
 * The XXH64s are not compared here. */
int mv_done_input_differs(const mv_done_input_stat *rec, const mv_done_input_stat *now);

/* An input's latest ok record as the tar layout's resume checks it (mv_done_sample_of). */
typedef struct {
    const char *output;  /* the record's output (the shard for a tar sample); NULL when none */
    const char *model;   /* "model" fingerprint, "" when absent */
    int64_t bytes;       /* "bytes", -1 when absent */
    int64_t offset;      /* "offset", -1 when absent */
    int64_t data_len;    /* shape[0] * shape[1] * the dtype's size, -1 when not known */
    int has_xxh64;
    uint64_t xxh64;
    int tar;             /* the record names a "shard" and a "key": a tar-layout sample */
    mv_done_input_stat src; /* the input file when that line was written */
    mv_line_order ord;   /* the record's order (its run and seq name the line) */
} mv_done_sample;

/* 1 with *s filled when input's latest line is ok, else 0; an input no line names as written is
 * found by its path from / (abs, or NULL: not looked up), as a line's input_abs records it.
 * Strings as for mv_done_lookup. */
int mv_done_sample_of(const mv_done *d, const char *input, const char *abs, mv_done_sample *s);

/* input's newest line's "error" ("" when it has none) when that line is an error line, else NULL
 * (ok, or not in d). Strings as for mv_done_lookup. */
const char *mv_done_error(const mv_done *d, const char *input);

/* The inputs that ever had an ok line, by index 0..mv_done_inputs(d)-1: entry i's input (raw
 * bytes), and 1 with *s filled when its latest line is ok (0: a later error line). */
size_t mv_done_inputs(const mv_done *d);
int mv_done_entry(const mv_done *d, size_t i, const char **input, mv_done_sample *s);

/* Counts the inputs whose latest line is ok by layout: *n_tar with a "shard" and "key", *n_files
 * without; *ex_files / *ex_tar (may be NULL) receive one input of each (NULL when none). */
void mv_done_layouts(const mv_done *d, size_t *n_files, size_t *n_tar, const char **ex_files,
                     const char **ex_tar);

/* Who holds an output name: the input of the latest "ok" line that named it. An output field
 * that is not already a canonical output name (absolute, ".", "..", empty or doubled '/', a
 * trailing '/'; mv_name_flaw, mv_names.h) is never entered, so resume never follows a path that
 * leaves OUT. */
typedef struct {
    const char *input; /* the input that made it (raw bytes) */
    const char *model; /* that line's "model" fingerprint, "" when absent */
    int64_t bytes;     /* that line's "bytes", -1 when absent */
    int ok;            /* 1 when that input's latest line is still ok (0: a later error line) */
    const char *run;   /* that line's run id, "" when absent */
    mv_done_input_stat src; /* the input file when that line was written */
} mv_done_owner;

/* The output name an input holds in d, the input as met now being path, or abs (its path from /,
 * may be NULL) where d knows it by the absolute path its lines record (input_abs, or an absolute
 * input): its newest ok line's output, else its newest error line's planned_output; NULL when d
 * does not know the input, it holds no name, or another input holds that name now. Never a name
 * that mv_name_flaw refuses. So an input keeps its first name whether it comes from a walk or a
 * path list, and from whatever directory. */
const char *mv_done_name_of(const mv_done *d, const char *path, const char *abs);
/* That name when it is an output file's (ends in MV_OUTPUT_SUFFIX), *len its length less the
 * suffix (the stem: the input's rel); else NULL. */
const char *mv_done_stem_of(const mv_done *d, const char *path, const char *abs, size_t *len);

/* 1 when the input that holds output (mv_done_owner_of) is one whose lines record abs (its path
 * from /, compared as mv_line_input_key does), else 0: the same input met from another working
 * directory, where the relative path its lines hold no longer leads to it. */
int mv_done_held_by(const mv_done *d, const char *output, const char *abs);

/* 1 with *w filled when some input holds output (a name relative to OUT, with ".npy.zst"), else
 * 0. O(1) expected; w's strings stay valid until d changes or is freed. */
int mv_done_owner_of(const mv_done *d, const char *output, mv_done_owner *w);

/* 1 when recorded (an input path from a manifest) and path name the same input: the same bytes,
 * the same path once normalised ("./a//b" is "a/b"; both relative or both absolute), or both
 * reaching the same file now (st_dev, st_ino: "images/x" and "/abs/images/x", symlinks; a file
 * an editor replaced keeps its path, so it is still found). Relative paths are read from the
 * current directory. A recorded input that no longer exists under another path is not the same. */
int mv_done_same_input(const char *recorded, const char *path);

/* 1 when OUT/output is whole, else 0 with a reason in why[cap]. out_real is realpath(OUT). The
 * file must resolve (symlinks followed) to a regular file inside out_real; with bytes >= 0 its
 * size must be bytes; without (manifests written before "bytes" existed) it must be one complete
 * zstd frame: the frame's blocks are walked through their 3-byte headers (a few small reads, not
 * the whole file) and must end, with the frame's checksum when it has one, exactly at the end of
 * the file, which a truncated file does not. */
int mv_done_output_intact(const char *out_real, const char *output, int64_t bytes, char *why,
                          size_t cap);

/* Base64 (RFC 4648, padded) helpers: malloc'd, NUL-terminated results; NULL on failure (out of
 * memory, or bad input for decode). */
char *mv_base64_encode(const void *p, size_t n);
uint8_t *mv_base64_decode(const char *s, size_t *n);

#endif
