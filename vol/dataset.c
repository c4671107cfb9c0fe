/* dataset.c - the connector's dataset callbacks: everything goes to the connector
 * beneath, except the reads serve.c serves from layout replicas; a write or resize
 * first makes the dataset's replicas stale. Every read (H5Dread and H5Dread_multi,
 * each dataset of it) that record.c may record (its file has a layout knowledge base)
 * is timed and handed to it; the others cost one check (pv_record_wanted).
 */
#include <stdlib.h>
#include <time.h>

#include "vol.h"

void *pv_dataset_create(void *obj, const H5VL_loc_params_t *loc, const char *name, hid_t lcpl_id,
                        hid_t type_id, hid_t space_id, hid_t dcpl_id, hid_t dapl_id,
                        hid_t dxpl_id, void **req)
{
    void *under = H5VLdataset_create(UNDER(obj), loc, VOL(obj), name, lcpl_id, type_id, space_id,
                                     dcpl_id, dapl_id, dxpl_id, req);
    if (!under)
        return NULL;
    pv_wrap_req(req, VOL(obj));
    return pv_new(under, VOL(obj));
}

void *pv_dataset_open(void *obj, const H5VL_loc_params_t *loc, const char *name, hid_t dapl_id,
                      hid_t dxpl_id, void **req)
{
    void *under = H5VLdataset_open(UNDER(obj), loc, VOL(obj), name, dapl_id, dxpl_id, req);
    if (!under)
        return NULL;
    pv_wrap_req(req, VOL(obj));
    return pv_new(under, VOL(obj));
}

static double seconds_of(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The objects beneath of count datasets, all of one connector (else NULL). */
static void **unwrapped(size_t count, void *dset[], void *one[1])
{
    void **under = count > 1 ? malloc(count * sizeof *under) : one;
    if (!under)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        if (VOL(dset[i]) != VOL(dset[0])) {
            if (under != one)
                free(under);
            return NULL;
        }
        under[i] = UNDER(dset[i]);
    }
    return under;
}

herr_t pv_dataset_read(size_t count, void *dset[], hid_t mem_type_id[], hid_t mem_space_id[],
                       hid_t file_space_id[], hid_t dxpl_id, void *buf[], void **req)
{
    void *one[1];
    void **under = unwrapped(count, dset, one);
    if (!under)
        return -1;
    int wanted = 0;
    for (size_t i = 0; i < count && !wanted; i++)
        wanted = pv_record_wanted(dset[i]);
    double start = wanted ? seconds_of(CLOCK_MONOTONIC) : 0;
    herr_t rc = 0;
    if (!(wanted && count == 1 && !req &&
          pv_serve_read(dset[0], mem_type_id[0], mem_space_id[0], file_space_id[0], dxpl_id,
                        buf[0])))
        rc = H5VLdataset_read(count, under, VOL(dset[0]), mem_type_id, mem_space_id,
                              file_space_id, dxpl_id, buf, req);
    double seconds = wanted ? seconds_of(CLOCK_MONOTONIC) - start : 0;
    pv_wrap_req(req, VOL(dset[0]));
    if (under != one)
        free(under);
    if (rc >= 0 && wanted) {
        double now = seconds_of(CLOCK_REALTIME);
        for (size_t i = 0; i < count; i++)
            pv_record_read(dset[i], mem_type_id[i], mem_space_id[i], file_space_id[i], now,
                           seconds / (double)count);
    }
    return rc;
}

herr_t pv_dataset_write(size_t count, void *dset[], hid_t mem_type_id[], hid_t mem_space_id[],
                        hid_t file_space_id[], hid_t dxpl_id, const void *buf[], void **req)
{
    void *one[1];
    void **under = unwrapped(count, dset, one);
    if (!under)
        return -1;
    for (size_t i = 0; i < count; i++)
        pv_serve_written(dset[i]);
    herr_t rc = H5VLdataset_write(count, under, VOL(dset[0]), mem_type_id, mem_space_id,
                                  file_space_id, dxpl_id, buf, req);
    pv_wrap_req(req, VOL(dset[0]));
    if (under != one)
        free(under);
    return rc;
}

herr_t pv_dataset_get(void *dset, H5VL_dataset_get_args_t *args, hid_t dxpl_id, void **req)
{
    herr_t rc = H5VLdataset_get(UNDER(dset), VOL(dset), args, dxpl_id, req);
    pv_wrap_req(req, VOL(dset));
    return rc;
}

herr_t pv_dataset_specific(void *obj, H5VL_dataset_specific_args_t *args, hid_t dxpl_id,
                           void **req)
{
    hid_t vol = VOL(obj); /* H5Drefresh may free the wrapper's object */
    if (args->op_type == H5VL_DATASET_SET_EXTENT)
        pv_serve_written(obj);
    herr_t rc = H5VLdataset_specific(UNDER(obj), vol, args, dxpl_id, req);
    pv_wrap_req(req, vol);
    return rc;
}

herr_t pv_dataset_optional(void *obj, H5VL_optional_args_t *args, hid_t dxpl_id, void **req)
{
    herr_t rc = H5VLdataset_optional(UNDER(obj), VOL(obj), args, dxpl_id, req);
    pv_wrap_req(req, VOL(obj));
    return rc;
}

herr_t pv_dataset_close(void *dset, hid_t dxpl_id, void **req)
{
    herr_t rc = H5VLdataset_close(UNDER(dset), VOL(dset), dxpl_id, req);
    pv_wrap_req(req, VOL(dset));
    if (rc >= 0)
        pv_free(dset);
    return rc;
}
