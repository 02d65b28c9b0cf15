/* sharegpt.c - (prompt, output) pairs from the public ShareGPT JSON format.
 *
 * Input: a JSON array of {"id": ..., "conversations": [{"from": "human",
 * "value": "..."}, {"from": "gpt", "value": "..."}, ...]} (e.g.
 * ShareGPT_V3_unfiltered_cleaned_split.json).  Each conversation gives at most
 * one request, as vLLM's benchmark_serving.py does: conversations with fewer
 * than 2 turns are skipped; the prompt is the first "human" (or "user") turn
 * and the output the turn right after it, which must be "gpt" (or
 * "assistant"); conversations without such an exchange are skipped and
 * counted.  vLLM's extra length filters (prompt < 4 or > 1024 tokens ...) are
 * model-specific and not applied here.
 *
 * Token counts are estimated without a tokenizer: tokens = max(1,
 * round(bytes / 4)) over the UTF-8 bytes of the text, the usual rule of thumb
 * for English with BPE tokenizers (about 4 characters per token).  It
 * undercounts code and non-Latin scripts; use a tokenized length CSV
 * (kind "sharegpt-csv") when exact counts matter.
 *
 * Memory: cJSON needs the whole file and its tree in memory (a few times the
 * file size, e.g. ~2-3 GB for the 650 MB V3 dump).  This is the one reader
 * that does not stream; the tree is freed as soon as the pairs (8 bytes per
 * request) are extracted. */
#include "workload/workload_int.h"

#include <string.h>

int64_t hs__tokens_estimate(size_t bytes)
{
    int64_t t = (int64_t)((bytes + 2) / 4); /* round half up */
    return t < 1 ? 1 : t;
}

static int is_from(const cJSON *turn, const char *a, const char *b)
{
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(turn, "from");
    return cJSON_IsString(from) &&
           (strcmp(from->valuestring, a) == 0 || strcmp(from->valuestring, b) == 0);
}

/* Message context for conversation number idx (0-based in the array). */
static void conv_name(char *buf, size_t cap, const char *path, int idx, const cJSON *conv)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(conv, "id");
    if (cJSON_IsString(id))
        snprintf(buf, cap, "%s: conversation %d (id \"%.40s\")", path, idx, id->valuestring);
    else
        snprintf(buf, cap, "%s: conversation %d", path, idx);
}

static int turn_tokens(const cJSON *turn, int k, const char *ctx, int64_t *out,
                       hs_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(turn, "value");
    if (!cJSON_IsString(v))
        return hs_errf(err, HS_EPARSE, "%s: turn %d: \"value\" is missing or not a string",
                       ctx, k);
    *out = hs__tokens_estimate(strlen(v->valuestring));
    if (*out > HS__TOKENS_ABSURD)
        return hs_errf(err, HS_EPARSE, "%s: turn %d: %lld tokens is absurd (more than %d)",
                       ctx, k, (long long)*out, HS__TOKENS_ABSURD);
    return 0;
}

int hs__pairs_load_json(hs__pairs *p, const char *path, int32_t max_prompt,
                        hs_err *err)
{
    cJSON *root = NULL;
    const cJSON *conv;
    char ctx[256];
    int rc, idx = 0;

    rc = hs_json_load(path, &root, err);
    if (rc) return rc;
    if (!cJSON_IsArray(root)) {
        rc = hs_errf(err, HS_EPARSE, "%s: expected a JSON array of conversations", path);
        goto done;
    }
    cJSON_ArrayForEach(conv, root) {
        const cJSON *turns, *t;
        int k = 0, human = -1;
        int64_t prompt = 0, output = 0;

        conv_name(ctx, sizeof ctx, path, idx++, conv);
        if (!cJSON_IsObject(conv)) {
            rc = hs_errf(err, HS_EPARSE, "%s: expected an object", ctx);
            goto done;
        }
        turns = cJSON_GetObjectItemCaseSensitive(conv, "conversations");
        if (!cJSON_IsArray(turns)) {
            rc = hs_errf(err, HS_EPARSE, "%s: \"conversations\" is missing or not an array", ctx);
            goto done;
        }
        if (cJSON_GetArraySize(turns) < 2) {
            p->skipped++;
            continue;
        }
        cJSON_ArrayForEach(t, turns) {
            if (!cJSON_IsObject(t)) {
                rc = hs_errf(err, HS_EPARSE, "%s: turn %d: expected an object", ctx, k);
                goto done;
            }
            if (is_from(t, "human", "user")) {
                human = k;
                break;
            }
            k++;
        }
        if (human < 0 || !t->next || !cJSON_IsObject(t->next) ||
            !is_from(t->next, "gpt", "assistant")) {
            p->skipped++;
            continue;
        }
        if ((rc = turn_tokens(t, human, ctx, &prompt, err)) != 0) goto done;
        if ((rc = turn_tokens(t->next, human + 1, ctx, &output, err)) != 0) goto done;
        if (max_prompt > 0 && prompt > max_prompt) {
            rc = hs_errf(err, HS_EPARSE, "%s: prompt of %lld tokens exceeds max_prompt %d",
                         ctx, (long long)prompt, (int)max_prompt);
            goto done;
        }
        if ((rc = hs__pairs_push(p, (int32_t)prompt, (int32_t)output, err)) != 0) goto done;
    }
    if (p->n == 0)
        rc = hs_errf(err, HS_EPARSE, "%s: no conversation with a human turn followed by a gpt turn",
                     path);
done:
    cJSON_Delete(root);
    return rc;
}
