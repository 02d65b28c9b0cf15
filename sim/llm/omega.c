/* omega.c - the quality indicator; see omega.h. */
#include "llm/omega.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"

/* Linear operators of one layer: input dimension and element count. */
static int layer_ops(const hs_model *m, double *din, double *numel)
{
    double h = m->hidden, q = (double)m->heads * m->head_dim;
    double kv = (double)m->kv_heads * m->head_dim, f = m->ffn;
    int n = 0;
    din[n] = h, numel[n++] = h * (q + 2 * kv);             /* QKV */
    din[n] = q, numel[n++] = q * h;                        /* out proj */
    din[n] = h, numel[n++] = h * f * (m->ffn_gated ? 2 : 1); /* up (+gate) */
    din[n] = f, numel[n++] = f * h;                        /* down */
    return n;
}

void hs_omega_default(const hs_model *m, double *out)
{
    double din[4], numel[4];
    int nops = layer_ops(m, din, numel);
    for (int i = 0; i < m->layers; i++) {
        double var = 1.0 + (double)i / m->layers;
        for (int k = 0; k < HS_NBITS; k++) {
            int b = hs_bits_set[k];
            double w = 0;
            if (b < 16)
                for (int o = 0; o < nops; o++) {
                    double s = 0.02 * sqrt(2 * log(numel[o])) / (pow(2, b - 1) - 1);
                    w += din[o] * s * s * var / 4;
                }
            out[i * HS_NBITS + k] = w;
        }
    }
}

int hs_omega_read(const char *path, int layers, double *out, hs_err *err)
{
    cJSON *root = NULL;
    const cJSON *bits, *rows, *row;
    int col[HS_NBITS], rc, i = 0;
    if ((rc = hs_json_load(path, &root, err))) return rc;
    bits = cJSON_GetObjectItemCaseSensitive(root, "bits");
    rows = cJSON_GetObjectItemCaseSensitive(root, "omega");
    if (!cJSON_IsArray(bits) || cJSON_GetArraySize(bits) != HS_NBITS) {
        rc = hs_errf(err, HS_EPARSE, "%s: bits: expected [16, 8, 4, 3] in some order", path);
        goto out;
    }
    for (int k = 0; k < HS_NBITS; k++) {
        const cJSON *b = cJSON_GetArrayItem(bits, k);
        col[k] = cJSON_IsNumber(b) ? hs_bits_index(hs_bits_of(b->valuedouble)) : -1;
        for (int x = 0; x < k && col[k] >= 0; x++)
            if (col[x] == col[k]) col[k] = -1;
        if (col[k] < 0) {
            rc = hs_errf(err, HS_EPARSE, "%s: bits[%d]: expected each of 16, 8, 4, 3 once", path, k);
            goto out;
        }
    }
    if (!cJSON_IsArray(rows) || cJSON_GetArraySize(rows) != layers) {
        rc = hs_errf(err, HS_EPARSE, "%s: omega: expected %d rows (one per layer)", path, layers);
        goto out;
    }
    cJSON_ArrayForEach(row, rows) {
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != HS_NBITS) {
            rc = hs_errf(err, HS_EPARSE, "%s: omega[%d]: expected %d numbers", path, i, HS_NBITS);
            goto out;
        }
        for (int k = 0; k < HS_NBITS; k++) {
            const cJSON *v = cJSON_GetArrayItem(row, k);
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0) {
                rc = hs_errf(err, HS_EPARSE, "%s: omega[%d][%d]: expected a finite number >= 0",
                             path, i, k);
                goto out;
            }
            out[i * HS_NBITS + col[k]] = v->valuedouble;
        }
        i++;
    }
out:
    cJSON_Delete(root);
    return rc;
}

