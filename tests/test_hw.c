/* test_hw.c - GPU and cluster profiles (sim/hw/gpu.c, cluster.c).
 *
 * Every shipped profile in profiles/gpus and profiles/clusters loads (the
 * directories are listed, not a hard-coded set), with the conventions of
 * profiles/README.md: name equals the file name, SI units (a100-80g: 312e12
 * FLOP/s, 80 GiB = 80 * 2^30 bytes, 2039e9 B/s), every off-diagonal
 * bandwidth positive, the cluster price equal to the sum of its GPUs'
 * prices.  dgx-a100x2 is checked entry by entry (intra-node NVLink vs
 * inter-node InfiniBand).  Malformed inputs are written to temporary files
 * in /tmp and each must fail with a code and a message naming the file and
 * the offending key (or line for JSON syntax errors).  Inputs that crash a
 * loader are run in a forked child so one crash does not hide the rest. */
#include "check.h"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hw/hw.h"

static const char *root;

static const char *write_tmp(const char *text)
{
    return hs_test_tmpfile("hw", text);
}


static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n > k && !strcmp(s + n - k, suf);
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

/* Sorted list of the *.json stems in dir; -1 when it cannot be opened. */
static int list_json(const char *dir, char names[][64], int cap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d))) {
        if (!has_suffix(e->d_name, ".json") || n >= cap) continue;
        snprintf(names[n], 64, "%.*s", (int)(strlen(e->d_name) - 5), e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, 64, cmp_name);
    return n;
}

/* The message contains `a` and, when not NULL, `b`. */
static int msg_has(const hs_err *err, const char *a, const char *b)
{
    int ok = strstr(err->msg, a) != NULL && (b == NULL || strstr(err->msg, b) != NULL);
    if (!ok)
        fprintf(stderr, "  message was: %s\n  wanted: \"%s\" and \"%s\"\n", err->msg, a,
                b ? b : "");
    return ok;
}
#define CHECK_MSG(err, a, b) CHECK(msg_has(&(err), (a), (b)))

static void test_data_root(void)
{
    const char *env = getenv("HS_ROOT");
    if (env && *env) CHECK_STR(hs_data_root(), env);
    CHECK(hs_data_root()[0] != '\0');
}

static void test_resolve(void)
{
    char buf[2048], want[2048];
    hs_err err = {0};
    CHECK_OK(hs_resolve(buf, sizeof buf, "profiles/gpus", "a100-80g", &err), &err);
    snprintf(want, sizeof want, "%s/profiles/gpus/a100-80g.json", hs_data_root());
    CHECK_STR(buf, want);
    CHECK_OK(hs_resolve(buf, sizeof buf, "profiles/gpus", "x/y", &err), &err);
    CHECK_STR(buf, "x/y");
    CHECK_OK(hs_resolve(buf, sizeof buf, "profiles/gpus", "z.json", &err), &err);
    CHECK_STR(buf, "z.json");
    CHECK_INT(hs_resolve(buf, sizeof buf, "profiles/gpus", "", &err), HS_EINVAL);
    CHECK_INT(hs_resolve(buf, 8, "profiles/gpus", "a100-80g", &err), HS_ERANGE);
}

