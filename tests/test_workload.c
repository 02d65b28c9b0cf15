/* test_workload.c - trace readers, generators, presets, config and stats.
 *
 * Fixtures: the tiny synthetic CSV/JSON files in traces/, written by the
 * project; their numbers follow closed formulas restated below.  Malformed
 * inputs are written to a fresh mkdtemp() directory.  With HS_SHARED_DATA set, the real
 * Azure 2023 and ShareGPT-stats traces are read in full and compared with the
 * figures in shared/data/README.md; otherwise that part prints a skip line. */
#include "check.h"

#include <time.h>
#include <unistd.h>

#include "workload/workload.h"
#include "workload/workload_int.h"

static char root[1024];   /* repository root */
static char tmpdir[256];  /* scratch directory for malformed fixtures */
static char tmpfiles[64][512];
static int ntmpfiles;

static void find_root(void)
{
    const char *env = getenv("HS_ROOT");
    if (env && *env) {
        snprintf(root, sizeof root, "%s", env);
    } else {
#ifdef HS_SOURCE_ROOT
        snprintf(root, sizeof root, "%s", HS_SOURCE_ROOT);
        return;
#endif /* __FILE__ is .../tests/test_workload.c */
        const char *slash;
        snprintf(root, sizeof root, "%s", __FILE__);
        slash = strstr(root, "tests/test_workload.c");
        if (slash == root) snprintf(root, sizeof root, ".");
        else if (slash) root[slash - root - 1] = '\0';
        else snprintf(root, sizeof root, ".");
    }
}

static const char *fixture(const char *name)
{
    static char buf[4][1200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/traces/%s", root, name);
    return buf[k];
}

static const char *write_tmp(const char *name, const char *text)
{
    static char buf[4][512];
    static int k;
    FILE *fp;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    fp = fopen(buf[k], "wb");
    if (!fp) {
        perror(buf[k]);
        exit(2);
    }
    fputs(text, fp);
    fclose(fp);
    if (ntmpfiles < 64) snprintf(tmpfiles[ntmpfiles++], sizeof tmpfiles[0], "%s", buf[k]);
    return buf[k];
}

/* Reads a whole source into a (malloc'ed) array; returns count or the error. */
static int64_t drain(const hs_workload_cfg *cfg, hs_arrival **out, hs_err *err)
{
    hs_source *s;
    hs_arrival a, *v = NULL;
    int64_t n = 0, cap = 0;
    int rc = hs_source_open(&s, cfg, err);
    if (rc) {
        *out = NULL;
        return rc;
    }
    while ((rc = hs_source_next(s, &a, err)) == 1) {
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            v = realloc(v, (size_t)cap * sizeof *v);
        }
        v[n++] = a;
    }
    hs_source_close(s);
    *out = v;
    return rc < 0 ? rc : n;
}

/* Every source's contract: ids 0.. in order, arrivals non-decreasing, lengths >= 1. */
static void check_contract(const hs_arrival *v, int64_t n)
{
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        if (v[i].id != i || v[i].prompt < 1 || v[i].output < 1) ok = 0;
        if (i > 0 && v[i].arrival < v[i - 1].arrival) ok = 0;
    }
    CHECK(ok);
}

static hs_workload_cfg trace_cfg(const char *kind, const char *path)
{
    hs_workload_cfg c;
    hs_workload_defaults(&c);
    snprintf(c.kind, sizeof c.kind, "%s", kind);
    snprintf(c.path, sizeof c.path, "%s", path);
    return c;
}

/* ---- timestamps -------------------------------------------------------- */

static hs_ns ts(const char *s)
{
    hs_ns t = -1;
    const char *why = NULL;
    if (hs__parse_timestamp(s, strlen(s), &t, &why) < 0) {
        fprintf(stderr, "timestamp \"%s\": %s\n", s, why);
        return -1;
    }
    return t;
}

static int ts_bad(const char *s)
{
    hs_ns t;
    const char *why = NULL;
    return hs__parse_timestamp(s, strlen(s), &t, &why) < 0 && why != NULL;
}

static void test_timestamps(void)
{
    CHECK_INT(hs__days_from_civil(1970, 1, 1), 0);
    CHECK_INT(hs__days_from_civil(1969, 12, 31), -1);
    CHECK_INT(hs__days_from_civil(2000, 3, 1), 11017);
    CHECK_INT(hs__days_from_civil(2024, 2, 29), 19782);
    CHECK_INT(hs__days_from_civil(1600, 1, 1), -135140);

    /* 2023 form: 7 fractional digits, no zone (UTC) */
    CHECK_INT(ts("2023-11-16 18:15:46.6805900"), INT64_C(1700158546680590000));
    /* 2024 form: 6 digits and a zone; the fraction is sometimes absent */
    CHECK_INT(ts("2024-05-10 00:00:00.009930+00:00"), INT64_C(1715299200009930000));
    CHECK_INT(ts("2024-05-10 00:00:00+00:00"), INT64_C(1715299200000000000));
    CHECK_INT(ts("2024-05-10 00:00:00"), INT64_C(1715299200000000000));
    CHECK_INT(ts("2024-05-10T00:00:00Z"), INT64_C(1715299200000000000));
    CHECK_INT(ts("2024-05-10 02:00:00+02:00"), INT64_C(1715299200000000000));
    CHECK_INT(ts("2024-05-10 02:00:00+0200"), INT64_C(1715299200000000000));
    CHECK_INT(ts("2024-05-10 00:00:00-05:30"), INT64_C(1715319000000000000));
    CHECK_INT(ts("2024-05-09 18:30:00-05:30"), INT64_C(1715299200000000000));
    CHECK_INT(ts("2024-05-10 00:00:00.5"), INT64_C(1715299200500000000));
    CHECK_INT(ts("2024-05-10 00:00:00.123456789"), INT64_C(1715299200123456789));
    CHECK_INT(ts("2024-05-10 00:00:00.1234567891"), INT64_C(1715299200123456789)); /* sub-ns truncated */
    CHECK_INT(ts("2024-02-29 00:00:00") - ts("2024-02-28 00:00:00"), 86400 * HS_NS_PER_S);
    CHECK_INT(ts("2024-01-01 00:00:00") - ts("2023-12-31 23:59:59.9999999"), 100);

    CHECK(ts_bad("2023-02-29 00:00:00"));       /* not a leap year */
    CHECK(ts_bad("2023-13-01 00:00:00"));
    CHECK(ts_bad("2023-11-16 24:00:00"));
    CHECK(ts_bad("2023-11-16 18:61:00"));
    CHECK(ts_bad("2023-11-16 18:15"));
    CHECK(ts_bad("2023-11-16 18:15:46."));
    CHECK(ts_bad("2023-11-16 18:15:46.68x"));
    CHECK(ts_bad("2023/11/16 18:15:46"));
    CHECK(ts_bad("2023-11-16"));
    CHECK(ts_bad("2024-05-10 00:00:00+25:00"));
    CHECK(ts_bad(""));
}

