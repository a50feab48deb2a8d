/*
 * Regenerates the expected hashes of ggml_reference.rs from ggml's own C quantizers.
 * Not built by cargo. With a llama.cpp checkout at $G = <llama.cpp>/ggml (e.g. the one vendored
 * in the PyPI sdist llama-cpp-python 0.3.36):
 *
 *   gcc -O2 -std=gnu11 -I $G/include -I $G/src ggml_harness.c $G/src/ggml-quants.c -lm -o harness
 *   INGOT_QUANT_DUMP_INPUT=/tmp/x.f32 cargo test -p ingot-quant --test ggml_reference
 *   ./harness Q4_K /tmp/x.f32 /tmp/q4_k.bin      # then FNV-1a 64 of the output file
 *
 * Build for baseline x86-64: with -march=haswell GCC contracts a*b+c into FMAs and several
 * k-quants change bytes (llama-quantize's output for the golden model matches the no-FMA build).
 */
#include "ggml.h"
#include "ggml-quants.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The few ggml.c symbols ggml-quants.c references, for the types used here. */
void ggml_abort(const char *file, int line, const char *fmt, ...) {
    (void)fmt;
    fprintf(stderr, "ggml_abort at %s:%d\n", file, line);
    abort();
}
static size_t block_size(enum ggml_type t) { return t == GGML_TYPE_Q4_0 || t == GGML_TYPE_Q4_1 || t == GGML_TYPE_Q5_0 || t == GGML_TYPE_Q5_1 || t == GGML_TYPE_Q8_0 || t == GGML_TYPE_IQ4_NL ? 32 : 256; }
size_t ggml_type_size(enum ggml_type t) {
    switch (t) {
    case GGML_TYPE_Q4_0: return 18; case GGML_TYPE_Q4_1: return 20; case GGML_TYPE_Q5_0: return 22;
    case GGML_TYPE_Q5_1: return 24; case GGML_TYPE_Q8_0: return 34; case GGML_TYPE_Q2_K: return 84;
    case GGML_TYPE_Q3_K: return 110; case GGML_TYPE_Q4_K: return 144; case GGML_TYPE_Q5_K: return 176;
    case GGML_TYPE_Q6_K: return 210; case GGML_TYPE_IQ4_NL: return 18; case GGML_TYPE_IQ4_XS: return 136;
    default: abort();
    }
}
size_t ggml_row_size(enum ggml_type t, int64_t ne) { return ggml_type_size(t) * ne / block_size(t); }
const char *ggml_type_name(enum ggml_type t) { (void)t; return "?"; }

/* usage: harness TYPE in.f32 out.bin (input length a multiple of 256 values) */
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    FILE *f = fopen(argv[2], "rb");
    if (!f) return 2;
    fseek(f, 0, SEEK_END);
    long nbytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    long n = nbytes / 4;
    float *x = malloc(nbytes);
    if (fread(x, 4, n, f) != (size_t)n) return 2;
    fclose(f);
    char *out = calloc(n * 4, 1);
    size_t sz = 0;
    const char *t = argv[1];
    if (!strcmp(t, "Q4_0")) { quantize_row_q4_0_ref(x, (void *)out, n); sz = n / 32 * 18; }
    else if (!strcmp(t, "Q4_1")) { quantize_row_q4_1_ref(x, (void *)out, n); sz = n / 32 * 20; }
    else if (!strcmp(t, "Q5_0")) { quantize_row_q5_0_ref(x, (void *)out, n); sz = n / 32 * 22; }
    else if (!strcmp(t, "Q5_1")) { quantize_row_q5_1_ref(x, (void *)out, n); sz = n / 32 * 24; }
    else if (!strcmp(t, "Q8_0")) { quantize_row_q8_0_ref(x, (void *)out, n); sz = n / 32 * 34; }
    else if (!strcmp(t, "Q8_K")) { quantize_row_q8_K_ref(x, (void *)out, n); sz = n / 256 * 292; }
    else if (!strcmp(t, "Q2_K")) sz = quantize_q2_K(x, out, n / 256, 256, NULL);
    else if (!strcmp(t, "Q3_K")) sz = quantize_q3_K(x, out, n / 256, 256, NULL);
    else if (!strcmp(t, "Q4_K")) sz = quantize_q4_K(x, out, n / 256, 256, NULL);
    else if (!strcmp(t, "Q5_K")) sz = quantize_q5_K(x, out, n / 256, 256, NULL);
    else if (!strcmp(t, "Q6_K")) sz = quantize_q6_K(x, out, n / 256, 256, NULL);
    else if (!strcmp(t, "IQ4_NL")) sz = quantize_iq4_nl(x, out, n / 256, 256, NULL);
    else if (!strcmp(t, "IQ4_XS")) sz = quantize_iq4_xs(x, out, n / 256, 256, NULL);
    else if (!strcmp(t, "IQ3_XXS")) { iq3xs_init_impl(256); sz = quantize_iq3_xxs(x, out, n / 256, 256, NULL); }
    else if (!strcmp(t, "IQ3_S")) { iq3xs_init_impl(512); sz = quantize_iq3_s(x, out, n / 256, 256, NULL); }
    else if (!strcmp(t, "IQ1_M")) { iq2xs_init_impl(GGML_TYPE_IQ1_M); sz = quantize_iq1_m(x, out, n / 256, 256, NULL); }
    else if (!strcmp(t, "IQ2_S")) { iq2xs_init_impl(GGML_TYPE_IQ2_S); sz = quantize_iq2_s(x, out, n / 256, 256, NULL); }
    else { fprintf(stderr, "unknown type %s\n", t); return 2; }
    FILE *o = fopen(argv[3], "wb");
    if (!o) return 2;
    fwrite(out, 1, sz, o);
    fclose(o);
    return 0;
}