static void test_all_gpus(void)
{
    char dir[1200], names[64][64];
    int n, loaded = 0;
    snprintf(dir, sizeof dir, "%s/profiles/gpus", root);
    n = list_json(dir, names, 64);
    CHECK(n >= 14);
    for (int i = 0; i < n; i++) {
        hs_gpu g;
        hs_err err = {0};
        int rc = hs_gpu_find(&g, names[i], &err);
        CHECK_OK(rc, &err);
        if (rc) continue;
        loaded++;
        CHECK_STR(g.name, names[i]);        /* README: name equals the file name */
        CHECK(g.display[0] != '\0');
        CHECK(g.price_source[0] != '\0');
        /* SI: TFLOPS -> FLOP/s, GiB -> bytes, GB/s -> B/s */
        CHECK(g.flops16 >= 5e12 && g.flops16 <= 5e15);
        /* FP32 on CUDA cores is given for every shipped GPU; FP16 GEMMs
         * (FP32 accumulation) run at least that fast: equal only without
         * tensor cores (the P100) */
        CHECK(g.flops32 >= 5e12 && g.flops32 <= g.flops16);
        CHECK(g.flops32 < g.flops16 || !strcmp(g.name, "p100-12g"));
        /* every shipped GPU names its memory: HBM on the data-centre
         * chips (GA100, GH100, GV100, GP100), GDDR elsewhere */
        CHECK_INT(g.hbm, !strncmp(g.name, "a100", 4) || !strncmp(g.name, "a800", 4) || !strcmp(g.name, "a30") ||
                             !strncmp(g.name, "h100", 4) || !strcmp(g.name, "h200") || !strncmp(g.name, "v100", 4) ||
                             !strncmp(g.name, "p100", 4));
        CHECK(g.mem_bytes >= 8.0 * 1073741824.0 && g.mem_bytes <= 256.0 * 1073741824.0);
        /* what CUDA reports: the nominal less at most 8% (the T4's ECC) */
        CHECK(g.mem_reported_bytes <= g.mem_bytes && g.mem_reported_bytes >= 0.92 * g.mem_bytes);
        CHECK(g.mem_bw >= 1e11 && g.mem_bw <= 1e13);
        /* every shipped GPU can use the cross-GPU memory-op model: 40-200
         * SMs at 1-3 GHz */
        CHECK(g.sm_rate >= 40e9 && g.sm_rate <= 600e9);
        CHECK(g.pcie_bw >= 1e10 && g.pcie_bw <= 1e11);
        CHECK(g.nvlink_bw == 0 || g.nvlink_bw >= 1e10);
        CHECK(g.price_per_hour > 0 && g.price_per_hour < 20);
        CHECK(g.bf16 == 0 || g.bf16 == 1);
    }
    CHECK_INT(loaded, n);
}

static void test_a100(void)
{
    hs_gpu g;
    hs_err err = {0};
    CHECK_OK(hs_gpu_find(&g, "a100-80g", &err), &err);
    CHECK_STR(g.name, "a100-80g");
    CHECK_STR(g.display, "NVIDIA A100 80GB SXM4");
    CHECK_REL(g.flops16, 312e12, 1e-12);
    CHECK_REL(g.ops8, 624e12, 1e-12);
    CHECK(g.mem_bytes == 80.0 * 1024 * 1024 * 1024);
    CHECK_REL(g.mem_bw, 2039e9, 1e-12);
    CHECK_REL(g.nvlink_bw, 300e9, 1e-12);
    CHECK_REL(g.pcie_bw, 32e9, 1e-12);
    CHECK_REL(g.tdp_w, 400, 1e-12);
    CHECK_REL(g.price_per_hour, 1.69, 1e-12);
    CHECK_INT(g.bf16, 1);
    /* a GPU without INT8 tensor cores and BF16 */
    CHECK_OK(hs_gpu_find(&g, "v100-32g", &err), &err);
    CHECK(g.ops8 == 0);
    CHECK_INT(g.bf16, 0);
    CHECK(g.mem_bytes == 32.0 * 1024 * 1024 * 1024);
    CHECK_REL(g.mem_reported_bytes, 31.74 * 1024 * 1024 * 1024, 1e-12);
    /* loading by path works too */
    {
        char path[1300];
        snprintf(path, sizeof path, "%s/profiles/gpus/h100-sxm-80g.json", root);
        CHECK_OK(hs_gpu_find(&g, path, &err), &err);
        CHECK_REL(g.flops16, 989.4e12, 1e-12);
        CHECK_REL(g.nvlink_bw, 450e9, 1e-12);
        CHECK_REL(g.sm_rate, 132 * 1980e6, 1e-12); /* 132 SMs at 1980 MHz */
    }
}

