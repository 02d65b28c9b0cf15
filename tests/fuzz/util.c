/* util.c - temporary files and the error contract for the fuzz targets;
 * see fuzz.h. */
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64];

static void empty_dir(const char *dir);

static void cleanup(void)
{
    if (!tmpdir[0]) return;
    empty_dir(tmpdir);
    rmdir(tmpdir);
}

static const char *dir_get(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/hs-fuzz-XXXXXX", base && strlen(base) < 40 ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("hs_fuzz: mkdtemp");
            abort();
        }
        atexit(cleanup);
    }
    return tmpdir;
}

static void write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) {
        perror(path);
        abort();
    }
}

const char *hs_fuzz_file(const uint8_t *data, size_t size, const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir_get(), name);
    write_file(path, data, size);
    return path;
}

static int name_ok(const uint8_t *s, size_t n)
{
    if (n == 0 || n > 100 || s[0] == '.') return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

static void empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    if (!d) return;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

static int is_mark(const uint8_t *data, size_t size, size_t i)
{
    return i + 5 <= size && (i == 0 || data[i - 1] == '\n') && !memcmp(data + i, "//// ", 5);
}

const char *hs_fuzz_dir(const uint8_t *data, size_t size, const char *default_name)
{
    char path[512], name[128];
    size_t start = 0, i = 0;
    const char *dir = dir_get();
    empty_dir(dir);
    snprintf(name, sizeof name, "%s", default_name ? default_name : "");
    /* a section runs from after its "//// NAME" line to the next mark */
    for (;;) {
        if (i == size || is_mark(data, size, i)) {
            if (name[0]) {
                snprintf(path, sizeof path, "%s/%s", dir, name);
                write_file(path, data + start, i - start);
            }
            if (i == size) break;
            {
                size_t j = i + 5, k = j;
                while (k < size && data[k] != '\n') k++;
                name[0] = '\0';
                if (name_ok(data + j, k - j)) {
                    memcpy(name, data + j, k - j);
                    name[k - j] = '\0';
                }
                start = i = k < size ? k + 1 : k;
            }
            continue;
        }
        i++;
    }
    return dir;
}

void hs_fuzz_check(int rc, const hs_err *err)
{
    size_t n;
    /* HS_FUZZ_SHOW=1: what each input gave (checking a corpus by hand) */
    if (getenv("HS_FUZZ_SHOW")) fprintf(stderr, "  -> %s\n", rc ? err->msg : "accepted");
    if (rc == 0) return;
    if (rc <= HS__ERR_FIRST || rc >= HS__ERR_LAST) {
        fprintf(stderr, "hs_fuzz: reader returned %d, not 0 or an HS_E* code\n", rc);
        abort();
    }
    n = strnlen(err->msg, sizeof err->msg);
    if (n == 0 || n == sizeof err->msg) {
        fprintf(stderr, "hs_fuzz: error %d (%s) without a message\n", rc, hs_strerror(rc));
        abort();
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)err->msg[i] < 0x20 || err->msg[i] == 0x7f) {
            fprintf(stderr, "hs_fuzz: error message has control character 0x%02x at %zu: %s\n",
                    (unsigned char)err->msg[i], i, err->msg);
            abort();
        }
}
