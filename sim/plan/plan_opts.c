/* plan_opts.c - planners' options: "key=value,..." text through the schema
 * each planner declares (hs_planner_ops.opts); see plan.h.  Apart from the
 * registry (plan.c), so that planners depend on it and not on the list
 * that names them. */
#include "plan/plan.h"

#include <stdio.h>
#include <string.h>

#include "core/str.h"

int hs_planner_opts(const hs_planner_ops *p, const char *text, void *blob, hs_err *err)
{
    char buf[1024], *save = NULL, *tok, where[96];
    if (p->opts) hs_conf_defaults(blob, p->opts);
    if (!text || !*text) return 0;
    if (!p->opts) return hs_errf(err, HS_EINVAL, "plan_opts: planner %s takes no options", p->name);
    if (strlen(text) >= sizeof buf)
        return hs_errf(err, HS_ERANGE, "plan_opts: longer than %zu characters", sizeof buf - 1);
    strcpy(buf, text);
    snprintf(where, sizeof where, "plan_opts (planner %s)", p->name);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        int rc;
        if (!eq) return hs_errf(err, HS_EINVAL, "plan_opts: \"%s\" is not key=value", tok);
        *eq = 0;
        if (!hs_conf_find(p->opts, tok)) {
            char keys[512], dym[160];
            const char *names[128];
            size_t n = 0;
            int nn = 0;
            keys[0] = 0;
            for (const hs_field *f = p->opts; f->key && n < sizeof keys; f++)
                n += (size_t)snprintf(keys + n, sizeof keys - n, "%s%s", n ? ", " : "", f->key);
            for (const hs_field *f = p->opts; f->key && nn < 128; f++) names[nn++] = f->key;
            return hs_errf(err, HS_EINVAL, "plan_opts: %s: unknown key for planner %s%s (keys: %s)", tok, p->name,
                           hs_str_did_you_mean(dym, sizeof dym, tok, names, nn), keys);
        }
        if ((rc = hs_conf_set(blob, p->opts, tok, eq + 1, where, err))) return rc;
    }
    return 0;
}

void hs_planner_opts_help(const hs_planner_ops *p, FILE *fp, const char *indent)
{
    for (const hs_field *f = p->opts; f && f->key; f++) {
        char def[64];
        if (f->type == HS_F_STRING) snprintf(def, sizeof def, "\"%s\"", f->def_str ? f->def_str : "");
        else snprintf(def, sizeof def, "%g", f->def);
        fprintf(fp, "%s%-12s %-10s %s\n", indent, f->key, def, f->help);
    }
}