/* ---- Azure fixtures ---------------------------------------------------- */

/* traces/azure-mini.csv: row i (0..49) at 2023-12-31 23:59:40.1234567 +
 * i * 0.5 s + (i % 7) * 100 ns (crosses into 2024), ContextTokens
 * 50 + (37 i mod 1000), GeneratedTokens 1 + (13 i mod 250). */
static hs_ns mini_off(int i) { return (hs_ns)i * 500000000 + (i % 7) * 100; }
static int mini_prompt(int i) { return 50 + (37 * i) % 1000; }
static int mini_output(int i) { return 1 + (13 * i) % 250; }

static void test_azure_mini(void)
{
    hs_workload_cfg c = trace_cfg("azure", fixture("azure-mini.csv"));
    hs_arrival *v;
    hs_err err = {0};
    int64_t n;
    int ok;

    n = drain(&c, &v, &err);
    CHECK_INT(n, 50);
    check_contract(v, n);
    ok = n == 50;
    for (int i = 0; ok && i < 50; i++)
        ok = v[i].arrival == mini_off(i) && v[i].prompt == mini_prompt(i) &&
             v[i].output == mini_output(i);
    CHECK(ok);
    free(v);

    /* window [5 s, 10 s): rows 10..19, arrivals relative to 5 s */
    c.window_start = 5;
    c.window_end = 10;
    n = drain(&c, &v, &err);
    CHECK_INT(n, 10);
    ok = n == 10;
    for (int i = 0; ok && i < 10; i++)
        ok = v[i].id == i && v[i].arrival == mini_off(10 + i) - 5 * HS_NS_PER_S &&
             v[i].prompt == mini_prompt(10 + i);
    CHECK(ok);
    CHECK_INT(v[0].arrival, 300);
    free(v);

    /* time_scale 2 halves the offsets; max_requests cuts the count */
    c.time_scale = 2;
    c.max_requests = 4;
    n = drain(&c, &v, &err);
    CHECK_INT(n, 4);
    CHECK_INT(v[3].arrival, (mini_off(13) - 5 * HS_NS_PER_S) / 2);
    CHECK_INT(v[3].output, mini_output(13));
    free(v);

    /* window past the end: nothing, not an error */
    c = trace_cfg("azure", fixture("azure-mini.csv"));
    c.window_start = 1000;
    CHECK_INT(drain(&c, &v, &err), 0);
    free(v);

    /* 2024 form: row i at 2024-02-28 23:59:58 + i * 0.25 s + (i odd) 9.93 ms,
     * "+00:00" zone, no fraction when it is zero, crossing the leap day. */
    c = trace_cfg("azure", fixture("azure-mini-2024.csv"));
    n = drain(&c, &v, &err);
    CHECK_INT(n, 20);
    check_contract(v, n);
    ok = n == 20;
    for (int i = 0; ok && i < 20; i++)
        ok = v[i].arrival == (hs_ns)i * 250000000 + (i % 2) * 9930000 &&
             v[i].prompt == 200 + 11 * i && v[i].output == 3 + i;
    CHECK(ok);
    free(v);
}

/* Opens a source on `text` and reads it to the end; returns the final rc. */
static int read_text(const char *name, const char *text, int64_t *count, hs_err *err)
{
    hs_workload_cfg c = trace_cfg("azure", write_tmp(name, text));
    hs_source *s;
    hs_arrival a;
    int rc = hs_source_open(&s, &c, err);
    *count = 0;
    if (rc) return rc;
    while ((rc = hs_source_next(s, &a, err)) == 1) (*count)++;
    if (rc < 0) { /* a failed source keeps failing */
        hs_err e2 = {0};
        CHECK(hs_source_next(s, &a, &e2) < 0);
    }
    hs_source_close(s);
    return rc;
}

#define HDR "TIMESTAMP,ContextTokens,GeneratedTokens\n"
#define R1 "2023-11-16 18:15:46.6805900,374,44\n"
#define R2 "2023-11-16 18:15:50.9951690,396,109\n"

/* Expects an HS_EPARSE naming "<name>:<line>:" and containing `what`. */
static void expect_bad(const char *name, const char *text, int line, const char *what)
{
    hs_err err = {0};
    int64_t n;
    char want[64];
    int rc = read_text(name, text, &n, &err);
    snprintf(want, sizeof want, "%s:%d: ", name, line);
    CHECK_INT(rc, HS_EPARSE);
    if (!strstr(err.msg, want) || !strstr(err.msg, what))
        fprintf(stderr, "  expected \"%s...%s\" in: %s\n", want, what, err.msg);
    CHECK(strstr(err.msg, want) != NULL);
    CHECK(strstr(err.msg, what) != NULL);
}

