/* test_omega.c - the quality indicator: computed from a synthetic
 * safetensors file the test writes itself (F32, F16 and BF16 tensors, a
 * 1-D bias and a non-layer tensor that must be ignored), with calibration
 * statistics; the default indicator; omega files; malformed inputs. */
#include "check.h"

#include <stdint.h>

#include "llm/omega.h"

static const char *tmpdir_path(const char *name)
{
    static char buf[8][256];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 256, "/tmp/hs_omega_%d_%s", (int)getpid(), name);
    return p;
}

/* Writes a safetensors file: header JSON (padded) + data. */
static void write_st(const char *path, const char *hdr, const unsigned char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    uint64_t len = strlen(hdr);
    unsigned char l8[8];
    for (int i = 0; i < 8; i++) l8[i] = (unsigned char)(len >> (8 * i));
    fwrite(l8, 1, 8, f);
    fwrite(hdr, 1, len, f);
    fwrite(data, 1, n, f);
    fclose(f);
}

static double g4(double var) { return var / 4; }

static void test_safetensors(void)
{
    /* layer 0: fc1 F32 [2 out, 3 in], max |w| = 0.5; bias F32 [2] (ignored)
     * layer 1: fc2 F16 [1 out, 4 in], max |w| = 2.0 (0x4000);
     *          q   BF16 [2 out, 2 in], max |w| = 1.0 (0x3f80)
     * embed (no layer) F32 [2, 2] with huge values (ignored) */
    unsigned char data[256];
    size_t n = 0;
    float f1[6] = {0.1f, -0.5f, 0.2f, 0.3f, 0.0f, -0.25f}, b1[2] = {9, 9}, emb[4] = {100, 100, 100, 100};
    uint16_t h2[4] = {0x3c00, 0xc000, 0x3800, 0x0000};   /* 1, -2, 0.5, 0 */
    uint16_t q[4] = {0x3f80, 0xbf00, 0x0000, 0x3e80};    /* 1, -0.5, 0, 0.25 */
    char hdr[1024];
    const char *path = tmpdir_path("a.safetensors"), *calib;
    double *om = NULL;
    int layers = 0;
    hs_err err = {0};
    memcpy(data + n, f1, 24); n += 24;   /* [0, 24) */
    memcpy(data + n, b1, 8); n += 8;     /* [24, 32) */
    for (int i = 0; i < 4; i++) { data[n++] = (unsigned char)(h2[i] & 255); data[n++] = (unsigned char)(h2[i] >> 8); } /* [32, 40) */
    for (int i = 0; i < 4; i++) { data[n++] = (unsigned char)(q[i] & 255); data[n++] = (unsigned char)(q[i] >> 8); }   /* [40, 48) */
    memcpy(data + n, emb, 16); n += 16;  /* [48, 64) */
    snprintf(hdr, sizeof hdr,
             "{\"__metadata__\": {\"format\": \"pt\"},"
             "\"model.decoder.layers.0.fc1.weight\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]},"
             "\"model.decoder.layers.0.fc1.bias\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [24, 32]},"
             "\"model.decoder.layers.1.fc2.weight\": {\"dtype\": \"F16\", \"shape\": [1, 4], \"data_offsets\": [32, 40]},"
             "\"model.decoder.layers.1.self_attn.q_proj.weight\": {\"dtype\": \"BF16\", \"shape\": [2, 2], \"data_offsets\": [40, 48]},"
             "\"model.decoder.embed_tokens.weight\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [48, 64]}}   ");
    write_st(path, hdr, data, n);
    calib = hs_test_tmpfile("calib", "{\"model.decoder.layers.1.fc2.weight\": {\"mean\": 0.5, \"var\": 3.0}}");
    CHECK_OK(hs_omega_from_safetensors(path, calib, 0, &om, &layers, &err), &err);
    CHECK_INT(layers, 2);
    if (om) {
        for (int k = 0; k < HS_NBITS; k++) {
            int b = hs_bits_set[k];
            double q1 = b == 16 ? 0 : 1 / (pow(2, b - 1) - 1);  /* step per unit of max|w| */
            /* layer 0: D = 3, S = 0.5 q1, G = var 1 / 4 */
            CHECK_NEAR(om[0 * HS_NBITS + k], 3 * pow(0.5 * q1, 2) * g4(1), 1e-12);
            /* layer 1: fc2 D = 4, S = 2 q1, G = 3/4; q D = 2, S = q1, G = 1/4 */
            CHECK_NEAR(om[1 * HS_NBITS + k], 4 * pow(2 * q1, 2) * g4(3) + 2 * pow(q1, 2) * g4(1), 1e-12);
        }
        /* fewer bits, larger indicator */
        CHECK(om[hs_bits_index(3)] > om[hs_bits_index(4)] && om[hs_bits_index(4)] > om[hs_bits_index(8)]);
    }
    free(om);
    om = NULL;
    /* stochastic rounding: G = (E[X]^2 + Var[X]) / 6 */
    CHECK_OK(hs_omega_from_safetensors(path, calib, 1, &om, &layers, &err), &err);
    if (om) {
        int k = hs_bits_index(4);
        double q1 = 1 / 7.0;
        CHECK_NEAR(om[1 * HS_NBITS + k], 4 * pow(2 * q1, 2) * (0.25 + 3) / 6 + 2 * pow(q1, 2) / 6, 1e-12);
    }
    free(om);
    om = NULL;
    /* write and read back as an omega file */
    {
        double in[2 * HS_NBITS] = {0, 1, 2, 3, 0, 1.5, 2.5, 3.5}, back[2 * HS_NBITS];
        const char *of = tmpdir_path("o.json");
        CHECK_OK(hs_omega_write(of, "t", 2, in, &err), &err);
        CHECK_OK(hs_omega_read(of, 2, back, &err), &err);
        for (int i = 0; i < 2 * HS_NBITS; i++) CHECK_NEAR(back[i], in[i], 1e-12);
        CHECK_INT(hs_omega_read(of, 3, back, &err), HS_EPARSE);   /* layer count */
        CHECK(strstr(err.msg, "3 rows") != NULL);
        remove(of);
    }
    /* malformed files: one error line each, never a crash */
    {
        const char *bad = tmpdir_path("bad.safetensors");
        write_st(bad, "{\"model.layers.0.w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 4000]}}", data, n);
        CHECK_INT(hs_omega_from_safetensors(bad, NULL, 0, &om, &layers, &err), HS_EPARSE);
        CHECK(strstr(err.msg, "outside the file") != NULL);
        write_st(bad, "{\"model.layers.0.w\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 24]}}", data, n);
        CHECK_INT(hs_omega_from_safetensors(bad, NULL, 0, &om, &layers, &err), HS_EPARSE);
        write_st(bad, "{\"model.layers.0.w\": {\"dtype\": \"I8\", \"shape\": [2, 2], \"data_offsets\": [0, 4]}}", data, n);
        CHECK_INT(hs_omega_from_safetensors(bad, NULL, 0, &om, &layers, &err), HS_EUNSUPPORTED);
        write_st(bad, "{\"embed.w\": {\"dtype\": \"F32\", \"shape\": [1, 1], \"data_offsets\": [0, 4]}}", data, n);
        CHECK_INT(hs_omega_from_safetensors(bad, NULL, 0, &om, &layers, &err), HS_EPARSE);
        write_st(bad, "not json", data, n);
        CHECK_INT(hs_omega_from_safetensors(bad, NULL, 0, &om, &layers, &err), HS_EPARSE);
        {
            FILE *f = fopen(bad, "wb");
            fputs("abc", f);
            fclose(f);
        }
        CHECK_INT(hs_omega_from_safetensors(bad, NULL, 0, &om, &layers, &err), HS_EPARSE);
        CHECK(om == NULL);
        remove(bad);
    }
    remove(path);
}

static void test_default(void)
{
    hs_model m;
    hs_err err = {0};
    double *om;
    CHECK_OK(hs_model_find(&m, "opt-13b", &err), &err);
    om = malloc(sizeof *om * m.layers * HS_NBITS);
    hs_omega_default(&m, om);
    for (int i = 0; i < m.layers; i++) {
        CHECK_NEAR(om[i * HS_NBITS + hs_bits_index(16)], 0, 0);
        CHECK(om[i * HS_NBITS + hs_bits_index(3)] > om[i * HS_NBITS + hs_bits_index(4)]);
        CHECK(om[i * HS_NBITS + hs_bits_index(4)] > om[i * HS_NBITS + hs_bits_index(8)]);
        CHECK(om[i * HS_NBITS + hs_bits_index(8)] > 0);
        /* later layers more sensitive (the paper's Table 1) */
        if (i) CHECK(om[i * HS_NBITS + hs_bits_index(4)] > om[(i - 1) * HS_NBITS + hs_bits_index(4)]);
    }
    free(om);
}

int main(void)
{
    hs_test_root();
    test_safetensors();
    test_default();
    return hs_check_result();
}
