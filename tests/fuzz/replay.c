/* replay.c - main() of a fuzz target built without libFuzzer: feeds every
 * file named on the command line, or found in a folder named there, to
 * LLVMFuzzerTestOneInput, in name order.  ctest runs it on the target's
 * corpus (seeds and kept crashing inputs); it fails when it found no input,
 * so a missing corpus cannot pass as a replay. */
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n;
    if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        if (f) fclose(f);
        return -1;
    }
    /* a buffer of exactly the input's size, as libFuzzer gives, so ASan
     * sees a read past the end */
    buf = malloc(n ? (size_t)n : 1);
    if (!buf || (n && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    if (getenv("HS_FUZZ_SHOW")) fprintf(stderr, "%s\n", path);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int done = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) {
            fprintf(stderr, "replay: %s: no such file or folder\n", argv[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            char **names = NULL;
            size_t n = 0, cap = 0;
            if (!d) return 1;
            while ((e = readdir(d))) {
                if (e->d_name[0] == '.') continue;
                if (n == cap) {
                    char **nn = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
                    if (!nn) return 1;
                    names = nn;
                }
                if (!(names[n++] = strdup(e->d_name))) return 1;
            }
            closedir(d);
            if (n) qsort(names, n, sizeof *names, cmp_str);
            for (size_t k = 0; k < n; k++) {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", argv[i], names[k]);
                if (replay_file(path)) return 1;
                done++;
                free(names[k]);
            }
            free(names);
        } else {
            if (replay_file(argv[i])) return 1;
            done++;
        }
    }
    if (!done) {
        fprintf(stderr, "replay: no input (usage: %s FILE|FOLDER...)\n", argv[0]);
        return 1;
    }
    printf("replayed %d inputs\n", done);
    return 0;
}
