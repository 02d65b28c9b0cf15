/* test_vidur.c - the importer of Vidur's published profiles (sim/perf/vidur.c).
 *
 * Part 1 needs nothing outside the repository: tests/fixtures/perf/vidur/ is
 * a tiny tree in Vidur's layout written for this test (synthetic numbers):
 *   compute/a100/meta-llama/Tiny-Test-hf/mlp.csv  tp 1, 2 x tokens 1, 16, 128;
 *       Vidur op k (0 = emb, 1 = input_layernorm, 2 = attn_pre_proj, ...,
 *       5 = post_attention_layernorm, ..., 9 = add) has median
 *       0.001 (k + 1)(1 + tokens / 100) / tp ms; the point (tp 1, 128) is
 *       repeated with every median x 1.5
 *   a100_attention_tiny-test-shape.csv   4 decode points (one repeated) and
 *       4 prefill points of the tiny-test shape
 *   a100_attention_other-shape.csv        a 70B-shaped row, to be ignored
 *   network/a100_dgx/{all_reduce,send_recv}.csv  with rows spanning two
 *       nodes, to be dropped
 *   device_configs/a100.yml               total_memory_gb: 80
 * Checked: row counts, ms -> us, repeated points averaged, both layer norms
 * averaged into norm, shape filter for attention files, single-node
 * collectives only, meta, name mapping, import_all + read back, and errors
 * naming file and line.
 * Part 2 reads the real files under $HS_SHARED_DATA/profiles/vidur when set
 * (skipped with a message otherwise): row counts of every table, spot values
 * converted to us, and a write -> read round trip. */
#include "check.h"

#include <unistd.h>

#include "perf/table.h"

static char fixture[1024];

static void make_tmpdir(char *buf, size_t cap)
{
    snprintf(buf, cap, "/tmp/hs_test_vidur_XXXXXX");
    if (!mkdtemp(buf)) { perror("mkdtemp"); exit(2); }
}

