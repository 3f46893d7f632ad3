/* cli.h — subcommands of the `lilac` binary; each lives in cmd_<name>.c. */
#ifndef LILAC_CLI_H
#define LILAC_CLI_H

typedef int (*cli_cmd_fn)(int argc, char **argv); /* argv[0] is the subcommand name */

int cmd_info(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_convert(int argc, char **argv);  /* also `quantize` */
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_scan(int argc, char **argv);
int cmd_mask(int argc, char **argv);
int cmd_unmask(int argc, char **argv);

/* The model used when -m is not given: $LILAC_MODEL, else the shipped demonstration model
 * (models/lilac-demo beside the binary's folder or under the current directory); NULL if none. */
const char *cli_default_model(void);

/* --kv-cache VALUE: "auto" (0: the backend's choice), "q8" (1) or "bf16" (-1) into *kv_q8
 * (ll_backend_params.kv_q8); -1 for anything else. */
int cli_kv_cache(const char *v, int *kv_q8);

/* Prints "lilac <cmd>: <msg>" to stderr and returns 1 (the exit status for runtime errors). */
int cli_fail(const char *cmd, const char *msg);

#endif
