/* placeholder */
int cmd_template(int argc, char **argv);
int cmd_template(int argc, char **argv) { (void)argc; (void)argv; return 1; }
