/* csv.c - streaming reader for CSV request traces.
 *
 * Formats (detected from the header, column order free, names matched
 * case-insensitively):
 *   Azure LLM inference traces 2023/2024: TIMESTAMP,ContextTokens,GeneratedTokens
 *   ShareGPT length statistics (sarathi-serve): num_prefill_tokens,num_decode_tokens,...
 *
 * The reader holds one line at a time (getline() into a reusable buffer), so
 * the week-long 2024 traces (over 1 GB) stream in constant memory.  Parsing
 * is by hand, without sscanf/strtod/mktime: a row costs a few tens of ns and
 * timestamps convert to ns exactly, independent of the host time zone.
 *
 * Invariants kept for the caller: returned token counts are in
 * [1, HS__TOKENS_ABSURD] (0 is raised to 1 and counted in `clamped`, since
 * Azure 2024 rows may carry 0 tokens); prompts never exceed max_prompt when it
 * is set; Azure timestamps are non-decreasing.  Every violation is an error
 * "path:LINE: what is wrong" with the physical line number. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* getline, strncasecmp */
#endif
#include "workload/workload_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- timestamps -------------------------------------------------------- */

int64_t hs__days_from_civil(int64_t y, int m, int d)
{
    /* Shift the year to start in March so the leap day is the last day of
     * the (shifted) year; eras are 400-year cycles of 146097 days. */
    int64_t era, yoe, doy, doe;
    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;                                   /* [0, 399] */
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

static int is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

/* Reads exactly n digits at s[*i]; -1 when one is not a digit. */
static int64_t digits(const char *s, size_t len, size_t *i, int n)
{
    int64_t v = 0;
    for (int k = 0; k < n; k++, (*i)++) {
        if (*i >= len || s[*i] < '0' || s[*i] > '9') return -1;
        v = v * 10 + (s[*i] - '0');
    }
    return v;
}

static int expect(const char *s, size_t len, size_t *i, char c)
{
    if (*i >= len || s[*i] != c) return 0;
    (*i)++;
    return 1;
}

int hs__parse_timestamp(const char *s, size_t len, hs_ns *out, const char **why)
{
    size_t i = 0;
    int64_t y, mo, d, h, mi, sec, frac = 0, zone = 0;
    int nfrac = 0;

    y = digits(s, len, &i, 4);
    if (y < 0 || !expect(s, len, &i, '-')) goto bad_date;
    mo = digits(s, len, &i, 2);
    if (mo < 0 || !expect(s, len, &i, '-')) goto bad_date;
    d = digits(s, len, &i, 2);
    if (d < 0) goto bad_date;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, (int)mo)) {
        *why = "date out of range";
        return -1;
    }
    if (i >= len || (s[i] != ' ' && s[i] != 'T')) goto bad_time;
    i++;
    h = digits(s, len, &i, 2);
    if (h < 0 || !expect(s, len, &i, ':')) goto bad_time;
    mi = digits(s, len, &i, 2);
    if (mi < 0 || !expect(s, len, &i, ':')) goto bad_time;
    sec = digits(s, len, &i, 2);
    if (sec < 0) goto bad_time;
    /* 60 admits a leap second (it then equals second 0 of the next minute). */
    if (h > 23 || mi > 59 || sec > 60) {
        *why = "time of day out of range";
        return -1;
    }
    if (i < len && s[i] == '.') {
        i++;
        if (i >= len || s[i] < '0' || s[i] > '9') {
            *why = "empty fraction of a second";
            return -1;
        }
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, nfrac++)
            if (nfrac < 9) frac = frac * 10 + (s[i] - '0');
        for (int k = nfrac; k < 9; k++) frac *= 10;
    }
    if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i < len && (s[i] == '+' || s[i] == '-')) {
        int sign = s[i] == '-' ? -1 : 1;
        int64_t zh, zm;
        i++;
        zh = digits(s, len, &i, 2);
        if (i < len && s[i] == ':') i++;
        zm = digits(s, len, &i, 2);
        if (zh < 0 || zm < 0 || zh > 23 || zm > 59) {
            *why = "bad zone offset (expected +HH:MM)";
            return -1;
        }
        zone = sign * (zh * 3600 + zm * 60);
    }
    if (i != len) {
        *why = "unexpected characters after the time";
        return -1;
    }
    /* Local time = UTC + zone, so UTC = local - zone.  The seconds cannot
     * overflow (4-digit years); the nanoseconds can: int64 ns since the
     * epoch end in April 2262.  Times before the epoch are rejected too, so
     * the difference of any two accepted timestamps fits as well. */
    {
        int64_t secs = hs__days_from_civil(y, (int)mo, (int)d) * 86400 + h * 3600 + mi * 60 +
                       sec - zone;
        if (secs < 0 || secs > (INT64_MAX - (HS_NS_PER_S - 1)) / HS_NS_PER_S) {
            *why = "outside the range of int64 nanoseconds since the Unix epoch "
                   "(1970-01-01 to 2262-04-11 UTC)";
            return -1;
        }
        *out = secs * HS_NS_PER_S + frac;
    }
    return 0;

