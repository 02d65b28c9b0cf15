/* test_vidur.c - the importer of Vidur's published profiles (sim/perf/vidur.c, vidur_all.c).
 *
 * Part 1 needs nothing outside the repository: tests/fixtures/perf/vidur/ is
 * a tiny tree in Vidur's layout written for this test (synthetic numbers):
 *   compute/a100/meta-llama/Tiny-Test-hf/mlp.csv  tp 1, 2 x tokens 1, 16, 128;
 *       Vidur op k (0 = emb, 1 = input_layernorm, 2 = attn_pre_proj, ...,
 *       5 = post_attention_layernorm, 6 = mlp_up_proj, ..., 9 = add) has
 *       median 0.001 (k + 1)(1 + tokens / 100) / tp ms; the point (tp 1, 128)
 *       is repeated with every median x 1.5; vocab_size 1024,
 *       n_expanded_embd 688, gated
 *   a100_attention_tiny-test-shape.csv   4 decode points (one repeated) and
 *       4 prefill points of the tiny-test shape
 *   a100_attention_other-shape.csv        a 70B-shaped row, to be ignored
 *   network/a100_dgx/{all_reduce,send_recv}.csv  with rows spanning two
 *       nodes, to be dropped
 *   device_configs/a100.yml               total_memory_gb: 80
 * Checked: row counts, ms -> us, repeated points averaged, both layer norms
 * averaged into norm, shape filter for attention files, single-node
 * collectives only, meta, name mapping, import_all + read back, and errors
 * naming file, line and column.
 * tests/fixtures/vidur_old/ (its README) holds equal numbers in the current
 * layout and in Vidur's old single-folder one (a mixed mlp.csv, attention.csv
 * without is_prefill, all_reduce.csv in n_embd x num_tokens with all_gather
 * rows, a per-model folder): both import to equal tables, with the skipped
 * rows counted in the log.  lm_head rows are synthesised from mlp_up x
 * vocab / (g ffn), checked on exact numbers.
 * Part 2 reads the real files under $HS_SHARED_DATA/profiles/vidur when set
 * (skipped with a message otherwise): row counts of every table, spot values
 * converted to us, a write -> read round trip, and import_all landing every
 * model on a models/ file. */
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
    static const char *const map[][2] = {
        {"meta-llama/Llama-2-7b-hf", "llama-2-7b"},
        {"meta-llama/Llama-2-70b-hf", "llama-2-70b"},
        {"meta-llama/Meta-Llama-3-8B", "llama-3-8b"},
        {"meta-llama/Meta-Llama-3-70B", "llama-3-70b"},
        {"codellama/CodeLlama-34b-Instruct-hf", "codellama-34b"},
        {"Qwen/Qwen-72B", "qwen-72b"},
        {"internlm/internlm-20b", "internlm-20b"},
        {"microsoft/phi-2", "phi-2"},
        /* the table is keyed by the name after the organisation */
        {"Meta-Llama-3-8B", "llama-3-8b"},
        /* the generic rule: lower case, -hf, then one fine-tune suffix */
        {"meta-llama/Tiny-Test-hf", "tiny-test"},
        {"meta-llama/Llama-2-13b-chat-hf", "llama-2-13b"},
        {"mistralai/Mistral-7B-Instruct", "mistral-7b"},
        {"tiiuae/falcon-7b", "falcon-7b"},
        {"x/Foo-Instruct-Chat", "foo-instruct"},  /* one suffix only */
        {"x/Chat", "chat"},                       /* a suffix, not the whole name */
    };
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
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        buf[0] = '\0';
        CHECK_OK(hs_vidur_model_name(buf, sizeof buf, map[i][0], &err), &err);
        CHECK_STR(buf, map[i][1]);
    }
    CHECK_INT(hs_vidur_model_name(buf, 4, "meta-llama/Llama-2-70b-hf", &err), HS_ERANGE);
    CHECK_INT(hs_vidur_model_name(buf, 13, "codellama/CodeLlama-34b-Instruct-hf", &err), HS_ERANGE);
    CHECK_OK(hs_vidur_model_name(buf, 14, "codellama/CodeLlama-34b-Instruct-hf", &err), &err);
    CHECK_INT(hs_vidur_model_name(buf, sizeof buf, "org/", &err), HS_ERANGE);
    CHECK_INT(hs_vidur_model_name(buf, sizeof buf, "", &err), HS_ERANGE);
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

    /* the same through import_ex, which counts what it dropped */
    {
        hs_vidur_stats st;
        memset(&st, 0xff, sizeof st);
        CHECK_OK(hs_vidur_import_ex(&t, fixture, "a100", "meta-llama/Tiny-Test-hf", "", 0, &st, &err), &err);
        if (t) {
            CHECK_INT(t->n_dense, 54);
            hs_ptable_destroy(t);
        }
        CHECK_INT(st.lm_head, 0);
        CHECK_INT(st.spans_nodes[HS_COMM_ALLREDUCE], 1);
        CHECK_INT(st.spans_nodes[HS_COMM_SENDRECV], 1);
        CHECK_INT(st.other[0] + st.other[1] + st.empty + st.zero_ms, 0);
    }

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
    CHECK_OK(hs_vidur_import_ex(&t, fixture, "a100", "meta-llama/Tiny-Test-hf", "", HS_VIDUR_LM_HEAD, NULL, &err),
             &err);
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
        /* 54 measured + 6 lm_head rows */
        CHECK(strstr(line, ": 60 dense, 4 decode, 4 prefill, 3 all-reduce, 2 send/recv rows; 6 lm_head rows "
                           "synthesised from mlp_up; skipped 1 all-reduce row spanning nodes, 1 send/recv row "
                           "spanning nodes\n") != NULL);
        if (!strstr(line, "60 dense")) fprintf(stderr, "log: %s", line);
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
    CHECK(strstr(err.msg, "mlp.csv:3: n_head: 8 differs from 4 on line 2 (one model per file)") != NULL);
    CHECK(t == NULL);
    rm_rf(dir);
}