static void test_azure_malformed(void)
{
    hs_err err = {0};
    int64_t n;
    hs_workload_cfg c;
    hs_source *s;
    hs_arrival a;

    expect_bad("cols.csv", HDR R1 R2 "2023-11-16 18:15:51.0000000,1\n", 4, "expected 3 columns, found 2");
    expect_bad("cols4.csv", HDR R1 "2023-11-16 18:15:51.0000000,1,2,3\n", 3, "found 4");
    expect_bad("num.csv", HDR R1 "2023-11-16 18:15:51.0000000,12a,5\n", 3, "ContextTokens \"12a\" is not a number");
    expect_bad("neg.csv", HDR R1 R2 R2 "2023-11-16 18:15:51.0000000,10,-5\n", 5, "GeneratedTokens \"-5\" is negative");
    expect_bad("frac.csv", HDR "2023-11-16 18:15:51.0000000,10.5,5\n", 2, "is not an integer");
    expect_bad("huge.csv", HDR R1 "2023-11-16 18:15:51.0000000,20000000,5\n", 3, "absurd");
    expect_bad("empty.csv", HDR R1 "2023-11-16 18:15:51.0000000,,5\n", 3, "is empty");
    expect_bad("back.csv", HDR R1 R2 R2 "2023-11-16 18:15:49.0000000,10,5\n", 5, "goes backwards");
    expect_bad("ts.csv", HDR R1 "2023-11-16 18:15:5x.0000000,10,5\n", 3, "TIMESTAMP");
    expect_bad("blank.csv", HDR "\n\n" R1 "bad line\n", 5, "expected 3 columns");

    /* header problems are errors at open */
    c = trace_cfg("azure", write_tmp("hdr.csv", "time,prompt,output\n" R1));
    CHECK_INT(hs_source_open(&s, &c, &err), HS_EPARSE);
    CHECK(strstr(err.msg, "hdr.csv:1: unrecognised header") != NULL);
    c = trace_cfg("azure", write_tmp("nothing.csv", "\n\n"));
    CHECK_INT(hs_source_open(&s, &c, &err), HS_EPARSE);
    CHECK(strstr(err.msg, "empty file") != NULL);
    c = trace_cfg("azure", fixture("sharegpt-mini.csv")); /* wrong format for the kind */
    CHECK_INT(hs_source_open(&s, &c, &err), HS_EPARSE);
    CHECK(strstr(err.msg, "expected TIMESTAMP,ContextTokens,GeneratedTokens") != NULL);

    /* accepted: CRLF, BOM, blank lines, equal timestamps, reordered columns */
    CHECK_INT(read_text("crlf.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                        "2023-11-16 18:15:46.6805900,374,44\r\n"
                        "2023-11-16 18:15:46.6805900,375,45\r\n\r\n\r\n", &n, &err), 0);
    CHECK_INT(n, 2);
    CHECK_INT(read_text("bom.csv", "\xEF\xBB\xBF" HDR R1 "\n" R2 "\n\n", &n, &err), 0);
    CHECK_INT(n, 2);
    c = trace_cfg("azure", write_tmp("order.csv", "GeneratedTokens,TIMESTAMP,ContextTokens\n"
                                     "7,2023-11-16 18:15:46,11\n"));
    CHECK_OK(hs_source_open(&s, &c, &err), &err);
    CHECK_INT(hs_source_next(s, &a, &err), 1);
    CHECK_INT(a.prompt, 11);
    CHECK_INT(a.output, 7);
    hs_source_close(s);

    /* zero token counts are raised to 1 and counted */
    c = trace_cfg("azure", write_tmp("zero.csv", HDR "2024-05-10 00:00:00+00:00,0,5\n"
                                     "2024-05-10 00:00:01+00:00,10,0\n"));
    CHECK_OK(hs_source_open(&s, &c, &err), &err);
    CHECK_INT(hs_source_next(s, &a, &err), 1);
    CHECK_INT(a.prompt, 1);
    CHECK_INT(hs_source_next(s, &a, &err), 1);
    CHECK_INT(a.output, 1);
    CHECK_INT(a.arrival, HS_NS_PER_S);
    CHECK_INT(hs__source_clamped(s), 2);
    hs_source_close(s);

    /* max_prompt: a longer prompt is an error at its line */
    c = trace_cfg("azure", fixture("azure-mini.csv"));
    c.max_prompt = 600;
    CHECK_OK(hs_source_open(&s, &c, &err), &err);
    n = 0;
    while (hs_source_next(s, &a, &err) == 1) n++;
    CHECK_INT(n, 15); /* row 15 (line 17) has 50 + 555 = 605 tokens */
    CHECK(strstr(err.msg, "azure-mini.csv:17: prompt of 605 tokens exceeds max_prompt 600") != NULL);
    hs_source_close(s);
}

/* ---- ShareGPT ---------------------------------------------------------- */

