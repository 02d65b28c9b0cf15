/* perf.c - `hetsim perf`: the latency-model tools.
 *   import-vidur VIDUR_DIR OUT_DIR  convert Vidur's published profiles into
 *                                   our table format (profiles/README.md)
 *   fit [DIRS]                      fit the roofline efficiency curves on
 *                                   measured tables and print them
 *   crossval [VIDUR_DIR]            cross-validate the fitted model on
 *                                   Vidur's A100/A40 tables
 *   compare DIR [options]           error of the roofline (and the fitted
 *                                   model) on one measured table */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "hw/hw.h"
#include "perf/fitted.h"
#include "perf/table.h"

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim perf <command>\n"
            "  import-vidur VIDUR_DIR OUT_DIR   convert Vidur profiles (compute/, network/,\n"
            "                                   *_attention_*.csv) to OUT_DIR/<gpu>/<model>/\n"
            "  fit [DIR[,DIR...]]               fit the efficiency curves on measured tables\n"
            "                                   (default: <data root>/profiles) and print them\n"
            "  crossval [VIDUR_DIR]             fit on Llama-2-7B A100, predict 70B A100; fit on\n"
            "                                   A100, predict A40; error per operator\n"
            "                                   (default: ../shared/data/profiles/vidur)\n"
            "  compare DIR [--fit DIRS] [--tflops X] [--gbs Y]\n"
            "                                   error per operator of the datasheet roofline\n"
            "                                   (or one on the given ceilings) and, with --fit,\n"
            "                                   of the model fitted on DIRS' tables of other\n"
            "                                   GPUs, against the measured table DIR\n");
}

int hs_cli_perf(int argc, char **argv)
{
    hs_err err = {0};
    int rc;
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "import-vidur")) {
        if (argc != 4) {
            fprintf(stderr, "hetsim: perf import-vidur: expected VIDUR_DIR OUT_DIR\n");
            return 2;
        }
        rc = hs_vidur_import_all(argv[2], argv[3], stdout, &err);
    } else if (!strcmp(argv[1], "fit")) {
        rc = hs_fit_report(argc > 2 ? argv[2] : NULL, stdout, &err);
    } else if (!strcmp(argv[1], "crossval")) {
        char def[1200];
        const char *dir = argc > 2 ? argv[2] : NULL;
        if (!dir) {
            snprintf(def, sizeof def, "%s/../shared/data/profiles/vidur", hs_data_root());
            dir = def;
        }
        rc = hs_perf_crossval(dir, stdout, &err);
    } else if (!strcmp(argv[1], "compare")) {
        hs_compare_opts o = {0};
        const char *dir = NULL;
        for (int i = 2; i < argc; i++) {
            const char *a = argv[i];
            if ((!strcmp(a, "--fit") || !strcmp(a, "--tflops") || !strcmp(a, "--gbs")) && i + 1 >= argc) {
                fprintf(stderr, "hetsim: perf compare: %s needs a value\n", a);
                return 2;
            }
            if (!strcmp(a, "--fit")) {
                o.fit_dirs = argv[++i];
            } else if (!strcmp(a, "--tflops") || !strcmp(a, "--gbs")) {
                char *end;
                double v = strtod(argv[++i], &end);
                if (end == argv[i] || *end || !(v > 0) || v > 1e7) {
                    fprintf(stderr, "hetsim: perf compare: %s \"%s\": expected a positive number\n", a, argv[i]);
                    return 2;
                }
                if (a[2] == 't') o.tflops = v;
                else o.gbs = v;
            } else if (a[0] == '-' || dir) {
                fprintf(stderr, "hetsim: perf compare: unexpected argument \"%s\" (see hetsim perf --help)\n", a);
                return 2;
            } else {
                dir = a;
            }
        }
        if (!dir) {
            fprintf(stderr, "hetsim: perf compare: expected a table directory (holding meta.json)\n");
            return 2;
        }
        rc = hs_perf_compare(dir, &o, NULL, stdout, &err);
    } else {
        fprintf(stderr, "hetsim: perf: unknown command \"%s\" (see hetsim perf --help)\n", argv[1]);
        return 2;
    }
    if (rc) fprintf(stderr, "hetsim: %s\n", err.msg);
    return hs_cli_exit_code(rc);
}
