/* test_chrome.c - the Chrome trace writer (out/chrome.h) on whole runs:
 * the file is valid JSON (parsed back with cJSON), has one complete event
 * per engine iteration with fast-forward on and off (each step of a
 * fast-forwarded run is its own event), lanes' iterations never overlap,
 * every preemption is an instant event, every KV hand-over a begin/end
 * pair on the receiving replica, the limit cuts and says so, and a failed
 * run or an unwritable path leaves no file.  What Perfetto's JSON importer
 * needs beyond the format: no pid or tid 0 (its idle task), a tid that
 * names one lane of one replica (it keys thread names by tid alone),
 * displayTimeUnit first and otherData after the events. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L  /* mkdtemp */
#endif
#include "out/chrome.h"

#include <cjson/cJSON.h>
#include <unistd.h>

#include "check.h"
#include "core/conf.h"
#include "fixture.h"

static char dir[64];

static const char *tmp_path(const char *name)
{
    static char p[8][128];
    static int k;
    char *s = p[k++ % 8];
    snprintf(s, 128, "%s/%s", dir, name);
    return s;
}

/* What a parsed trace holds, with its structural checks done. */
typedef struct summary {
    int64_t iters, preempts, kv_b, kv_e, names, threads, cut, bad;
    int64_t tokens;         /* sum of args.tokens over iterations */
    cJSON *root;
} summary;

static const cJSON *member(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = member(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* The file's text (caller frees), for checks on key order. */
static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!fp) return NULL;
    if (!fseek(fp, 0, SEEK_END) && (n = ftell(fp)) >= 0 && !fseek(fp, 0, SEEK_SET) && (buf = malloc((size_t)n + 1))) {
        buf[fread(buf, 1, (size_t)n, fp)] = '\0';
    }
    fclose(fp);
    return buf;
}

/* Parses path and checks every event against the trace-event format:
 * fields each phase needs, per (pid, tid) iterations in time order without
 * overlap (written at their ends, per lane in order), b/e paired by id;
 * pid = replica + 1, tid = pid * 10000 + lane (never 0, unique per lane). */
static summary read_trace(const char *path, int32_t n_replicas)
{
    summary s = {0};
    hs_err err = {0};
    char *text = slurp(path);
    CHECK(text != NULL);
    if (text) {
        /* displayTimeUnit is read from the first chunk only; keys after an
         * unknown one are skipped by older importers, so the events come
         * before otherData */
        const char *ev = strstr(text, "\"traceEvents\""), *od = strstr(text, "\"otherData\"");
        static const char head[] = "{\"displayTimeUnit\":\"ms\",";
        CHECK(!strncmp(text, head, sizeof head - 1));
        CHECK(ev != NULL && od != NULL && ev < od);
        free(text);
    }
    CHECK_OK(hs_json_load(path, &s.root, &err), &err);
    if (!s.root) return s;
    const cJSON *evs = member(s.root, "traceEvents");
    CHECK(cJSON_IsArray(evs));
    /* last end per (replica, lane), 64 lanes of 64 replicas at most here */
    static double last_end[64][64];
    static int open_kv[4096];
    memset(last_end, 0, sizeof last_end);
    memset(open_kv, 0, sizeof open_kv);
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *ph = member(e, "ph");
        const cJSON *name = member(e, "name");
        const cJSON *args = member(e, "args");
        /* back to 0-based replica and lane */
        double rpid = num(e, "pid"), rtid = num(e, "tid");
        int pid = (int)rpid - 1, tid = (int)(rtid - rpid * 10000);
        if (!cJSON_IsString(ph) || !cJSON_IsString(name) || rpid < 1 || rtid < 1 || pid >= n_replicas || tid < 0 ||
            tid >= 64) {
            s.bad++;
            continue;
        }
        char p = ph->valuestring[0];
        if (p == 'M') {
            char want[32];
            s.names += !strcmp(name->valuestring, "process_name");
            if (!strcmp(name->valuestring, "thread_name")) {
                /* the tid Perfetto names is the lane's own */
                snprintf(want, sizeof want, "lane %d", tid);
                s.threads++;
                if (!cJSON_IsString(member(args, "name")) || strcmp(member(args, "name")->valuestring, want)) s.bad++;
            }
        } else if (p == 'X') {
            double ts = num(e, "ts"), dur = num(e, "dur");
            s.iters++;
            if (ts < 0 || dur < 0 || !cJSON_IsObject(args) || num(args, "tokens") < 0 ||
                num(args, "kv_used") > num(args, "kv_total") || ts < last_end[pid][tid])
                s.bad++;
            else
                last_end[pid][tid] = ts + dur;
            s.tokens += (int64_t)num(args, "tokens");
        } else if (p == 'i') {
            const cJSON *sc = member(e, "s");
            if (!cJSON_IsString(sc) || num(e, "ts") < 0) s.bad++;
            else if (!strcmp(sc->valuestring, "t")) s.preempts++;
            else s.cut++;
        } else if (p == 'b' || p == 'e') {
            int id = (int)num(e, "id");
            if (id < 0 || id >= 4096 || num(e, "ts") < 0) {
                s.bad++;
                continue;
            }
            if (p == 'b') s.kv_b++, open_kv[id]++;
            else s.kv_e++, open_kv[id]--;
            if (open_kv[id] < 0 || open_kv[id] > 1) s.bad++;
        } else {
            s.bad++;
        }
    }
    return s;
}

