/* main.c - the hetsim command line: dispatches subcommands.  Only this file
 * (and the subcommand functions it calls) decides exit codes. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "plan/plan.h"

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim <command> [options]\n"
            "\n"
            "hetsim simulates LLM serving on (heterogeneous) GPU clusters.\n"
            "\n"
            "commands:\n"
            "  run          simulate a workload on a deployment, store results in SQLite\n"
            "  plan         run a planner and write the deployment JSON\n"
            "  list         show models, GPUs, clusters, policies, planners\n"
            "  trace stats  summarise a trace file\n"
            "  sweep        run a grid or list of cases in parallel, resumable\n"
            "  search       capacity search, cheapest deployment, cost-latency Pareto front\n"
            "  report       plots and an HTML page from a results database\n"
            "  perf         latency models: import and calibrate tables, engine profiles,\n"
            "               cross-validation, one iteration's time (perf step)\n"
            "  validate     compare a schedule's predicted iteration times with measured ones\n");
    /* the planners' own research subcommands */
    for (int i = 0; hs_planners[i]; i++)
        if (hs_planners[i]->command)
            fprintf(fp, "  %-12s %s\n", hs_planners[i]->name, hs_planners[i]->command_help);
    fprintf(fp, "\n`hetsim <command> --help` describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "run")) return hs_cli_run(argc - 1, argv + 1);
    if (!strcmp(argv[1], "plan")) return hs_cli_plan(argc - 1, argv + 1);
    if (!strcmp(argv[1], "list")) return hs_cli_list(argc - 1, argv + 1);
    if (!strcmp(argv[1], "trace")) return hs_cli_trace(argc - 1, argv + 1);
    if (!strcmp(argv[1], "perf")) return hs_cli_perf(argc - 1, argv + 1);
    if (!strcmp(argv[1], "validate")) return hs_cli_validate(argc - 1, argv + 1);
#ifdef HS_MPI
    if (!strcmp(argv[1], "sweep")) return hs_cli_sweep_mpi(argc - 1, argv + 1);
#else
    if (!strcmp(argv[1], "sweep")) return hs_cli_sweep(argc - 1, argv + 1);
#endif
    if (!strcmp(argv[1], "search")) return hs_cli_search(argc - 1, argv + 1);
    if (!strcmp(argv[1], "report")) return hs_cli_report(argc - 1, argv + 1);
    for (int i = 0; hs_planners[i]; i++)
        if (hs_planners[i]->command && !strcmp(argv[1], hs_planners[i]->name))
            return hs_planners[i]->command(argc - 1, argv + 1);
    {
        char cmd[128]; /* escaped: the error stays one line */
        hs_err_escape(cmd, sizeof cmd, argv[1], strlen(argv[1]));
        fprintf(stderr, "hetsim: unknown command \"%s\" (see hetsim --help)\n", cmd);
    }
    return 2;
}
