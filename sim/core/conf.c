/* conf.c - typed configuration schemas; see conf.h. */
#include "core/conf.h"
#include "core/str.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const hs_field *hs_conf_find(const hs_field *fields, const char *key)
{
    for (const hs_field *f = fields; f->key; f++)
        if (strcmp(f->key, key) == 0) return f;
    return NULL;
}

static int store_num(void *obj, const hs_field *f, double v, const char *where,
                     hs_err *err)
{
    char *p = obj ? (char *)obj + f->offset : NULL; /* NULL: check only */
    if (!isfinite(v))
        return hs_errf(err, HS_ERANGE, "%s: %s: value is not a finite number",
                       where, f->key);
    if (v < f->min || v > f->max)
        return hs_errf(err, HS_ERANGE, "%s: %s: %g is outside [%g, %g]",
                       where, f->key, v, f->min, f->max);
    switch (f->type) {
    case HS_F_INT:
    case HS_F_BOOL:
        if (v != floor(v))
            return hs_errf(err, HS_ERANGE, "%s: %s: %g is not an integer",
                           where, f->key, v);
        if (p) *(int *)p = (int)v;
        break;
    case HS_F_I64:
        if (v != floor(v))
            return hs_errf(err, HS_ERANGE, "%s: %s: %g is not an integer",
                           where, f->key, v);
        if (p) *(int64_t *)p = (int64_t)v;
        break;
    case HS_F_DOUBLE:
        if (p) *(double *)p = v;
        break;
    default: return hs_errf(err, HS_EINVAL, "%s: %s: not a number field",
                            where, f->key);
    }
    return 0;
}

static int store_str(void *obj, const hs_field *f, const char *s,
                     const char *where, hs_err *err)
{
    size_t n = strlen(s);
    if (n >= f->size)
        return hs_errf(err, HS_ERANGE, "%s: %s: string longer than %zu characters",
                       where, f->key, f->size - 1);
    if (obj) memcpy((char *)obj + f->offset, s, n + 1); /* NULL: check only */
    return 0;
}

void hs_conf_defaults(void *obj, const hs_field *fields)
{
    for (const hs_field *f = fields; f->key; f++) {
        char *p = (char *)obj + f->offset;
        switch (f->type) {
        case HS_F_INT:
        case HS_F_BOOL: *(int *)p = (int)f->def; break;
        case HS_F_I64: *(int64_t *)p = (int64_t)f->def; break;
        case HS_F_DOUBLE: *(double *)p = f->def; break;
        case HS_F_STRING:
            if (f->def_str) snprintf(p, f->size, "%s", f->def_str);
            else p[0] = '\0';
            break;
        case HS_F_SKIP: break;
        }
    }
}

/* " (did you mean ...)" for an unknown key among the schema's keys. */
static const char *dym_key(char *buf, size_t cap, const hs_field *fields, const char *key)
{
    const char *names[256];
    int n = 0;
    for (const hs_field *f = fields; f->key && n < 256; f++)
        if (f->type != HS_F_SKIP) names[n++] = f->key;
    return hs_str_did_you_mean(buf, cap, key, names, n);
}

/* One pass of hs_conf_fill over json: obj NULL checks every member, else
 * stores them (already checked). */
static int fill_pass(void *obj, const hs_field *fields, const cJSON *json, const char *where,
                     hs_err *err)
{
    int rc;
    for (const cJSON *it = json->child; it; it = it->next) {
        const hs_field *f = hs_conf_find(fields, it->string);
        char dym[160];
        if (!f)
            return hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\"%s", where,
                           it->string, dym_key(dym, sizeof dym, fields, it->string));
        switch (f->type) {
        case HS_F_SKIP: continue;
        case HS_F_STRING:
            if (!cJSON_IsString(it))
                return hs_errf(err, HS_EPARSE, "%s: %s: expected a string",
                               where, f->key);
            rc = store_str(obj, f, it->valuestring, where, err);
            break;
        case HS_F_BOOL:
            if (cJSON_IsBool(it)) {
                if (obj) *(int *)((char *)obj + f->offset) = cJSON_IsTrue(it);
                rc = 0;
                break;
            }
            if (!cJSON_IsNumber(it))
                return hs_errf(err, HS_EPARSE, "%s: %s: expected true or false",
                               where, f->key);
            rc = store_num(obj, f, it->valuedouble, where, err);
            break;
        default:
            if (!cJSON_IsNumber(it))
                return hs_errf(err, HS_EPARSE, "%s: %s: expected a number",
                               where, f->key);
            rc = store_num(obj, f, it->valuedouble, where, err);
        }
        if (rc) return rc;
    }
    for (const hs_field *f = fields; f->key; f++)
        if (f->required && !cJSON_GetObjectItemCaseSensitive(json, f->key))
            return hs_errf(err, HS_EPARSE, "%s: missing required key \"%s\"",
                           where, f->key);
    return 0;
}

int hs_conf_fill(void *obj, const hs_field *fields, const cJSON *json,
                 const char *where, hs_err *err)
{
    int rc;
    if (!cJSON_IsObject(json))
        return hs_errf(err, HS_EPARSE, "%s: expected a JSON object", where);
    /* check every member first, so that a bad key leaves obj untouched */
    if ((rc = fill_pass(NULL, fields, json, where, err))) return rc;
    return fill_pass(obj, fields, json, where, err);
}

