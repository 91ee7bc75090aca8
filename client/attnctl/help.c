/* attnctl's usage texts: `attnctl --help`, `attnctl CMD --help` (exit 0)
 * and the text printed on a usage error (exit 2), from one table. */
#include <stdio.h>
#include <string.h>

#include "attnctl.h"

#define URL_LINE                                                                                   \
    "  --url U        attnd's nng URL (default $ATTN_URL, else " ATTNCTL_DEFAULT_URL ")\n"
#define LOCAL_LINE                                                                                 \
    "  --local        start a private attnd for this command ($ATTND, else the one beside\n"       \
    "                 attnctl, else attnd on PATH) on a socket of its own\n"

/* X(name, one-line summary, full usage) */
#define ACTL_COMMANDS(X)                                                                           \
    X("hello", "server version, backends, devices, artifact identity",                             \
      "usage: attnctl hello [--url U | --local]\n"                                                 \
      "Print attnd's hello reply as JSON: protocol and server version, build id,\n"                \
      "backends with availability and reasons, devices, the loaded-artifact identity.\n" URL_LINE  \
          LOCAL_LINE "Exit 0 when the reply is ok, 1 otherwise, 2 on a usage error.\n")            \
    X("pool", "create, drop or describe a K/V pool",                                               \
      "usage: attnctl pool create NAME --layers L --pages N --page-size P --kv-heads H\n"          \
      "                           --head-dim D [--head-dim-vo D] [--dtype fp32|fp16|bf16]\n"       \
      "                           [--layout NHD|HND] [--device cpu|cuda:N] [--url U]\n"            \
      "       attnctl pool drop NAME [--url U]\n"                                                  \
      "       attnctl pool info NAME [--url U]\n"                                                  \
      "create allocates L layers of N pages of P rows (K and V, H heads of D values);\n"           \
      "drop frees it once no run holds it; info prints its geometry and bytes.\n" URL_LINE         \
      "Exit 0 when the reply is ok, 1 otherwise, 2 on a usage error.\n")                           \
    X("stats", "counters, plan cache, pools",                                                      \
      "usage: attnctl stats [--url U]\n"                                                           \
      "Print attnd's stats reply as JSON: request, reply and error counters, per-op\n"             \
      "counts, hand-off times, plan-cache counters, pools and their bytes.\n" URL_LINE             \
      "Exit 0 when the reply is ok, 1 otherwise, 2 on a usage error.\n")                           \
    X("run", "send JSON requests, print JSON replies",                                             \
      "usage: attnctl run FILE.json [--url U | --local] [--compact]\n"                             \
      "FILE.json holds one request map or an array of them (docs/protocol.md, JSON form);\n"       \
      "\"plan_id\": \"last\" names the plan the previous request created.\n" URL_LINE LOCAL_LINE   \
      "  --compact      one JSON line per reply instead of indented output\n"                      \
      "Exit 0 when every reply is ok, 1 otherwise, 2 on a usage error.\n")                         \
    X("gen", "write a synthetic workload capture",                                                 \
      "usage: attnctl gen --out FILE [--kind decode|prefill|append|mixed] [--seed N]\n"            \
      "                   [--pool NAME] [--requests B] [--steps S] [--min-len T] [--max-len T]\n"  \
      "                   [--dist uniform|longtail] [--layers L] [--kv-heads H] [--qo-heads H]\n"  \
      "                   [--head-dim D] [--page-size P] [--dtype fp32|fp16|bf16]\n"               \
      "                   [--device cpu|cuda:N] [--trace] [--verify]\n"                            \
      "Runs the workload through a private attnd (as --local) and writes every request and\n"      \
      "reply to FILE in the capture format of docs/daemon.md (replay it with attnctl replay).\n"   \
      "  --trace        ask every run for kernel records\n"                                        \
      "  --verify       ask every run for an fp64 check by the CPU reference\n"                    \
      "Defaults: --kind mixed --seed 1 --pool gen --requests 4 --steps 3 --min-len 8\n"            \
      "--max-len 96 --layers 2 --kv-heads 2 --qo-heads 4 --head-dim 32 --page-size 16 fp32.\n")    \
    X("replay", "replay a capture and compare the replies",                                        \
      "usage: attnctl replay FILE [--url U | --local] [--verify] [--repeat N] [--quiet]\n"         \
      "Creates the capture's pools, sends every recorded request (plan ids remapped) and\n"        \
      "prints one line per request: op, phase mix, backend, splits, plan event, us.\n" URL_LINE    \
          LOCAL_LINE "  --verify       compare every reply with the recorded one (exit 1 on a "    \
      "mismatch)\n"                                                                                \
      "  --repeat N     time side-effect-free requests N times (median)\n"                         \
      "  --quiet        no per-request lines\n")                                                   \
    X("bench", "closed-loop load: requests/s, RTT p50/p99",                                        \
      "usage: attnctl bench [--url U] [--clients N] [--requests M] [--op hello|stats|decode]\n"    \
      "                     [--batch B] [--cache-len T] [--qo-heads H] [--kv-heads H]\n"           \
      "                     [--head-dim D] [--echo --setup-url ATTND_URL] [--json]\n"              \
      "N clients (default 4) each send M requests (default 200) back to back; prints\n"            \
      "requests/s and RTT percentiles.  decode runs B requests of T rows (default 16, 4096,\n"     \
      "32/8 heads, d=128).\n" URL_LINE                                                             \
      "  --echo         the target is a bare nng echo server; the frame comes from --setup-url\n"  \
      "  --json         one JSON object instead of text\n")                                        \
    X("explain", "explain the diagnostics of a reply or capture",                                  \
      "usage: attnctl explain FILE [--id N]\n"                                                     \
      "FILE: a JSON reply or diagnostic (or an array / JSON lines of them), or an attnd\n"         \
      "capture file.  Prints candidates with reasons, selection, plan, kernels, timing and\n"      \
      "evidence level for each diagnostic (only request N with --id).\n")

typedef struct actl_command_help {
    const char *name;
    const char *summary;
    const char *usage;
} actl_command_help;

static const actl_command_help commands[] = {
#define X(name, summary, usage) {name, summary, usage},
    ACTL_COMMANDS(X)
#undef X
};

void actl_print_usage(FILE *out)
{
    fputs("usage: attnctl COMMAND [ARGS]    (attnctl COMMAND --help for its options)\n", out);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fputs("  --version print attnctl's version and build id\n"
          "The URL defaults to $ATTN_URL, else " ATTNCTL_DEFAULT_URL ".\n",
          out);
}

const char *actl_command_usage(const char *cmd)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, cmd) == 0)
            return commands[i].usage;
    return NULL;
}

int actl_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}
