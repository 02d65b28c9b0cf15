/* test_encdec.c - encoder-decoder models (T5-11B) in the runtime.
 *
 * 1. The model's ratios and memory: a decoder layer's cross-attention
 *    projections and the cross K/V projection, by hand from T5's shapes;
 *    encoder layers placed on a stage; an encoder-only stage holds the
 *    encoder output per prompt token, not KV.
 * 2. The latency terms hs_perf_build derives for encoder-decoder layouts,
 *    against one-layer tables of the same builder on a bare model.
 * 3. Deployments: enc_layers parsed, written back, placed by default, and
 *    wrong layer sums refused with one line naming the replica.
 * 4. Exact timelines of one query (prompt 100, output 3):
 *    vllm - encoding yields no token; three decoding steps, the first
 *      giving the TTFT (D = S steps, not S - 1);
 *    static - the same batch of one, the same times;
 *    waa - the encoder replica (encoder layers only) sends the encoder
 *      output (100 x hidden x 2 bytes) to the decoder replica, whose first
 *      step also projects its cross-attention KV.
 * 5. Many queries under vllm, rra and waa: every arrival finishes with its
 *    full output, tokens and ITLs add up, the audit holds after every event.
 * 6. Policies that chunk prompts or split attention refuse encoder-decoder
 *    models with one line. */
#include <math.h>

#include "check.h"
#include "fixture.h"

#define T5_ENC_LAYER (1024.0 * 16384 * 4 + 2.0 * 1024 * 65536 + 2 * 1024)

static void test_model(void)
{
    hs_model m;
    hs_err err = {0};
    hs_stage_mem a, b;
    CHECK_OK(hs_model_find(&m, "t5-11b", &err), &err);
    /* attention h(q + 2kv) + q h, MLP 2 h f, two RMS norms */
    CHECK_NEAR(hs_model_enc_layer_params(&m), T5_ENC_LAYER, 0);
    CHECK_NEAR(hs_model_dec_ratio(&m), 1 + 2.0 * 1024 * 16384 / T5_ENC_LAYER, 1e-12);
    CHECK_NEAR(hs_model_cross_kv_ratio(&m), 2.0 * 1024 * 16384 / T5_ENC_LAYER, 1e-12);
    CHECK_INT(hs_model_max_context(&m), 1024);
    /* encoder-only first stage: 12 encoder layers and the embedding; the
     * encoder output (FP16 hidden) per prompt token instead of KV */
    hs_model_stage_mem_enc(&m, 0, 12, 1, 0, 1, 16, 16, 1, 1, &a);
    CHECK_NEAR(a.weights, (12 * T5_ENC_LAYER + hs_model_embed_params(&m)) * 2, 1e-3);
    CHECK_NEAR(a.kv_per_token, 1024 * 2, 0);
    /* both kinds on a middle stage: KV of the decoder layers only */
    hs_model_stage_mem_enc(&m, 6, 6, 0, 0, 2, 16, 16, 1, 1, &b);
    CHECK_NEAR(b.weights, (6 * hs_model_layer_params(&m) + 6 * T5_ENC_LAYER) * 2 / 2, 1e-3);
    CHECK_NEAR(b.kv_per_token, 6 * hs_model_kv_bytes_token_layer(&m, 2, 16), 0);
    /* the legacy form puts every encoder layer on the first stage */
    hs_model_stage_mem(&m, 12, 1, 0, 1, 16, 16, 1, 1, &a);
    hs_model_stage_mem_enc(&m, 12, 24, 1, 0, 1, 16, 16, 1, 1, &b);
    CHECK_NEAR(a.weights, b.weights, 0);
    CHECK_OK(hs_model_find(&m, "llama-2-7b", &err), &err);
    CHECK_NEAR(hs_model_dec_ratio(&m), 1, 0);
    CHECK_NEAR(hs_model_cross_kv_ratio(&m), 0, 0);
    CHECK_INT(hs_model_max_context(&m), m.max_seq_len);
}

static void one_stage(hs_layout *l, int layers, int enc, int gpu)
{
    memset(l, 0, sizeof *l);
    l->pp = 1;
    l->kv_bits = 16;
    l->enc_set = 1;
    l->stage[0].tp = 1;
    l->stage[0].layers = layers;
    l->stage[0].enc_layers = enc;
    l->stage[0].bits = 16;
    l->stage[0].gpus[0] = gpu;
}

