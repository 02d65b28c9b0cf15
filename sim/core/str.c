/* str.c - heap strings and growable arrays of pointers; see str.h. */
#include "core/str.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

char *hs_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int hs_ptrs_push(void *arr, int *n, void *p)
{
    void ***a = arr;
    void **g = realloc(*a, (size_t)(*n + 1) * sizeof **a);
    if (!g) return HS_ENOMEM;
    *a = g;
    g[(*n)++] = p;
    return 0;
}

void hs_strs_free(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* Optimal string alignment distance, case-insensitive; gives up (returns
 * a large number) past 63 characters, which no registered name reaches. */
static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    int d[64][64];
    if (la > 63 || lb > 63) return 1000;
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

const char *hs_str_suggest(const char *name, const char *const *cands, int n)
{
    const char *best = NULL, *sub = NULL, *pre = NULL;
    int bd = 1000, n_sub = 0, n_pre = 0, len = (int)strlen(name);
    int limit = len / 3 > 1 ? len / 3 : 1;
    if (!len) return NULL;
    for (int i = 0; i < n; i++) {
        int dist;
        if (!cands[i] || !strcmp(cands[i], name)) continue;
        dist = edit_distance(name, cands[i]);
        if (dist < bd) {
            bd = dist;
            best = cands[i];
        }
        if (len >= 2 && strstr(cands[i], name)) {
            if (!n_sub) sub = cands[i];
            n_sub++;
            if (!strncmp(cands[i], name, (size_t)len)) {
                if (!n_pre) pre = cands[i];
                n_pre++;
            }
        }
    }
    /* A shortened name ("h100") is likelier than a near miss ("h200"). */
    if (n_pre == 1) return pre;
    if (best && bd <= limit) return best;
    return n_sub == 1 ? sub : NULL;
}

const char *hs_str_did_you_mean(char *buf, size_t cap, const char *name,
                                const char *const *cands, int n)
{
    const char *s = hs_str_suggest(name, cands, n);
    if (!cap) return buf;
    if (s) snprintf(buf, cap, " (did you mean \"%s\"?)", s);
    else buf[0] = '\0';
    return buf;
}

int hs_parse_int(const char *opt, const char *v, long long lo, long long hi, long long *out, hs_err *err)
{
    char *end;
    long long x;
    errno = 0;
    x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return hs_errf(err, HS_ERANGE, "%s: \"%s\" is not an integer in %lld..%lld", opt, v, lo, hi);
    *out = x;
    return 0;
}
