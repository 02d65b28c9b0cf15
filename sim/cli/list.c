/* list.c - `hetsim list` and `hetsim trace stats`. */
#include <dirent.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/config.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "perf/calib.h"
#include "perf/perf.h"
#include "plan/plan.h"
#include "policy/policy.h"
#include "serve/engine.h"
#include "workload/workload.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of *.json files in <root>/<dir> (caller frees). */
static int list_json(const char *dir, char ***names, int *n)
{
    char path[1024];
    DIR *d;
    struct dirent *de;
    int cap = 0;
    *names = NULL;
    *n = 0;
    snprintf(path, sizeof path, "%s/%s", hs_data_root(), dir);
    d = opendir(path);
    if (!d) return -1;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l <= 5 || strcmp(de->d_name + l - 5, ".json")) continue;
        if (*n == cap) {
            char **nn = realloc(*names, (size_t)(cap = cap ? cap * 2 : 32) * sizeof *nn);
            if (!nn) break;
            *names = nn;
        }
        (*names)[*n] = strndup(de->d_name, l - 5);
        if ((*names)[*n]) (*n)++;
    }
    closedir(d);
    qsort(*names, (size_t)*n, sizeof **names, cmp_str);
    return 0;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

static int list_models(void)
{
    char **names;
    int n, bad = 0;
    if (list_json("models", &names, &n)) {
        fprintf(stderr, "hetsim: cannot read %s/models\n", hs_data_root());
        return 2;
    }
    printf("%-14s %-16s %8s %6s %7s %5s %4s %7s\n", "model", "arch", "params", "layers", "hidden",
           "heads", "kv", "context");
    for (int i = 0; i < n; i++) {
        hs_model m;
        hs_err err = {0};
        if (hs_model_find(&m, names[i], &err)) {
            printf("%-14s (invalid: %s)\n", names[i], err.msg);
            bad = 1;
            continue;
        }
        printf("%-14s %-16s %7.1fB %6d %7d %5d %4d %7d\n", m.name, m.arch, hs_model_params(&m) / 1e9,
               m.layers + m.encoder_layers, m.hidden, m.heads, m.kv_heads, m.max_seq_len);
    }
    free_names(names, n);
    return bad ? 2 : 0;
}

/* ", +-X% (lo-hi% by GPU)": an entry's cross-validated error as a run's
 * trust line states it (hs_calib_expected_err); "" when unknown. */
static void err_text(const hs_calib_entry *e, char *out, size_t n)
{
    double lo, hi, x = hs_calib_expected_err(e, &lo, &hi);
    out[0] = '\0';
    if (x >= 0 && lo >= 0) snprintf(out, n, ", +-%.0f%% (%.0f-%.0f%% by GPU)", x, lo, hi);
    else if (x >= 0) snprintf(out, n, ", +-%.0f%%", x);
}

/* Where a run's kernel times for GPU g come from by default, chosen as
 * perf/measured.c chooses (its own entry; an entry lacking some ops, as the
 * H200's of GEMMs, takes the rest from the same chip's entry, else the
 * transfer; no entry: the same chip's, else the transfer), with the
 * cross-validated error; cal NULL: no calibration shipped. */
static void gpu_source(const hs_calib *cal, const hs_gpu *g, char *out, size_t n)
{
    const hs_calib_entry *e = cal ? hs_calib_for(cal, g->name) : NULL;
    const hs_calib_entry *sib = cal && g->same_chip_as[0] ? hs_calib_for(cal, g->same_chip_as) : NULL;
    char er[64];
    int partial = 0;
    if (sib && !sib->gpu[0]) sib = NULL;
    if (!e) {
        snprintf(out, n, "datasheet roofline (no calibration)");
        return;
    }
    for (int op = 0; e->gpu[0] && op < HS_OP_COUNT; op++) partial |= e->fit.k[op].from < 0;
    if (partial) {
        /* models with a table use it for its ops; the rest, and every
         * other model, come from back */
        const hs_calib_entry *back = sib ? sib : hs_calib_for(cal, "");
        err_text(back, er, sizeof er);
        if (back == e || !back) snprintf(out, n, "measured: some ops of %.60s", e->models);
        else if (back->gpu[0]) snprintf(out, n, "some ops of %.60s measured; rest as %s (same chip)%s", e->models, back->gpu, er);
        else
            snprintf(out, n, "some ops of %.60s measured; rest transferred%s%s", e->models, er,
                     hs_fit_extrapolates_tc(&back->fit, g) ? "; no tensor cores: extrapolated" : "");
    } else if (e->gpu[0] && e->n_tables == 1) {
        snprintf(out, n, "measured: 1 model (%.60s), not cross-validated", e->models);
    } else if (e->gpu[0]) {
        err_text(e, er, sizeof er);
        /* er is ", +-X%" */
        snprintf(out, n, "measured: %d models%s%s", e->n_tables, er[0] ? ", a new model " : "", er[0] ? er + 2 : "");
    } else if (sib) {
        err_text(sib, er, sizeof er);
        snprintf(out, n, "as %s (same chip)%s", sib->gpu, er);
    } else {
        err_text(e, er, sizeof er);
        snprintf(out, n, "transferred%s%s", er,
                 hs_fit_extrapolates_tc(&e->fit, g) ? "; no tensor cores: extrapolated" : "");
    }
}