static void roofline(hs_perf_cfg *pc)
{
    hs_perf_cfg_defaults(pc);
    snprintf(pc->model, sizeof pc->model, "roofline");
}

static void test_perf_terms(void)
{
    hs_model m, bare;
    hs_cluster *c = NULL;
    hs_err err = {0};
    hs_perf_cfg pc;
    hs_layout l, one;
    hs_perf p, ref, dec;
    double rd, fkv;
    roofline(&pc);
    CHECK_OK(hs_model_find(&m, "t5-11b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "exegpt-a40x8", &err), &err);
    rd = hs_model_dec_ratio(&m);
    fkv = hs_model_cross_kv_ratio(&m);
    /* RRA-style: both stages hold 12 encoder and 12 decoder layers */
    memset(&l, 0, sizeof l);
    l.pp = 2;
    l.kv_bits = 16;
    l.enc_set = 1;
    for (int s = 0; s < 2; s++) {
        l.stage[s].tp = 1;
        l.stage[s].layers = 12;
        l.stage[s].enc_layers = 12;
        l.stage[s].bits = 16;
        l.stage[s].gpus[0] = s;
    }
    CHECK_OK(hs_perf_build(&p, &pc, &m, c, &l, 2048, 64, &err), &err);
    /* reference: one bare layer (a decoder-only view), and the embedding */
    bare = m;
    bare.encoder_layers = 0;
    memset(&one, 0, sizeof one);
    one.pp = 2;
    one.kv_bits = 16;
    one.stage[0] = l.stage[0];
    one.stage[0].layers = one.stage[0].enc_layers = 0;
    one.stage[1] = one.stage[0];
    one.stage[1].layers = 1;
    CHECK_OK(hs_perf_build(&ref, &pc, &bare, c, &one, 2048, 64, &err), &err);
    for (int t = 1; t <= 2048; t += 341) {
        double emb = ref.stage[0].dense[t], lay = ref.stage[1].dense[t];
        CHECK(emb > 0 && lay > 0);
        /* and each encoder layer's attention cost per query row */
        double tok = 12 * ref.stage[1].pre_tok * t;
        CHECK_REL(p.stage[0].enc[t], emb + (12 + 12 * fkv) * lay + tok, 1e-12);
        CHECK_REL(p.stage[1].enc[t], (12 + 12 * fkv) * lay + tok, 1e-12);
        CHECK_REL(p.stage[0].dense[t], emb + 12 * rd * lay, 1e-12);
        CHECK_REL(p.stage[1].dense[t], 12 * rd * lay, 1e-12);
    }
    CHECK_REL(p.stage[1].dec_fixed, 2 * 12 * ref.stage[1].dec_fixed, 1e-12);
    CHECK_REL(p.stage[1].dec_seq, 2 * 12 * ref.stage[1].dec_seq, 1e-12);
    CHECK_REL(p.stage[1].dec_ctx, 12 * ref.stage[1].dec_ctx, 1e-12);
    CHECK_REL(p.stage[1].enc_fixed, 12 * ref.stage[1].pre_fixed, 1e-12);
    CHECK_REL(p.stage[1].enc_pair, 12 * ref.stage[1].pre_cross, 1e-12);
    {
        /* hs_perf_stage_ns: the encoding term beside the others */
        hs_batch_shape b = {0};
        b.enc_tokens = 300;
        b.enc_pairs = 100.0 * 100 + 200.0 * 200;
        CHECK_REL(hs_perf_stage_ns(&p, 1, &b),
                  p.stage[1].enc[300] + p.stage[1].enc_fixed + p.stage[1].enc_pair * b.enc_pairs, 1e-12);
        b.tokens = b.samples = b.dec_seqs = 4;
        b.dec_ctx = 400;
        CHECK_REL(hs_perf_stage_ns(&p, 1, &b),
                  p.stage[1].enc[300] + p.stage[1].enc_fixed + p.stage[1].enc_pair * b.enc_pairs +
                      p.stage[1].dense[4] + p.stage[1].head[4] + p.stage[1].dec_fixed +
                      p.stage[1].dec_seq * 4 + p.stage[1].dec_ctx * 400, 1e-12);
    }
    /* a decoder replica (no encoder layer) projects cross KV, no embedding */
    one_stage(&l, 24, 0, 3);
    CHECK_OK(hs_perf_build(&dec, &pc, &m, c, &l, 2048, 64, &err), &err);
    CHECK_REL(dec.stage[0].enc[500], 24 * fkv * ref.stage[1].dense[500], 1e-12);
    CHECK_NEAR(dec.stage[0].enc_pair, 0, 0);
    /* decoder-only models have no encoding term */
    hs_perf_free(&ref);
    CHECK_OK(hs_perf_build(&ref, &pc, &bare, c, &one, 2048, 64, &err), &err);
    CHECK(ref.stage[0].enc == NULL && ref.stage[1].enc == NULL);
    hs_perf_free(&ref);
    /* encoder layers for a model with no encoder are refused */
    one.stage[1].enc_layers = 2;
    CHECK(hs_perf_build(&ref, &pc, &bare, c, &one, 2048, 64, &err) == HS_ERANGE);
    hs_perf_free(&ref);
    hs_perf_free(&p);
    hs_perf_free(&dec);
    hs_cluster_destroy(c);
}

/* Reads a deployment from text and checks it against T5 (or `model`). */
static int deploy_text(hs_deploy *d, const char *model, const char *text, hs_err *err)
{
    hs_model m;
    hs_cluster *c = NULL;
    int rc;
    const char *path = hs_test_tmpfile("encdec_dep", text);
    memset(d, 0, sizeof *d);
    if ((rc = hs_model_find(&m, model, err)) || (rc = hs_cluster_find(&c, "exegpt-a40x8", err)))
        return rc;
    if (!(rc = hs_deploy_read(d, path, err)) && (rc = hs_deploy_check(d, &m, c, "dep", err)))
        hs_deploy_free(d);
    hs_cluster_destroy(c);
    return rc;
}

#define REP(role, stages) "{\"role\":\"" role "\",\"stages\":[" stages "]}"
#define DEP(model, reps) "{\"model\":\"" model "\",\"cluster\":\"exegpt-a40x8\",\"replicas\":[" reps "]}"

static void test_deploy(void)
{
    hs_deploy d, d2;
    hs_err err = {0};
    hs_model m;
    hs_layout l;
    char *txt;
    CHECK_OK(hs_model_find(&m, "t5-11b", &err), &err);
    /* given explicitly, and written back */
    CHECK_OK(deploy_text(&d, "t5-11b",
                         DEP("t5-11b", REP("prefill", "{\"tp\":1,\"layers\":0,\"enc_layers\":24,\"gpus\":[0]}") ","
                                       REP("decode", "{\"tp\":2,\"layers\":24,\"enc_layers\":0,\"gpus\":[1,2]}")),
                         &err), &err);
    CHECK_INT(d.r[0].layout.stage[0].enc_layers, 24);
    CHECK_INT(d.r[0].layout.stage[0].layers, 0);
    CHECK_INT(d.r[0].layout.enc_set, 1);
    txt = hs_deploy_to_json(&d);
    CHECK(txt && strstr(txt, "\"enc_layers\":24"));
    if (txt) {
        CHECK_OK(deploy_text(&d2, "t5-11b", txt, &err), &err);
        CHECK_INT(d2.r[0].layout.stage[0].enc_layers, 24);
        CHECK_INT(d2.r[1].layout.stage[0].layers, 24);
        hs_deploy_free(&d2);
    }
    free(txt);
    hs_deploy_free(&d);
    /* default placement: with the decoder layers; none on a decode replica */
    one_stage(&l, 0, 0, 0);
    l.pp = 2;
    l.enc_set = 0;
    l.stage[0].layers = 16;
    l.stage[1] = l.stage[0];
    l.stage[1].layers = 8;
    hs_layout_place_enc(&l, &m, "colocated");
    CHECK_INT(l.stage[0].enc_layers, 16);
    CHECK_INT(l.stage[1].enc_layers, 8);
    CHECK_INT(l.enc_set, 1);
    l.enc_set = 0;
    hs_layout_place_enc(&l, &m, "decode");
    CHECK_INT(l.stage[0].enc_layers + l.stage[1].enc_layers, 0);
    /* an encoder replica with no decoder layer: by GPUs (tp 3 and 1) */
    l.enc_set = 0;
    l.stage[0].layers = l.stage[1].layers = 0;
    l.stage[0].tp = 3;
    hs_layout_place_enc(&l, &m, "prefill");
    CHECK_INT(l.stage[0].enc_layers, 18);
    CHECK_INT(l.stage[1].enc_layers, 6);
    /* a colocated T5 without enc_layers gets the whole encoder */
    CHECK_OK(deploy_text(&d, "t5-11b", DEP("t5-11b", REP("colocated", "{\"tp\":2,\"layers\":24,\"gpus\":[0,1]}")),
                         &err), &err);
    hs_deploy_free(&d);
    /* refusals, one line each, naming the replica */
    CHECK(deploy_text(&d, "t5-11b",
                      DEP("t5-11b", REP("colocated", "{\"tp\":1,\"layers\":24,\"enc_layers\":20,\"gpus\":[0]}")),
                      &err) == HS_EINVAL);
    CHECK(strstr(err.msg, "replicas[0]: stages hold 20 encoder layers, t5-11b has 24") != NULL);
    CHECK(!strchr(err.msg, '\n'));
    CHECK(deploy_text(&d, "t5-11b",
                      DEP("t5-11b", REP("colocated", "{\"tp\":1,\"layers\":0,\"enc_layers\":24,\"gpus\":[0]}")),
                      &err) == HS_EINVAL);
    CHECK(strstr(err.msg, "stages hold 0 decoder layers") != NULL);
    CHECK(deploy_text(&d, "t5-11b",
                      DEP("t5-11b", REP("colocated", "{\"tp\":1,\"layers\":24,\"enc_layers\":24,\"gpus\":[0]},"
                                                     "{\"tp\":1,\"layers\":0,\"enc_layers\":0,\"gpus\":[1]}")),
                      &err) == HS_ERANGE);
    CHECK(strstr(err.msg, "stages[1].layers") && strstr(err.msg, "at least one layer"));
    CHECK(deploy_text(&d, "t5-11b",
                      DEP("t5-11b", REP("prefill", "{\"tp\":1,\"layers\":0,\"enc_layers\":24,\"gpus\":[0]}") ","
                                    REP("decode", "{\"tp\":1,\"layers\":24,\"enc_layers\":24,\"gpus\":[1]}")),
                      &err) == HS_EINVAL);
    CHECK(strstr(err.msg, "replicas[1]: a decode replica holds no encoder layer") != NULL);
    CHECK(deploy_text(&d, "llama-2-7b",
                      DEP("llama-2-7b", REP("colocated", "{\"tp\":1,\"layers\":32,\"enc_layers\":2,\"gpus\":[0]}")),
                      &err) == HS_EINVAL);
    CHECK(strstr(err.msg, "enc_layers: llama-2-7b has no encoder") != NULL);
    CHECK(deploy_text(&d, "t5-11b",
                      DEP("t5-11b", REP("colocated", "{\"tp\":1,\"layers\":24,\"enc_layers\":-1,\"gpus\":[0]}")),
                      &err) != 0);
    CHECK(strstr(err.msg, "enc_layers") != NULL);
}

/* ---- runs of a deployment given as text --------------------------------------- */

typedef struct run_out {
    fx_result x;
    hs_perf perf[2];          /* the replicas' tables, rebuilt alike */
    int n_rep;
} run_out;

static const char *one_query(void)
{
    return hs_test_tmpfile("encdec_q", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                       "2024-01-01 00:00:00.0000000,100,3\n");
}

/* blocks > 0 cuts replica 0's KV blocks; mml > 0 sets the context limit. */
static int run_dep_kv(const char *dep, const char *policy, const hs_workload_cfg *wc, int64_t blocks,
                      int32_t mml_set, run_out *o, hs_err *err)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_deploy d;
    hs_replica *reps = NULL;
    fx_opts fo;
    int rc, max_tokens;
    int32_t mml;
    memset(o, 0, sizeof *o);
    memset(&d, 0, sizeof d);
    fx_defaults(&fo);
    fo.policy = policy;
    fo.wc = *wc;
    roofline(&fo.pc);
    fo.ec.audit = 1;
    fx_popt(&fo, "static_batch", "8");
    fx_popt(&fo, "exegpt_be", "4");
    fx_popt(&fo, "exegpt_nd", "2");
    fx_popt(&fo, "exegpt_adjust", "0");
    if (!hs_policy_find(policy)) return hs_errf(err, HS_ENOTFOUND, "policy %s", policy);
    if ((rc = hs_model_find(&m, "t5-11b", err)) || (rc = hs_cluster_find(&c, "exegpt-a40x8", err)))
        return rc;
    mml = mml_set > 0 ? mml_set : hs_model_max_context(&m);
    max_tokens = hs_engine_pass_tokens(&fo.ec, hs_policy_find(policy), fx_popts(&fo), mml);
    if ((rc = deploy_text(&d, "t5-11b", dep, err))) goto out;
    if ((rc = hs_replicas_build(&reps, &d, &m, c, &fo.ec, &fo.pc, max_tokens, mml, err))) goto out;
    if (blocks > 0) reps[0].kv_blocks = blocks;
    /* the replicas' tables, rebuilt alike for the hand computations */
    for (int i = 0; i < d.n && i < 2; i++) {
        hs_layout l = d.r[i].layout;
        hs_layout_place_enc(&l, &m, d.r[i].role);
        if ((rc = hs_perf_build(&o->perf[i], &fo.pc, &m, c, &l, max_tokens, fo.ec.max_num_seqs, err))) goto out;
        o->n_rep = i + 1;
    }
    rc = fx_run_replicas(&fo, &fo.ec, reps, d.n, mml, c, &o->x, err);
out:
    hs_replicas_free(reps, d.n);
    hs_deploy_free(&d);
    hs_cluster_destroy(c);
    return rc;
}

static int run_dep(const char *dep, const char *policy, const hs_workload_cfg *wc, run_out *o,
                   hs_err *err)
{
    return run_dep_kv(dep, policy, wc, 0, 0, o, err);
}

/* Runs a trace given as Azure-format CSV rows ("prompt,output" per line
 * after the header, all at t = 0). */
static int run_csv(const char *rows, const char *dep, const char *policy, int64_t blocks, int32_t mml,
                   run_out *o, hs_err *err)
{
    char text[512];
    hs_workload_cfg wc;
    snprintf(text, sizeof text, "TIMESTAMP,ContextTokens,GeneratedTokens\n%s", rows);
    hs_workload_defaults(&wc);
    hs_workload_set(&wc, "kind", "azure", NULL);
    hs_workload_set(&wc, "path", hs_test_tmpfile("encdec_csv", text), NULL);
    return run_dep_kv(dep, policy, &wc, blocks, mml, o, err);
}

static void run_free(run_out *o)
{
    for (int i = 0; i < o->n_rep; i++) hs_perf_free(&o->perf[i]);
    fx_free(&o->x);
}

static void trace_wc(hs_workload_cfg *wc, const char *path)
{
    hs_workload_defaults(wc);
    hs_workload_set(wc, "kind", "azure", NULL);
    hs_workload_set(wc, "path", path, NULL);
}

#define COLOC DEP("t5-11b", REP("colocated", "{\"tp\":1,\"layers\":24,\"gpus\":[0]}"))
#define SPLIT DEP("t5-11b", REP("prefill", "{\"tp\":1,\"layers\":0,\"enc_layers\":24,\"gpus\":[0]}") "," \
                            REP("decode", "{\"tp\":1,\"layers\":24,\"gpus\":[1]}"))

