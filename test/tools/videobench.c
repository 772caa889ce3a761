/* videobench - times sparse sampling against decoding every frame (issue: sparse sampling of a long
 * video must not decode every frame).
 *   videobench FILE [FPS]   samples frames like HF at FPS (default 2), then reads every frame
 * Prints frames decoded and wall time for both. */
#include "mv_video.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: videobench FILE [FPS]\n");
        return 2;
    }
    double fps = argc > 2 ? atof(argv[2]) : 2.0;
    mv_err e;
    mv_video *v;
    mv_video_info info;
    double t = mv_now();
    if (mv_video_open(argv[1], &v, &info, &e)) {
        fprintf(stderr, "videobench: %s\n", e.msg);
        return 1;
    }
    double t_open = mv_now() - t;
    int n = mv_video_num_frames(info.total_frames, info.fps, fps, 4, 768);
    int64_t *idx = malloc(n * sizeof *idx);
    mv_video_indices(info.total_frames, n, idx);
    int64_t d0 = mv_video_decoded_frames(v);
    uint8_t *frames;
    t = mv_now();
    if (mv_video_read(v, idx, n, &frames, NULL, &e)) {
        fprintf(stderr, "videobench: %s\n", e.msg);
        return 1;
    }
    double t_sparse = mv_now() - t;
    int64_t d_sparse = mv_video_decoded_frames(v) - d0;
    free(frames);
    mv_video_close(v);
    printf("%s: %lld frames %dx%d at %.3f fps (%s); open+index %.3fs\n", argv[1],
           (long long)info.total_frames, info.width, info.height, info.fps, info.codec, t_open);
    printf("sparse: %d sampled at %.2f fps: decoded %lld frames in %.3fs\n", n, fps,
           (long long)d_sparse, t_sparse);
    /* every frame, in chunks, on a fresh handle */
    if (mv_video_open(argv[1], &v, &info, &e)) {
        fprintf(stderr, "videobench: %s\n", e.msg);
        return 1;
    }
    d0 = mv_video_decoded_frames(v);
    t = mv_now();
    const int chunk = 64;
    int64_t *all = malloc(chunk * sizeof *all);
    for (int64_t s = 0; s < info.total_frames; s += chunk) {
        int m = info.total_frames - s < chunk ? (int)(info.total_frames - s) : chunk;
        for (int i = 0; i < m; i++)
            all[i] = s + i;
        if (mv_video_read(v, all, m, &frames, NULL, &e)) {
            fprintf(stderr, "videobench: %s\n", e.msg);
            return 1;
        }
        free(frames);
    }
    double t_full = mv_now() - t;
    printf("full: decoded %lld frames in %.3fs (%.1fx the sparse time)\n",
           (long long)(mv_video_decoded_frames(v) - d0), t_full, t_full / t_sparse);
    mv_video_close(v);
    free(all);
    free(idx);
    return 0;
}
