/* mv_interrupt.h - the run's interrupt, as the decoders see it.
 *
 * An interrupt (SIGINT, SIGTERM: main.c's handler sets a flag) must stop the decodes in flight,
 * not only the inputs not yet started: every decoder already stops at its --timeout deadline
 * (libjpeg's progress monitor, libpng's row callback, the WebP, GIF, TIFF and BMP row loops,
 * FFmpeg's interrupt callback and the frame loops), and those same checks ask mv_interrupted.
 * The flag is the caller's (mv_run_opts.interrupt), registered once before the decode threads
 * start and read with no lock (a sig_atomic_t). Not here: what the pipeline does with an input
 * stopped this way (it is dropped, not failed: the next run does it).
 */
#ifndef MV_INTERRUPT_H
#define MV_INTERRUPT_H

#include <signal.h>

/* Registers flag (non-zero: interrupted), or NULL for none. */
void mv_interrupt_watch(const volatile sig_atomic_t *flag);

/* 1 when a flag is registered (decoders then keep their checks on without a deadline). */
int mv_interrupt_watched(void);

/* 1 when the registered flag is set. */
int mv_interrupted(void);

#endif