static void test_sharegpt(void)
{
    hs_workload_cfg c = trace_cfg("sharegpt-csv", fixture("sharegpt-mini.csv"));
    hs_arrival *v, *w;
    hs_err err = {0};
    int64_t n;
    int ok;
    /* JSON fixture: estimated tokens round(bytes/4) per the first human->gpt exchange */
    static const int jp[] = {5, 7, 100, 4, 3}, jo[] = {8, 18, 250, 2, 1};

    /* rows in file order: prefill 10(i+1)+3, decode 5(i+1); constant 4 req/s */
    snprintf(c.arrival, sizeof c.arrival, "constant");
    c.rate = 4;
    n = drain(&c, &v, &err);
    CHECK_INT(n, 20);
    check_contract(v, n);
    ok = n == 20;
    for (int i = 0; ok && i < 20; i++)
        ok = v[i].prompt == 10 * (i + 1) + 3 && v[i].output == 5 * (i + 1) &&
             v[i].arrival == (hs_ns)i * 250000000;
    CHECK(ok);
    free(v);

    c.duration = 2; /* arrivals 0 .. 1.75 s */
    CHECK_INT(drain(&c, &v, &err), 8);
    free(v);
    c.duration = 0;
    c.max_requests = 5;
    c.time_scale = 2;
    n = drain(&c, &v, &err);
    CHECK_INT(n, 5);
    CHECK_INT(v[4].arrival, 500000000);
    free(v);

    /* poisson arrivals: deterministic for a seed */
    c = trace_cfg("sharegpt-csv", fixture("sharegpt-mini.csv"));
    c.seed = 42;
    n = drain(&c, &v, &err);
    CHECK_INT(drain(&c, &w, &err), n);
    CHECK(n == 20 && memcmp(v, w, (size_t)n * sizeof *v) == 0);
    check_contract(v, n);
    free(v);
    free(w);

    c = trace_cfg("sharegpt-json", fixture("sharegpt-mini.json"));
    snprintf(c.arrival, sizeof c.arrival, "constant");
    c.rate = 1;
    n = drain(&c, &v, &err);
    CHECK_INT(n, 5);
    check_contract(v, n);
    ok = n == 5;
    for (int i = 0; ok && i < 5; i++)
        ok = v[i].prompt == jp[i] && v[i].output == jo[i] && v[i].arrival == i * HS_NS_PER_S;
    CHECK(ok);
    free(v);
    CHECK_INT(hs__tokens_estimate(0), 1);
    CHECK_INT(hs__tokens_estimate(5), 1);
    CHECK_INT(hs__tokens_estimate(6), 2);
    CHECK_INT(hs__tokens_estimate(400), 100);

    {
        hs__pairs p = {0};
        CHECK_OK(hs__pairs_load_json(&p, fixture("sharegpt-mini.json"), 0, &err), &err);
        CHECK_INT(p.n, 5);
        CHECK_INT(p.skipped, 3);
        hs__pairs_free(&p);
        CHECK_INT(hs__pairs_load_json(&p, fixture("sharegpt-mini.json"), 50, &err), HS_EPARSE);
        CHECK(strstr(err.msg, "conversation 3 (id \"a4\"): prompt of 100 tokens exceeds max_prompt 50") != NULL);
        hs__pairs_free(&p);
        CHECK_INT(hs__pairs_load_json(&p, write_tmp("obj.json", "{\"a\": 1}"), 0, &err), HS_EPARSE);
        CHECK(strstr(err.msg, "expected a JSON array") != NULL);
        CHECK_INT(hs__pairs_load_json(&p, write_tmp("turn.json",
                  "[{\"id\":\"x\",\"conversations\":[{\"from\":\"human\",\"value\":3},{\"from\":\"gpt\",\"value\":\"a\"}]}]"),
                  0, &err), HS_EPARSE);
        CHECK(strstr(err.msg, "conversation 0 (id \"x\"): turn 0: \"value\"") != NULL);
        CHECK_INT(hs__pairs_load_json(&p, write_tmp("syntax.json", "[\n{\"id\": 1,\n]"), 0, &err), HS_EPARSE);
        CHECK(strstr(err.msg, "syntax.json:") != NULL);
        hs__pairs_free(&p);
    }

    /* malformed sharegpt csv names its line */
    c = trace_cfg("sharegpt-csv", write_tmp("sg.csv", "num_prefill_tokens,num_decode_tokens\n5,6\n7,x\n"));
    CHECK_INT(drain(&c, &v, &err), HS_EPARSE);
    CHECK(strstr(err.msg, "sg.csv:3: num_decode_tokens \"x\" is not a number") != NULL);
    free(v);
}

/* ---- synthetic --------------------------------------------------------- */

typedef struct moments { double mean, sd, min, max; } moments;

static moments gaps_of(const hs_arrival *v, int64_t n)
{
    moments m = {0, 0, 1e300, 0};
    double s = 0, s2 = 0;
    for (int64_t i = 1; i < n; i++) {
        double g = hs_ns_to_s(v[i].arrival - v[i - 1].arrival);
        s += g;
        s2 += g * g;
    }
    m.mean = s / (double)(n - 1);
    m.sd = sqrt(s2 / (double)(n - 1) - m.mean * m.mean);
    return m;
}

static moments lens_of(const hs_arrival *v, int64_t n, int output)
{
    moments m = {0, 0, 1e300, 0};
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = output ? v[i].output : v[i].prompt;
        s += x;
        s2 += x * x;
        if (x < m.min) m.min = x;
        if (x > m.max) m.max = x;
    }
    m.mean = s / (double)n;
    m.sd = sqrt(s2 / (double)n - m.mean * m.mean);
    return m;
}

static hs_workload_cfg synth_cfg(int64_t n)
{
    hs_workload_cfg c;
    hs_err err = {0};
    hs_workload_defaults(&c);
    CHECK_OK(hs_workload_set(&c, "preset", "", &err), &err);
    c.max_requests = n;
    return c;
}

static void set_side(hs_lendist *d, const char *kind, double mean, double sd, double lo, double hi)
{
    snprintf(d->kind, sizeof d->kind, "%s", kind);
    d->mean = mean;
    d->std = sd;
    d->min = lo;
    d->max = hi;
}

