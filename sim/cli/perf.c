/* perf.c - `hetsim perf`: the latency-model tools.
 *   import-vidur VIDUR_DIR OUT_DIR  convert Vidur's published profiles into
 *                                   our table format (profiles/README.md)
 *   fit [DIRS]                      fit the roofline efficiency curves on
 *                                   measured tables and print them
 *   crossval [VIDUR_DIR]            cross-validate the fitted model on
 *                                   Vidur's A100/A40 tables
 *   compare DIR [options]           error of the roofline (and the fitted
 *                                   model) on one measured table
 *   fit-overhead CSV [options]      fit an engine profile (host cost per
 *                                   iteration) on Vidur's cpu_overheads.csv */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "hw/hw.h"
#include "perf/calib.h"
#include "perf/fitted.h"
#include "perf/overhead.h"
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
            "                                   GPUs, against the measured table DIR\n"
            "  calibrate [DIRS] [--out FILE]    fit the shipped calibration on every measured\n"
            "                                   table (default <data root>/profiles) with\n"
            "                                   leave-one-model-out and leave-one-GPU-out errors;\n"
            "                                   writes profiles/calibration.json (or FILE)\n"
            "  fit-overhead CSV [--out FILE] [--name N] [--display TEXT] [--source TEXT]\n"
            "               [--licence TEXT] [--collective-launch-us X]\n"
            "                                   fit an engine profile (host cost per iteration:\n"
            "                                   schedule, prepare inputs, sample, process outputs,\n"
            "                                   Ray) on Vidur's cpu_overheads.csv; prints the fit\n"
            "                                   and leave-one-model-out errors\n");
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
    } else if (!strcmp(argv[1], "calibrate")) {
        char root[700], outp[760];
        const char *dirs = NULL, *out = NULL;
        static hs_calib cal;
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--out") && i + 1 < argc) {
                out = argv[++i];
            } else if (argv[i][0] == '-' || dirs) {
                fprintf(stderr, "hetsim: perf calibrate: unexpected argument \"%s\" (see hetsim perf --help)\n", argv[i]);
                return 2;
            } else {
                dirs = argv[i];
            }
        }
        snprintf(root, sizeof root, "%s/profiles", hs_data_root());
        snprintf(outp, sizeof outp, "%s/calibration.json", root);
        rc = hs_calib_build(&cal, dirs ? dirs : root, stdout, &err);
        if (!rc) rc = hs_calib_write(&cal, out ? out : outp, &err);
        if (!rc) printf("wrote %s\n", out ? out : outp);
    } else if (!strcmp(argv[1], "fit-overhead")) {
        hs_ovh_opts o = {0};
        const char *csv = NULL;
        o.collective_launch_us = 20;
        for (int i = 2; i < argc; i++) {
            const char *a = argv[i];
            const char **slot = !strcmp(a, "--out") ? &o.out : !strcmp(a, "--name") ? &o.name
                              : !strcmp(a, "--display") ? &o.display : !strcmp(a, "--source") ? &o.source
                              : !strcmp(a, "--licence") ? &o.licence : NULL;
            if ((slot || !strcmp(a, "--collective-launch-us")) && i + 1 >= argc) {
                fprintf(stderr, "hetsim: perf fit-overhead: %s needs a value\n", a);
                return 2;
            }
            if (slot) {
                *slot = argv[++i];
            } else if (!strcmp(a, "--collective-launch-us")) {
                char *end;
                double v = strtod(argv[++i], &end);
                if (end == argv[i] || *end || !(v >= 0) || v > 1e5) {
                    fprintf(stderr, "hetsim: perf fit-overhead: --collective-launch-us \"%s\": expected a number in 0..1e5\n", argv[i]);
                    return 2;
                }
                o.collective_launch_us = v;
            } else if (a[0] == '-' || csv) {
                fprintf(stderr, "hetsim: perf fit-overhead: unexpected argument \"%s\" (see hetsim perf --help)\n", a);
                return 2;
            } else {
                csv = a;
            }
        }
        if (!csv) {
            fprintf(stderr, "hetsim: perf fit-overhead: expected Vidur's cpu_overheads.csv\n");
            return 2;
        }
        rc = hs_ovh_report(csv, &o, stdout, NULL, NULL, &err);
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
