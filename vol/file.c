/* file.c - the connector's file callbacks: files are created and opened through the
 * connector beneath (the access list rewritten to name it); closing a file appends its
 * recorded reads to the knowledge base's record log and ends the log (record.c); opening
 * one finds its knowledge base then, its path resolved against the directory current at
 * the open.
 */
#include <stdlib.h>

#include "vol.h"

/* Wraps a file the connector beneath created or opened, and releases the access list
 * rewritten for it. */
static void *opened(void *under, hid_t vol, hid_t fapl, void **req)
{
    pv_obj *file = NULL;
    if (under) {
        file = pv_new(under, vol);
        pv_wrap_req(req, vol);
    }
    H5Pclose(fapl);
    return file;
}

void *pv_file_create(const char *name, unsigned flags, hid_t fcpl_id, hid_t fapl_id,
                     hid_t dxpl_id, void **req)
{
    hid_t vol;
    hid_t fapl = pv_under_fapl(fapl_id, &vol);
    if (fapl < 0)
        return NULL;
    return opened(H5VLfile_create(name, flags, fcpl_id, fapl, dxpl_id, req), vol, fapl, req);
}

void *pv_file_open(const char *name, unsigned flags, hid_t fapl_id, hid_t dxpl_id, void **req)
{
    hid_t vol;
    hid_t fapl = pv_under_fapl(fapl_id, &vol);
    if (fapl < 0)
        return NULL;
    void *file = opened(H5VLfile_open(name, flags, fapl, dxpl_id, req), vol, fapl, req);
    if (file) {
        pv_record_file_opened(name);
        pv_serve_file_opened(name);
    }
    return file;
}

herr_t pv_file_get(void *file, H5VL_file_get_args_t *args, hid_t dxpl_id, void **req)
{
    pv_obj *o = file;
    herr_t rc = H5VLfile_get(o->under_object, o->under_vol_id, args, dxpl_id, req);
    pv_wrap_req(req, o->under_vol_id);
    return rc;
}

/* "Is accessible" and "delete" come without a file object, with an access list that
 * names this connector: they go beneath with the list rewritten. */
static herr_t by_fapl(H5VL_file_specific_args_t *args, hid_t *fapl_field, hid_t dxpl_id,
                      void **req)
{
    H5VL_file_specific_args_t mine = *args;
    hid_t vol;
    hid_t fapl = pv_under_fapl(*fapl_field, &vol);
    if (fapl < 0)
        return -1;
    if (args->op_type == H5VL_FILE_IS_ACCESSIBLE)
        mine.args.is_accessible.fapl_id = fapl;
    else
        mine.args.del.fapl_id = fapl;
    herr_t rc = H5VLfile_specific(NULL, vol, &mine, dxpl_id, req);
    pv_wrap_req(req, vol);
    H5Pclose(fapl);
    return rc;
}

herr_t pv_file_specific(void *file, H5VL_file_specific_args_t *args, hid_t dxpl_id, void **req)
{
    if (args->op_type == H5VL_FILE_IS_ACCESSIBLE)
        return by_fapl(args, &args->args.is_accessible.fapl_id, dxpl_id, req);
    if (args->op_type == H5VL_FILE_DELETE)
        return by_fapl(args, &args->args.del.fapl_id, dxpl_id, req);
    pv_obj *o = file;
    herr_t rc = H5VLfile_specific(o->under_object, o->under_vol_id, args, dxpl_id, req);
    pv_wrap_req(req, o->under_vol_id);
    if (rc >= 0 && args->op_type == H5VL_FILE_REOPEN && *args->args.reopen.file)
        *args->args.reopen.file = pv_new(*args->args.reopen.file, o->under_vol_id);
    return rc;
}

herr_t pv_file_optional(void *file, H5VL_optional_args_t *args, hid_t dxpl_id, void **req)
{
    pv_obj *o = file;
    herr_t rc = H5VLfile_optional(o->under_object, o->under_vol_id, args, dxpl_id, req);
    pv_wrap_req(req, o->under_vol_id);
    return rc;
}

herr_t pv_file_close(void *file, hid_t dxpl_id, void **req)
{
    pv_obj *o = file;
    char *name = NULL;
    size_t len = 0;
    H5VL_file_get_args_t get = {.op_type = H5VL_FILE_GET_NAME};
    get.args.get_name = (H5VL_file_get_name_args_t){H5I_FILE, 0, NULL, &len};
    if (H5VLfile_get(o->under_object, o->under_vol_id, &get, dxpl_id, NULL) >= 0 &&
        (name = malloc(len + 1)) != NULL) {
        get.args.get_name = (H5VL_file_get_name_args_t){H5I_FILE, len + 1, name, &len};
        if (H5VLfile_get(o->under_object, o->under_vol_id, &get, dxpl_id, NULL) < 0) {
            free(name);
            name = NULL;
        }
    }
    herr_t rc = H5VLfile_close(o->under_object, o->under_vol_id, dxpl_id, req);
    pv_wrap_req(req, o->under_vol_id);
    if (rc >= 0) {
        if (name) {
            pv_serve_file_closed(name);
            pv_record_file_closed(name);
        }
        pv_free(o);
    }
    free(name);
    return rc;
}
