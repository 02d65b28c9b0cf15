/* test_shorthand.c - cluster shorthand (hw/cluster.c: 4x8xh100-sxm-80g,
 * mixed with '+'), "repeat" on a cluster file's node, and the shared
 * "did you mean" helper (core/str.c) that every name lookup uses.
 *
 * Links of a shorthand come from the GPU files' defaults: the values
 * checked here are those in profiles/gpus (h100-sxm-80g: 450 GB/s, 3 us
 * inside, 50 GB/s, 10 us between; a100-80g: 300 / 25; l40s: none given,
 * so PCIe 32 GB/s, 5 us and 12.5 GB/s, 20 us). */
#include "check.h"

#include "core/str.h"
#include "hw/hw.h"

static int has(const hs_err *e, const char *a)
{
    int ok = strstr(e->msg, a) != NULL;
    if (!ok) fprintf(stderr, "  message was: %s\n  wanted: %s\n", e->msg, a);
    return ok;
}

static void test_suggest(void)
{
    const char *c[] = {"a100-80g", "h100-sxm-80g", "h200", "l40s", NULL, "vllm", "sarathi"};
    char buf[64];
    CHECK_STR(hs_str_suggest("h100", c, 7), "h100-sxm-80g");   /* prefix beats a near miss */
    CHECK_STR(hs_str_suggest("a100-80", c, 7), "a100-80g");
    CHECK_STR(hs_str_suggest("VLLM", c, 7), "vllm");           /* case-insensitive: distance 0 */
    CHECK_STR(hs_str_suggest("vlm", c, 7), "vllm");
    CHECK_STR(hs_str_suggest("sarthai", c, 7), "sarathi");     /* transposition + deletion */
    CHECK_STR(hs_str_suggest("l04s", c, 7), "l40s");           /* one transposition */
    CHECK(hs_str_suggest("zzzzzz", c, 7) == NULL);
    CHECK(hs_str_suggest("", c, 7) == NULL);
    CHECK(hs_str_suggest("vllm", c, 7) == NULL);               /* exact: nothing to suggest */
    CHECK_STR(hs_str_did_you_mean(buf, sizeof buf, "h20", c, 7), " (did you mean \"h200\"?)");
    CHECK_STR(hs_str_did_you_mean(buf, sizeof buf, "qqqqq", c, 7), "");
    /* ties go to the first candidate */
    {
        const char *t[] = {"ab", "ac"};
        CHECK_STR(hs_str_suggest("aa", t, 2), "ab");
    }
}

static void test_homogeneous(void)
{
    hs_cluster *c = NULL;
    hs_err err = {0};
    CHECK(hs_cluster_is_shorthand("4x8xh100-sxm-80g"));
    CHECK(!hs_cluster_is_shorthand("h100x8"));
    CHECK(!hs_cluster_is_shorthand("4x8.json"));
    CHECK_OK(hs_cluster_find(&c, "4x8xh100-sxm-80g", &err), &err);
    if (!c) return;
    CHECK_STR(c->name, "4x8xh100-sxm-80g");
    CHECK_INT(c->n_gpus, 32);
    CHECK_INT(c->n_nodes, 4);
    CHECK_INT(c->n_types, 1);
    CHECK_INT(c->gpu_node[7], 0);
    CHECK_INT(c->gpu_node[8], 1);
    CHECK_INT(c->gpu_node[31], 3);
    CHECK_REL(hs_cluster_bw(c, 0, 7), 450e9, 1e-12);
    CHECK_REL(hs_cluster_lat(c, 0, 7), 3e-6, 1e-9);
    CHECK_REL(hs_cluster_bw(c, 0, 8), 50e9, 1e-12);
    CHECK_REL(hs_cluster_lat(c, 31, 0), 10e-6, 1e-9);
    CHECK_REL(hs_cluster_price(c, NULL, 0), 32 * 3.69, 1e-9);
    hs_cluster_destroy(c);
    c = NULL;

    /* GPUSxGPU is one node; a GPU without link keys gets PCIe */
    CHECK_OK(hs_cluster_find(&c, "8xl40s", &err), &err);
    if (!c) return;
    CHECK_INT(c->n_gpus, 8);
    CHECK_INT(c->n_nodes, 1);
    CHECK_REL(hs_cluster_bw(c, 0, 1), 32e9, 1e-12);
    CHECK_REL(hs_cluster_lat(c, 0, 1), 5e-6, 1e-9);
    hs_cluster_destroy(c);
}