/* Encoding of one 100-token prompt, then steps with contexts 101..103. */
static void test_one_query(void)
{
    run_out v, s, w;
    hs_workload_cfg wc;
    hs_err err = {0};
    hs_batch_shape enc = {0}, dec;
    hs_ns e0, e1, e2, e3;
    trace_wc(&wc, one_query());
    enc.enc_tokens = enc.enc_new = 100;
    enc.enc_pairs = 100.0 * 100;
    enc.enc_seqs = 1;  /* the host prepares the prompt as a prefill's */
    CHECK_OK(run_dep(COLOC, "vllm", &wc, &v, &err), &err);
    CHECK_INT(v.x.n, 1);
    if (v.x.n == 1 && v.n_rep == 1) {
        const hs_req_record *r = &v.x.rec[0];
        e0 = fx_step(&v.perf[0], 0, &enc);
        dec = fx_decode(1, 101);
        e1 = fx_step(&v.perf[0], e0, &dec);
        dec.dec_ctx = 102;
        e2 = fx_step(&v.perf[0], e1, &dec);
        dec.dec_ctx = 103;
        e3 = fx_step(&v.perf[0], e2, &dec);
        CHECK_INT(r->first_sched, 0);
        CHECK_INT(r->first_token, e1); /* not e0: encoding yields no token */
        CHECK_INT(r->finish, e3);
        CHECK_INT(r->output, 3);
        CHECK_INT(v.x.itl_count, 2);
        CHECK_NEAR(v.x.itl_sum_ns, (double)(e3 - e1), 0.5);
        /* FasterTransformer's batch of one: the same steps */
        CHECK_OK(run_dep(COLOC, "static", &wc, &s, &err), &err);
        CHECK_INT(s.x.n, 1);
        if (s.x.n == 1) {
            CHECK_INT(s.x.rec[0].first_token, e1);
            CHECK_INT(s.x.rec[0].finish, e3);
            CHECK_INT(s.x.rec[0].output, 3);
            CHECK_INT(s.x.itl_count, 2);
        }
        run_free(&s);
    }
    run_free(&v);
    /* WAA: encoder replica on GPU 0, decoder on GPU 1 */
    CHECK_OK(run_dep(SPLIT, "waa", &wc, &w, &err), &err);
    CHECK_INT(w.x.n, 1);
    if (w.x.n == 1 && w.n_rep == 2) {
        const hs_req_record *r = &w.x.rec[0];
        hs_cluster *c = NULL;
        double bytes = 100.0 * 1024 * 2, dur;
        hs_ns land;
        CHECK_OK(hs_cluster_find(&c, "exegpt-a40x8", &err), &err);
        e0 = fx_step(&w.perf[0], 0, &enc);
        dur = bytes * 1e9 / hs_cluster_bw(c, 0, 1);
        land = e0 + hs_ns_from_s(hs_cluster_lat(c, 0, 1)) + (hs_ns)ceil(dur - (dur * 1e-13 + 1e-6));
        dec = fx_decode(1, 101);
        dec.enc_tokens = 100; /* the cross-attention K/V projection */
        e1 = fx_step(&w.perf[1], land, &dec);
        dec.enc_tokens = 0;
        dec.dec_ctx = 102;
        e2 = fx_step(&w.perf[1], e1, &dec);
        dec.dec_ctx = 103;
        e3 = fx_step(&w.perf[1], e2, &dec);
        CHECK_INT(r->replica, 1);
        CHECK_INT(r->first_token, e1);
        CHECK_INT(r->finish, e3);
        CHECK_INT(r->output, 3);
        /* the projection is in the first step: it is longer than the second */
        CHECK(e1 - land > e2 - e1);
        hs_cluster_destroy(c);
    }
    run_free(&w);
}

