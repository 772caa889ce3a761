/* mv_output.h - atomic writing of embeddings as OUT/<rel>.npy.zst.
 *
 * The file is an NPY v1.0 array compressed as ONE zstd frame carrying its content size and a
 * checksum, so `zstd -d` + numpy.load read it. It is written to a temp file in the same directory
 * (".tmp-<pid>-<random>"), fsync'd, renamed over the final name, and the directory fsync'd: a
 * reader never sees a partial file. This module does not decide names or detect collisions
 * between inputs; the caller does.
 */
#ifndef MV_OUTPUT_H
#define MV_OUTPUT_H

#include "mv_common.h"
#include "mv_npy.h"

/* Final path out_dir/rel.npy.zst into buf[cap]. rel must be relative: not empty, not starting
 * with '/', no "", "." or ".." component (MV_ERR_USAGE otherwise); MV_ERR_LIMIT if it does not
 * fit in cap. */
mv_status mv_output_path(const char *out_dir, const char *rel, char *buf, size_t cap, mv_err *e);

/* Writes data (float32, [rows, cols] C order) as out_dir/rel.npy.zst, stored as dt (MV_DT_F32,
 * or MV_DT_F16 converted with round-to-nearest-even), compressed at zstd_level. Creates missing
 * parent directories (mode 0777 & ~umask). The first time this process writes into a directory,
 * temp files ".tmp-<pid>-*" there whose pid no longer exists (left by a killed run) are removed.
 * On success final_path (if non-NULL) receives the final path. On any failure the temp file is
 * removed and e names the file and cause (e.g. "No space left on device"). Thread-safe. */
mv_status mv_output_write(const char *out_dir, const char *rel, mv_dtype dt, int64_t rows,
                          int64_t cols, const float *data, int zstd_level, char *final_path,
                          size_t cap, mv_err *e);

/* Removes ".tmp-<pid>-*" files in dir whose pid is not a live process (and is not ours).
 * Returns the number removed, or -1 if dir cannot be read. mv_output_write calls it lazily. */
int mv_output_clean_temps(const char *dir);

#endif