/* Writes text to root/rel, creating its folders. */
static void put(const char *root, const char *rel, const char *text)
{
    char path[1024], cmd[1200], *slash;
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", root, rel);
    slash = strrchr(path, '/');
    *slash = '\0';
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    if (system(cmd) != 0) { perror("mkdir"); exit(2); }
    *slash = '/';
    if (!(f = fopen(path, "w")) || fputs(text, f) < 0) { perror(path); exit(2); }
    fclose(f);
}

static void test_lm_head(void)
{
    hs_ptable *t = NULL;
    hs_err err = {0};
    hs_vidur_stats st;
    size_t added = 99;
    char dir[256];
    /* in memory: ratio 32000 / (2 x 8000) = 2, exact */
    CHECK_OK(hs_ptable_create(&t, &err), &err);
    if (!t) return;
    CHECK_OK(hs_ptable_add_dense(t, HS_OP_MLP_UP, 1, 16, 1, 10, &err), &err);
    CHECK_OK(hs_ptable_add_dense(t, HS_OP_MLP_UP, 2, 16, 8, 6, &err), &err);
    CHECK_OK(hs_ptable_add_dense(t, HS_OP_MLP_UP, 1, 4, 1, 3, &err), &err); /* 4-bit weights: not a source */
    CHECK_OK(hs_ptable_add_dense(t, HS_OP_QKV, 1, 16, 1, 5, &err), &err);
    CHECK_OK(hs_vidur_lm_head(t, 32000, 8000, 1, &added, &err), &err);
    CHECK_INT(added, 2);
    CHECK_INT(t->n_dense, 6);
    CHECK_OK(hs_ptable_sort(t, &err), &err);
    CHECK_NEAR(dense_us(t, HS_OP_LM_HEAD, 1, 1), 20, 0);
    CHECK_NEAR(dense_us(t, HS_OP_LM_HEAD, 2, 8), 12, 0);
    CHECK(hs_ptable_dense_at(t, HS_OP_LM_HEAD, 1, 4, 1) != NULL); /* the head is read at 16 bits */
    /* twice: refused, the table unchanged */
    CHECK_INT(hs_vidur_lm_head(t, 32000, 8000, 1, NULL, &err), HS_EINVAL);
    CHECK(strstr(err.msg, "lm_head: the table already has lm_head rows") != NULL);
    CHECK_INT(t->n_dense, 6);
    hs_ptable_destroy(t);
    /* not gated: 51200 / 10240 = 5; shapes that are none are refused */
    t = NULL;
    CHECK_OK(hs_ptable_create(&t, &err), &err);
    if (!t) return;
    CHECK_OK(hs_ptable_add_dense(t, HS_OP_MLP_UP, 1, 16, 4, 7, &err), &err);
    CHECK_INT(hs_vidur_lm_head(t, 0, 10240, 0, NULL, &err), HS_EINVAL);
    CHECK_INT(hs_vidur_lm_head(t, 51200, 10240, 2, NULL, &err), HS_EINVAL);
    CHECK_INT(t->n_dense, 1);
    CHECK_OK(hs_vidur_lm_head(t, 51200, 10240, 0, NULL, &err), &err);
    CHECK_NEAR(dense_us(t, HS_OP_LM_HEAD, 1, 4), 35, 0);
    hs_ptable_destroy(t);
    /* nothing to scale */
    t = NULL;
    CHECK_OK(hs_ptable_create(&t, &err), &err);
    if (!t) return;
    CHECK_OK(hs_ptable_add_dense(t, HS_OP_QKV, 1, 16, 4, 7, &err), &err);
    CHECK_INT(hs_vidur_lm_head(t, 51200, 10240, 0, NULL, &err), HS_ENOTFOUND);
    CHECK_INT(t->n_dense, 1);
    hs_ptable_destroy(t);

    /* through the importer on the perf/vidur fixture (vocab 1024, ffn 688,
     * gated): every (tp, tokens) of mlp_up, the repeated point averaged first */
    t = NULL;
    CHECK_OK(hs_vidur_import_ex(&t, fixture, "a100", "meta-llama/Tiny-Test-hf", "", HS_VIDUR_LM_HEAD, &st, &err),
             &err);
    if (t) {
        static const int toks[] = {1, 16, 128};
        hs_ptable_need need = {2, 16, (1u << HS_OP_LM_HEAD) | (1u << HS_OP_NORM), 0, 0};
        CHECK_INT(t->n_dense, 60);
        CHECK_INT(st.lm_head, 6);
        for (int tp = 1; tp <= 2; tp++)
            for (int i = 0; i < 3; i++) {
                double up = fx_us(6, tp, toks[i]) * (tp == 1 && toks[i] == 128 ? 1.25 : 1);
                CHECK_NEAR(dense_us(t, HS_OP_MLP_UP, tp, toks[i]), up, 1e-9);
                CHECK_NEAR(dense_us(t, HS_OP_LM_HEAD, tp, toks[i]), up * 1024 / 1376, 1e-9);
            }
        CHECK(strstr(t->meta.source, "; lm_head synthesised from mlp_up x N ratio vocab_size/(2 n_expanded_embd) = "
                                     "1024/(2*688)") != NULL);
        CHECK_OK(hs_ptable_check(t, &need, &err), &err); /* a last stage has what it needs */
        hs_ptable_destroy(t);
    }
    /* the measured-only import has no head, and the check says so */
    CHECK_OK(hs_vidur_import(&t, fixture, "a100", "meta-llama/Tiny-Test-hf", NULL, &err), &err);
    if (t) {
        hs_ptable_need need = {2, 16, 1u << HS_OP_LM_HEAD, 0, 0};
        CHECK_INT(hs_ptable_check(t, &need, &err), HS_ENOTFOUND);
        CHECK(strstr(err.msg, "missing lm_head at tp 2, bits 16") != NULL);
        hs_ptable_destroy(t);
    }
    /* without vocab_size there is no head to synthesise: an error naming it */
    make_tmpdir(dir, sizeof dir);
    put(dir, "compute/x/o/M/mlp.csv",
        "time_stats.mlp_up_proj.median,n_head,n_kv_head,n_embd,n_expanded_embd,use_gated_mlp,num_tokens,"
        "num_tensor_parallel_workers\n0.1,4,2,256,688,True,1,1\n");
    t = NULL;
    CHECK_INT(hs_vidur_import_ex(&t, dir, "x", "o/M", NULL, HS_VIDUR_LM_HEAD, NULL, &err), HS_EPARSE);
    CHECK(strstr(err.msg, "compute/x/o/M/mlp.csv:1: missing column \"vocab_size\" (lm_head is synthesised from it)") !=
          NULL);
    CHECK(t == NULL);
    CHECK_OK(hs_vidur_import(&t, dir, "x", "o/M", NULL, &err), &err);
    hs_ptable_destroy(t);
    rm_rf(dir);
}