static void test_all_clusters(void)
{
    char dir[1200], names[128][64];
    int n, loaded = 0;
    snprintf(dir, sizeof dir, "%s/profiles/clusters", root);
    n = list_json(dir, names, 128);
    CHECK(n >= 30);
    for (int i = 0; i < n; i++) {
        hs_cluster *c = NULL;
        hs_err err = {0};
        int rc = hs_cluster_find(&c, names[i], &err), bad_bw = 0, bad_lat = 0, bad_diag = 0,
            bad_node = 0, bad_type = 0;
        double price = 0;
        CHECK_OK(rc, &err);
        if (rc || !c) continue;
        loaded++;
        CHECK_STR(c->name, names[i]);
        CHECK(c->n_gpus >= 1 && c->n_nodes >= 1 && c->n_types >= 1);
        CHECK(c->n_types <= c->n_nodes);
        for (int a = 0; a < c->n_gpus; a++) {
            if (c->gpu_type[a] < 0 || c->gpu_type[a] >= c->n_types) bad_type++;
            if (c->gpu_node[a] < 0 || c->gpu_node[a] >= c->n_nodes ||
                (a > 0 && c->gpu_node[a] < c->gpu_node[a - 1]))
                bad_node++; /* numbered in node order */
            price += c->types[c->gpu_type[a]].price_per_hour;
            for (int b = 0; b < c->n_gpus; b++) {
                double bw = hs_cluster_bw(c, a, b), lat = hs_cluster_lat(c, a, b);
                if (a == b) {
                    if (bw != 0 || lat != 0) bad_diag++;
                    continue;
                }
                if (!(bw > 0) || !isfinite(bw)) bad_bw++;
                if (!(lat >= 0) || !isfinite(lat) || lat > 1) bad_lat++;
            }
        }
        if (bad_bw || bad_lat || bad_diag || bad_node || bad_type)
            fprintf(stderr, "cluster %s: bw %d lat %d diag %d node %d type %d bad\n",
                    names[i], bad_bw, bad_lat, bad_diag, bad_node, bad_type);
        CHECK_INT(bad_bw, 0);
        CHECK_INT(bad_lat, 0);
        CHECK_INT(bad_diag, 0);
        CHECK_INT(bad_node, 0);
        CHECK_INT(bad_type, 0);
        CHECK_REL(hs_cluster_price(c, NULL, 0), price, 1e-12);
        CHECK(price > 0);
        hs_cluster_destroy(c);
    }
    CHECK_INT(loaded, n);
}

static void test_dgx_a100x2(void)
{
    hs_cluster *c = NULL;
    hs_err err = {0};
    int ids[3] = {0, 8, 15}, bad = 0;
    CHECK_OK(hs_cluster_find(&c, "dgx-a100x2", &err), &err);
    if (!c) return;
    CHECK_STR(c->name, "dgx-a100x2");
    CHECK_INT(c->n_gpus, 16);
    CHECK_INT(c->n_nodes, 2);
    CHECK_INT(c->n_types, 1);
    CHECK_STR(c->types[0].name, "a100-80g");
    CHECK_STR(c->node_name[0], "n0");
    CHECK_STR(c->node_name[1], "n1");
    CHECK_INT(c->gpu_node[7], 0);
    CHECK_INT(c->gpu_node[8], 1);
    CHECK_REL(hs_cluster_bw(c, 0, 1), 300e9, 1e-12);   /* NVLink, same node */
    CHECK_REL(hs_cluster_bw(c, 9, 15), 300e9, 1e-12);
    CHECK_REL(hs_cluster_bw(c, 0, 8), 25e9, 1e-12);    /* IB, across nodes */
    CHECK_REL(hs_cluster_bw(c, 15, 7), 25e9, 1e-12);
    CHECK_REL(hs_cluster_lat(c, 0, 1), 3e-6, 1e-9);
    CHECK_REL(hs_cluster_lat(c, 8, 0), 10e-6, 1e-9);
    CHECK(hs_cluster_bw(c, 3, 3) == 0);
    for (int a = 0; a < 16; a++)
        for (int b = 0; b < 16; b++) {
            double want = a == b ? 0 : (a / 8 == b / 8 ? 300e9 : 25e9);
            if (fabs(hs_cluster_bw(c, a, b) - want) > 1e-3) bad++;
            if (hs_cluster_bw(c, a, b) != hs_cluster_bw(c, b, a)) bad++;
        }
    CHECK_INT(bad, 0);
    CHECK_REL(hs_cluster_price(c, NULL, 0), 16 * 1.69, 1e-12);
    CHECK_REL(hs_cluster_price(c, ids, 3), 3 * 1.69, 1e-12);
    CHECK_NEAR(hs_cluster_price(c, ids, 0), 0, 0);
    hs_cluster_destroy(c);
}