bad_date:
    *why = "expected YYYY-MM-DD HH:MM:SS[.fraction][+HH:MM]";
    return -1;
bad_time:
    *why = "expected HH:MM:SS after the date";
    return -1;
}

/* ---- lines ------------------------------------------------------------- */

int hs__lines_open(hs__lines *l, const char *path, hs_err *err)
{
    memset(l, 0, sizeof *l);
    l->path = path;
    l->fp = fopen(path, "rb");
    if (!l->fp) return hs_errf(err, HS_EIO, "%s: cannot open: %s", path, strerror(errno));
    return 0;
}

int hs__lines_next(hs__lines *l, char **line, size_t *len, hs_err *err)
{
    for (;;) {
        ssize_t n = getline(&l->buf, &l->cap, l->fp);
        size_t k;
        if (n < 0) {
            if (ferror(l->fp))
                return hs_errf(err, HS_EIO, "%s:%ld: read error", l->path, l->line + 1);
            if (!feof(l->fp)) /* getline failed to grow its buffer */
                return hs_errf(err, HS_ENOMEM, "%s:%ld: line too long", l->path, l->line + 1);
            return 0;
        }
        l->line++;
        k = (size_t)n;
        while (k > 0 && (l->buf[k - 1] == '\n' || l->buf[k - 1] == '\r')) k--;
        l->buf[k] = '\0';
        for (size_t j = 0; j < k; j++) {
            if (l->buf[j] != ' ' && l->buf[j] != '\t') {
                *line = l->buf;
                *len = k;
                return 1;
            }
        }
        /* blank line: skipped (trailing blank lines are common) */
    }
}

void hs__lines_close(hs__lines *l)
{
    if (l->fp) fclose(l->fp);
    free(l->buf);
    memset(l, 0, sizeof *l);
}

/* ---- fields ------------------------------------------------------------ */

typedef struct field { const char *s; size_t n; } field;

/* Splits line in place at commas; trims blanks and one pair of surrounding
 * double quotes per field.  Returns the column count, or -1 past max. */
static int split(const char *line, size_t len, field *f, int max)
{
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || line[i] == ',') {
            const char *s = line + start;
            size_t k = i - start;
            if (n == max) return -1;
            while (k > 0 && (*s == ' ' || *s == '\t')) s++, k--;
            while (k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t')) k--;
            if (k >= 2 && s[0] == '"' && s[k - 1] == '"') s++, k -= 2;
            f[n].s = s;
            f[n].n = k;
            n++;
            start = i + 1;
        }
    }
    return n;
}

static int field_is(const field *f, const char *name)
{
    return strlen(name) == f->n && strncasecmp(f->s, name, f->n) == 0;
}

/* Parses a token count: decimal digits, optionally ".0..." (as written by
 * tools that store integers as floats).  Returns 0, or -1 with *why. */