/* Rows of a and b that differ (keys, and times bit for bit). */
static int rows_differ(const hs_ptable *a, const hs_ptable *b, int comm)
{
    int bad = a->n_dense != b->n_dense;
    for (size_t i = 0; !bad && i < a->n_dense; i++)
        bad += a->dense[i].op != b->dense[i].op || a->dense[i].tp != b->dense[i].tp ||
               a->dense[i].bits != b->dense[i].bits || a->dense[i].tokens != b->dense[i].tokens ||
               a->dense[i].us != b->dense[i].us;
    for (int k = 0; k < 2; k++) {
        bad += a->n_attn[k] != b->n_attn[k];
        for (size_t i = 0; !bad && i < a->n_attn[k]; i++)
            bad += memcmp(&a->attn[k][i], &b->attn[k][i], 3 * sizeof(int32_t)) || a->attn[k][i].us != b->attn[k][i].us;
        if (!comm) continue;
        bad += a->n_comm[k] != b->n_comm[k];
        for (size_t i = 0; !bad && i < a->n_comm[k]; i++)
            bad += a->comm[k][i].gpus != b->comm[k][i].gpus || a->comm[k][i].bytes != b->comm[k][i].bytes ||
                   a->comm[k][i].us != b->comm[k][i].us;
    }
    return bad;
}

