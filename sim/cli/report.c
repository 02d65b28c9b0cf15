/* report.c - `hetsim report`: plots and one HTML page from a results
 * database, drawn by tools/report.py with matplotlib (Debian's
 * python3-matplotlib, run by /usr/bin/python3 unless HS_PYTHON names
 * another interpreter).  Without matplotlib the report is skipped with a
 * one-line notice and exit code 0 (--require makes that exit 3), so a
 * machine without plotting still runs sweeps. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "hw/hw.h"

static void report_usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim report [--db FILE] [--out DIR] [--sweep NAME] [--format png|svg]\n"
            "                     [--slo-ttft MS] [--slo-tpot MS] [--require]\n"
            "\n"
            "Draws from a results database: TTFT, TPOT and E2E latency CDFs; TTFT, TPOT,\n"
            "goodput and SLO attainment versus offered rate (workload.rate x time_scale, or\n"
            "a trace's measured arrival rate); cost-latency Pareto fronts per workload and\n"
            "rate (overloaded and SLO-missing points marked, off the front); per-replica\n"
            "utilisation and KV use over time (table samples); predicted versus measured\n"
            "iteration times (table validations).  Series are labelled by the runs'\n"
            "--label, else by the keys that differ between them.  Writes DIR/*.png (or\n"
            ".svg) and DIR/index.html linking them.\n"
            "\n"
            "  --db FILE       results database (default results/hetsim.db)\n"
            "  --out DIR       output folder (default results/report)\n"
            "  --sweep NAME    only the cases of this sweep (default: every run)\n"
            "  --format F      png (default) or svg\n"
            "  --slo-ttft MS   TTFT target drawn on the latency panels (default: the runs'\n"
            "                  slo.ttft_ms when they share one; 0: none)\n"
            "  --slo-tpot MS   TPOT target, likewise (slo.tpot_ms)\n"
            "  --require       exit 3 when matplotlib is missing (default: skip with a notice)\n"
            "\n"
            "Environment: HS_PYTHON (interpreter, default /usr/bin/python3),\n"
            "HS_REPORT_SCRIPT (default <source>/tools/report.py).\n");
}

/* Runs argv; returns its exit code, or -1 when it could not start. */
static int run_child(char *const argv[], int quiet)
{
    pid_t p;
    int st;
    fflush(stdout);
    fflush(stderr);
    p = fork();
    if (p < 0) return -1;
    if (p == 0) {
        if (quiet) {
            FILE *n = freopen("/dev/null", "w", stderr);
            (void)n;
        }
        execv(argv[0], argv);
        _exit(127);
    }
    if (waitpid(p, &st, 0) < 0) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int hs_cli_report(int argc, char **argv)
{
    const char *db = "results/hetsim.db", *out = "results/report", *sweep = "", *fmt = "png";
    const char *slo_ttft = NULL, *slo_tpot = NULL;
    const char *py = getenv("HS_PYTHON"), *script_env = getenv("HS_REPORT_SCRIPT");
    char script[1200];
    int require = 0, rc;
    struct stat sb;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            report_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--require")) {
            require = 1;
            continue;
        }
        if (strcmp(a, "--db") && strcmp(a, "--out") && strcmp(a, "--sweep") && strcmp(a, "--format") &&
            strcmp(a, "--slo-ttft") && strcmp(a, "--slo-tpot")) {
            hs_eprintf("hetsim: unknown option \"%s\" (see hetsim report --help)\n", a);
            return 2;
        }
        if (!v) {
            hs_eprintf("hetsim: %s needs a value (see hetsim report --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--db")) db = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--sweep")) sweep = v;
        else if (!strcmp(a, "--slo-ttft")) slo_ttft = v;
        else if (!strcmp(a, "--slo-tpot")) slo_tpot = v;
        else fmt = v;
    }
    for (int k = 0; k < 2; k++) {
        const char *v = k ? slo_tpot : slo_ttft;
        char *end;
        double x;
        if (!v) continue;
        errno = 0;
        x = strtod(v, &end);
        /* Checked here, so a bad value is one line, not a Python usage dump. */
        if (end == v || *end || errno || !(x >= 0 && x <= 1e9)) {
            hs_eprintf("hetsim: %s: \"%s\" is not a number of ms in [0, 1e9]\n",
                    k ? "--slo-tpot" : "--slo-ttft", v);
            return 2;
        }
    }
    if (strcmp(fmt, "png") && strcmp(fmt, "svg")) {
        hs_eprintf("hetsim: --format: \"%s\" is not png or svg\n", fmt);
        return 2;
    }
    if (stat(db, &sb) != 0) {
        hs_eprintf("hetsim: %s: cannot open: %s\n", db, strerror(errno));
        return 2;
    }
    if (!py || !*py) py = "/usr/bin/python3";
    if (script_env && *script_env) snprintf(script, sizeof script, "%s", script_env);
    else snprintf(script, sizeof script, "%s/tools/report.py", hs_data_root());
    if (access(script, R_OK) != 0) {
        hs_eprintf("hetsim: %s: the report script is missing (set HS_REPORT_SCRIPT)\n", script);
        return 1;
    }
    {
        char *chk[] = {(char *)py, "-c", "import matplotlib", NULL};
        if (access(py, X_OK) != 0 || run_child(chk, 1) != 0) {
            hs_eprintf("hetsim: report skipped: %s cannot import matplotlib "
                            "(install python3-matplotlib, or set HS_PYTHON)\n", py);
            return require ? 3 : 0;
        }
    }
    {
        char *args[16] = {(char *)py, script, "--db", (char *)db, "--out", (char *)out, "--sweep",
                          (char *)sweep, "--format", (char *)fmt, NULL};
        int na = 10;
        if (slo_ttft) {
            args[na++] = "--slo-ttft";
            args[na++] = (char *)slo_ttft;
        }
        if (slo_tpot) {
            args[na++] = "--slo-tpot";
            args[na++] = (char *)slo_tpot;
        }
        args[na] = NULL;
        rc = run_child(args, 0);
    }
    if (rc != 0) {
        hs_eprintf("hetsim: report: %s failed (exit %d)\n", script, rc);
        return rc == 2 ? 2 : 1;
    }
    return 0;
}
