/* attnctl: the command-line client of attnd. */
#include <stdio.h>
#include <string.h>

#include "attnctl.h"

static const char usage[] =
    "usage: attnctl COMMAND [ARGS]\n"
    "  hello [--url U | --local]                 server version, backends, devices\n"
    "  pool create|drop|info NAME [...]          manage K/V pools\n"
    "  stats [--url U]                           counters, plan cache, pools\n"
    "  run FILE.json [--url U | --local]         send JSON requests, print JSON replies\n"
    "  gen --out FILE [--kind decode|prefill|append|mixed] [--seed N] ...\n"
    "                                            write a synthetic capture\n"
    "  replay FILE [--url U | --local] [--verify] [--repeat N]\n"
    "                                            replay a capture, compare the replies\n"
    "  bench [--url U] [--clients N] [--requests M] [--op hello|decode]\n"
    "                                            closed-loop load: requests/s, RTT p50/p99\n"
    "  explain FILE                              explain diagnostics of a reply or capture\n"
    "The URL defaults to $ATTN_URL, else " ATTNCTL_DEFAULT_URL ".\n";

/* explain.c is another module's; a weak reference keeps attnctl linkable
 * while it is absent (it is an object file, so it links whenever present). */
extern int attnctl_explain(int argc, char **argv) __attribute__((weak));

int main(int argc, char **argv)
{
    const char *cmd;
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    cmd = argv[1];
    argc--;
    argv++;
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
    fprintf(stderr, "attnctl: unknown command '%s'\n%s", cmd, usage);
    return 2;
}
