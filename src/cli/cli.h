/* cli.h — subcommands of the `lilac` binary; each lives in cmd_<name>.c. */
#ifndef LILAC_CLI_H
#define LILAC_CLI_H

typedef int (*cli_cmd_fn)(int argc, char **argv); /* argv[0] is the subcommand name */

int cmd_info(int argc, char **argv);
int cmd_logits(int argc, char **argv);
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

/* Prints "lilac <cmd>: <msg>" to stderr and returns 1 (the exit status for runtime errors). */
int cli_fail(const char *cmd, const char *msg);

#endif