/* Explicit matrices and mixed types: iserve (bridged pairs), hexgen2-het1. */
static void test_matrix_clusters(void)
{
    hs_cluster *c = NULL;
    hs_err err = {0};
    CHECK_OK(hs_cluster_find(&c, "iserve-a6000x8", &err), &err);
    if (c) {
        CHECK_INT(c->n_gpus, 8);
        CHECK_REL(hs_cluster_bw(c, 0, 1), 56.25e9, 1e-12);
        CHECK_REL(hs_cluster_bw(c, 1, 2), 32e9, 1e-12);
        CHECK_REL(hs_cluster_lat(c, 6, 7), 3e-6, 1e-9);
        CHECK_REL(hs_cluster_lat(c, 0, 7), 5e-6, 1e-9);
        hs_cluster_destroy(c);
        c = NULL;
    }
    CHECK_OK(hs_cluster_find(&c, "hexgen2-het1", &err), &err);
    if (c) {
        /* README: 2 H100 + 6 A100 + 8 L40 + 4 A6000, $28.80/h */
        CHECK_INT(c->n_gpus, 20);
        CHECK_INT(c->n_types, 4);
        CHECK_NEAR(hs_cluster_price(c, NULL, 0), 28.80, 0.005);
        CHECK_STR(hs_cluster_gpu(c, 0)->name, "h100-sxm-80g");
        CHECK_STR(hs_cluster_gpu(c, 19)->name, "rtx-a6000");
        hs_cluster_destroy(c);
    }
}

/* A good GPU file with one line replaced (or removed when with == NULL). */
static const char *gpu_text(const char *key, const char *with)
{
    static const char *lines[] = {
        "\"name\": \"tgpu\"", "\"display\": \"Test GPU\"", "\"fp16_tflops\": 100",
        "\"bf16\": true", "\"int8_tops\": 200", "\"mem_gib\": 24", "\"mem_bw_gbs\": 900",
        "\"nvlink_gbs\": 0", "\"pcie_gbs\": 32", "\"tdp_w\": 300",
        "\"price_per_hour\": 1.0", "\"price_source\": \"test\"", NULL};
    return hs_test_json_lines(lines, key, with);
}

static void gpu_bad(const char *text, int want_rc, const char *want1, const char *want2)
{
    hs_gpu g;
    hs_err err = {0};
    const char *path = write_tmp(text);
    int rc = hs_gpu_load(&g, path, &err);
    CHECK_INT(rc, want_rc);
    CHECK_MSG(err, path, want1);
    if (want2) CHECK_MSG(err, path, want2);
}