static void test_mixed(void)
{
    hs_cluster *c = NULL;
    hs_err err = {0};
    CHECK_OK(hs_cluster_find(&c, "1x4xh100-sxm-80g+2x2xa100-80g+1x1xl40s", &err), &err);
    if (!c) return;
    CHECK_INT(c->n_gpus, 9);
    CHECK_INT(c->n_nodes, 4);
    CHECK_INT(c->n_types, 3);
    CHECK_STR(hs_cluster_gpu(c, 0)->name, "h100-sxm-80g");
    CHECK_STR(hs_cluster_gpu(c, 4)->name, "a100-80g");
    CHECK_STR(hs_cluster_gpu(c, 8)->name, "l40s");
    CHECK_INT(c->gpu_node[5], 1);
    CHECK_INT(c->gpu_node[6], 2);
    CHECK_REL(hs_cluster_bw(c, 0, 3), 450e9, 1e-12);   /* inside the H100 node */
    CHECK_REL(hs_cluster_bw(c, 4, 5), 300e9, 1e-12);   /* inside an A100 node */
    /* between nodes: the slowest network of the mix (l40s: 12.5 GB/s, 20 us) */
    CHECK_REL(hs_cluster_bw(c, 0, 4), 12.5e9, 1e-12);
    CHECK_REL(hs_cluster_lat(c, 5, 6), 20e-6, 1e-9);
    CHECK_REL(hs_cluster_price(c, NULL, 0), 4 * 3.69 + 4 * 1.69 + 1.95, 1e-9);
    hs_cluster_destroy(c);
    c = NULL;
    /* without the L40S, the A100s' 25 GB/s decides */
    CHECK_OK(hs_cluster_find(&c, "1x4xh100-sxm-80g+1x4xa100-80g", &err), &err);
    if (!c) return;
    CHECK_REL(hs_cluster_bw(c, 0, 4), 25e9, 1e-12);
    CHECK_REL(hs_cluster_lat(c, 0, 4), 10e-6, 1e-9);
    hs_cluster_destroy(c);
}

static void test_errors(void)
{
    static const char *const bad[] = {"4x8x", "4x0xh100-sxm-80g", "0x8xh100-sxm-80g", "4x8xh100-sxm-80g+",
                                      "4x8xh100-sxm-80g++1x1xa40", "4x5000xh100-sxm-80g",
                                      "1x4xh100-sxm-80g+a40"};
    hs_cluster *c = NULL;
    hs_err err = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_INT(hs_cluster_find(&c, bad[i], &err), HS_EINVAL);
        CHECK(c == NULL);
        CHECK(has(&err, bad[i]));
        CHECK(has(&err, "NODESxGPUSxGPU"));
    }
    /* a misspelt GPU: one line naming it, with the likely one */
    CHECK_INT(hs_cluster_find(&c, "4x8xh100", &err), HS_ENOTFOUND);
    CHECK(c == NULL);
    CHECK(has(&err, "cluster \"4x8xh100\": unknown GPU \"h100\" (did you mean \"h100-sxm-80g\"?)"));
    CHECK(strchr(err.msg, '\n') == NULL);
    CHECK_INT(hs_cluster_find(&c, "2x2xa100-80", &err), HS_ENOTFOUND);
    CHECK(has(&err, "did you mean \"a100-80g\""));
    /* too long to be a cluster name */
    CHECK_INT(hs_cluster_find(&c, "1x1xa40+1x1xa40+1x1xa40+1x1xa40+1x1xa40+1x1xa40+1x1xa40+1x1xa40+1x1xa40", &err),
              HS_EINVAL);
    CHECK(has(&err, "at most 63 characters"));
    /* an unknown cluster file suggests a shipped one */
    CHECK_INT(hs_cluster_find(&c, "dgx-a10", &err), HS_ENOTFOUND);
    CHECK(has(&err, "did you mean \"dgx-a100\""));
}

