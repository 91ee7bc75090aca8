/* attnctl: the command-line client of attnd. */
#include <stdio.h>
#include <string.h>

#include "attnctl.h"

/* explain.c is another module's; a weak reference keeps attnctl linkable
 * while it is absent (it is an object file, so it links whenever present). */
extern int attnctl_explain(int argc, char **argv) __attribute__((weak));

int main(int argc, char **argv)
{
    const char *cmd, *usage;
    if (argc < 2) {
        actl_print_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        if (argc > 2 && (usage = actl_command_usage(argv[2])) != NULL) {
            fputs(usage, stdout); /* attnctl help CMD */
            return 0;
        }
        actl_print_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        actl_print_version(stdout);
        return 0;
    }
    cmd = argv[1];
    argc--;
    argv++;
    usage = actl_command_usage(cmd);
    if (usage != NULL && actl_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(cmd, "hello") == 0)
        return actl_cmd_hello(argc, argv);
    if (strcmp(cmd, "pool") == 0)
        return actl_cmd_pool(argc, argv);
    if (strcmp(cmd, "stats") == 0)
        return actl_cmd_stats(argc, argv);
    if (strcmp(cmd, "run") == 0)
        return actl_cmd_run(argc, argv);
    if (strcmp(cmd, "gen") == 0)
        return actl_cmd_gen(argc, argv);
    if (strcmp(cmd, "replay") == 0)
        return actl_cmd_replay(argc, argv);
    if (strcmp(cmd, "bench") == 0)
        return actl_cmd_bench(argc, argv);
    if (strcmp(cmd, "explain") == 0) {
        if (attnctl_explain == NULL) {
            fprintf(stderr, "attnctl: explain is not part of this build\n");
            return 2;
        }
        return attnctl_explain(argc, argv);
    }
    fprintf(stderr, "attnctl: unknown command '%s'\n", cmd);
    actl_print_usage(stderr);
    return 2;
}