static void test_gpu_errors(void)
{
    hs_gpu g;
    hs_err err = {0};
    const char *ok = write_tmp(gpu_text(NULL, NULL));
    CHECK_OK(hs_gpu_load(&g, ok, &err), &err);
    CHECK_REL(g.flops16, 100e12, 1e-12);
    CHECK(g.flops32 == 0); /* optional, not given */
    CHECK(g.hbm == 0);     /* memory not given: GDDR's factor (none) */
    CHECK_OK(hs_gpu_load(&g, write_tmp(gpu_text("mem_bw_gbs", "\"mem_bw_gbs\": 900, \"memory\": \"HBM3e\"")), &err), &err);
    CHECK(g.hbm == 1);
    gpu_bad(gpu_text("mem_bw_gbs", "\"mem_bw_gbs\": 900, \"memory\": \"HBM9\""), HS_EPARSE, "memory",
            "is not HBM2");
    CHECK(g.mem_bytes == 24.0 * 1073741824.0);
    CHECK(g.mem_reported_bytes == g.mem_bytes); /* not given: the nominal */
    CHECK_OK(hs_gpu_load(&g, write_tmp(gpu_text("mem_gib", "\"mem_gib\": 24, \"mem_reported_gib\": 23.5")), &err), &err);
    CHECK(g.mem_bytes == 24.0 * 1073741824.0 && g.mem_reported_bytes == 23.5 * 1073741824.0);
    gpu_bad(gpu_text("mem_gib", "\"mem_gib\": 24, \"mem_reported_gib\": 24.5"), HS_EPARSE, "mem_reported_gib",
            "above mem_gib 24");
    gpu_bad(gpu_text("mem_gib", "\"mem_gib\": 24, \"mem_reported_gib\": 0"), HS_ERANGE, "mem_reported_gib", NULL);
    gpu_bad(gpu_text("fp16_tflops", "\"fp16_tflops\": 100, \"fp32_tflops\": 150"), HS_EPARSE, "fp32_tflops",
            "above fp16_tflops");
    gpu_bad(gpu_text("fp16_tflops", "\"fp16_tflops\": 100, \"fp32_tflops\": -1"), HS_ERANGE, "fp32_tflops", NULL);

    gpu_bad(gpu_text("tdp_w", "\"tdp_w\": 300, \"colour\": \"green\""), HS_EPARSE,
            "colour", "unknown key");
    gpu_bad(gpu_text("mem_bw_gbs", NULL), HS_EPARSE, "mem_bw_gbs", "missing");
    gpu_bad(gpu_text("mem_gib", "\"mem_gib\": \"24\""), HS_EPARSE, "mem_gib", NULL);
    gpu_bad(gpu_text("bf16", "\"bf16\": \"yes\""), HS_EPARSE, "bf16", NULL);
    gpu_bad(gpu_text("name", "\"name\": 7"), HS_EPARSE, "name", NULL);
    gpu_bad(gpu_text("mem_bw_gbs", "\"mem_bw_gbs\": -900"), HS_ERANGE, "mem_bw_gbs", NULL);
    gpu_bad(gpu_text("fp16_tflops", "\"fp16_tflops\": 0"), HS_ERANGE, "fp16_tflops", NULL);
    gpu_bad(gpu_text("price_per_hour", "\"price_per_hour\": 1e9"), HS_ERANGE,
            "price_per_hour", NULL);
    gpu_bad(gpu_text("bf16", "\"bf16\": 2"), HS_ERANGE, "bf16", NULL);
    gpu_bad(gpu_text("name", "\"name\": \"0123456789012345678901234567890123456789\""),
            HS_ERANGE, "name", NULL);
    /* syntax error on line 4 (the lines are: {, name, display, fp16...) */
    gpu_bad("{\n  \"name\": \"tgpu\",\n  \"display\": \"x\",\n  \"fp16_tflops\": 100,,\n}\n",
            HS_EPARSE, ":4:", NULL);
    gpu_bad("{\n  \"name\": \"tgpu\"\n  \"display\": \"x\"\n}\n", HS_EPARSE, ":3:", NULL);
    gpu_bad("[1, 2]\n", HS_EPARSE, "object", NULL);
    gpu_bad("", HS_EPARSE, ":1:", NULL);
    /* same_chip_as: a shipped GPU, not itself, no typo (it would fall
     * back to the transfer model without a word) */
    CHECK_OK(hs_gpu_load(&g, write_tmp(gpu_text("tdp_w", "\"tdp_w\": 300, \"same_chip_as\": \"a40\"")), &err), &err);
    CHECK(!strcmp(g.same_chip_as, "a40"));
    CHECK_OK(hs_gpu_load(&g, ok, &err), &err);
    CHECK(g.same_chip_as[0] == 0);
    gpu_bad(gpu_text("tdp_w", "\"tdp_w\": 300, \"same_chip_as\": \"tgpu\""), HS_EPARSE,
            "same_chip_as", "itself");
    gpu_bad(gpu_text("tdp_w", "\"tdp_w\": 300, \"same_chip_as\": \"a4O\""), HS_EPARSE,
            "same_chip_as", "unknown GPU \"a4O\"");
    gpu_bad(gpu_text("tdp_w", "\"tdp_w\": 300, \"same_chip_as\": \"../gpus/a40\""), HS_EPARSE,
            "same_chip_as", NULL);

    /* sms and boost_mhz: optional, but together; their product is SM cycles/s */
    CHECK(g.sm_rate == 0);
    CHECK_OK(hs_gpu_load(&g, write_tmp(gpu_text("tdp_w", "\"tdp_w\": 300, \"sms\": 84, \"boost_mhz\": 1740")), &err), &err);
    CHECK_REL(g.sm_rate, 84 * 1740e6, 1e-12);
    gpu_bad(gpu_text("tdp_w", "\"tdp_w\": 300, \"sms\": 84"), HS_EPARSE, "boost_mhz", "together");
    gpu_bad(gpu_text("tdp_w", "\"tdp_w\": 300, \"boost_mhz\": 1740"), HS_EPARSE, "sms", "together");
    gpu_bad(gpu_text("tdp_w", "\"tdp_w\": 300, \"sms\": 8.5, \"boost_mhz\": 1740"), HS_ERANGE, "sms", "not an integer");
    gpu_bad(gpu_text("tdp_w", "\"tdp_w\": 300, \"sms\": -1, \"boost_mhz\": 1740"), HS_ERANGE, "sms", NULL);

    /* missing files: load -> HS_EIO, find by name -> HS_ENOTFOUND */
    CHECK_INT(hs_gpu_load(&g, "/nonexistent/dir/x.json", &err), HS_EIO);
    CHECK_MSG(err, "/nonexistent/dir/x.json", NULL);
    CHECK_INT(hs_gpu_find(&g, "no-such-gpu", &err), HS_ENOTFOUND);
    CHECK_MSG(err, "no-such-gpu", NULL);
}