static void test_synthetic(void)
{
    const int64_t N = 200000;
    hs_workload_cfg c = synth_cfg(N);
    hs_arrival *v, *w;
    hs_err err = {0};
    moments m;
    int64_t n;

    /* poisson: exponential gaps, CV 1 */
    c.rate = 100;
    set_side(&c.prompt, "uniform", 0, 0, 10, 20);
    set_side(&c.output, "fixed", 7, 0, 1, 1);
    n = drain(&c, &v, &err);
    CHECK_INT(n, N);
    check_contract(v, n);
    CHECK_INT(v[0].arrival, 0);
    m = gaps_of(v, n);
    CHECK_REL(m.mean, 0.01, 0.01);
    CHECK_REL(m.sd / m.mean, 1.0, 0.02);
    m = lens_of(v, n, 0);
    CHECK_REL(m.mean, 15, 0.005);
    CHECK_NEAR(m.sd, sqrt((11.0 * 11.0 - 1) / 12), 0.02);
    CHECK_INT(m.min, 10);
    CHECK_INT(m.max, 20);
    m = lens_of(v, n, 1);
    CHECK(m.min == 7 && m.max == 7);

    /* same seed, same sequence; another seed, another one */
    CHECK_INT(drain(&c, &w, &err), N);
    CHECK(memcmp(v, w, (size_t)N * sizeof *v) == 0);
    free(w);
    c.seed = 2;
    CHECK_INT(drain(&c, &w, &err), N);
    CHECK(memcmp(v, w, (size_t)N * sizeof *v) != 0);
    free(w);
    free(v);

    /* gamma with CV 3 */
    c.seed = 1;
    snprintf(c.arrival, sizeof c.arrival, "gamma");
    c.cv = 3;
    c.rate = 10;
    n = drain(&c, &v, &err);
    check_contract(v, n);
    m = gaps_of(v, n);
    CHECK_REL(m.mean, 0.1, 0.03);
    CHECK_REL(m.sd / m.mean, 3, 0.06);
    free(v);

    /* constant: exactly i / rate even for a rate that is not a whole ns */
    snprintf(c.arrival, sizeof c.arrival, "constant");
    c.rate = 3;
    c.max_requests = 3000001;
    n = drain(&c, &v, &err);
    CHECK_INT(v[3000000].arrival, 1000000 * HS_NS_PER_S);
    CHECK_INT(v[1].arrival, 333333333);
    CHECK_INT(v[2].arrival, 666666667);
    free(v);
    c.max_requests = 0;
    c.duration = 10; /* arrivals 0, 1/3, ... 29/3 */
    CHECK_INT(drain(&c, &v, &err), 30);
    free(v);

    /* truncated normal: bounds hold, mean of a symmetric truncation stays */
    c = synth_cfg(N);
    set_side(&c.prompt, "normal", 100, 30, 50, 150);
    set_side(&c.output, "normal", 10, 20, 1, 1000); /* heavy truncation at 1 */
    n = drain(&c, &v, &err);
    m = lens_of(v, n, 0);
    CHECK(m.min >= 50 && m.max <= 150);
    CHECK_NEAR(m.mean, 100, 0.3);
    /* sd of N(100, 30) truncated to +-50 (+-1.667 sd): 30 * sqrt(1 - 2 a phi(a) / (2 Phi(a) - 1)) */
    CHECK_NEAR(m.sd, 30 * sqrt(1 - 2 * 1.6833 * 0.09913 / (2 * 0.95221 - 1)), 0.3);
    m = lens_of(v, n, 1);
    CHECK(m.min >= 1 && m.max <= 1000);
    CHECK(m.mean > 17 && m.mean < 21); /* truncated below: mean rises above 10 */
    free(v);

    /* lognormal: mean/std are those of the lengths */
    set_side(&c.prompt, "lognormal", 500, 300, 1, 1e6);
    set_side(&c.output, "lognormal", 50, 100, 5, 200); /* clamped into [5, 200] */
    n = drain(&c, &v, &err);
    m = lens_of(v, n, 0);
    CHECK_REL(m.mean, 500, 0.01);
    CHECK_REL(m.sd, 300, 0.03);
    m = lens_of(v, n, 1);
    CHECK(m.min == 5 && m.max == 200);
    free(v);

    /* max_prompt clamps generated prompts */
    c.max_prompt = 400;
    n = drain(&c, &v, &err);
    m = lens_of(v, n, 0);
    CHECK_INT(m.max, 400);
    free(v);

    /* joint (prompt, output) resampling from a trace file */
    c = synth_cfg(5000);
    set_side(&c.prompt, "trace", 0, 0, 0, 0);
    set_side(&c.output, "trace", 0, 0, 0, 0);
    snprintf(c.path, sizeof c.path, "%s", fixture("sharegpt-mini.csv"));
    n = drain(&c, &v, &err);
    CHECK_INT(n, 5000);
    {
        int ok = 1, seen_min = 0, seen_max = 0;
        for (int64_t i = 0; i < n; i++) {
            ok &= v[i].prompt == 2 * v[i].output + 3 && v[i].output % 5 == 0 &&
                  v[i].output >= 5 && v[i].output <= 100;
            seen_min |= v[i].output == 5;
            seen_max |= v[i].output == 100;
        }
        CHECK(ok && seen_min && seen_max);
    }
    free(v);
    snprintf(c.path, sizeof c.path, "%s", fixture("azure-mini.csv"));
    n = drain(&c, &v, &err);
    CHECK_INT(n, 5000);
    {
        int ok = 1;
        for (int64_t i = 0; i < n; i++) {
            int k, found = 0;
            for (k = 0; k < 50 && !found; k++)
                found = v[i].prompt == mini_prompt(k) && v[i].output == mini_output(k);
            ok &= found;
        }
        CHECK(ok);
    }
    free(v);
}

/* ---- presets ----------------------------------------------------------- */

static hs_trace_stats preset_stats(const char *name, int64_t n, hs_workload_cfg *out)
{
    hs_workload_cfg c;
    hs_trace_stats st;
    hs_source *s = NULL;
    hs_err err = {0};
    memset(&st, 0, sizeof st);
    hs_workload_defaults(&c);
    CHECK_OK(hs_workload_set(&c, "preset", name, &err), &err);
    c.max_requests = n;
    if (out) *out = c;
    CHECK_OK(hs_source_open(&s, &c, &err), &err);
    if (s) CHECK_OK(hs_trace_stats_compute(s, &st, &err), &err);
    hs_source_close(s);
    printf("preset %s (n=%lld):\n", name, (long long)n);
    hs_trace_stats_print(&st, stdout);
    return st;
}