static int list_gpus(void)
{
    char **names, cpath[1024];
    int n, bad = 0;
    hs_calib *cal = NULL;
    hs_err cerr = {0};
    struct stat st;
    if (list_json("profiles/gpus", &names, &n)) {
        fprintf(stderr, "hetsim: cannot read %s/profiles/gpus\n", hs_data_root());
        return 2;
    }
    /* as a run reads it (perf/measured.c): a missing file (or not a
     * regular one) is no calibration; a bad one is reported, and the
     * listing goes on without it */
    snprintf(cpath, sizeof cpath, "%s/profiles/calibration.json", hs_data_root());
    if (stat(cpath, &st) == 0 && S_ISREG(st.st_mode)) {
        if (!(cal = malloc(sizeof *cal))) {
            fprintf(stderr, "hetsim: out of memory\n");
            free_names(names, n);
            return 2;
        }
        if (hs_calib_load(cal, cpath, &cerr)) {
            fprintf(stderr, "hetsim: %s\n", cerr.msg);
            free(cal);
            cal = NULL;
            bad = 1;
        }
    }
    /* node/net: the links a cluster shorthand gives a node of this GPU
     * (inside the node, and per GPU between nodes); latency model: where a
     * run's kernel times come from by default */
    printf("%-14s %10s %8s %9s %10s %8s %10s %7s %9s %6s  %s\n", "gpu", "fp16 TF/s", "mem GiB", "mem GB/s",
           "nvlink GB/s", "$/h", "node GB/s", "node us", "net GB/s", "net us", "latency model");
    for (int i = 0; i < n; i++) {
        hs_gpu g;
        hs_err err = {0};
        if (hs_gpu_find(&g, names[i], &err)) {
            printf("%-14s (invalid: %s)\n", names[i], err.msg);
            bad = 1;
            continue;
        }
        {
            char src[256];
            gpu_source(cal, &g, src, sizeof src);
            printf("%-14s %10.1f %8.0f %9.0f %10.1f %8.2f %10.1f %7.1f %9.1f %6.1f  %s\n", g.name, g.flops16 / 1e12,
                   g.mem_bytes / 1073741824.0, g.mem_bw / 1e9, g.nvlink_bw / 1e9, g.price_per_hour,
                   g.intra_bw / 1e9, g.intra_lat * 1e6, g.inter_bw / 1e9, g.inter_lat * 1e6, src);
        }
    }
    free(cal);
    free_names(names, n);
    return bad ? 2 : 0;
}

static int list_clusters(void)
{
    char **names;
    int n, bad = 0;
    if (list_json("profiles/clusters", &names, &n)) {
        fprintf(stderr, "hetsim: cannot read %s/profiles/clusters\n", hs_data_root());
        return 2;
    }
    printf("%-26s %5s %5s %8s  %s\n", "cluster", "gpus", "nodes", "$/h", "description");
    for (int i = 0; i < n; i++) {
        hs_cluster *c;
        hs_err err = {0};
        if (hs_cluster_find(&c, names[i], &err)) {
            printf("%-26s (invalid: %s)\n", names[i], err.msg);
            bad = 1;
            continue;
        }
        printf("%-26s %5d %5d %8.2f  %.70s\n", c->name, c->n_gpus, c->n_nodes,
               hs_cluster_price(c, NULL, 0), c->description);
        hs_cluster_destroy(c);
    }
    free_names(names, n);
    /* The grammar of hs_cluster_find's shorthand and the GPUs it takes, so
     * that a cluster needs no file and no reading of docs. */
    printf("\nor a shorthand, NODESxGPUSxGPU[+...] (GPUSxGPU: one node), wherever a cluster is named:\n"
           "  4x8xh100-sxm-80g                 4 nodes of 8 H100 SXM\n"
           "  1x4xh100-sxm-80g+1x4xa100-80g    one node of each\n"
           "links from the GPU's defaults (hetsim list gpus: node, net); GPU is one of:\n ");
    if (list_json("profiles/gpus", &names, &n)) {
        fprintf(stderr, "hetsim: cannot read %s/profiles/gpus\n", hs_data_root());
        return 2;
    }
    for (int i = 0; i < n; i++) printf(" %s", names[i]);
    printf("\n");
    free_names(names, n);
    return bad ? 2 : 0;
}