/* Recompute after preemption.  A and B (prompt 60, output 60) share a lane
 * of 12 blocks of 16 tokens: B, the later, is preempted after g tokens and
 * waits for A.  Its recompute encodes the prompt again (encoder and cross
 * K/V projection) and runs the decoder over its g tokens (causal pairs and
 * pairs against the prompt), sampling token g + 1; it then decodes alone.
 * Exactly one g reproduces B's finish to the nanosecond. */
static void test_recompute(void)
{
    run_out o;
    hs_err err = {0};
    CHECK_OK(run_csv("2024-01-01 00:00:00.0000000,60,60\n"
                     "2024-01-01 00:00:00.0000000,60,60\n",
                     COLOC, "vllm", 12, 128, &o, &err), &err);
    CHECK_INT(o.x.n, 2);
    if (o.x.n == 2 && o.n_rep == 1) {
        const hs_req_record *a = fx_find(&o.x, 0), *b = fx_find(&o.x, 1);
        int found = 0, at = -1;
        CHECK(a && b);
        if (a && b) {
            CHECK_INT(a->preemptions, 0);
            CHECK_INT(b->preemptions, 1);
            CHECK_INT(b->output, 60);
            CHECK(b->finish > a->finish);
            for (int g = 1; g < 60; g++) {
                hs_batch_shape r = {0};
                hs_ns t;
                r.enc_tokens = r.enc_new = 60;
                r.enc_pairs = 60.0 * 60;
                r.enc_seqs = 1;
                r.tokens = g;
                r.pre_chunks = 1;
                r.pre_self = g * (g + 1) / 2.0;
                r.pre_tokens = g;
                r.pre_cross = 60.0 * g;
                r.samples = 1;
                t = fx_step(&o.perf[0], a->finish, &r);
                for (int i = 0; i < 60 - (g + 1); i++) {
                    hs_batch_shape d = fx_decode(1, 60 + g + i + 1);
                    t = fx_step(&o.perf[0], t, &d);
                }
                if (t == b->finish) {
                    found++;
                    at = g;
                }
            }
            printf("recompute: B preempted after %d tokens\n", at);
            CHECK_INT(found, 1);
        }
    }
    run_free(&o);
}