static void test_presets(void)
{
    static const struct { const char *name; double in_mean, in_max, out_p99, out_max; } exegpt[] = {
        {"S", 256, 512, 63, 80}, {"T", 128, 256, 292, 320}, {"G", 64, 128, 417, 480},
        {"C1", 256, 512, 137, 160}, {"C2", 512, 1024, 579, 640},
    };
    const int64_t N = 200000;
    hs_workload_cfg c;
    hs_trace_stats st;
    hs_err err = {0};
    hs_arrival *v;
    double mu, sigma;

    /* the fit reproduces mean and p99 exactly */
    CHECK_OK(hs__lognormal_fit_mean_p99(1154.7, 4142, &mu, &sigma), &err);
    CHECK_NEAR(exp(mu + sigma * sigma / 2), 1154.7, 1e-9);
    CHECK_NEAR(exp(mu + 2.326347874 * sigma), 4142, 1e-4);
    CHECK(hs__lognormal_fit_mean_p99(10, 5, &mu, &sigma) < 0);

    /* defaults are the azure-conv preset */
    hs_workload_defaults(&c);
    CHECK_STR(c.preset, "azure-conv");
    CHECK_STR(c.kind, "synthetic");
    CHECK_STR(c.prompt.kind, "lognormal");
    CHECK_INT(drain(&c, &v, &err), 2000); /* default count of a preset */
    free(v);

    st = preset_stats("azure-conv", N, NULL);
    CHECK_REL(st.rate, 5.53, 0.01);
    CHECK_REL(st.gap_cv, 1.0, 0.02);
    CHECK_REL(st.prompt_mean, 1154.7, 0.01);
    CHECK_REL(st.prompt_p99, 4142, 0.02);
    CHECK_REL(st.prompt_p50, 943, 0.02);  /* the fit's median; the trace's is 1020 */
    CHECK(st.prompt_max <= 14050);
    CHECK_REL(st.output_mean, 211.1, 0.01);
    CHECK_REL(st.output_p99, 601, 0.02);
    CHECK_REL(st.output_p50, 186, 0.02);  /* trace: 129 */
    CHECK(st.output_max <= 1000);

    st = preset_stats("azure-code", 1000000, NULL);
    CHECK_REL(st.rate, 2.57, 0.05);       /* gamma CV 13: slow convergence */
    CHECK_REL(st.gap_cv, 13.15, 0.25);
    CHECK_REL(st.prompt_mean, 2047.8, 0.02); /* the clamp at 7437 removes ~0.5% */
    CHECK_INT(st.prompt_max, 7437);
    CHECK_REL(st.prompt_p99, 7436, 0.01);
    CHECK_REL(st.output_mean, 27.9, 0.01);
    CHECK_REL(st.output_p99, 251, 0.03);
    CHECK_REL(st.output_p50, 11.7, 0.1);  /* trace: 13 */

    for (size_t i = 0; i < sizeof exegpt / sizeof exegpt[0]; i++) {
        st = preset_stats(exegpt[i].name, N, &c);
        CHECK_REL(st.rate, 10, 0.01);
        /* Table 3's max is twice the mean: the truncation is symmetric */
        CHECK_REL(st.prompt_mean, exegpt[i].in_mean, 0.01);
        CHECK(st.prompt_max <= exegpt[i].in_max);
        CHECK(st.output_max <= exegpt[i].out_max);
        CHECK_REL(st.output_p99, exegpt[i].out_p99, 0.05); /* the cap at max trims the tail */
    }

    /* explicit keys after a preset override it; JSON applies the preset first */
    hs_workload_defaults(&c);
    CHECK_OK(hs_workload_set(&c, "preset", "S", &err), &err);
    CHECK_OK(hs_workload_set(&c, "rate", "20", &err), &err);
    CHECK_OK(hs_workload_set(&c, "output.max", "70", &err), &err);
    CHECK_NEAR(c.rate, 20, 0);
    CHECK_NEAR(c.output.max, 70, 0);
    CHECK_NEAR(c.output.mean, 32, 0);
    {
        cJSON *j = cJSON_Parse("{\"rate\": 7, \"output\": {\"max\": 60}, \"preset\": \"C1\"}");
        CHECK_OK(hs_workload_conf(&c, j, "run.json", &err), &err);
        CHECK_STR(c.preset, "C1");
        CHECK_NEAR(c.rate, 7, 0);
        CHECK_NEAR(c.output.max, 60, 0);
        CHECK_NEAR(c.output.mean, 64, 0);
        CHECK_NEAR(c.prompt.std, 115, 0);
        cJSON_Delete(j);
    }
}

/* ---- configuration and validation -------------------------------------- */

static void expect_conf(const char *json, const char *msg)
{
    hs_workload_cfg c, before;
    hs_err err = {0};
    cJSON *j = cJSON_Parse(json);
    hs_workload_defaults(&c);
    memcpy(&before, &c, sizeof c);
    CHECK(j != NULL);
    CHECK(hs_workload_conf(&c, j, "run.json", &err) < 0);
    if (!strstr(err.msg, msg)) fprintf(stderr, "  expected \"%s\" in: %s\n", msg, err.msg);
    CHECK(strstr(err.msg, msg) != NULL);
    CHECK(memcmp(&c, &before, sizeof c) == 0); /* no partial update */
    cJSON_Delete(j);
}

static void expect_open(const char *sets, const char *msg)
{
    hs_workload_cfg c;
    hs_err err = {0};
    hs_source *s = NULL;
    char buf[1024], *save = NULL, *kv;
    hs_workload_defaults(&c);
    snprintf(buf, sizeof buf, "%s", sets);
    for (kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(kv, '=');
        *eq = '\0';
        CHECK_OK(hs_workload_set(&c, kv, eq + 1, &err), &err);
    }
    CHECK(hs_source_open(&s, &c, &err) < 0);
    CHECK(s == NULL);
    if (!strstr(err.msg, msg)) fprintf(stderr, "  %s: expected \"%s\" in: %s\n", sets, msg, err.msg);
    CHECK(strstr(err.msg, msg) != NULL);
}