/* Runs o with a trace written to path (limit: iterations); returns the
 * engine's result. */
static fx_result run_traced(fx_opts *o, const char *path, int64_t limit, int32_t n_replicas)
{
    fx_result x;
    hs_chrome *c = NULL;
    hs_err err = {0};
    CHECK_OK(hs_chrome_open(&c, path, limit, &err), &err);
    for (int32_t i = 0; i < n_replicas; i++) hs_chrome_replica(c, i, "colocated", "gpu:0", 1);
    o->tl = hs_chrome_timeline(c);
    CHECK_OK(fx_run(o, &x, &err), &err);
    CHECK_OK(hs_chrome_close(c, 0, &err), &err);
    o->tl = NULL;
    return x;
}

static void test_iterations_and_preemptions(void)
{
    fx_opts o;
    fx_pressure(&o, "6", 120);
    o.max_replicas = 1;
    fx_result on = run_traced(&o, tmp_path("ff.json"), 0, 1);
    summary a = read_trace(tmp_path("ff.json"), 1);
    CHECK(on.iterations > 100);
    CHECK(on.preemptions > 0);
    CHECK_INT(a.bad, 0);
    CHECK_INT(a.iters, on.iterations);
    CHECK_INT(a.preempts, on.preemptions);
    CHECK_INT(a.names, 1);
    CHECK_INT(a.threads, 1);
    CHECK_INT(a.cut, 0);
    printf("pressure: %lld iterations, %lld preemptions, %lld tokens in the trace\n", (long long)a.iters,
           (long long)a.preempts, (long long)a.tokens);

    /* fast-forward off: the same iterations, one event each, the same batches */
    o.ec.fast_forward = 0;
    fx_result off = run_traced(&o, tmp_path("noff.json"), 0, 1);
    summary b = read_trace(tmp_path("noff.json"), 1);
    CHECK_INT(off.iterations, on.iterations);
    CHECK_INT(b.bad, 0);
    CHECK_INT(b.iters, a.iters);
    CHECK_INT(b.tokens, a.tokens);
    CHECK_INT(b.preempts, a.preempts);
    cJSON_Delete(a.root);
    cJSON_Delete(b.root);
    fx_free(&on);
    fx_free(&off);
}

static void test_handovers(void)
{
    fx_opts o;
    fx_defaults(&o);
    o.prefill_replicas = 3;
    o.wc.max_requests = 150;
    fx_result x = run_traced(&o, tmp_path("disagg.json"), 0, 8);
    summary s = read_trace(tmp_path("disagg.json"), 8);
    CHECK_INT(s.bad, 0);
    CHECK_INT(s.iters, x.iterations);
    CHECK_INT(s.names, 8);
    CHECK_INT(s.threads, 8);
    /* every completed request was prefilled on one replica and decoded on
     * another: one hand-over each, begun and ended */
    CHECK_INT(s.kv_b, x.completed);
    CHECK_INT(s.kv_e, s.kv_b);
    cJSON_Delete(s.root);
    fx_free(&x);
}

static void test_limit_and_failures(void)
{
    fx_opts o;
    hs_err err = {0};
    hs_chrome *c = NULL;
    fx_pressure(&o, "6", 40);
    o.max_replicas = 1;
    fx_result x = run_traced(&o, tmp_path("cut.json"), 25, 1);
    summary s = read_trace(tmp_path("cut.json"), 1);
    CHECK_INT(s.bad, 0);
    CHECK_INT(s.iters, 25);
    CHECK_INT(s.cut, 1);
    const cJSON *e, *evs = member(s.root, "traceEvents");
    cJSON_ArrayForEach(e, evs)
        if (!strcmp(member(e, "ph")->valuestring, "i") && !strcmp(member(e, "s")->valuestring, "g"))
            CHECK_INT((int64_t)num(member(e, "args"), "iterations_left_out"), x.iterations - 25);
    cJSON_Delete(s.root);
    fx_free(&x);

    /* a discarded trace (a failed run) leaves no file, nor its temporary */
    const char *p = tmp_path("discard.json");
    CHECK_OK(hs_chrome_open(&c, p, 0, &err), &err);
    CHECK_OK(hs_chrome_close(c, 1, &err), &err);
    CHECK(access(p, F_OK) != 0);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    CHECK(access(tmp, F_OK) != 0);

    /* a path that cannot be created: one line naming it */
    CHECK_INT(hs_chrome_open(&c, "/nonexistent-dir/t.json", 0, &err), HS_EIO);
    CHECK(c == NULL);
    CHECK(strstr(err.msg, "/nonexistent-dir/t.json.tmp") != NULL);
    printf("unwritable: %s\n", err.msg);
    CHECK_OK(hs_chrome_close(NULL, 0, &err), &err);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/hs_test_chrome_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_iterations_and_preemptions();
    test_handovers();
    test_limit_and_failures();
    static const char *const files[] = {"ff.json", "noff.json", "disagg.json", "cut.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(tmp_path(files[i]));
    rmdir(dir);
    return hs_check_result();
}