int hs_omega_write(const char *path, const char *model, int layers, const double *om,
                   hs_err *err)
{
    FILE *f;
    cJSON *name;
    char *q;
    for (int i = 0; i < layers * HS_NBITS; i++)
        if (!isfinite(om[i]))
            return hs_errf(err, HS_EINVAL, "%s: omega of layer %d is not finite", path, i / HS_NBITS);
    /* The model name may be a path: quote it as JSON. */
    if (!(name = cJSON_CreateString(model)) || !(q = cJSON_PrintUnformatted(name))) {
        cJSON_Delete(name);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    cJSON_Delete(name);
    if (!(f = fopen(path, "w"))) {
        free(q);
        return hs_errf(err, HS_EIO, "%s: cannot write", path);
    }
    fprintf(f, "{\"model\": %s, \"bits\": [16, 8, 4, 3],\n \"omega\": [", q);
    free(q);
    for (int i = 0; i < layers; i++) {
        fprintf(f, "%s\n  [", i ? "," : "");
        for (int k = 0; k < HS_NBITS; k++)
            fprintf(f, "%s%.9g", k ? ", " : "", om[i * HS_NBITS + k]);
        fputc(']', f);
    }
    fprintf(f, "]}\n");
    if (fclose(f)) return hs_errf(err, HS_EIO, "%s: write failed", path);
    return 0;
}

/* Layer index in a tensor name, -1 when none. */
static int layer_of(const char *name)
{
    static const char *const keys[] = {"layers.", "h.", "blocks.", "layer."};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        size_t n = strlen(keys[k]);
        for (const char *p = strstr(name, keys[k]); p; p = strstr(p + 1, keys[k])) {
            const char *d = p + n;
            long v = 0;
            if (p != name && p[-1] != '.') continue;
            if (!isdigit((unsigned char)*d)) continue;
            while (isdigit((unsigned char)*d) && v < 1000000) v = v * 10 + (*d++ - '0');
            if (*d == '.' || *d == 0) return (int)v;
        }
    }
    return -1;
}

