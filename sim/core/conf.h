/* conf.h - typed configuration schemas over cJSON.
 *
 * Each configurable struct declares a table of hs_field (key, type, offset,
 * default, min, max).  hs_conf_fill() applies a JSON object to the struct;
 * hs_conf_set() applies one "key=value" string (the CLI's --set).  Unknown
 * keys, wrong types, non-finite numbers and out-of-range values are errors
 * naming the file and the key.  Tables end with a {NULL} entry. */
#ifndef HS_CONF_H
#define HS_CONF_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "core/err.h"

typedef enum hs_ftype {
    HS_F_INT,     /* int */
    HS_F_I64,     /* int64_t */
    HS_F_DOUBLE,  /* double */
    HS_F_BOOL,    /* int, 0 or 1 */
    HS_F_STRING,  /* char[size] */
    HS_F_SKIP     /* key allowed here, handled by the caller */
} hs_ftype;

typedef struct hs_field {
    const char *key;
    hs_ftype type;
    size_t offset;      /* offsetof(struct, member) */
    size_t size;        /* HS_F_STRING: capacity of the char array */
    int required;       /* 1: missing key is an error */
    double def;         /* default for numbers and bools */
    double min, max;    /* inclusive range for numbers */
    const char *def_str;/* default for strings (NULL: empty) */
    const char *help;   /* one line for --help and docs, with units */
} hs_field;

#define HS_FIELD_NUM(st, m, t, req, d, lo, hi, h) \
    { #m, t, offsetof(st, m), 0, req, d, lo, hi, NULL, h }
#define HS_FIELD_STR(st, m, req, d, h) \
    { #m, HS_F_STRING, offsetof(st, m), sizeof(((st *)0)->m), req, 0, 0, 0, d, h }

/* Writes every field's default into obj. */
void hs_conf_defaults(void *obj, const hs_field *fields);

/* Applies the members of JSON object `json` to obj.  `where` names the
 * source for messages (a file path).  Returns 0 or HS_EPARSE/HS_ERANGE; on
 * an error obj is unchanged (every member is checked before any is
 * stored). */
int hs_conf_fill(void *obj, const hs_field *fields, const cJSON *json,
                 const char *where, hs_err *err);

/* Applies one key from its textual value (as given to --set). */
int hs_conf_set(void *obj, const hs_field *fields, const char *key,
                const char *value, const char *where, hs_err *err);

/* Finds a field by key, NULL when absent. */
const hs_field *hs_conf_find(const hs_field *fields, const char *key);

/* Reads and parses a whole JSON file.  *out is owned by the caller
 * (cJSON_Delete).  Errors name the path and, for syntax errors, the line. */
int hs_json_load(const char *path, cJSON **out, hs_err *err);

/* Writes j, formatted, followed by a newline, to path (through path.tmp,
 * renamed over it: path is the old file or the whole new one).  j may be NULL (a tree whose building ran out of memory):
 * then HS_ENOMEM.  The tree stays the caller's.  Returns 0, HS_ENOMEM or
 * HS_EIO naming the path. */
int hs_json_save(const cJSON *j, const char *path, hs_err *err);

/* Helpers for code that walks cJSON trees by hand; all return 0 or an error
 * naming where/key.  Missing keys are errors unless a default is given by the
 * _opt variants (which return 0 and leave *v unchanged when absent). */
int hs_json_num(const cJSON *o, const char *key, double lo, double hi,
                double *v, const char *where, hs_err *err);
int hs_json_num_opt(const cJSON *o, const char *key, double lo, double hi,
                    double *v, const char *where, hs_err *err);
int hs_json_int(const cJSON *o, const char *key, long lo, long hi,
                long *v, const char *where, hs_err *err);
int hs_json_int_opt(const cJSON *o, const char *key, long lo, long hi,
                    long *v, const char *where, hs_err *err);
int hs_json_str(const cJSON *o, const char *key, char *buf, size_t cap,
                const char *where, hs_err *err);
int hs_json_str_opt(const cJSON *o, const char *key, char *buf, size_t cap,
                    const char *where, hs_err *err);

#endif
