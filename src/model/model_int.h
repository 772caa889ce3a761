/* model_int.h - inside the model loader (src/model/): the model directory's JSON files, read by
 * model_config.c for model.c. Every function returns MV_ERR_MODEL (or the I/O status) with a
 * message naming the file and the field at fault. Not a public header: include/mv_model.h is the
 * API.
 */
#ifndef MV_MODEL_INT_H
#define MV_MODEL_INT_H

#include "mv_model.h"

#include <jansson.h>

/* path's JSON object (a regular file only: a FIFO would block); NULL with *st and e set. */
json_t *mv_model_read_json(const char *path, mv_err *e, mv_status *st);

/* dir/config.json's vision parameters into c (derived fields too: head_dim, pos_side, ...). */
mv_status mv_model_read_config(const char *dir, mv_vision_config *c, mv_err *e);

/* dir's preprocessor_config.json and video_preprocessor_config.json into pp, over
 * mv_preproc_defaults (both files are optional); patch, merge and temporal sizes must agree with
 * c's. */
mv_status mv_model_read_preproc(const char *dir, const mv_vision_config *c, mv_preproc_config *pp,
                                mv_err *e);

#endif