static void test_config(void)
{
    hs_workload_cfg c;
    hs_err err = {0};
    char set[1400];
    cJSON *j;

    hs_workload_defaults(&c);
    CHECK_OK(hs_workload_set(&c, "prompt.mean", "123.5", &err), &err);
    CHECK_NEAR(c.prompt.mean, 123.5, 0);
    CHECK_OK(hs_workload_set(&c, "seed", "12345678901", &err), &err);
    CHECK_INT(c.seed, 12345678901LL);
    CHECK_OK(hs_workload_set(&c, "kind", "azure", &err), &err);
    CHECK_STR(c.kind, "azure");
    CHECK(hs_workload_set(&c, "bogus", "1", &err) < 0);
    CHECK(strstr(err.msg, "unknown key \"bogus\"") != NULL);
    CHECK(hs_workload_set(&c, "prompt.bogus", "1", &err) < 0);
    CHECK(strstr(err.msg, "prompt.bogus") != NULL);
    CHECK(hs_workload_set(&c, "rate", "-1", &err) < 0);
    CHECK(strstr(err.msg, "rate") != NULL);
    CHECK(hs_workload_set(&c, "rate", "fast", &err) < 0);
    CHECK(hs_workload_set(&c, "max_requests", "1.5", &err) < 0);
    CHECK(hs_workload_set(&c, "preset", "Z", &err) < 0);
    CHECK(strstr(err.msg, "unknown preset \"Z\"") != NULL);

    j = cJSON_Parse("{\"kind\": \"sharegpt-csv\", \"path\": \"x.csv\", \"arrival\": \"gamma\","
                    " \"cv\": 2, \"max_requests\": 10, \"prompt\": {\"kind\": \"fixed\", \"mean\": 9}}");
    hs_workload_defaults(&c);
    CHECK_OK(hs_workload_conf(&c, j, "run.json", &err), &err);
    CHECK_STR(c.kind, "sharegpt-csv");
    CHECK_STR(c.arrival, "gamma");
    CHECK_NEAR(c.cv, 2, 0);
    CHECK_INT(c.max_requests, 10);
    CHECK_STR(c.prompt.kind, "fixed");
    CHECK_NEAR(c.prompt.mean, 9, 0);
    CHECK_STR(c.preset, "azure-conv"); /* a label only; kind decides */
    cJSON_Delete(j);

    expect_conf("{\"rate\": 5, \"burst\": 1}", "run.json: unknown key \"burst\"");
    expect_conf("{\"prompt\": {\"mean\": 5, \"median\": 4}}", "run.json: unknown key \"prompt.median\"");
    expect_conf("{\"prompt\": {\"mean\": -5}}", "run.json: prompt.mean: -5 is outside");
    expect_conf("{\"prompt\": 5}", "run.json: prompt: expected an object");
    expect_conf("{\"time_scale\": 0}", "run.json: time_scale: 0 is outside");
    expect_conf("{\"rate\": \"fast\"}", "run.json: rate: expected a number");
    expect_conf("{\"preset\": \"X\"}", "unknown preset \"X\"");
    expect_conf("{\"preset\": 3}", "preset: expected a string");
    expect_conf("{\"kind\": \"synthetic\", \"preset\": \"S\", \"seed\": 1.5}", "seed: 1.5 is not an integer");

    expect_open("kind=parquet", "workload.kind: unknown kind \"parquet\"");
    expect_open("rate=0", "workload.rate: must be > 0");
    expect_open("arrival=gamma cv=0", "workload.cv: must be > 0 for arrival gamma");
    expect_open("arrival=weibull", "workload.arrival: unknown process \"weibull\"");
    expect_open("preset= prompt.kind=normal prompt.min=10 prompt.max=5 max_requests=5",
                "workload.prompt.min: 10 is greater than prompt.max 5");
    expect_open("prompt.kind=zipf", "workload.prompt.kind: unknown distribution \"zipf\"");
    expect_open("output.kind=fixed output.mean=0", "workload.output.mean: must be in [1,");
    expect_open("preset= max_requests=0", "workload.max_requests: a synthetic workload needs");
    expect_open("kind=azure", "workload.path: required for kind azure");
    expect_open("kind=azure path=/nonexistent/trace.csv", "/nonexistent/trace.csv: cannot open");
    expect_open("kind=sharegpt-json path=/nonexistent/sg.json", "/nonexistent/sg.json: cannot open");
    expect_open("prompt.kind=trace", "workload.output.kind: must also be \"trace\"");
    expect_open("prompt.kind=trace output.kind=trace", "workload.path: required for lengths \"trace\"");
    expect_open("path=/tmp/x.csv", "workload.path: \"/tmp/x.csv\" is unused by kind synthetic");
    expect_open("window_start=5", "workload.window_start: applies only to kind azure");
    snprintf(set, sizeof set, "kind=azure path=%s window_start=10 window_end=5", fixture("azure-mini.csv"));
    expect_open(set, "workload.window_end: 5 s must be greater than window_start 10 s");
    snprintf(set, sizeof set, "kind=azure path=%s duration=5", fixture("azure-mini.csv"));
    expect_open(set, "workload.duration: applies to generated arrivals");
    expect_open("max_prompt=100 prompt.min=200", "workload.prompt.min: 200 exceeds max_prompt 100");
    expect_open("max_prompt=100 prompt.kind=fixed prompt.mean=101", "workload.prompt.mean: 101 exceeds max_prompt 100");
}

/* ---- stats ------------------------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* numpy-style linear interpolation over sorted data */
static double quantile(const int *v, int n, double f)
{
    double pos = f * (n - 1);
    int i = (int)floor(pos);
    return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[i];
}