int hs_cli_list(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    int all = !strcmp(what, "all"), rc = 0, known = all;
    if (!strcmp(what, "--help") || !strcmp(what, "-h")) {
        printf("usage: hetsim list [models|gpus|clusters|policies|planners|routers|perf|all]\n");
        return 0;
    }
    if (all || !strcmp(what, "models")) {
        known = 1;
        if (all) printf("== models ==\n");
        rc |= list_models();
    }
    if (all || !strcmp(what, "gpus")) {
        known = 1;
        if (all) printf("\n== gpus ==\n");
        rc |= list_gpus();
    }
    if (all || !strcmp(what, "clusters")) {
        known = 1;
        if (all) printf("\n== clusters ==\n");
        rc |= list_clusters();
    }
    if (all || !strcmp(what, "policies")) {
        known = 1;
        if (all) printf("\n== policies ==\n");
        for (int i = 0; hs_policies[i]; i++) {
            printf("%-15s %s\n", hs_policies[i]->name, hs_policies[i]->help);
            /* its own keys (engine.*), from its ops table */
            for (const hs_field *f = hs_policies[i]->opts; f && f->key; f++)
                printf("%-15s   engine.%s (default %g)\n", "", f->key, f->def);
        }
    }
    if (all || !strcmp(what, "planners")) {
        known = 1;
        if (all) printf("\n== planners ==\n");
        for (int i = 0; hs_planners[i]; i++) {
            printf("%-15s %s\n", hs_planners[i]->name, hs_planners[i]->help);
            if (hs_planners[i]->opts) printf("%-15s   --plan-opts keys:\n", "");
            hs_planner_opts_help(hs_planners[i], stdout, "                    ");
        }
    }
    if (all || !strcmp(what, "routers")) {
        known = 1;
        if (all) printf("\n== routers ==\n");
        for (int i = 0; hs_routers[i]; i++)
            printf("%-15s %s\n", hs_routers[i]->name, hs_routers[i]->help);
    }
    if (all || !strcmp(what, "perf")) {
        known = 1;
        if (all) printf("\n== latency models ==\n");
        for (int i = 0; hs_perf_builders[i]; i++)
            printf("%-15s %s\n", hs_perf_builders[i]->name, hs_perf_builders[i]->help);
    }
    if (!known) {
        fprintf(stderr, "hetsim: list: unknown category \"%s\" (see hetsim list --help)\n", what);
        return 2;
    }
    return rc;
}

int hs_cli_trace(int argc, char **argv)
{
    hs_workload_cfg wc;
    hs_source *src = NULL;
    hs_trace_stats st;
    hs_err err = {0};
    int rc;
    char kind[24];
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: hetsim trace stats FILE [--set workload.KEY=VALUE ...]\n"
               "Summarises a trace: count, duration, rate, burstiness, length percentiles.\n");
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "stats") || argc < 3) {
        fprintf(stderr, "hetsim: trace: expected `trace stats FILE`\n");
        return 2;
    }
    hs_workload_defaults(&wc);
    if ((rc = hs_cli_trace_kind(argv[2], kind, sizeof kind, &err))) goto fail;
    if ((rc = hs_workload_set(&wc, "kind", kind, &err)) ||
        (rc = hs_workload_set(&wc, "path", argv[2], &err)))
        goto fail;
    for (int i = 3; i < argc; i++) {
        const char *kv = argv[i], *eq;
        char key[64];
        if (!strcmp(kv, "--set") && i + 1 < argc) kv = argv[++i];
        eq = strchr(kv, '=');
        if (strncmp(kv, "workload.", 9) || !eq || (size_t)(eq - kv - 9) >= sizeof key) {
            rc = hs_errf(&err, HS_EINVAL, "trace stats: expected --set workload.KEY=VALUE, got \"%s\"", kv);
            goto fail;
        }
        memcpy(key, kv + 9, (size_t)(eq - kv - 9));
        key[eq - kv - 9] = '\0';
        if ((rc = hs_workload_set(&wc, key, eq + 1, &err))) goto fail;
    }
    if ((rc = hs_source_open(&src, &wc, &err))) goto fail;
    if ((rc = hs_trace_stats_compute(src, &st, &err))) goto fail;
    hs_trace_stats_print(&st, stdout);
    hs_source_close(src);
    return 0;
fail:
    hs_source_close(src);
    fprintf(stderr, "hetsim: %s\n", err.msg);
    return hs_cli_exit_code(rc);
}