static float half_to_float(uint16_t h)
{
    int e = (h >> 10) & 31, mnt = h & 1023;
    float v = e == 0 ? ldexpf((float)mnt, -24)
              : e == 31 ? (mnt ? NAN : INFINITY) : ldexpf((float)(mnt | 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* max|W| of one tensor, streamed from the file in chunks. */
static int tensor_absmax(FILE *f, long long off, long long numel, int esize, const char *dt,
                         double *out)
{
    unsigned char buf[1 << 16];
    double mx = 0;
    if (fseeko(f, (off_t)off, SEEK_SET)) return HS_EIO;
    while (numel > 0) {
        long long want = (long long)(sizeof buf / esize);
        size_t got;
        if (want > numel) want = numel;
        got = fread(buf, (size_t)esize, (size_t)want, f);
        if (got != (size_t)want) return HS_EIO;
        for (size_t i = 0; i < got; i++) {
            double v;
            if (esize == 4) {
                float x;
                memcpy(&x, buf + 4 * i, 4);
                v = x;
            } else {
                uint16_t x = (uint16_t)(buf[2 * i] | buf[2 * i + 1] << 8);
                if (!strcmp(dt, "BF16")) {
                    uint32_t u = (uint32_t)x << 16;
                    float y;
                    memcpy(&y, &u, 4);
                    v = y;
                } else v = half_to_float(x);
            }
            if (!isfinite(v)) return HS_EINVAL;   /* inf/NaN weights: no quantisation error */
            if (fabs(v) > mx) mx = fabs(v);
        }
        numel -= want;
    }
    *out = mx;
    return 0;
}

int hs_omega_from_safetensors(const char *path, const char *calib, int stochastic,
                              double **out, int *layers_out, hs_err *err)
{
    FILE *f = fopen(path, "rb");
    unsigned char len8[8];
    uint64_t hlen = 0;
    long long fsize, data0;
    char *hdr = NULL;
    cJSON *root = NULL, *cal = NULL;
    const cJSON *t;
    double *om = NULL;
    unsigned char *seen = NULL;   /* [layers]: a 2-D weight was read */
    int rc = 0, layers = 0;
    *out = NULL;
    if (!f) return hs_errf(err, HS_EIO, "%s: cannot open", path);
    if (calib && calib[0] && (rc = hs_json_load(calib, &cal, err))) goto out;
    if (fseeko(f, 0, SEEK_END) || (fsize = (long long)ftello(f)) < 8 || fseeko(f, 0, SEEK_SET) ||
        fread(len8, 1, 8, f) != 8) {
        rc = hs_errf(err, HS_EPARSE, "%s: not a safetensors file (shorter than its 8-byte header size)", path);
        goto out;
    }
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    if (hlen < 2 || hlen > 100000000 || (long long)hlen > fsize - 8) {
        rc = hs_errf(err, HS_EPARSE, "%s: header size %llu does not fit the file", path,
                     (unsigned long long)hlen);
        goto out;
    }
    data0 = 8 + (long long)hlen;
    if (!(hdr = malloc(hlen + 1)) || fread(hdr, 1, hlen, f) != hlen) {
        rc = hs_errf(err, HS_EIO, "%s: cannot read the header", path);
        goto out;
    }
    hdr[hlen] = 0;
    if (!(root = cJSON_Parse(hdr)) || !cJSON_IsObject(root)) {
        rc = hs_errf(err, HS_EPARSE, "%s: header is not a JSON object", path);
        goto out;
    }
    cJSON_ArrayForEach(t, root) {
        int l = layer_of(t->string);
        if (strcmp(t->string, "__metadata__") && l >= 0 && l + 1 > layers) layers = l + 1;
    }
    if (!layers || layers > 100000) {
        rc = hs_errf(err, HS_EPARSE, "%s: no tensor names a layer (\"layers.<i>.\", \"h.<i>.\")", path);
        goto out;
    }
    if (!(om = calloc((size_t)layers * HS_NBITS, sizeof *om)) || !(seen = calloc((size_t)layers, 1))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    cJSON_ArrayForEach(t, root) {
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
        const cJSON *of = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        int l = layer_of(t->string), esize;
        long long numel = 1, b, e;
        double mx, mean = 0, var = 1, g;
        if (!strcmp(t->string, "__metadata__")) continue;
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(of) ||
            cJSON_GetArraySize(of) != 2) {
            rc = hs_errf(err, HS_EPARSE, "%s: tensor %s: expected dtype, shape and data_offsets", path, t->string);
            goto out;
        }
        esize = !strcmp(dt->valuestring, "F32") ? 4
                : (!strcmp(dt->valuestring, "F16") || !strcmp(dt->valuestring, "BF16")) ? 2 : 0;
        for (int k = 0; k < cJSON_GetArraySize(sh); k++) {
            const cJSON *d = cJSON_GetArrayItem(sh, k);
            if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1e12) {
                rc = hs_errf(err, HS_EPARSE, "%s: tensor %s: shape[%d] is not a size", path, t->string, k);
                goto out;
            }
            if (d->valuedouble > 0 && numel > LLONG_MAX / 8 / (long long)d->valuedouble) {
                rc = hs_errf(err, HS_EPARSE, "%s: tensor %s: shape too large", path, t->string);
                goto out;
            }
            numel *= (long long)d->valuedouble;
        }
        b = (long long)cJSON_GetArrayItem(of, 0)->valuedouble;
        e = (long long)cJSON_GetArrayItem(of, 1)->valuedouble;
        if (b < 0 || e < b || data0 + e > fsize) {
            rc = hs_errf(err, HS_EPARSE, "%s: tensor %s: data_offsets [%lld, %lld] outside the file", path, t->string, b, e);
            goto out;
        }
        /* only 2-D weights of a layer are quantised operators */
        if (l < 0 || cJSON_GetArraySize(sh) != 2) continue;
        if (!esize) {
            rc = hs_errf(err, HS_EUNSUPPORTED, "%s: tensor %s: dtype %s (expected F32, F16 or BF16)", path, t->string, dt->valuestring);
            goto out;
        }
        if (e - b != numel * esize) {
            rc = hs_errf(err, HS_EPARSE, "%s: tensor %s: %lld bytes for %lld elements of %s", path, t->string, e - b, numel, dt->valuestring);
            goto out;
        }
        if ((rc = tensor_absmax(f, data0 + b, numel, esize, dt->valuestring, &mx))) {
            rc = rc == HS_EINVAL
                     ? hs_errf(err, HS_EPARSE, "%s: tensor %s: holds inf or NaN weights", path, t->string)
                     : hs_errf(err, HS_EIO, "%s: tensor %s: cannot read its data", path, t->string);
            goto out;
        }
        seen[l] = 1;
        if (cal) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(cal, t->string);
            char where[600];
            snprintf(where, sizeof where, "%s: %s", calib, t->string);
            if (s && ((rc = hs_json_num_opt(s, "mean", -1e30, 1e30, &mean, where, err)) ||
                      (rc = hs_json_num_opt(s, "var", 0, 1e30, &var, where, err))))
                goto out;
        }
        g = stochastic ? (mean * mean + var) / 6 : var / 4;
        for (int k = 0; k < HS_NBITS; k++) {
            int bits = hs_bits_set[k];
            double step = mx / (pow(2, bits - 1) - 1);
            /* PyTorch Linear weights are [out, in]: D_W is shape[1] */
            if (bits < 16)
                om[l * HS_NBITS + k] += cJSON_GetArrayItem(sh, 1)->valuedouble * step * step * g;
        }
    }
    /* A layer without a quantisable weight would look free to quantise:
     * most likely one shard of a multi-file checkpoint. */
    for (int l = 0; l < layers; l++)
        if (!seen[l]) {
            rc = hs_errf(err, HS_EINVAL, "%s: layer %d: no 2-D weight tensor (one shard of a sharded checkpoint?)",
                         path, l);
            goto out;
        }
    *out = om;
    *layers_out = layers;
    om = NULL;
out:
    free(seen);
    free(om);
    free(hdr);
    cJSON_Delete(root);
    cJSON_Delete(cal);
    fclose(f);
    return rc;
}
