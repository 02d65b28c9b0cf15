/* str.h - heap strings and growable arrays of pointers: copy a string,
 * append it to a list, free the list; and the one "did you mean" helper
 * every name lookup uses.
 *
 * Ownership: hs_xstrdup's copy belongs to the caller (free() it, or hand
 * it to a list).  A list is a caller-owned pointer and count (NULL and 0
 * when empty); hs_ptrs_push stores the pointer, not a copy, and leaves the
 * list and p untouched on failure (p is still the caller's to free).  A
 * list of strings made this way is freed whole, strings and array, by
 * hs_strs_free. */
#ifndef HS_STR_H
#define HS_STR_H

#include <stddef.h>

#include "core/err.h"

/* A malloc'd copy of s, or NULL when out of memory (strdup is POSIX, not
 * ISO C11). */
char *hs_xstrdup(const char *s);

/* Appends p to the array of *n pointers whose address is arr (a char ***,
 * say: void * so that any pointer array fits), growing it by one with
 * realloc.  Returns 0, or HS_ENOMEM with the array and *n unchanged. */
int hs_ptrs_push(void *arr, int *n, void *p);

/* Frees v[0..n-1] and v itself; NULL with n 0 is a no-op. */
void hs_strs_free(char **v, int n);

/* "Did you mean": the candidate a misspelt `name` most likely meant, or
 * NULL when none is close.  In order: the one candidate `name` is a
 * prefix of ("h100" for "h100-sxm-80g"); the nearest by edit distance
 * (Levenshtein with transpositions, case-insensitive) when at most
 * max(1, len/3); the one candidate containing `name`.  Ties go to the first candidate, so the answer does
 * not depend on anything but the list's order.  NULL entries are
 * skipped. */
const char *hs_str_suggest(const char *name, const char *const *cands, int n);

/* Writes " (did you mean \"X\"?)" for hs_str_suggest's answer into buf,
 * or "" when there is none; returns buf, so it fits a printf argument. */
const char *hs_str_did_you_mean(char *buf, size_t cap, const char *name,
                                const char *const *cands, int n);

/* A command-line integer: all of v, base 10, in lo..hi.  HS_ERANGE with
 * "OPT: \"V\" is not an integer in LO..HI" otherwise. */
int hs_parse_int(const char *opt, const char *v, long long lo, long long hi, long long *out,
                 hs_err *err);

#endif