static void test_repeat(void)
{
    hs_cluster *c = NULL, *d = NULL;
    hs_err err = {0};
    const char *p = hs_test_tmpfile("shorthand",
        "{\"name\": \"r\", \"description\": \"x\", \"source\": \"test\", \"nodes\": ["
        "{\"name\": \"a\", \"gpu\": \"a100-80g\", \"count\": 2, \"repeat\": 3, \"intra_bw_gbs\": 300, \"intra_latency_us\": 3},"
        "{\"name\": \"b\", \"gpu\": \"a40\", \"count\": 1}],"
        "\"inter_bw_gbs\": 25, \"inter_latency_us\": 10}");
    CHECK_OK(hs_cluster_load(&c, p, &err), &err);
    if (!c) return;
    CHECK_INT(c->n_gpus, 7);
    CHECK_INT(c->n_nodes, 4);
    CHECK_STR(c->node_name[0], "a-0");
    CHECK_STR(c->node_name[2], "a-2");
    CHECK_STR(c->node_name[3], "b");
    CHECK_INT(c->gpu_node[5], 2);
    CHECK_INT(c->gpu_node[6], 3);
    CHECK_REL(hs_cluster_bw(c, 4, 5), 300e9, 1e-12);  /* repeated nodes keep the link */
    CHECK_REL(hs_cluster_bw(c, 3, 4), 25e9, 1e-12);
    CHECK_STR(hs_cluster_gpu(c, 6)->name, "a40");
    /* the shipped example with repeat equals its shorthand's topology */
    CHECK_OK(hs_cluster_find(&d, "h100x32", &err), &err);
    if (d) {
        hs_cluster *e = NULL;
        CHECK_OK(hs_cluster_find(&e, "4x8xh100-sxm-80g", &err), &err);
        if (e) {
            CHECK_INT(d->n_gpus, e->n_gpus);
            CHECK(!memcmp(d->bw, e->bw, sizeof(double) * (size_t)d->n_gpus * (size_t)d->n_gpus));
            CHECK(!memcmp(d->lat, e->lat, sizeof(double) * (size_t)d->n_gpus * (size_t)d->n_gpus));
            hs_cluster_destroy(e);
        }
        hs_cluster_destroy(d);
    }
    hs_cluster_destroy(c);
    c = NULL;
    p = hs_test_tmpfile("shorthand",
        "{\"name\": \"r\", \"nodes\": [{\"name\": \"a\", \"gpu\": \"a40\", \"count\": 1, \"repeat\": 0}]}");
    CHECK_INT(hs_cluster_load(&c, p, &err), HS_ERANGE);
    CHECK(has(&err, "repeat"));
    p = hs_test_tmpfile("shorthand",
        "{\"name\": \"r\", \"nodes\": [{\"name\": \"a\", \"gpu\": \"a40\", \"count\": 4096, \"repeat\": 65536}]}");
    CHECK_INT(hs_cluster_load(&c, p, &err), HS_ERANGE);
    CHECK(has(&err, "65536 GPUs"));
}

/* core/str.h hs_parse_int: the whole string, base 10, in range; one line
 * naming the option otherwise. */
static void test_parse_int(void)
{
    long long v = -7;
    hs_err err = {0};
    CHECK_OK(hs_parse_int("--top", "12", 1, 1000, &v, &err), &err);
    CHECK(v == 12);
    CHECK_OK(hs_parse_int("--n", "-3", -5, 5, &v, &err), &err);
    CHECK(v == -3);
    v = 99;
    CHECK_INT(hs_parse_int("--top", "0", 1, 1000, &v, &err), HS_ERANGE);
    CHECK(v == 99);
    CHECK_STR(err.msg, "--top: \"0\" is not an integer in 1..1000");
    CHECK_INT(hs_parse_int("--top", "12x", 1, 1000, &v, &err), HS_ERANGE);
    CHECK_INT(hs_parse_int("--top", "", 1, 1000, &v, &err), HS_ERANGE);
    CHECK_INT(hs_parse_int("--top", "1.5", 1, 1000, &v, &err), HS_ERANGE);
    CHECK_INT(hs_parse_int("--top", "99999999999999999999999", 1, 1000, &v, &err), HS_ERANGE);
    CHECK(v == 99);
}

int main(void)
{
    test_suggest();
    test_parse_int();
    test_homogeneous();
    test_mixed();
    test_errors();
    test_repeat();
    return hs_check_result();
}
