/* str.c - heap strings and growable arrays of pointers; see str.h. */
#include "core/str.h"

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