/* The whole log of import_all as one string (static buffer). */
static const char *slurp(FILE *f)
{
    static char buf[8192];
    size_t n;
    rewind(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    return buf;
}

static void test_layouts(void)
{
    char cur[1024], old[1024], dir[256], out[2][512], sub[600];
    hs_ptable *a = NULL, *b = NULL, *h = NULL, *bl = NULL;
    hs_err err = {0};
    FILE *log = tmpfile();
    snprintf(cur, sizeof cur, "%s/tests/fixtures/vidur_old/current", hs_data_root());
    snprintf(old, sizeof old, "%s/tests/fixtures/vidur_old/old", hs_data_root());
    make_tmpdir(dir, sizeof dir);
    snprintf(out[0], sizeof out[0], "%s/current", dir);
    snprintf(out[1], sizeof out[1], "%s/old", dir);
    CHECK_OK(hs_vidur_import_all(cur, out[0], NULL, &err), &err);
    CHECK_OK(hs_vidur_import_all(old, out[1], log, &err), &err);
    snprintf(sub, sizeof sub, "%s/a100-80g/tiny-test", out[0]);
    CHECK_OK(hs_ptable_read(&a, sub, &err), &err);
    snprintf(sub, sizeof sub, "%s/a100-80g/tiny-test", out[1]);
    CHECK_OK(hs_ptable_read(&b, sub, &err), &err);
    snprintf(sub, sizeof sub, "%s/h100-sxm-80g/tiny-test", out[1]);
    CHECK_OK(hs_ptable_read(&h, sub, &err), &err);
    snprintf(sub, sizeof sub, "%s/a100-80g/bloom-176b", out[1]);
    CHECK_OK(hs_ptable_read(&bl, sub, &err), &err);
    if (a) {
        /* 9 ops x 4 (tp, tokens) less one time of 0 ms, plus 4 lm_head */
        CHECK_INT(a->n_dense, 39);
        CHECK_NEAR(dense_us(a, HS_OP_MLP_UP, 1, 8), 34.4, 1e-9);  /* (30.1 + 38.7) / 2 */
        CHECK_NEAR(dense_us(a, HS_OP_QKV, 1, 8), 6.5, 1e-9);
        CHECK_NEAR(dense_us(a, HS_OP_NORM, 1, 1), 1.1, 1e-9);     /* (1 + 1.2) / 2 */
        CHECK_NEAR(dense_us(a, HS_OP_ROPE, 2, 8), -1, 0);         /* timed 0 ms: absent */
        /* lm_head = mlp_up x 1024 / (2 x 688) */
        CHECK_NEAR(dense_us(a, HS_OP_LM_HEAD, 1, 1), 12.8, 1e-9);
        CHECK_NEAR(dense_us(a, HS_OP_LM_HEAD, 1, 8), 25.6, 1e-9);
        CHECK_NEAR(dense_us(a, HS_OP_LM_HEAD, 2, 1), 6.4, 1e-9);
        CHECK_NEAR(dense_us(a, HS_OP_LM_HEAD, 2, 8), 12.8, 1e-9);
        CHECK_INT(a->n_attn[HS_ATTN_DECODE], 3);
        CHECK_INT(a->n_attn[HS_ATTN_PREFILL], 3);
        CHECK_NEAR(attn_us(a, HS_ATTN_DECODE, 1, 4, 32), 16, 1e-9);
        CHECK_NEAR(attn_us(a, HS_ATTN_PREFILL, 1, 64, 128), 22, 1e-9);
        CHECK_INT(a->n_comm[HS_COMM_ALLREDUCE], 3);
        CHECK_INT(a->n_comm[HS_COMM_SENDRECV], 1);
        CHECK_NEAR(comm_us(a, HS_COMM_ALLREDUCE, 2, 8192), 20, 1e-9);
        CHECK_NEAR(comm_us(a, HS_COMM_ALLREDUCE, 4, 2048), 15, 1e-9);
        CHECK_NEAR(comm_us(a, HS_COMM_SENDRECV, 2, 2048), 8, 1e-9);
    }
    if (a && b) {
        /* the old layout, the same numbers: the same table */
        CHECK_INT(rows_differ(a, b, 1), 0);
        CHECK_STR(b->meta.gpu, a->meta.gpu);
        CHECK_STR(b->meta.model, a->meta.model);
        CHECK_INT(b->meta.kv_block_size, a->meta.kv_block_size);
        CHECK_INT(b->meta.mem_usable_bytes, a->meta.mem_usable_bytes);
        CHECK_INT(b->meta.mem_usable_bytes, 80LL << 30);
        CHECK(strstr(b->meta.source, "old layout: a100/mlp.csv (rows of tiny-test's shape), a100/attention.csv, "
                                     "a100/all_reduce.csv, a100/send_recv.csv; lm_head synthesised") != NULL);
    }
    if (a && h) { /* one model per folder: equal rows, no network files */
        CHECK_INT(rows_differ(a, h, 0), 0);
        CHECK_INT(h->n_comm[0] + h->n_comm[1], 0);
        CHECK_STR(h->meta.gpu, "h100-sxm-80g");
    }
    if (bl) { /* bloom-176b's shape, not gated: lm_head = mlp_up x 250880 / 57344 = x 4.375 */
        CHECK_INT(bl->n_dense, 18); /* 8 ops (no rope) x 2 tokens + 2 lm_head */
        CHECK_NEAR(dense_us(bl, HS_OP_LM_HEAD, 1, 1), 875, 1e-9);
        CHECK_NEAR(dense_us(bl, HS_OP_LM_HEAD, 1, 8), 1050, 1e-9);
        CHECK_NEAR(dense_us(bl, HS_OP_ROPE, 1, 1), -1, 0);
        CHECK_INT(bl->n_attn[0] + bl->n_attn[1], 0); /* attention.csv has no row of its shape */
        CHECK_INT(bl->n_comm[HS_COMM_ALLREDUCE], 3);
    }
    if (log) {
        const char *txt = slurp(log);
        CHECK(strstr(txt, "a100/mlp.csv [tiny-test] -> ") != NULL);
        CHECK(strstr(txt, "/a100-80g/tiny-test: 39 dense, 3 decode, 3 prefill, 3 all-reduce, 1 send/recv rows; "
                          "4 lm_head rows synthesised from mlp_up; skipped 2 rows of another collective (all_gather) "
                          "in all_reduce.csv, 1 collective row of 0 bytes or 1 GPU, 1 time of 0 ms (below the "
                          "profiler's resolution)\n") != NULL);
        CHECK(strstr(txt, "/a100-80g/bloom-176b: 18 dense, 0 decode, 0 prefill, 3 all-reduce, 1 send/recv rows; "
                          "2 lm_head rows synthesised from mlp_up; skipped 2 rows of another collective") != NULL);
        CHECK(strstr(txt, "a100/mlp.csv: 1 row of shape n_embd 1024, n_head 8, n_kv_head 8, n_expanded_embd 4096, "
                          "vocab_size 1000, gated skipped: no model in models/ has that shape\n") != NULL);
        CHECK(strstr(txt, "h100/meta-llama/Tiny-Test-hf -> ") != NULL);
        if (!strstr(txt, "bloom-176b: 18 dense")) fprintf(stderr, "log:\n%s", txt);
        fclose(log);
    }
    hs_ptable_destroy(a);
    hs_ptable_destroy(b);
    hs_ptable_destroy(h);
    hs_ptable_destroy(bl);
    rm_rf(dir);
}

#define MLP_HDR "time_stats.mlp_up_proj.median,n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp," \
                "num_tokens,num_tensor_parallel_workers\n"
#define MLP_OK "0.1,4,2,256,688,1024,True,1,1\n"
#define ATTN_HDR "time_stats.attn_decode.median,time_stats.attn_prefill.median,n_embd,n_q_head,n_kv_head," \
                 "block_size,num_tensor_parallel_workers,batch_size,prefill_chunk_size,kv_cache_size,is_prefill\n"

/* Old-layout folders that are wrong: each an error naming file, line and
 * column, and nothing written. */
static void test_malformed_old(void)
{
    static const struct { const char *f1, *t1, *f2, *t2, *msg; } cases[] = {
        {"a100/mlp.csv", MLP_HDR "0.1,4,2,256,688,1024,maybe,1,1\n", NULL, NULL,
         "a100/mlp.csv:2: use_gated_mlp: \"maybe\" is not True or False"},
        {"a100/mlp.csv", MLP_HDR "0.1,4,2,256,688,1024,True,1\n", NULL, NULL,
         "a100/mlp.csv:2: num_tensor_parallel_workers: missing (the row has 8 of the header's 9 fields)"},
        {"a100/mlp.csv", MLP_HDR "0.1,4,2,256,688,1024,True,1,1,7\n", NULL, NULL,
         "a100/mlp.csv:2: 10 fields, the header has 9"},
        {"a100/mlp.csv", MLP_HDR MLP_OK "nan,4,2,256,688,1024,True,2,1\n", NULL, NULL,
         "a100/mlp.csv:3: time_stats.mlp_up_proj.median: \"nan\" is not a number"},
        {"a100/mlp.csv", MLP_HDR "0.1,4,2,256,688,1024,True,1,99\n", NULL, NULL,
         "a100/mlp.csv:2: num_tensor_parallel_workers: 99 is outside"},
        {"a100/mlp.csv", MLP_HDR "0.1,4,2,-256,688,1024,True,1,1\n", NULL, NULL,
         "a100/mlp.csv:2: n_embd: -256 is outside"},
        {"a100/mlp.csv", MLP_HDR, NULL, NULL, "a100/mlp.csv: no data rows"},
        {"a100/mlp.csv", "", NULL, NULL, "a100/mlp.csv: empty file (no header)"},
        {"a100/mlp.csv", "n_head,n_kv_head\n4,2\n", NULL, NULL, "a100/mlp.csv:1: missing column \"n_embd\""},
        {"a100/mlp.csv", MLP_HDR MLP_OK, "a100/attention.csv", ATTN_HDR "0.01,,256,4,2,16,1,1,0,32\n",
         "a100/attention.csv:2: is_prefill: missing"},
        {"a100/mlp.csv", MLP_HDR MLP_OK, "a100/attention.csv", ATTN_HDR "0.01,,256,4,2,16,1,1,0,32,yes\n",
         "a100/attention.csv:2: is_prefill: \"yes\" is not True or False"},
        {"a100/mlp.csv", MLP_HDR MLP_OK, "a100/attention.csv", ATTN_HDR ",0.01,256,4,2,16,1,2,64,0,True\n",
         "a100/attention.csv:2: batch_size: prefill with 2 sequences (only 1 is supported)"},
        {"a100/mlp.csv", MLP_HDR MLP_OK, "a100/attention.csv", ATTN_HDR ",0.01,256,4,2,16,1,1,0,0,True\n",
         "a100/attention.csv:2: prefill_chunk_size: 0 in a prefill row"},
        {"a100/mlp.csv", MLP_HDR MLP_OK, "a100/attention.csv",
         ATTN_HDR "0.01,,256,4,2,16,1,1,0,32,False\n0.01,,256,4,2,32,1,2,0,32,False\n",
         "a100/attention.csv:3: block_size: 32 differs from 16 of the rows before"},
        {"a100/mlp.csv", MLP_HDR MLP_OK, "a100/attention.csv", ATTN_HDR ",,256,4,2,16,1,1,0,32,False\n",
         "a100/attention.csv:2: time_stats.attn_decode.median: \"\" is not a number"},
        {"a100/mlp.csv", MLP_HDR MLP_OK, "a100/all_reduce.csv",
         ",time_stats.all_reduce.median,num_workers,n_embd\n0,0.01,2,256\n",
         "a100/all_reduce.csv:1: missing column \"size\" (or \"n_embd\" and \"num_tokens\")"},
        {"a100/mlp.csv", MLP_HDR MLP_OK, "a100/all_reduce.csv",
         ",time_stats.all_reduce.median,num_workers,n_embd,num_tokens\n0,0.01,2,256,x\n",
         "a100/all_reduce.csv:2: num_tokens: \"x\" is not an integer"},
        {"a100/mlp.csv", MLP_HDR MLP_OK, "a100/send_recv.csv",
         ",time_stats.send_recv.median,num_workers,size,devices_per_node\n0,0.01,2,2048,0\n",
         "a100/send_recv.csv:2: devices_per_node: 0 is outside"},
        /* two sources of one table */
        {"a100/mlp.csv", MLP_HDR MLP_OK, "a100/meta-llama/Tiny-Test-hf/mlp.csv", MLP_HDR MLP_OK,
         ": a100/mlp.csv [tiny-test] and a100/meta-llama/Tiny-Test-hf both import as a100-80g/tiny-test"},
        /* a per-model folder holds one model */
        {"a100/m/mlp.csv", MLP_HDR MLP_OK "0.1,4,2,512,688,1024,True,2,1\n", NULL, NULL,
         "a100/m/mlp.csv:3: n_embd: 512 differs from 256 on line 2 (one model per file)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[256], src[512], out[512];
        hs_err err = {0};
        make_tmpdir(dir, sizeof dir);
        snprintf(src, sizeof src, "%s/in", dir);
        snprintf(out, sizeof out, "%s/out", dir);
        put(src, cases[i].f1, cases[i].t1);
        if (cases[i].f2) put(src, cases[i].f2, cases[i].t2);
        CHECK(hs_vidur_import_all(src, out, NULL, &err) < 0);
        CHECK(strstr(err.msg, cases[i].msg) != NULL);
        if (!strstr(err.msg, cases[i].msg)) fprintf(stderr, "case %zu: %s\n", i, err.msg);
        CHECK(access(out, F_OK) != 0); /* nothing written */
        rm_rf(dir);
    }
}

/* Every one-byte change of the old fixture's files either imports or fails
 * with an error naming a file: nothing crashes (run under ASan/UBSan in the
 * sanitized build). */
static void test_mutations(void)
{
    static const char *const files[] = {"a100/mlp.csv", "a100/attention.csv", "a100/all_reduce.csv",
                                        "a100/send_recv.csv"};
    static const char subst[] = {',', '\n', 'x', '-', '0', '9', '\0'};
    char old[1024], dir[256], src[512], out[512], cmd[2200];
    int runs = 0, fails = 0, bad = 0;
    snprintf(old, sizeof old, "%s/tests/fixtures/vidur_old/old", hs_data_root());
    make_tmpdir(dir, sizeof dir);
    snprintf(src, sizeof src, "%s/in", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", old, src);
    if (system(cmd) != 0) { perror("cp"); exit(2); }
    for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
        char path[600], *text;
        long n;
        FILE *f;
        snprintf(path, sizeof path, "%s/%s", src, files[fi]);
        if (!(f = fopen(path, "rb"))) { perror(path); exit(2); }
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        rewind(f);
        text = malloc((size_t)n + 1);
        if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) exit(2);
        fclose(f);
        /* a spread of positions, every substitution, plus truncations */
        for (long pos = 0; pos < n; pos += 1 + n / 16)
            for (size_t k = 0; k <= sizeof subst; k++) {
                hs_err err = {0};
                int rc;
                if (!(f = fopen(path, "wb"))) exit(2);
                if (k < sizeof subst) {
                    fwrite(text, 1, (size_t)pos, f);
                    fputc(subst[k], f);
                    fwrite(text + pos + 1, 1, (size_t)(n - pos - 1), f);
                } else {
                    fwrite(text, 1, (size_t)pos, f); /* cut short */
                }
                fclose(f);
                rc = hs_vidur_import_all(src, out, NULL, &err);
                runs++;
                if (rc) {
                    fails++;
                    bad += rc > 0 || !strstr(err.msg, ".csv");
                    if (rc > 0 || !strstr(err.msg, ".csv")) fprintf(stderr, "%s @%ld: %s\n", files[fi], pos, err.msg);
                }
            }
        if (!(f = fopen(path, "wb"))) exit(2);
        fwrite(text, 1, (size_t)n, f);
        fclose(f);
        free(text);
    }
    printf("mutations: %d imports, %d refused\n", runs, fails);
    CHECK(runs > 100 && fails > 0);
    CHECK_INT(bad, 0);
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
    /* lm_head from mlp_up x vocab / (g ffn): Llama-2-7B 32768 / (2 x 11008),
     * phi-2 (not gated) 51200 / 10240 */
    CHECK_OK(hs_vidur_import_ex(&t, vd, "a100", "meta-llama/Llama-2-7b-hf", "", HS_VIDUR_LM_HEAD, NULL, &err), &err);
    if (t) {
        CHECK_INT(t->n_dense, 9324 + 1036);
        CHECK_NEAR(dense_us(t, HS_OP_MLP_UP, 1, 4096), (3365.5 + 3324) / 2, 1e-6);
        CHECK_NEAR(dense_us(t, HS_OP_LM_HEAD, 1, 4096), (3365.5 + 3324) / 2 * 32768 / 22016, 1e-6);
        CHECK_REL(dense_us(t, HS_OP_LM_HEAD, 8, 1), dense_us(t, HS_OP_MLP_UP, 8, 1) * 32768 / 22016, 1e-12);
        hs_ptable_destroy(t);
    }
    CHECK_OK(hs_vidur_import_ex(&t, vd, "a40", "microsoft/phi-2", "", HS_VIDUR_LM_HEAD, NULL, &err), &err);
    if (t) {
        CHECK_INT(t->n_dense, 2331 + 259);
        CHECK_REL(dense_us(t, HS_OP_LM_HEAD, 1, 512), dense_us(t, HS_OP_MLP_UP, 1, 512) * 5, 1e-12);
        CHECK_STR(t->meta.model, "phi-2");
        hs_ptable_destroy(t);
    }
    /* import_all: every table lands on a model of models/ */
    {
        static const char *const want[] = {"a100-80g/qwen-72b", "a100-80g/codellama-34b", "a100-80g/internlm-20b",
                                           "a100-80g/llama-2-70b", "a100-80g/llama-2-7b", "a100-80g/llama-3-70b",
                                           "a100-80g/llama-3-8b", "a100-80g/phi-2", "a40/qwen-72b",
                                           "a40/codellama-34b", "a40/internlm-20b", "a40/llama-2-70b",
                                           "a40/llama-2-7b", "a40/phi-2"};
        FILE *log = tmpfile();
        make_tmpdir(dir, sizeof dir);
        CHECK_OK(hs_vidur_import_all(vd, dir, log, &err), &err);
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            hs_model m;
            snprintf(sub, sizeof sub, "%s/%s", dir, want[i]);
            CHECK_OK(hs_ptable_read(&u, sub, &err), &err);
            if (!u) continue;
            CHECK_OK(hs_model_find(&m, u->meta.model, &err), &err);
            CHECK(hs_ptable_has_op(u, HS_OP_LM_HEAD, 1, 16));
            CHECK(strstr(u->meta.source, "; lm_head synthesised from mlp_up x N ratio") != NULL);
            hs_ptable_destroy(u);
            u = NULL;
        }
        if (log) {
            const char *txt = slurp(log);
            int lines = 0;
            for (const char *q = txt; (q = strchr(q, '\n')); q++) lines++;
            CHECK_INT(lines, 15); /* 14 kernel tables and H100's collectives */
            CHECK(strstr(txt, "a100/meta-llama/Llama-2-7b-hf -> ") != NULL);
            CHECK(strstr(txt, "/a100-80g/llama-2-7b: 10360 dense, 0 decode, 0 prefill, 2979 all-reduce, 993 send/recv "
                              "rows; 1036 lm_head rows synthesised from mlp_up; skipped 3976 all-reduce rows spanning "
                              "nodes, 994 send/recv rows spanning nodes\n") != NULL);
            CHECK(strstr(txt, "a100/meta-llama/Meta-Llama-3-70B -> ") != NULL);
            CHECK(strstr(txt, "/a100-80g/llama-3-70b: 18040 dense, 10112 decode, 4206 prefill") != NULL);
            /* H100: Vidur measured collectives, no kernels */
            CHECK(strstr(txt, "network/h100_dgx -> ") != NULL);
            CHECK(strstr(txt, "/h100-sxm-80g/_network: 0 dense, 0 decode, 0 prefill, 2979 all-reduce, 993 send/recv rows") != NULL);
            fclose(log);
        }
        /* the collectives-only table reads back, with no kernels and no model */
        snprintf(sub, sizeof sub, "%s/h100-sxm-80g/_network", dir);
        CHECK_OK(hs_ptable_read(&u, sub, &err), &err);
        if (u) {
            hs_curve cv;
            CHECK_STR(u->meta.model, "");
            CHECK_STR(u->meta.gpu, "h100-sxm-80g");
            CHECK_INT((int)u->n_dense, 0);
            CHECK_INT((int)u->n_comm[HS_COMM_ALLREDUCE], 2979);
            CHECK_OK(hs_ptable_allreduce_curve(u, 8, &cv, &err), &err);
            CHECK(cv.n > 0 && hs_curve_eval(&cv, 1 << 20) > 0);
            hs_curve_free(&cv);
            hs_ptable_destroy(u);
            u = NULL;
        }
        snprintf(sub, sizeof sub, "%s/h100-sxm-80g/_network/dense.csv", dir);
        CHECK(access(sub, F_OK) != 0);
        rm_rf(dir);
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
    test_lm_head();
    test_layouts();
    test_malformed_old();
    test_mutations();
    test_real();
    return hs_check_result();
}