/* Cluster fixture: a two-node cluster of tgpu-free shipped GPUs. */
#define NODE0 "{\"name\": \"n0\", \"gpu\": \"a100-80g\", \"count\": 2, \"intra_bw_gbs\": 300, \"intra_latency_us\": 3}"
#define NODE1 "{\"name\": \"n1\", \"gpu\": \"a100-80g\", \"count\": 1}"

static const char *cluster_text(const char *nodes, const char *extra)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "{\n  \"name\": \"tc\",\n  \"description\": \"test\",\n  \"source\": \"test\",\n"
             "  \"nodes\": [%s]%s%s\n}\n",
             nodes, extra ? ",\n  " : "", extra ? extra : "");
    return buf;
}

static void cluster_bad(const char *text, int want_rc, const char *want1, const char *want2)
{
    hs_cluster *c = (hs_cluster *)&c; /* poison: must be reset to NULL */
    hs_err err = {0};
    const char *path = write_tmp(text);
    int rc = hs_cluster_load(&c, path, &err);
    CHECK_INT(rc, want_rc);
    CHECK(c == NULL);
    CHECK_MSG(err, path, want1);
    if (want2) CHECK_MSG(err, path, want2);
    if (!rc && c && c != (hs_cluster *)&c) hs_cluster_destroy(c);
}

/* Runs hs_cluster_load in a child: 42 when it fails cleanly, 43 when it
 * succeeds, 1000 + signal when it crashes, else the child's exit code. */