/* T5's window (512) bounds each side: a 600-token prompt is dropped, a
 * 700-token output stops at 512, though prompt + output fit the default
 * context limit of 1024. */
static void test_window(void)
{
    run_out o;
    hs_err err = {0};
    CHECK_OK(run_csv("2024-01-01 00:00:00.0000000,600,3\n"
                     "2024-01-01 00:00:00.0000000,100,700\n",
                     COLOC, "vllm", 0, 0, &o, &err), &err);
    CHECK_INT(o.x.n, 2);
    CHECK_INT(o.x.dropped, 1);
    CHECK_INT(o.x.completed, 1);
    {
        const hs_req_record *a = fx_find(&o.x, 0), *b = fx_find(&o.x, 1);
        CHECK(a && a->dropped && a->why && strstr(a->why, "encoder's window"));
        CHECK(b && !b->dropped && b->output == 512);
    }
    run_free(&o);
}

/* Many queries, lengths drawn from ExeGPT's task S: all finish with their
 * whole output and the books balance (the audit runs after every event). */
static void test_many(void)
{
    static const struct { const char *dep, *policy; } cases[] = {
        {COLOC, "vllm"},
        {COLOC, "static"},
        {COLOC, "rra"},
        {SPLIT, "waa"},
        {DEP("t5-11b", REP("colocated", "{\"tp\":1,\"layers\":12,\"gpus\":[0]},{\"tp\":1,\"layers\":12,\"gpus\":[1]}")),
         "rra"},
        /* a prefill replica holding the decoder too: it projects the cross
         * KV itself and hands the KV over */
        {DEP("t5-11b", REP("prefill", "{\"tp\":1,\"layers\":24,\"gpus\":[0]}") ","
                       REP("decode", "{\"tp\":1,\"layers\":24,\"gpus\":[1]}")),
         "vllm"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_out o;
        hs_workload_cfg wc;
        hs_err err = {0};
        int64_t bad = 0, tokens = 0, out = 0;
        hs_workload_defaults(&wc);
        hs_workload_set(&wc, "preset", "S", NULL);
        hs_workload_set(&wc, "rate", "40", NULL);
        wc.max_requests = 300;
        CHECK_OK(run_dep(cases[i].dep, cases[i].policy, &wc, &o, &err), &err);
        CHECK_INT(o.x.arrivals, 300);
        CHECK_INT(o.x.completed, 300);
        CHECK(!o.x.clock_back);
        for (int64_t k = 0; k < o.x.n; k++) {
            const hs_req_record *r = &o.x.rec[k];
            bad += !(r->arrival <= r->first_sched && r->first_sched < r->first_token &&
                     r->first_token <= r->finish && r->output >= 1);
            tokens += r->output;
            out++;
        }
        CHECK_INT(bad, 0);
        /* every token but each query's first is an inter-token interval */
        CHECK_INT(o.x.itl_count, tokens - out);
        printf("%-6s %-9s %lld queries, %lld tokens, %lld preemptions\n", cases[i].policy,
               strstr(cases[i].dep, "prefill") ? "split" : "colocated", (long long)out,
               (long long)tokens, (long long)o.x.preemptions);
        run_free(&o);
    }
}

static void test_refusals(void)
{
    static const char *const pols[] = {"sarathi", "pq", "hetis"};
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++) {
        run_out o;
        hs_workload_cfg wc;
        hs_err err = {0};
        trace_wc(&wc, one_query());
        CHECK(run_dep(COLOC, pols[i], &wc, &o, &err) == HS_EUNSUPPORTED);
        CHECK(strstr(err.msg, "does not run encoder-decoder models") != NULL);
        CHECK(strstr(err.msg, pols[i]) != NULL);
        run_free(&o);
    }
}

int main(void)
{
    hs_test_root();
    test_model();
    test_perf_terms();
    test_deploy();
    test_one_query();
    test_recompute();
    test_window();
    test_many();
    test_refusals();
    return hs_check_result();
}