static void rm_rf(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* us of a dense row, -1 when absent */
static double dense_us(const hs_ptable *t, int op, int tp, int tokens)
{
    for (size_t i = 0; i < t->n_dense; i++)
        if (t->dense[i].op == op && t->dense[i].tp == tp && t->dense[i].tokens == tokens && t->dense[i].bits == 16)
            return t->dense[i].us;
    return -1;
}

static double attn_us(const hs_ptable *t, int kind, int tp, int x, int y)
{
    for (size_t i = 0; i < t->n_attn[kind]; i++)
        if (t->attn[kind][i].tp == tp && t->attn[kind][i].x == x && t->attn[kind][i].y == y)
            return t->attn[kind][i].us;
    return -1;
}

static double comm_us(const hs_ptable *t, int kind, int gpus, double bytes)
{
    for (size_t i = 0; i < t->n_comm[kind]; i++)
        if (t->comm[kind][i].gpus == gpus && t->comm[kind][i].bytes == bytes) return t->comm[kind][i].us;
    return -1;
}

/* the fixture's median in us for Vidur op index k */
static double fx_us(int k, int tp, int tokens)
{
    return 1e3 * 0.001 * (k + 1) * (1 + tokens / 100.0) / tp;
}

static void test_names(void)
{
    char buf[64];
    hs_err err = {0};
    CHECK_OK(hs_vidur_gpu_name(buf, sizeof buf, "a100", &err), &err);
    CHECK_STR(buf, "a100-80g");
    CHECK_OK(hs_vidur_gpu_name(buf, sizeof buf, "a40", &err), &err);
    CHECK_STR(buf, "a40");
    CHECK_OK(hs_vidur_gpu_name(buf, sizeof buf, "h100", &err), &err);
    CHECK_STR(buf, "h100-sxm-80g");
    CHECK_OK(hs_vidur_gpu_name(buf, sizeof buf, "l40s", &err), &err);
    CHECK_STR(buf, "l40s");
    CHECK_OK(hs_vidur_model_name(buf, sizeof buf, "meta-llama/Llama-2-70b-hf", &err), &err);
    CHECK_STR(buf, "llama-2-70b");
    CHECK_OK(hs_vidur_model_name(buf, sizeof buf, "codellama/CodeLlama-34b-Instruct-hf", &err), &err);
    CHECK_STR(buf, "codellama-34b-instruct");
    CHECK_OK(hs_vidur_model_name(buf, sizeof buf, "microsoft/phi-2", &err), &err);
    CHECK_STR(buf, "phi-2");
    CHECK_INT(hs_vidur_model_name(buf, 4, "meta-llama/Llama-2-70b-hf", &err), HS_ERANGE);
}

static void test_fixture(void)
{
    hs_ptable *t = NULL;
    hs_err err = {0};
    CHECK_OK(hs_vidur_import(&t, fixture, "a100", "meta-llama/Tiny-Test-hf", "", &err), &err);
    if (!t) return;
    CHECK_STR(t->meta.gpu, "a100-80g");
    CHECK_STR(t->meta.model, "tiny-test");
    CHECK_STR(t->meta.backend, "vidur");
    CHECK_STR(t->meta.dtype, "fp16");
    CHECK(strstr(t->meta.source, "compute/a100/meta-llama/Tiny-Test-hf/mlp.csv") != NULL);
    CHECK(strstr(t->meta.source, "a100_attention_tiny-test-shape.csv") != NULL);
    CHECK(strstr(t->meta.source, "other-shape") == NULL);
    CHECK(strstr(t->meta.source, "network/a100_dgx") != NULL);
    CHECK_INT(t->meta.mem_usable_bytes, 80LL << 30);
    CHECK_INT(t->meta.kv_block_size, 16);
    CHECK_INT(strlen(t->meta.created), 10);
    /* 9 ops (two Vidur norms -> one) x 2 tp x 3 tokens; lm_head absent */
    CHECK_INT(t->n_dense, 54);
    CHECK(!hs_ptable_has_op(t, HS_OP_LM_HEAD, 1, 16));
    CHECK_NEAR(dense_us(t, HS_OP_QKV, 1, 16), fx_us(2, 1, 16), 1e-9);        /* 3.48 */
    CHECK_NEAR(dense_us(t, HS_OP_MLP_DOWN, 2, 1), fx_us(8, 2, 1), 1e-9);
    CHECK_NEAR(dense_us(t, HS_OP_EMB, 2, 128), fx_us(0, 2, 128), 1e-9);
    /* norm = mean of input_layernorm (k = 1) and post_attention (k = 5) */
    CHECK_NEAR(dense_us(t, HS_OP_NORM, 1, 1), (fx_us(1, 1, 1) + fx_us(5, 1, 1)) / 2, 1e-9);
    /* the repeated point: mean of the two rows */
    CHECK_NEAR(dense_us(t, HS_OP_QKV, 1, 128), fx_us(2, 1, 128) * 1.25, 1e-9);  /* 8.55 */
    CHECK_NEAR(dense_us(t, HS_OP_NORM, 1, 128), (fx_us(1, 1, 128) + fx_us(5, 1, 128)) * 1.25 / 2, 1e-9);
    /* attention: 4 distinct decode points (one averaged), 4 prefill */
    CHECK_INT(t->n_attn[HS_ATTN_DECODE], 4);
    CHECK_INT(t->n_attn[HS_ATTN_PREFILL], 4);
    CHECK_NEAR(attn_us(t, HS_ATTN_DECODE, 1, 1, 32), 1e3 * (0.010 + 0.001 + 0.00001 * 32), 1e-6);
    CHECK_NEAR(attn_us(t, HS_ATTN_DECODE, 1, 4, 256), 1e3 * (0.02424 + 0.030) / 2, 1e-6);
    CHECK_NEAR(attn_us(t, HS_ATTN_PREFILL, 1, 128, 128), 1e3 * (0.012 + 0.000001 * 128 * (128 + 64.5)), 1e-3);
    /* collectives: rows spanning two nodes are dropped */
    CHECK_INT(t->n_comm[HS_COMM_ALLREDUCE], 3);
    CHECK_INT(t->n_comm[HS_COMM_SENDRECV], 2);
    CHECK_NEAR(comm_us(t, HS_COMM_ALLREDUCE, 2, 2048), 10, 1e-9);
    CHECK_NEAR(comm_us(t, HS_COMM_ALLREDUCE, 4, 2048), 20, 1e-9);
    CHECK_NEAR(comm_us(t, HS_COMM_SENDRECV, 2, 1048576), 30, 1e-9);
    hs_ptable_destroy(t);

    /* no network; a named network that is not there is an error */
    CHECK_OK(hs_vidur_import(&t, fixture, "a100", "meta-llama/Tiny-Test-hf", NULL, &err), &err);
    if (t) {
        CHECK_INT(t->n_comm[0] + t->n_comm[1], 0);
        hs_ptable_destroy(t);
    }
    CHECK_INT(hs_vidur_import(&t, fixture, "a100", "meta-llama/Tiny-Test-hf", "nope", &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "network/nope: no such network folder") != NULL);
    CHECK_INT(hs_vidur_import(&t, fixture, "a40", "meta-llama/Tiny-Test-hf", "", &err), HS_EIO);
    CHECK(strstr(err.msg, "compute/a40/meta-llama/Tiny-Test-hf/mlp.csv: cannot open") != NULL);
    CHECK(t == NULL);
}

static void test_import_all(void)
{
    char dir[256], sub[512];
    hs_err err = {0};
    hs_ptable *t = NULL, *u = NULL;
    FILE *log = tmpfile();
    make_tmpdir(dir, sizeof dir);
    CHECK_OK(hs_vidur_import_all(fixture, dir, log, &err), &err);
    snprintf(sub, sizeof sub, "%s/a100-80g/tiny-test", dir);
    CHECK_OK(hs_ptable_read(&u, sub, &err), &err);
    CHECK_OK(hs_vidur_import(&t, fixture, "a100", "meta-llama/Tiny-Test-hf", "", &err), &err);
    if (t && u) {
        CHECK_INT(u->n_dense, t->n_dense);
        for (size_t i = 0; i < t->n_dense && i < u->n_dense; i++) CHECK_REL(u->dense[i].us, t->dense[i].us, 1e-9);
        CHECK_INT(u->n_attn[0], t->n_attn[0]);
        CHECK_INT(u->n_comm[0], t->n_comm[0]);
        CHECK_STR(u->meta.backend, "vidur");
    }
    if (log) {
        char line[512] = "";
        rewind(log);
        if (!fgets(line, sizeof line, log)) line[0] = '\0';
        CHECK(strstr(line, "a100/meta-llama/Tiny-Test-hf -> ") != NULL);
        CHECK(strstr(line, "54 dense, 4 decode, 4 prefill, 3 all-reduce, 2 send/recv rows") != NULL);
        fclose(log);
    }
    CHECK_INT(hs_vidur_import_all(dir, dir, NULL, &err), HS_ENOTFOUND);
    hs_ptable_destroy(t);
    hs_ptable_destroy(u);
    rm_rf(dir);
}

static void test_malformed(void)
{
    char dir[256], path[512];
    hs_ptable *t = NULL;
    hs_err err = {0};
    FILE *f;
    make_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/compute/x/o/M", dir);
    {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
        if (system(cmd) != 0) { perror("mkdir"); exit(2); }
    }
    snprintf(path, sizeof path, "%s/compute/x/o/M/mlp.csv", dir);
    f = fopen(path, "w");
    if (!f) exit(2);
    fputs("time_stats.add.median,n_head,n_kv_head,n_embd,num_tensor_parallel_workers\n0.1,4,2,256,1\n", f);
    fclose(f);
    CHECK_INT(hs_vidur_import(&t, dir, "x", "o/M", NULL, &err), HS_EPARSE);
    CHECK(strstr(err.msg, "mlp.csv:1: missing column \"num_tokens\"") != NULL);
    f = fopen(path, "w");
    if (!f) exit(2);
    fputs("time_stats.add.median,n_head,n_kv_head,n_embd,num_tokens,num_tensor_parallel_workers\n"
          "0.1,4,2,256,1,1\n0.1,4,2,256,two,1\n", f);
    fclose(f);
    CHECK_INT(hs_vidur_import(&t, dir, "x", "o/M", NULL, &err), HS_EPARSE);
    CHECK(strstr(err.msg, "mlp.csv:3: num_tokens: \"two\" is not an integer") != NULL);
    f = fopen(path, "w");
    if (!f) exit(2);
    fputs("time_stats.add.median,n_head,n_kv_head,n_embd,num_tokens,num_tensor_parallel_workers\n"
          "0.1,4,2,256,1,1\n0.1,8,2,256,2,1\n", f);
    fclose(f);
    CHECK_INT(hs_vidur_import(&t, dir, "x", "o/M", NULL, &err), HS_EPARSE);
    CHECK(strstr(err.msg, "mlp.csv:3: model shape differs from the first row") != NULL);
    CHECK(t == NULL);
    rm_rf(dir);
}

static void test_real(void)
{
    const char *shared = hs_shared_data();
    char vd[1024], dir[256], sub[512];
    hs_ptable *t = NULL, *u = NULL;
    hs_err err = {0};
    if (!shared) {
        printf("HS_SHARED_DATA not set: skipping the checks on Vidur's real profiles\n");
        return;
    }
    snprintf(vd, sizeof vd, "%s/profiles/vidur", shared);
    /* a100 7B: 259 token counts x 4 TP degrees x 9 ops; no attention file
     * of that shape */
    CHECK_OK(hs_vidur_import(&t, vd, "a100", "meta-llama/Llama-2-7b-hf", "", &err), &err);
    if (t) {
        CHECK_INT(t->n_dense, 9324);
        CHECK_INT(t->n_attn[0] + t->n_attn[1], 0);
        CHECK_INT(t->n_comm[HS_COMM_ALLREDUCE], 2979); /* 2, 4, 8 GPUs in one node x 993 sizes */
        CHECK_INT(t->n_comm[HS_COMM_SENDRECV], 993);
        CHECK_NEAR(dense_us(t, HS_OP_QKV, 1, 4096), (1911 + 1886.5) / 2, 1e-6); /* repeated row averaged */
        CHECK_NEAR(dense_us(t, HS_OP_EMB, 1, 4096), 234.5, 1e-6);
        hs_ptable_destroy(t);
    }
    CHECK_OK(hs_vidur_import(&t, vd, "a100", "meta-llama/Llama-2-70b-hf", "", &err), &err);
    if (t) {
        CHECK_INT(t->n_dense, 9324);
        CHECK_INT(t->n_attn[HS_ATTN_DECODE], 10112);   /* 128 batches x 79 contexts */
        CHECK_INT(t->n_attn[HS_ATTN_PREFILL], 4206);
        CHECK_NEAR(dense_us(t, HS_OP_MLP_UP, 4, 512), 547, 1e-6);
        CHECK_NEAR(dense_us(t, HS_OP_NORM, 8, 1024), 42, 1e-6);
        CHECK_NEAR(dense_us(t, HS_OP_MLP_DOWN, 2, 4096), 4022, 1e-6);
        CHECK_NEAR(attn_us(t, HS_ATTN_DECODE, 2, 64, 1024), 122, 1e-6);
        CHECK_NEAR(attn_us(t, HS_ATTN_DECODE, 2, 1, 32), 15, 1e-6);
        CHECK_NEAR(attn_us(t, HS_ATTN_PREFILL, 2, 1024, 2048), 421, 1e-6);
        CHECK_NEAR(attn_us(t, HS_ATTN_PREFILL, 2, 64, 0), 15, 1e-6);
        CHECK_NEAR(comm_us(t, HS_COMM_ALLREDUCE, 2, 2048), 10, 1e-6);
        CHECK_NEAR(comm_us(t, HS_COMM_ALLREDUCE, 8, 2048), 62, 1e-6);
        CHECK_NEAR(comm_us(t, HS_COMM_ALLREDUCE, 4, 2048), 61, 1e-6);
        CHECK_NEAR(comm_us(t, HS_COMM_SENDRECV, 2, 1048576), 17, 1e-6);
        make_tmpdir(dir, sizeof dir);
        snprintf(sub, sizeof sub, "%s/a100-80g/llama-2-70b", dir);
        CHECK_OK(hs_ptable_write(t, sub, &err), &err);
        CHECK_OK(hs_ptable_read(&u, sub, &err), &err);
        if (u) {
            int bad = 0;
            CHECK_INT(u->n_dense, t->n_dense);
            CHECK_INT(u->n_attn[0], t->n_attn[0]);
            CHECK_INT(u->n_attn[1], t->n_attn[1]);
            CHECK_INT(u->n_comm[0], t->n_comm[0]);
            CHECK_INT(u->n_comm[1], t->n_comm[1]);
            for (size_t i = 0; i < t->n_dense && i < u->n_dense; i++)
                bad += u->dense[i].op != t->dense[i].op || u->dense[i].tp != t->dense[i].tp ||
                       u->dense[i].tokens != t->dense[i].tokens ||
                       fabs(u->dense[i].us - t->dense[i].us) > 1e-9 * t->dense[i].us;
            for (size_t i = 0; i < t->n_attn[0] && i < u->n_attn[0]; i++)
                bad += fabs(u->attn[0][i].us - t->attn[0][i].us) > 1e-9 * t->attn[0][i].us;
            CHECK_INT(bad, 0);
            hs_ptable_destroy(u);
        }
        rm_rf(dir);
        hs_ptable_destroy(t);
    }
    CHECK_OK(hs_vidur_import(&t, vd, "a40", "meta-llama/Llama-2-70b-hf", "", &err), &err);
    if (t) {
        CHECK_INT(t->n_dense, 9324);
        CHECK_INT(t->n_comm[HS_COMM_ALLREDUCE], 0); /* Vidur has no A40 all-reduce */
        CHECK_INT(t->n_comm[HS_COMM_SENDRECV], 993);
        CHECK_STR(t->meta.gpu, "a40");
        CHECK_INT(t->meta.mem_usable_bytes, 45LL << 30);
        hs_ptable_destroy(t);
    }
}

int main(void)
{
    const char *env = getenv("HS_ROOT");
    if (env && *env) setenv("HETSIM_ROOT", env, 1);
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/perf/vidur", hs_data_root());
    test_names();
    test_fixture();
    test_import_all();
    test_malformed();
    test_real();
    return hs_check_result();
}
