/* options.h - the command line of mvembed (options.c), for main.c: argv into an mv_run_opts, the
 * usage errors, strict numbers. Status convention of these calls: -1 when the run goes on, else
 * the exit status (0 after --help or --version, 1 after a usage error). */
#ifndef MV_CLI_OPTIONS_H
#define MV_CLI_OPTIONS_H

#include "mv_run.h"

/* "mvembed: MSG[: ARG]" and the hint to --help on stderr; 1. */
int cli_usage_error(const char *msg, const char *arg);
/* Reads every option of argv into o (the operands: o->paths). */
int cli_parse_args(int argc, char **argv, mv_run_opts *o);
/* What the options say together. */
int cli_check_args(mv_run_opts *o);

#endif