static void test_stats(void)
{
    hs_workload_cfg c = trace_cfg("azure", fixture("azure-mini.csv"));
    hs_trace_stats st;
    hs_source *s;
    hs_err err = {0};
    int p[50], o[50];
    double psum = 0;

    CHECK_OK(hs_source_open(&s, &c, &err), &err);
    CHECK_OK(hs_trace_stats_compute(s, &st, &err), &err);
    hs_source_close(s);
    for (int i = 0; i < 50; i++) {
        p[i] = mini_prompt(i);
        o[i] = mini_output(i);
        psum += p[i];
    }
    qsort(p, 50, sizeof p[0], cmp_int);
    qsort(o, 50, sizeof o[0], cmp_int);
    CHECK_INT(st.count, 50);
    CHECK_NEAR(st.duration_s, 24.5, 1e-12);
    CHECK_NEAR(st.rate, 2.0, 1e-12);
    CHECK_NEAR(st.max_gap_s, 0.5000001, 1e-12);
    CHECK(st.gap_cv > 0 && st.gap_cv < 1e-5);
    CHECK_NEAR(st.prompt_mean, psum / 50, 1e-9);
    CHECK_NEAR(st.prompt_p50, quantile(p, 50, 0.5), 1e-9);
    CHECK_NEAR(st.prompt_p90, quantile(p, 50, 0.9), 1e-9);
    CHECK_NEAR(st.prompt_p99, quantile(p, 50, 0.99), 1e-9);
    CHECK_NEAR(st.prompt_max, p[49], 0);
    CHECK_NEAR(st.output_p99, quantile(o, 50, 0.99), 1e-9);
    CHECK_NEAR(st.output_max, o[49], 0);
    hs_trace_stats_print(&st, stdout);

    /* empty window: zeros, not an error */
    c.window_start = 999;
    CHECK_OK(hs_source_open(&s, &c, &err), &err);
    CHECK_OK(hs_trace_stats_compute(s, &st, &err), &err);
    CHECK_INT(st.count, 0);
    hs_source_close(s);
}

/* ---- real traces (shared/data) ----------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static hs_trace_stats real_stats(const char *kind, const char *dir, const char *file,
                                 double *secs)
{
    char path[1200];
    hs_workload_cfg c;
    hs_trace_stats st;
    hs_source *s = NULL;
    hs_err err = {0};
    double t0;
    snprintf(path, sizeof path, "%s/traces/%s", dir, file);
    c = trace_cfg(kind, path);
    memset(&st, 0, sizeof st);
    t0 = now_s();
    CHECK_OK(hs_source_open(&s, &c, &err), &err);
    if (s) CHECK_OK(hs_trace_stats_compute(s, &st, &err), &err);
    *secs = now_s() - t0;
    if (s) CHECK_INT(hs__source_clamped(s), 0);
    hs_source_close(s);
    printf("%s (%.1f ms):\n", file, *secs * 1e3);
    hs_trace_stats_print(&st, stdout);
    return st;
}

static void test_real_traces(void)
{
    const char *dir = hs_shared_data();
    hs_trace_stats st;
    double secs;
    if (!dir) {
        printf("skip: HS_SHARED_DATA unset, real Azure/ShareGPT traces not checked\n");
        return;
    }
    /* figures from shared/data/README.md, checked to their printed rounding */
    st = real_stats("azure", dir, "AzureLLMInferenceTrace_conv.csv", &secs);
    CHECK_INT(st.count, 19366);
    CHECK_NEAR(st.duration_s, 3501.7, 0.05);
    CHECK_NEAR(st.rate, 5.53, 0.005);
    CHECK_NEAR(st.gap_cv, 1.09, 0.005);
    CHECK_NEAR(st.prompt_p50, 1020, 0.5);
    CHECK_NEAR(st.prompt_mean, 1154.7, 0.05);
    CHECK_NEAR(st.prompt_p99, 4142, 0.5);
    CHECK_NEAR(st.prompt_max, 14050, 0);
    CHECK_NEAR(st.output_p50, 129, 0.5);
    CHECK_NEAR(st.output_mean, 211.1, 0.05);
    CHECK_NEAR(st.output_p99, 601, 0.5);
    CHECK_NEAR(st.output_max, 1000, 0);
    CHECK(secs < 1.0); /* milliseconds in practice; generous for sanitizer builds */

    st = real_stats("azure", dir, "AzureLLMInferenceTrace_code.csv", &secs);
    CHECK_INT(st.count, 8819);
    CHECK_NEAR(st.duration_s, 3435.9, 0.05);
    CHECK_NEAR(st.rate, 2.57, 0.005);
    CHECK_NEAR(st.gap_cv, 13.15, 0.005);
    CHECK_NEAR(st.max_gap_s, 217, 0.5);
    CHECK_NEAR(st.prompt_p50, 1469, 0.5);
    CHECK_NEAR(st.prompt_mean, 2047.8, 0.05);
    CHECK_NEAR(st.prompt_p99, 7436, 0.5);
    CHECK_NEAR(st.prompt_max, 7437, 0);
    CHECK_NEAR(st.output_p50, 13, 0.5);
    CHECK_NEAR(st.output_mean, 27.9, 0.05);
    CHECK_NEAR(st.output_p99, 251, 0.5);
    CHECK_NEAR(st.output_max, 1899, 0);

    st = real_stats("sharegpt-csv", dir, "sharegpt_8k_filtered_stats_llama2_tokenizer.csv", &secs);
    CHECK_INT(st.count, 30731);
    CHECK_NEAR(st.prompt_p50, 1730, 0.5);
    CHECK_NEAR(st.prompt_mean, 2340, 0.5);
    CHECK_NEAR(st.prompt_p99, 7434, 0.5);
    CHECK_NEAR(st.output_p50, 415, 0.5);
    CHECK_NEAR(st.output_mean, 438.7, 0.05);
    CHECK_NEAR(st.output_p99, 998, 0.5);
    CHECK(st.output_max <= 1024);
}

int main(void)
{
    find_root();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hs_workload_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_timestamps();
    test_azure_mini();
    test_azure_malformed();
    test_sharegpt();
    test_synthetic();
    test_presets();
    test_config();
    test_stats();
    test_real_traces();
    for (int i = 0; i < ntmpfiles; i++) unlink(tmpfiles[i]);
    if (rmdir(tmpdir) != 0) perror(tmpdir);
    return hs_check_result();
}