static int parse_tokens(const field *f, int64_t *v, const char **why)
{
    size_t i = 0;
    int64_t x = 0;
    if (f->n == 0) {
        *why = "is empty";
        return -1;
    }
    if (f->s[0] == '-') {
        *why = "is negative";
        return -1;
    }
    if (f->s[0] == '+') i++;
    if (i >= f->n || f->s[i] < '0' || f->s[i] > '9') {
        *why = "is not a number";
        return -1;
    }
    for (; i < f->n && f->s[i] >= '0' && f->s[i] <= '9'; i++) {
        x = x * 10 + (f->s[i] - '0');
        if (x > HS__TOKENS_ABSURD) {
            *why = "is absurd (more than 10000000 tokens)";
            return -1;
        }
    }
    if (i < f->n && f->s[i] == '.') {
        for (i++; i < f->n && f->s[i] == '0'; i++) {}
        if (i < f->n) {
            *why = "is not an integer";
            return -1;
        }
    }
    if (i != f->n) {
        *why = "is not a number";
        return -1;
    }
    *v = x;
    return 0;
}

/* ---- CSV traces -------------------------------------------------------- */

int hs__csv_open(hs__csv *c, const char *path, hs__csvfmt want,
                 int32_t max_prompt, hs_err *err)
{
    field f[HS__CSV_MAXCOLS];
    char *line;
    size_t len;
    int rc, n;

    memset(c, 0, sizeof *c);
    c->col_ts = c->col_prompt = c->col_output = -1;
    c->max_prompt = max_prompt;
    rc = hs__lines_open(&c->lines, path, err);
    if (rc) return rc;
    rc = hs__lines_next(&c->lines, &line, &len, err);
    if (rc < 0) goto fail;
    if (rc == 0) {
        rc = hs_errf(err, HS_EPARSE, "%s: empty file (expected a CSV header)", path);
        goto fail;
    }
    if (len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) line += 3, len -= 3; /* UTF-8 BOM */
    n = split(line, len, f, HS__CSV_MAXCOLS);
    if (n < 0) {
        rc = hs_errf(err, HS_EPARSE, "%s:%ld: header has more than %d columns", path,
                     c->lines.line, HS__CSV_MAXCOLS);
        goto fail;
    }
    c->ncols = n;
    for (int i = 0; i < n; i++) {
        if (field_is(&f[i], "TIMESTAMP")) c->col_ts = i;
        else if (field_is(&f[i], "ContextTokens") || field_is(&f[i], "num_prefill_tokens"))
            c->col_prompt = i;
        else if (field_is(&f[i], "GeneratedTokens") || field_is(&f[i], "num_decode_tokens"))
            c->col_output = i;
    }
    if (c->col_ts >= 0 && c->col_prompt >= 0 && c->col_output >= 0 &&
        field_is(&f[c->col_prompt], "ContextTokens") &&
        field_is(&f[c->col_output], "GeneratedTokens"))
        c->fmt = HS__CSV_AZURE;
    else if (c->col_prompt >= 0 && c->col_output >= 0 &&
             field_is(&f[c->col_prompt], "num_prefill_tokens") &&
             field_is(&f[c->col_output], "num_decode_tokens"))
        c->fmt = HS__CSV_SHAREGPT;
    if (c->fmt == HS__CSV_ANY || (want != HS__CSV_ANY && want != c->fmt)) {
        const char *exp = want == HS__CSV_AZURE ? "TIMESTAMP,ContextTokens,GeneratedTokens"
                        : want == HS__CSV_SHAREGPT ? "num_prefill_tokens,num_decode_tokens,..."
                        : "TIMESTAMP,ContextTokens,GeneratedTokens or num_prefill_tokens,num_decode_tokens,...";
        rc = hs_errf(err, HS_EPARSE, "%s:%ld: unrecognised header (expected %s)", path,
                     c->lines.line, exp);
        goto fail;
    }
    if (c->fmt == HS__CSV_SHAREGPT) c->col_ts = -1;
    return 0;
fail:
    hs__lines_close(&c->lines);
    return rc;
}

