/* mv_hub.h - resolves a --model argument that names a Hugging Face hub repository
 * ("Qwen/Qwen3.5-2B", "Qwen/Qwen3.5-2B@REVISION") to a snapshot directory in the local Hugging
 * Face cache, the way huggingface_hub finds it offline. Never touches the network, never writes
 * and never reads the environment (the caller passes the variables in, mv_hub_env): a model
 * that is not in the cache is an error naming every place that was looked at.
 *
 * Order (huggingface_hub's):
 *   1. ARG is an existing path (a directory, as before): ARG itself.
 *   2. ARG is not shaped like a repo id ([ORG/]NAME of [A-Za-z0-9._-], each part starting and
 *      ending with a letter, digit or '_', no "--" or "..", at most 96 characters, then an optional
 *      @REVISION): ARG itself (the loader reports the missing directory).
 *   3. The cache root: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
 *      $XDG_CACHE_HOME/huggingface/hub, else $HOME/.cache/huggingface/hub (empty variables count
 *      as unset; a leading ~ is the home directory).
 *   4. There, models--ORG--NAME/snapshots/COMMIT, where COMMIT is the content of
 *      models--ORG--NAME/refs/REVISION (REVISION defaults to "main"), or REVISION itself when no
 *      such ref exists and REVISION is a 40-hex commit hash.
 */
#ifndef MV_HUB_H
#define MV_HUB_H

#include "mv_common.h"

/* The environment variables that choose the cache root, as the program read them (NULL or ""
 * counts as unset). */
typedef struct {
    const char *hf_hub_cache;          /* $HF_HUB_CACHE */
    const char *huggingface_hub_cache; /* $HUGGINGFACE_HUB_CACHE, its older name */
    const char *hf_home;               /* $HF_HOME */
    const char *xdg_cache_home;        /* $XDG_CACHE_HOME */
    const char *home;                  /* $HOME */
} mv_hub_env;

/* Writes the directory to load into dir[cap] (NUL-terminated); env NULL: every variable unset.
 * MV_ERR_MODEL when ARG is a repo id that is neither a local path nor in the cache (the message
 * lists the local path, the cache root with the variable that chose it, and the ref / snapshot
 * paths tried); MV_ERR_USAGE for a malformed revision or a path longer than cap. */
mv_status mv_hub_resolve(const char *arg, const mv_hub_env *env, char *dir, size_t cap, mv_err *e);

#endif