static int load_in_child(const char *path)
{
    pid_t pid;
    int st;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        hs_cluster *c = NULL;
        hs_err err = {0};
        int rc = hs_cluster_load(&c, path, &err);
        hs_cluster_destroy(c);
        _exit(rc < 0 ? 42 : 43); /* distinct from sanitizer (1) and crash exits */
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    if (WIFSIGNALED(st)) return 1000 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

static void test_cluster_errors(void)
{
    hs_cluster *c = NULL;
    hs_err err = {0};
    const char *p;

    /* The fixture itself loads: 2 + 1 GPUs, single-GPU node needs no intra link. */
    p = write_tmp(cluster_text(NODE0 ", " NODE1, "\"inter_bw_gbs\": 12.5, \"inter_latency_us\": 20"));
    CHECK_OK(hs_cluster_load(&c, p, &err), &err);
    if (c) {
        CHECK_INT(c->n_gpus, 3);
        CHECK_REL(hs_cluster_bw(c, 0, 1), 300e9, 1e-12);
        CHECK_REL(hs_cluster_bw(c, 1, 2), 12.5e9, 1e-12);
        CHECK_REL(hs_cluster_lat(c, 2, 0), 20e-6, 1e-9);
        hs_cluster_destroy(c);
        c = NULL;
    }

    cluster_bad(cluster_text(NODE0, "\"colour\": \"red\""), HS_EPARSE, "colour", "unknown key");
    cluster_bad(cluster_text("{\"name\": \"n0\", \"gpu\": \"a100-80g\", \"count\": 1, \"speed\": 1}",
                             NULL), HS_EPARSE, "speed", "nodes[0]");
    cluster_bad("{\"description\": \"x\", \"nodes\": [" NODE0 "]}", HS_EPARSE, "name", "missing");
    cluster_bad(cluster_text("{\"name\": \"n0\", \"count\": 1}", NULL), HS_EPARSE, "gpu", "missing");
    cluster_bad(cluster_text("{\"name\": \"n0\", \"gpu\": \"a100-80g\", \"count\": 2}", NULL),
                HS_EPARSE, "intra_bw_gbs", "nodes[0]");
    cluster_bad(cluster_text("{\"name\": \"n0\", \"gpu\": \"a100-80g\"}", NULL), HS_EPARSE,
                "count", NULL);
    cluster_bad(cluster_text(NODE0 ", " NODE1, "\"inter_bw_gbs\": \"25\", \"inter_latency_us\": 10"),
                HS_EPARSE, "inter_bw_gbs", "number");
    cluster_bad(cluster_text("{\"name\": 1, \"gpu\": \"a100-80g\", \"count\": 1}", NULL),
                HS_EPARSE, "name", "string");
    cluster_bad(cluster_text(NODE0 ", " NODE1, "\"inter_bw_gbs\": -25, \"inter_latency_us\": 10"),
                HS_ERANGE, "inter_bw_gbs", NULL);
    cluster_bad(cluster_text("{\"name\": \"n0\", \"gpu\": \"a100-80g\", \"count\": 0}", NULL),
                HS_ERANGE, "count", NULL);
    cluster_bad(cluster_text("{\"name\": \"n0\", \"gpu\": \"a100-80g\", \"count\": 1.5}", NULL),
                HS_ERANGE, "count", NULL);
    cluster_bad(cluster_text("{\"name\": \"n0\", \"gpu\": \"no-such-gpu\", \"count\": 1}", NULL),
                HS_ENOTFOUND, "no-such-gpu", "nodes[0]");
    cluster_bad(cluster_text(NODE0 ", " NODE1, NULL), HS_EPARSE, "inter_bw_gbs", "link");
    cluster_bad(cluster_text(NODE0 ", " NODE1, "\"inter_bw_gbs\": 25"), HS_EPARSE,
                "inter_latency_us", "link");
    cluster_bad(cluster_text(NODE0, "\"nodes2\": 1"), HS_EPARSE, "nodes2", NULL);
    cluster_bad("{\"name\": \"tc\", \"nodes\": []}", HS_EPARSE, "nodes", NULL);

    /* explicit matrices: 2 GPUs */
    cluster_bad(cluster_text(NODE0, "\"bandwidth_gbs\": [[0, 0], [300, 0]], "
                                    "\"latency_us\": [[0, 3], [3, 0]]"),
                HS_EPARSE, "bandwidth_gbs[0][1]", "missing link");
    cluster_bad(cluster_text(NODE0, "\"bandwidth_gbs\": [[0, 300], [300, 0], [1, 1]], "
                                    "\"latency_us\": [[0, 3], [3, 0]]"),
                HS_EPARSE, "bandwidth_gbs", "2 rows");
    cluster_bad(cluster_text(NODE0, "\"bandwidth_gbs\": [[0, 300, 1], [300, 0]], "
                                    "\"latency_us\": [[0, 3], [3, 0]]"),
                HS_EPARSE, "bandwidth_gbs[0]", "2 entries");
    cluster_bad(cluster_text(NODE0, "\"bandwidth_gbs\": [[0, 300], [300, 0]], "
                                    "\"latency_us\": [[0, 3]]"),
                HS_EPARSE, "latency_us", "2 rows");
    cluster_bad(cluster_text(NODE0, "\"bandwidth_gbs\": [[0, 300], [-1, 0]], "
                                    "\"latency_us\": [[0, 3], [3, 0]]"),
                HS_ERANGE, "bandwidth_gbs[1][0]", NULL);
    cluster_bad(cluster_text(NODE0, "\"bandwidth_gbs\": [[0, 300], [\"x\", 0]], "
                                    "\"latency_us\": [[0, 3], [3, 0]]"),
                HS_EPARSE, "bandwidth_gbs[1][0]", NULL);
    cluster_bad(cluster_text(NODE0, "\"bandwidth_gbs\": [[0, 300], [300, 0]]"), HS_EPARSE,
                "latency_us", NULL);
    /* a valid matrix overrides the node values, and zero latency is allowed */
    p = write_tmp(cluster_text(NODE0, "\"bandwidth_gbs\": [[0, 50], [60, 0]], "
                                      "\"latency_us\": [[0, 0], [7, 0]]"));
    CHECK_OK(hs_cluster_load(&c, p, &err), &err);
    if (c) {
        CHECK_REL(hs_cluster_bw(c, 0, 1), 50e9, 1e-12);
        CHECK_REL(hs_cluster_bw(c, 1, 0), 60e9, 1e-12);
        CHECK_NEAR(hs_cluster_lat(c, 0, 1), 0, 0);
        CHECK_REL(hs_cluster_lat(c, 1, 0), 7e-6, 1e-9);
        hs_cluster_destroy(c);
        c = NULL;
    }

    /* malformed JSON: the message names the line */
    cluster_bad("{\n  \"name\": \"tc\",\n  \"nodes\": [\n    {\"name\": \"n0\" \"gpu\": \"a100-80g\"}\n  ]\n}\n",
                HS_EPARSE, ":4:", "JSON");

    /* unknown cluster name */
    CHECK_INT(hs_cluster_find(&c, "no-such-cluster", &err), HS_ENOTFOUND);
    CHECK(c == NULL);
    CHECK_MSG(err, "no-such-cluster", NULL);
    hs_cluster_destroy(NULL); /* no-op */

    /* The error must not depend on whether the caller passed an hs_err:
     * err.h allows NULL (hs_errf writes "when err is not NULL"). */
    p = write_tmp(cluster_text("{\"name\": \"n0\", \"gpu\": \"no-such-gpu\", \"count\": 1}", NULL));
    c = NULL;
    {
        int rc = hs_cluster_load(&c, p, NULL);
        CHECK(rc < 0);
        CHECK(c == NULL);
        if (!rc && c) hs_cluster_destroy(c);
        c = NULL;
    }

    /* Valid JSON that is not an object must be rejected, not crash. */
    p = write_tmp("[1, 2]\n");
    CHECK_INT(load_in_child(p), 42);
}

int main(void)
{
    root = hs_test_root();
    test_data_root();
    test_resolve();
    test_all_gpus();
    test_a100();
    test_all_clusters();
    test_dgx_a100x2();
    test_matrix_clusters();
    test_gpu_errors();
    test_cluster_errors();
    return hs_check_result();
}
