/* layout_capi.c - exercises patio's layout core through its C ABI (patio_layout.h):
 * flattening against a hand-computed reference, pricing and a choice between an array
 * and its transposed replica, plans carried out as pieces (a concatenated product
 * replica read alone or split with the original, a point replica with the points it
 * lacks, a transposed replica with its axes swapped) checked against hand-computed
 * selections, destinations and extents, and bad inputs (null pointers, a wrong rank, a
 * selection outside the array, unsorted index sets, a short buffer, an unknown preset,
 * a piece or axis out of range, a stale plan) each getting its error code.
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

/* Plans on a 1024 x 1024 array of doubles (8 KiB rows, so rows are pages apart) with
 * a concatenated product replica (rows 100, 300, 500, every column) and a concatenated
 * point replica (four elements): a request inside the product is read from it alone,
 * one leaving it along axis 0 is split, points come from the point replica. */
static void plans(const double *consts) {
    const uint64_t big[2] = {1024, 1024};
    PatioLayout *orig = NULL, *prod = NULL, *pts = NULL, *bad = NULL;
    CHECK(patio_layout_contiguous(2, big, 8, 0, &orig) == PATIO_OK);
    const uint64_t pshape[2] = {3, 1024};
    CHECK(patio_layout_contiguous(2, pshape, 8, 16u << 20, &prod) == PATIO_OK);
    const uint64_t npts = 4, ptshape[1] = {4};
    CHECK(patio_layout_contiguous(1, ptshape, 8, 32u << 20, &pts) == PATIO_OK);
    PatioDecider *dec = NULL;
    CHECK(patio_decider_new(orig, NULL, 0, "ssd", consts, &dec) == PATIO_OK);

    uint64_t *sets = malloc(sizeof(uint64_t) * (3 + 1024));
    CHECK(sets != NULL);
    if (!sets) return;
    sets[0] = 100, sets[1] = 300, sets[2] = 500;
    for (uint64_t i = 0; i < 1024; i++) sets[3 + i] = i;
    const uint64_t lens[2] = {3, 1024};
    const uint32_t ident[2] = {0, 1};
    CHECK(patio_decider_add_product(dec, prod, 2, lens, sets, ident) == PATIO_OK);
    const uint64_t linear[4] = {5, 1030, 2050, 9000};
    CHECK(patio_decider_add_points(dec, pts, npts, linear) == PATIO_OK);

    /* Rows 100, 300, 500 (three hyperslabs, a product): read from the replica alone. */
    const uint64_t three[24] = {100, 0, 1, 1, 1, 1, 1, 1024, 300, 0, 1, 1, 1, 1, 1, 1024,
                                500, 0, 1, 1, 1, 1, 1, 1024};
    PatioPlan *plan = NULL;
    int32_t kind = -1, sk = -1;
    double seconds = 0, saved = 0;
    uint64_t np = 0, n = 0, dims[4], blocks[8], count = 0, inflated = 1;
    uint64_t off[4], len[4];
    uint32_t order[4], srank = 0;
    int64_t copy = -2;
    CHECK(patio_decider_plan(dec, 2, 3, three, &plan) == PATIO_OK);
    CHECK(patio_plan_summary(plan, &kind, &seconds, &saved, &np) == PATIO_OK);
    CHECK(kind == PATIO_PLAN_SUB && np == 1 && saved > 0);
    CHECK(patio_plan_buffer(plan, dims, 4, &n) == PATIO_OK);
    CHECK(n == 2 && dims[0] == 3 && dims[1] == 1024);
    CHECK(patio_plan_piece(plan, 0, &copy, order, 4, &n) == PATIO_OK);
    CHECK(copy == 0 && n == 2 && order[0] == 0 && order[1] == 1);
    CHECK(patio_plan_selection(plan, 0, PATIO_SOURCE, &sk, &srank, &count) == PATIO_OK);
    CHECK(sk == PATIO_SEL_GRIDS && srank == 2 && count == 1);
    CHECK(patio_plan_axis(plan, 0, PATIO_SOURCE, 0, 0, blocks, 4, &n) == PATIO_OK);
    CHECK(n == 1 && blocks[0] == 0 && blocks[1] == 3);
    CHECK(patio_plan_axis(plan, 0, PATIO_DEST, 0, 1, blocks, 4, &n) == PATIO_OK);
    CHECK(n == 1 && blocks[0] == 0 && blocks[1] == 1024);
    CHECK(patio_plan_extents(dec, plan, 0, off, len, 4, &n, &inflated) == PATIO_OK);
    CHECK(n == 1 && off[0] == 16u << 20 && len[0] == 3 * 8192 && inflated == 0);
    /* Bad inputs on a plan. */
    CHECK(patio_plan_piece(plan, 1, &copy, order, 4, &n) == PATIO_EINVAL);
    CHECK(patio_plan_piece(plan, 0, &copy, order, 1, &n) == PATIO_ERANGE && n == 2);
    CHECK(patio_plan_selection(plan, 0, 7, &sk, &srank, &count) == PATIO_EINVAL);
    CHECK(patio_plan_axis(plan, 0, PATIO_SOURCE, 0, 2, blocks, 4, &n) == PATIO_EINVAL);
    CHECK(patio_plan_axis(plan, 0, PATIO_SOURCE, 1, 0, blocks, 4, &n) == PATIO_EINVAL);
    CHECK(patio_plan_coords(plan, 0, PATIO_SOURCE, off, 4, &n) == PATIO_EINVAL);
    CHECK(patio_plan_summary(NULL, &kind, &seconds, &saved, &np) == PATIO_ENULL);
    CHECK(patio_plan_summary(plan, NULL, &seconds, &saved, &np) == PATIO_ENULL);
    CHECK(patio_plan_buffer(plan, NULL, 0, &n) == PATIO_ERANGE && n == 2);
    CHECK(patio_plan_extents(NULL, plan, 0, off, len, 4, &n, &inflated) == PATIO_ENULL);
    patio_plan_free(plan);

    /* Rows 100, 300, 500, 700: the replica's three rows plus row 700 from the original. */
    const uint64_t four[8] = {100, 0, 200, 1, 4, 1, 1, 1024};
    CHECK(patio_decider_plan(dec, 2, 1, four, &plan) == PATIO_OK);
    CHECK(patio_plan_summary(plan, &kind, &seconds, &saved, &np) == PATIO_OK);
    CHECK(kind == PATIO_PLAN_SPLIT && np == 2);
    CHECK(patio_plan_piece(plan, 1, &copy, order, 4, &n) == PATIO_OK && copy == -1);
    CHECK(patio_plan_axis(plan, 1, PATIO_SOURCE, 0, 0, blocks, 4, &n) == PATIO_OK);
    CHECK(n == 1 && blocks[0] == 700 && blocks[1] == 1);
    CHECK(patio_plan_axis(plan, 1, PATIO_DEST, 0, 0, blocks, 4, &n) == PATIO_OK);
    CHECK(n == 1 && blocks[0] == 3 && blocks[1] == 1);
    CHECK(patio_plan_axis(plan, 0, PATIO_DEST, 0, 0, blocks, 4, &n) == PATIO_OK);
    CHECK(n == 1 && blocks[0] == 0 && blocks[1] == 3);
    CHECK(patio_plan_extents(dec, plan, 1, off, len, 4, &n, &inflated) == PATIO_OK);
    CHECK(n == 1 && off[0] == 700 * 8192 && len[0] == 8192);

    /* Points in another order than the replica's, and one it lacks. */
    const uint64_t coords[10] = {8, 808, 0, 5, 2, 2, 1, 6, 500, 500};
    PatioPlan *pplan = NULL;
    CHECK(patio_decider_plan_points(dec, 2, 5, coords, &pplan) == PATIO_OK);
    CHECK(patio_plan_summary(pplan, &kind, &seconds, &saved, &np) == PATIO_OK);
    CHECK(kind == PATIO_PLAN_POINTS && np == 2);
    CHECK(patio_plan_buffer(pplan, dims, 4, &n) == PATIO_OK && n == 1 && dims[0] == 5);
    uint64_t where[8];
    CHECK(patio_plan_piece(pplan, 0, &copy, order, 4, &n) == PATIO_OK && copy == 1);
    CHECK(patio_plan_coords(pplan, 0, PATIO_SOURCE, where, 8, &n) == PATIO_OK && n == 4);
    CHECK(where[0] == 0 && where[1] == 1 && where[2] == 2 && where[3] == 3);
    CHECK(patio_plan_coords(pplan, 0, PATIO_DEST, where, 8, &n) == PATIO_OK && n == 4);
    CHECK(where[0] == 1 && where[1] == 3 && where[2] == 2 && where[3] == 0);
    CHECK(patio_plan_coords(pplan, 0, PATIO_DEST, where, 2, &n) == PATIO_ERANGE && n == 4);
    CHECK(patio_plan_selection(pplan, 1, PATIO_SOURCE, &sk, &srank, &count) == PATIO_OK);
    CHECK(sk == PATIO_SEL_POINTS && srank == 2 && count == 1);
    CHECK(patio_plan_coords(pplan, 1, PATIO_SOURCE, where, 8, &n) == PATIO_OK);
    CHECK(n == 1 && where[0] == 500 && where[1] == 500);
    CHECK(patio_plan_coords(pplan, 1, PATIO_DEST, where, 8, &n) == PATIO_OK);
    CHECK(n == 1 && where[0] == 4);
    CHECK(patio_plan_axis(pplan, 1, PATIO_DEST, 0, 0, blocks, 4, &n) == PATIO_EINVAL);
    patio_plan_free(pplan);

    /* Bad replicas and requests. */
    const uint64_t unsorted[4] = {9, 5, 7, 8};
    CHECK(patio_decider_add_points(dec, pts, 4, unsorted) == PATIO_EINVAL);
    CHECK(patio_decider_add_points(dec, pts, 4, NULL) == PATIO_ENULL);
    sets[0] = 300, sets[1] = 100;
    CHECK(patio_decider_add_product(dec, prod, 2, lens, sets, ident) == PATIO_EINVAL);
    sets[0] = 100, sets[1] = 300;
    const uint64_t short_lens[2] = {2, 1024};
    CHECK(patio_decider_add_product(dec, prod, 2, short_lens, sets, ident) == PATIO_EINVAL);
    CHECK(patio_decider_add_product(dec, prod, 2, lens, sets, NULL) == PATIO_ENULL);
    CHECK(patio_decider_add_product(NULL, prod, 2, lens, sets, ident) == PATIO_ENULL);
    const uint64_t outside[2] = {1024, 0};
    CHECK(patio_decider_plan_points(dec, 2, 1, outside, &pplan) == PATIO_EINVAL);
    CHECK(patio_decider_plan_points(dec, 3, 1, coords, &pplan) == PATIO_EINVAL);
    CHECK(patio_decider_plan_points(dec, 2, 1, NULL, &pplan) == PATIO_ENULL);
    CHECK(patio_decider_plan_points(dec, 2, 1, coords, NULL) == PATIO_ENULL);
    CHECK(patio_decider_plan(dec, 0, 1, four, &pplan) == PATIO_EINVAL);
    /* A plan made before the decider's replicas changed gives no extents. */
    const uint64_t tshape[2] = {1024, 1024};
    CHECK(patio_layout_contiguous(2, tshape, 8, 64u << 20, &bad) == PATIO_OK);
    const uint32_t swap[2] = {1, 0};
    CHECK(patio_decider_add_transposed(dec, bad, 2, swap) == PATIO_OK);
    CHECK(patio_plan_extents(dec, plan, 1, off, len, 4, &n, &inflated) == PATIO_EINVAL);
    patio_plan_free(plan);
    /* A column now comes from the transposed replica, its axes swapped. */
    const uint64_t column[8] = {0, 7, 1, 1, 1024, 1, 1, 1};
    CHECK(patio_decider_plan(dec, 2, 1, column, &plan) == PATIO_OK);
    CHECK(patio_plan_summary(plan, &kind, &seconds, &saved, &np) == PATIO_OK);
    CHECK(kind == PATIO_PLAN_WHOLE && np == 1);
    CHECK(patio_plan_piece(plan, 0, &copy, order, 4, &n) == PATIO_OK);
    CHECK(copy == 2 && n == 2 && order[0] == 1 && order[1] == 0);
    CHECK(patio_plan_extents(dec, plan, 0, off, len, 4, &n, &inflated) == PATIO_OK);
    CHECK(n == 1 && off[0] == (64u << 20) + 7 * 8192 && len[0] == 8192);
    patio_plan_free(plan);
    patio_plan_free(NULL);

    free(sets);
    patio_decider_free(dec);
    patio_layout_free(bad);
    patio_layout_free(pts);
    patio_layout_free(prod);
    patio_layout_free(orig);
}

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

    plans(consts);

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
