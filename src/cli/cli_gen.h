/* cli_gen.h — options shared by `lilac run` and `lilac chat`: the model/engine, sampling and stop
 * flags, parsed strictly (an invalid value is an error naming the flag). */
#ifndef LILAC_CLI_GEN_H
#define LILAC_CLI_GEN_H

#include "runtime/engine.h"

#define CLI_MAX_STOPS 16

typedef struct cli_gen_opts {
    ll_engine_params ep;
    ll_gen_request rq;          /* sampling, max_tokens, stop */
    const char *stops[CLI_MAX_STOPS];
    int think;                  /* -1: template default, 0: --no-think, 1: --think */
    int sampling_set[8];        /* which sampling flags were given (others take model defaults) */
} cli_gen_opts;

void cli_gen_init(cli_gen_opts *o);
/* Tries the option at argv[*i] (advancing *i past its value). Returns 1 if consumed, 0 if it is
 * not a shared option, -1 on a bad value (message in ll_errmsg()). */
int cli_gen_parse(cli_gen_opts *o, int argc, char **argv, int *i);
/* Fills sampling fields not given on the command line from the engine's defaults. */
void cli_gen_apply_defaults(cli_gen_opts *o, const ll_engine *e);
/* A progress bar on stderr for model loading and weight upload (only when stderr is a terminal);
 * cli_progress_done ends the line. */
void cli_progress_install(void);
void cli_progress_done(void);
/* Help text for the shared options. */
void cli_gen_usage(FILE *f);
/* "prompt 12 tok (cached 8) | prefill 300.0 tok/s | decode 25.1 tok/s (40 tok)" on stderr */
void cli_gen_print_stats(const ll_gen_result *r);

#endif