int hs_conf_set(void *obj, const hs_field *fields, const char *key,
                const char *value, const char *where, hs_err *err)
{
    const hs_field *f = hs_conf_find(fields, key);
    char *end;
    double v;
    char dym[160];
    if (!f || f->type == HS_F_SKIP)
        return hs_errf(err, HS_EPARSE, "%s: unknown key \"%s\"%s", where, key,
                       dym_key(dym, sizeof dym, fields, key));
    if (f->type == HS_F_STRING) return store_str(obj, f, value, where, err);
    if (f->type == HS_F_BOOL) {
        if (!strcmp(value, "true") || !strcmp(value, "yes")) value = "1";
        if (!strcmp(value, "false") || !strcmp(value, "no")) value = "0";
    }
    errno = 0;
    v = strtod(value, &end);
    if (end == value || *end != '\0' || errno == ERANGE)
        return hs_errf(err, HS_EPARSE, "%s: %s: \"%s\" is not a number", where,
                       key, value);
    return store_num(obj, f, v, where, err);
}

int hs_json_save(const cJSON *j, const char *path, hs_err *err)
{
    char *s = j ? cJSON_Print(j) : NULL, tmp[4200];
    FILE *f;
    int bad;
    if (!s) return hs_errf(err, HS_ENOMEM, "out of memory writing %s", path);
    /* written beside and renamed over: a failed write never leaves a
     * truncated file in place of a good one */
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        free(s);
        return hs_errf(err, HS_ERANGE, "%s: path too long", path);
    }
    if (!(f = fopen(tmp, "w"))) {
        free(s);
        return hs_errf(err, HS_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    }
    fprintf(f, "%s\n", s);
    free(s);
    bad = ferror(f);
    bad |= fclose(f);
    if (bad || rename(tmp, path)) {
        remove(tmp);
        return hs_errf(err, HS_EIO, "%s: write error", path);
    }
    return 0;
}

int hs_json_load(const char *path, cJSON **out, hs_err *err)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long n;
    const char *ep;
    *out = NULL;
    if (!fp) return hs_errf(err, HS_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        return hs_errf(err, HS_EIO, "%s: cannot read", path);
    }
    buf = malloc((size_t)n + 1);
    if (!buf) {
        fclose(fp);
        return hs_errf(err, HS_ENOMEM, "%s: out of memory reading %ld bytes", path, n);
    }
    if (fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        fclose(fp);
        free(buf);
        return hs_errf(err, HS_EIO, "%s: short read", path);
    }
    fclose(fp);
    buf[n] = '\0';
    *out = cJSON_ParseWithOpts(buf, &ep, 1);
    if (!*out) {
        int line = 1;
        const char *p;
        if (!ep) ep = buf;
        for (p = buf; p < ep && *p; p++)
            if (*p == '\n') line++;
        free(buf);
        return hs_errf(err, HS_EPARSE, "%s:%d: invalid JSON", path, line);
    }
    free(buf);
    return 0;
}

static int get_num(const cJSON *o, const char *key, double lo, double hi,
                   double *v, const char *where, hs_err *err, int optional)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it) {
        if (optional) return 0;
        return hs_errf(err, HS_EPARSE, "%s: missing key \"%s\"", where, key);
    }
    if (!cJSON_IsNumber(it))
        return hs_errf(err, HS_EPARSE, "%s: %s: expected a number", where, key);
    if (!isfinite(it->valuedouble) || it->valuedouble < lo || it->valuedouble > hi)
        return hs_errf(err, HS_ERANGE, "%s: %s: %g is outside [%g, %g]", where,
                       key, it->valuedouble, lo, hi);
    *v = it->valuedouble;
    return 0;
}

int hs_json_num(const cJSON *o, const char *key, double lo, double hi,
                double *v, const char *where, hs_err *err)
{
    return get_num(o, key, lo, hi, v, where, err, 0);
}

int hs_json_num_opt(const cJSON *o, const char *key, double lo, double hi,
                    double *v, const char *where, hs_err *err)
{
    return get_num(o, key, lo, hi, v, where, err, 1);
}

static int get_int(const cJSON *o, const char *key, long lo, long hi, long *v,
                   const char *where, hs_err *err, int optional)
{
    double d = 0;
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    int rc;
    if (!it && optional) return 0;
    rc = get_num(o, key, (double)lo, (double)hi, &d, where, err, optional);
    if (rc) return rc;
    if (d != floor(d))
        return hs_errf(err, HS_ERANGE, "%s: %s: %g is not an integer", where, key, d);
    *v = (long)d;
    return 0;
}

int hs_json_int(const cJSON *o, const char *key, long lo, long hi, long *v,
                const char *where, hs_err *err)
{
    return get_int(o, key, lo, hi, v, where, err, 0);
}

int hs_json_int_opt(const cJSON *o, const char *key, long lo, long hi, long *v,
                    const char *where, hs_err *err)
{
    return get_int(o, key, lo, hi, v, where, err, 1);
}

static int get_str(const cJSON *o, const char *key, char *buf, size_t cap,
                   const char *where, hs_err *err, int optional)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it) {
        if (optional) return 0;
        return hs_errf(err, HS_EPARSE, "%s: missing key \"%s\"", where, key);
    }
    if (!cJSON_IsString(it))
        return hs_errf(err, HS_EPARSE, "%s: %s: expected a string", where, key);
    if (strlen(it->valuestring) >= cap)
        return hs_errf(err, HS_ERANGE, "%s: %s: longer than %zu characters",
                       where, key, cap - 1);
    strcpy(buf, it->valuestring);
    return 0;
}

int hs_json_str(const cJSON *o, const char *key, char *buf, size_t cap,
                const char *where, hs_err *err)
{
    return get_str(o, key, buf, cap, where, err, 0);
}

int hs_json_str_opt(const cJSON *o, const char *key, char *buf, size_t cap,
                    const char *where, hs_err *err)
{
    return get_str(o, key, buf, cap, where, err, 1);
}
