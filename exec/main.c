/* hetsim-exec - the executor's entry point.
 *
 * The CUDA/cuBLAS and CPU backends (profile, replay, info) are built in a
 * later change; this binary exists so the build graph, install and CLI
 * layout are fixed now.  It does not pretend to measure anything. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: hetsim-exec <profile|replay|info> [options]\n"
               "The executor backends are not built yet; every subcommand "
               "reports that and exits 2.\n");
        return 0;
    }
    fprintf(stderr, "hetsim-exec: %s: executor backends are not built yet\n",
            argc > 1 ? argv[1] : "(no subcommand)");
    return 2;
}