static int tokens(hs__csv *c, const field *f, const char *name, int32_t *out,
                  hs_err *err)
{
    const char *why;
    int64_t v;
    if (parse_tokens(f, &v, &why) < 0)
        return hs_errf(err, HS_EPARSE, "%s:%ld: %s \"%.*s\" %s", c->lines.path,
                       c->lines.line, name, (int)(f->n > 40 ? 40 : f->n), f->s, why);
    if (v == 0) {
        v = 1;
        c->clamped++;
    }
    *out = (int32_t)v;
    return 0;
}

int hs__csv_next(hs__csv *c, hs__row *row, hs_err *err)
{
    field f[HS__CSV_MAXCOLS];
    const char *why;
    char *line;
    size_t len;
    int rc, n;

    rc = hs__lines_next(&c->lines, &line, &len, err);
    if (rc <= 0) return rc;
    row->line = c->lines.line;
    n = split(line, len, f, HS__CSV_MAXCOLS);
    if (n != c->ncols)
        return hs_errf(err, HS_EPARSE, "%s:%ld: expected %d columns, found %s%d",
                       c->lines.path, row->line, c->ncols, n < 0 ? "more than " : "",
                       n < 0 ? HS__CSV_MAXCOLS : n);
    row->ts = 0;
    if (c->col_ts >= 0) {
        const field *t = &f[c->col_ts];
        if (hs__parse_timestamp(t->s, t->n, &row->ts, &why) < 0)
            return hs_errf(err, HS_EPARSE, "%s:%ld: TIMESTAMP \"%.*s\": %s", c->lines.path,
                           row->line, (int)(t->n > 40 ? 40 : t->n), t->s, why);
        if (c->have_prev && row->ts < c->prev_ts)
            return hs_errf(err, HS_EPARSE,
                           "%s:%ld: TIMESTAMP \"%.*s\" goes backwards (%.6f s before the previous row)",
                           c->lines.path, row->line, (int)t->n, t->s,
                           hs_ns_to_s(c->prev_ts - row->ts));
        c->prev_ts = row->ts;
        c->have_prev = 1;
    }
    rc = tokens(c, &f[c->col_prompt],
                c->fmt == HS__CSV_AZURE ? "ContextTokens" : "num_prefill_tokens",
                &row->prompt, err);
    if (rc) return rc;
    rc = tokens(c, &f[c->col_output],
                c->fmt == HS__CSV_AZURE ? "GeneratedTokens" : "num_decode_tokens",
                &row->output, err);
    if (rc) return rc;
    if (c->max_prompt > 0 && row->prompt > c->max_prompt)
        return hs_errf(err, HS_EPARSE, "%s:%ld: prompt of %d tokens exceeds max_prompt %d",
                       c->lines.path, row->line, (int)row->prompt, (int)c->max_prompt);
    c->rows++;
    return 1;
}

void hs__csv_close(hs__csv *c)
{
    hs__lines_close(&c->lines);
}

/* ---- pair tables ------------------------------------------------------- */

int hs__pairs_push(hs__pairs *p, int32_t prompt, int32_t output, hs_err *err)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        hs__pair *v;
        if (cap > SIZE_MAX / sizeof *v)
            return hs_errf(err, HS_ENOMEM, "too many (prompt, output) pairs");
        v = realloc(p->v, cap * sizeof *v);
        if (!v)
            return hs_errf(err, HS_ENOMEM, "out of memory for %zu (prompt, output) pairs", cap);
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n].prompt = prompt;
    p->v[p->n].output = output;
    p->n++;
    return 0;
}

void hs__pairs_free(hs__pairs *p)
{
    free(p->v);
    memset(p, 0, sizeof *p);
}

int hs__pairs_load_csv(hs__pairs *p, const char *path, int32_t max_prompt,
                       hs_err *err)
{
    hs__csv c;
    hs__row row;
    int rc = hs__csv_open(&c, path, HS__CSV_ANY, max_prompt, err);
    if (rc) return rc;
    while ((rc = hs__csv_next(&c, &row, err)) == 1)
        if ((rc = hs__pairs_push(p, row.prompt, row.output, err)) != 0) break;
    p->clamped += c.clamped;
    hs__csv_close(&c);
    if (rc < 0) return rc;
    if (p->n == 0) return hs_errf(err, HS_EPARSE, "%s: no data rows", path);
    return 0;
}
