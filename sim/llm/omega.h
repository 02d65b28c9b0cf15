/* omega.h - LLM-PQ's quality indicator omega_{i,b} per layer and bit-width.
 *
 * omega_{i,b} = sum over the linear operators o of layer i of
 *     D_o * S_o(b)^2 * G(X_o)
 * (the paper's Prop. 2): D_o is the operator's input dimension, S_o(b) =
 * max|W_o| / (2^(b-1) - 1) the symmetric quantisation step, and G(X) =
 * Var[X]/4 for deterministic rounding or (E[X]^2 + Var[X])/6 for
 * stochastic rounding, from calibration statistics of the operator's
 * input.  FP16 layers have omega 0.  INT8 uses the same form (as the paper).
 *
 * File (JSON): {"model": "opt-13b", "bits": [16, 8, 4, 3],
 *               "omega": [[o16, o8, o4, o3], ...one row per layer]}.
 * Values are used raw, as the paper's objective does: theta converts them
 * to seconds of latency.
 *
 * Default (no weights): weights taken as Gaussian with std 0.02 (OPT's and
 * BLOOM's init), max|W| = std * sqrt(2 ln D_W) over the operator's
 * elements, and Var[X_i] = 1 + i/L: later layers more sensitive, as the
 * paper's Table 1 measured (quantising OPT-1.3b layers 16-24 costs more
 * perplexity than layers 0-8). */
#ifndef HS_OMEGA_H
#define HS_OMEGA_H

#include "core/err.h"
#include "llm/model.h"
#include "llm/quant.h"

/* out[layers * HS_NBITS], bit order hs_bits_set. */
void hs_omega_default(const hs_model *m, double *out);
/* Reads a file; the layer count must equal `layers`. */
int hs_omega_read(const char *path, int layers, double *out, hs_err *err);
int hs_omega_write(const char *path, const char *model, int layers, const double *om,
                   hs_err *err);

/* Computes omega from a safetensors file: the JSON header is parsed with
 * cJSON and every 2-D tensor whose name holds a layer index
 * ("...layers.<i>...", "...h.<i>...", "...blocks.<i>...") is streamed in
 * chunks (F32, F16 or BF16) to find max|W|.  calib (NULL or "") is a JSON
 * object {"<tensor name>": {"mean": m, "var": v}} of the operators' input
 * statistics; operators not listed use mean 0, var 1 (post-LayerNorm).
 * *layers_out = largest layer index + 1; *out is allocated
 * ([layers * HS_NBITS], caller frees).  Errors name the file and tensor. */
int hs_omega_from_safetensors(const char *path, const char *calib, int stochastic,
                              double **out, int *layers_out, hs_err *err);

#endif
