/* fuzz_video.c - libFuzzer harness for the video path on small inputs: the container sniff, then
 * (for what the CLI would treat as a video) FFmpeg demux + decode through mv_video_open_input
 * (frame index, first-frame decode, rotation) from an mv_input over the bytes in memory (FFmpeg
 * reads it through an AVIOContext, as it reads files and tar members) and mv_video_read of the
 * first, middle and last frames, then HF's frame-count / index / video smart_resize math on the
 * stream's facts. Open must give positive frame counts and sizes, reads must fill
 * n * height * width * 3 readable bytes with finite (or NaN) times, and failures must leave one
 * line naming the input. Each input gets a 2 s decode limit (the CLI's
 * --timeout), so a hang shows up as a libFuzzer timeout only if that limit is not honoured.
 * Not here: resizing and patchify of frames (shared with images, fuzz_image.c), the tower. */
#include "fuzz_util.h"
#include "mv_input.h"
#include "mv_preprocess.h"
#include "mv_sniff.h"
#include "mv_video.h"

#include <math.h>

#define FZ_NAME "fuzz-input.vid"
#define FZ_LIMIT_S 2.0
#define FZ_MAX_READ_BYTES (256u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t nh = size < MV_SNIFF_BYTES ? size : MV_SNIFF_BYTES;
    if (size == 0 || mv_sniff(data, nh) != MV_MEDIA_VIDEO)
        return 0; /* the CLI hands only these to FFmpeg */
    mv_video *v = NULL;
    mv_video_info info;
    mv_err e;
    e.msg[0] = 0;
    mv_input in;
    if (mv_input_open_mem(&in, data, size, FZ_NAME, &e) != MV_OK)
        abort(); /* only out of memory could fail this */
    mv_video_limits lim = {.timeout_s = FZ_LIMIT_S};
    if (mv_video_open_input(&in, &lim, &v, &info, &e) != MV_OK) {
        if (v)
            abort();
        fz_check_msg(&e, FZ_NAME, "mv_video_open_input");
        mv_input_close(&in);
        return 0;
    }
    if (info.total_frames < 1 || info.width < 1 || info.height < 1 || info.fps < 0 ||
        (info.rotation != 0 && info.rotation != 90 && info.rotation != 180 && info.rotation != 270) ||
        !info.codec) {
        fprintf(stderr, "bad video info: %lld frames %dx%d fps %g rotation %d\n",
                (long long)info.total_frames, info.width, info.height, info.fps, info.rotation);
        abort();
    }
    int64_t idx[3] = {0, info.total_frames / 2, info.total_frames - 1};
    int n = 3;
    size_t fsz = (size_t)info.width * info.height * 3;
    if (fsz * n <= FZ_MAX_READ_BYTES) {
        uint8_t *frames = NULL;
        double ts[3];
        e.msg[0] = 0;
        mv_status st = mv_video_read(v, idx, n, &frames, ts, &e);
        if (st == MV_OK) {
            if (!frames)
                abort();
            fz_touch(frames, fsz * n);
            /* Timestamps are the decoder's (best-effort) frame times: finite, or NaN when the
             * stream has none. They are not required to ascend: without usable packet
             * timestamps frames are counted in decode order and a corrupt stream may carry
             * any times (test/fuzz/crashes/README.md, "video timestamps"). */
            for (int i = 0; i < n; i++)
                if (isinf(ts[i])) {
                    fprintf(stderr, "timestamp %d is infinite\n", i);
                    abort();
                }
            free(frames);
        } else {
            if (frames)
                abort();
            fz_check_msg(&e, FZ_NAME, "mv_video_read");
        }
    }
    mv_video_close(v);
    mv_input_close(&in);

    /* the sampling math the CLI applies to these facts */
    mv_preproc_config pp;
    mv_preproc_defaults(&pp);
    int nf = mv_video_num_frames(info.total_frames, info.fps, pp.fps, pp.min_frames, pp.max_frames);
    if (nf < 1 || nf > info.total_frames || nf > pp.max_frames) {
        fprintf(stderr, "mv_video_num_frames gave %d for %lld frames\n", nf, (long long)info.total_frames);
        abort();
    }
    int64_t *ix = malloc((size_t)nf * sizeof *ix);
    if (!ix)
        abort();
    mv_video_indices(info.total_frames, nf, ix);
    for (int i = 0; i < nf; i++)
        if (ix[i] < 0 || ix[i] >= info.total_frames || (i && ix[i] < ix[i - 1])) {
            fprintf(stderr, "frame index %lld at %d out of order or range\n", (long long)ix[i], i);
            abort();
        }
    free(ix);
    int oh, ow;
    e.msg[0] = 0;
    if (mv_smart_resize_video(nf, info.height, info.width, pp.patch * pp.merge, pp.temporal,
                              pp.video_min_pixels, pp.video_max_pixels, &oh, &ow, &e) == MV_OK) {
        if (oh < 1 || ow < 1 || oh % (pp.patch * pp.merge) || ow % (pp.patch * pp.merge))
            abort();
    } else if (!e.msg[0]) {
        abort();
    }
    return 0;
}
