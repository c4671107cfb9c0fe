/* layout_capi.c - exercises patio's layout core through its C ABI (patio_layout.h):
 * flattening against a hand-computed reference, pricing and a choice between an array
 * and its transposed replica, and bad inputs (null pointers, a wrong rank, a selection
 * outside the array, a short buffer, an unknown preset) each getting its error code.
 * Prints "ok" and exits 0 when every check holds; otherwise names the failed check. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "patio_layout.h"

static int failures = 0;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,       \
                    __LINE__, #cond, patio_layout_last_error());                        \
            failures++;                                                                 \
        }                                                                               \
    } while (0)

int main(void) {
    /* A 64 x 64 array of doubles at byte 1024. */
    const uint64_t shape[2] = {64, 64};
    PatioLayout *orig = NULL;
    CHECK(patio_layout_contiguous(2, shape, 8, 1024, &orig) == PATIO_OK && orig != NULL);

    /* Column 5 of rows 0..3: hyperslab start {0,5} stride {1,1} count {4,1} block {1,1}. */
    const uint64_t column[8] = {0, 5, 1, 1, 4, 1, 1, 1};
    uint64_t off[8], len[8], n = 0;
    CHECK(patio_layout_flatten(orig, 2, 1, column, off, len, 8, &n) == PATIO_OK);
    CHECK(n == 4);
    for (uint64_t i = 0; i < n && i < 4; i++) {
        CHECK(off[i] == 1024 + (i * 64 + 5) * 8);
        CHECK(len[i] == 8);
    }
    /* Rows 2..3 whole: one extent. */
    const uint64_t rows[8] = {2, 0, 1, 1, 1, 1, 2, 64};
    CHECK(patio_layout_flatten(orig, 2, 1, rows, off, len, 8, &n) == PATIO_OK);
    CHECK(n == 1 && off[0] == 1024 + 2 * 64 * 8 && len[0] == 2 * 64 * 8);

    /* Pricing and a choice: a column is cheaper from the transposed replica. */
    const double consts[4] = {5e-6, 1e-4, 1e-4, 0.0};
    const uint64_t tshape[2] = {64, 64};
    PatioLayout *trans = NULL;
    CHECK(patio_layout_contiguous(2, tshape, 8, 1 << 20, &trans) == PATIO_OK);
    const uint64_t full_column[8] = {0, 5, 1, 1, 64, 1, 1, 1};
    double orig_s = 0, seconds = 0, saved = 0;
    CHECK(patio_layout_price(orig, "ssd", consts, 2, 1, full_column, &orig_s) == PATIO_OK);
    CHECK(orig_s > 0);
    PatioDecider *dec = NULL;
    CHECK(patio_decider_new(orig, NULL, 0, "ssd", consts, &dec) == PATIO_OK);
    const uint32_t perm[2] = {1, 0};
    CHECK(patio_decider_add_transposed(dec, trans, 2, perm) == PATIO_OK);
    int64_t replica = -2;
    CHECK(patio_decider_choose(dec, 2, 1, full_column, &replica, &seconds, &saved) ==
          PATIO_OK);
    CHECK(replica == 0 && seconds < orig_s && saved > 0);
    CHECK(patio_decider_choose(dec, 2, 1, rows, &replica, &seconds, &saved) == PATIO_OK);
    CHECK(replica == -1 && saved == 0);

    /* Bad inputs: codes, never a crash. */
    PatioLayout *bad = NULL;
    CHECK(patio_layout_contiguous(2, NULL, 8, 0, &bad) == PATIO_ENULL);
    CHECK(patio_layout_contiguous(2, shape, 0, 0, &bad) == PATIO_EINVAL);
    CHECK(patio_layout_contiguous(2, shape, 8, 0, NULL) == PATIO_ENULL);
    const uint64_t chunk[2] = {16, 16};
    const int64_t addrs[3] = {0, 1, 2};
    CHECK(patio_layout_chunked(2, shape, 8, chunk, 3, addrs, NULL, &bad) == PATIO_EINVAL);
    CHECK(patio_layout_flatten(NULL, 2, 1, column, off, len, 8, &n) == PATIO_ENULL);
    const uint64_t rank3[12] = {0, 5, 0, 1, 1, 1, 4, 1, 1, 1, 1, 1};
    CHECK(patio_layout_flatten(orig, 3, 1, rank3, off, len, 8, &n) == PATIO_EINVAL);
    const uint64_t outside[8] = {60, 0, 1, 1, 8, 1, 1, 1};
    CHECK(patio_layout_flatten(orig, 2, 1, outside, off, len, 8, &n) == PATIO_EINVAL);
    CHECK(patio_layout_flatten(orig, 2, 1, column, off, len, 2, &n) == PATIO_ERANGE && n == 4);
    CHECK(patio_layout_flatten(orig, 2, 1, NULL, off, len, 8, &n) == PATIO_ENULL);
    CHECK(patio_layout_price(orig, "nosuch", consts, 2, 1, column, &seconds) == PATIO_EINVAL);
    CHECK(patio_layout_price(orig, NULL, consts, 2, 1, column, &seconds) == PATIO_ENULL);
    const double negative[4] = {-1, 0, 0, 0};
    CHECK(patio_layout_price(orig, "ssd", negative, 2, 1, column, &seconds) == PATIO_EINVAL);
    const uint32_t not_perm[2] = {0, 0};
    CHECK(patio_decider_add_transposed(dec, trans, 2, not_perm) == PATIO_EINVAL);
    CHECK(patio_decider_choose(NULL, 2, 1, column, &replica, &seconds, &saved) == PATIO_ENULL);
    CHECK(patio_decider_choose(dec, 2, 1, outside, &replica, &seconds, &saved) == PATIO_EINVAL);

    patio_decider_free(dec);
    patio_layout_free(trans);
    patio_layout_free(orig);
    patio_layout_free(NULL);
    patio_decider_free(NULL);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    puts("ok");
    return 0;
}
