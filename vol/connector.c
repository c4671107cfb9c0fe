/* connector.c - patio's VOL connector class: registration (the plugin entry points),
 * its info (the connector beneath), object wrapping, introspection, requests, blobs,
 * tokens and the catch-all optional callback, all passed to the connector beneath.
 *
 * Loaded by HDF5 from HDF5_PLUGIN_PATH with
 *   HDF5_VOL_CONNECTOR="patio under_vol=0;under_info={}"
 * (0 = the native connector; "patio" alone means the same). Built for the HDF5 whose
 * headers it was compiled with (VOL class version H5VL_VERSION); HDF5 itself refuses
 * a class of another version, and another HDF5 release of the same class version
 * gets one warning and an unrecorded pass-through (record.c).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <H5PLextern.h>

#include "vol.h"

void pv_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("patio VOL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

pv_obj *pv_new(void *under_object, hid_t under_vol_id)
{
    pv_obj *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->under_object = under_object;
    o->under_vol_id = under_vol_id;
    H5Iinc_ref(under_vol_id);
    return o;
}

void pv_free(pv_obj *o)
{
    hid_t err = H5Eget_current_stack(); /* keep the caller's error stack */
    H5Idec_ref(o->under_vol_id);
    H5Eset_current_stack(err);
    pv_record_dset_free(o->dset);
    free(o);
}

void pv_wrap_req(void **req, hid_t under_vol_id)
{
    if (req && *req)
        *req = pv_new(*req, under_vol_id);
}

/* ------------------------------------------------------------------------ info */
static hid_t native_id(void)
{
    return H5VLregister_connector_by_value(H5_VOL_NATIVE, H5P_DEFAULT);
}

static void *info_copy(const void *src)
{
    const pv_info *in = src;
    pv_info *out = calloc(1, sizeof *out);
    if (!out || !in)
        return out;
    out->under_vol_id = in->under_vol_id;
    H5Iinc_ref(out->under_vol_id);
    if (in->under_vol_info)
        H5VLcopy_connector_info(out->under_vol_id, &out->under_vol_info, in->under_vol_info);
    return out;
}

static herr_t info_cmp(int *cmp, const void *a, const void *b)
{
    const pv_info *x = a, *y = b;
    *cmp = 0;
    if (H5VLcmp_connector_cls(cmp, x->under_vol_id, y->under_vol_id) < 0)
        return -1;
    if (*cmp == 0)
        return H5VLcmp_connector_info(cmp, x->under_vol_id, x->under_vol_info, y->under_vol_info);
    return 0;
}

void pv_info_release(void *p)
{
    pv_info *info = p;
    if (!info)
        return;
    hid_t err = H5Eget_current_stack();
    if (info->under_vol_info)
        H5VLfree_connector_info(info->under_vol_id, info->under_vol_info);
    H5Idec_ref(info->under_vol_id);
    H5Eset_current_stack(err);
    free(info);
}

static herr_t info_free(void *p)
{
    pv_info_release(p);
    return 0;
}

static herr_t info_to_str(const void *p, char **str)
{
    const pv_info *info = p;
    H5VL_class_value_t value = 0;
    char *under = NULL;
    H5VLget_value(info->under_vol_id, &value);
    H5VLconnector_info_to_str(info->under_vol_info, info->under_vol_id, &under);
    size_t n = 40 + (under ? strlen(under) : 0);
    *str = H5allocate_memory(n, false);
    if (!*str)
        return -1;
    snprintf(*str, n, "under_vol=%u;under_info={%s}", (unsigned)value, under ? under : "");
    if (under)
        H5free_memory(under);
    return 0;
}

/* "under_vol=N;under_info={...}"; anything else: one warning, the native connector. */
static herr_t str_to_info(const char *str, void **out)
{
    pv_info *info = calloc(1, sizeof *info);
    unsigned value = 0;
    int used = 0;
    if (!info)
        return -1;
    if (!str || !*str || sscanf(str, " under_vol=%u;%n", &value, &used) < 1 || used == 0) {
        if (str && *str)
            pv_warn("HDF5_VOL_CONNECTOR info \"%s\" not understood (expected "
                    "under_vol=N;under_info={...}); using the native connector beneath",
                    str);
        info->under_vol_id = native_id();
        *out = info;
        return info->under_vol_id < 0 ? -1 : 0;
    }
    info->under_vol_id = H5VLregister_connector_by_value((H5VL_class_value_t)value, H5P_DEFAULT);
    if (info->under_vol_id < 0) {
        pv_warn("no VOL connector of value %u to pass to; using the native connector", value);
        info->under_vol_id = native_id();
        value = H5_VOL_NATIVE;
    }
    const char *open = strchr(str + used, '{'), *close = strrchr(str + used, '}');
    if (open && close && close > open + 1) {
        size_t n = (size_t)(close - open - 1);
        char *inner = malloc(n + 1);
        if (inner) {
            memcpy(inner, open + 1, n);
            inner[n] = '\0';
            H5VLconnector_str_to_info(inner, info->under_vol_id, &info->under_vol_info);
            free(inner);
        }
    }
    *out = info;
    return 0;
}

hid_t pv_under_fapl(hid_t fapl_id, hid_t *under_vol_id)
{
    pv_info *info = NULL;
    H5Pget_vol_info(fapl_id, (void **)&info);
    hid_t vol = info ? info->under_vol_id : native_id();
    void *vinfo = info ? info->under_vol_info : NULL;
    hid_t copy = H5Pcopy(fapl_id);
    if (copy >= 0 && H5Pset_vol(copy, vol, vinfo) < 0) {
        H5Pclose(copy);
        copy = -1;
    }
    *under_vol_id = vol;
    if (info)
        pv_info_release(info);
    return copy;
}

/* -------------------------------------------------------------------- wrapping */
static void *get_object(const void *obj)
{
    const pv_obj *o = obj;
    return H5VLget_object(o->under_object, o->under_vol_id);
}

static herr_t get_wrap_ctx(const void *obj, void **wrap_ctx)
{
    const pv_obj *o = obj;
    pv_wrap_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return -1;
    ctx->under_vol_id = o->under_vol_id;
    H5Iinc_ref(ctx->under_vol_id);
    H5VLget_wrap_ctx(o->under_object, o->under_vol_id, &ctx->under_wrap_ctx);
    *wrap_ctx = ctx;
    return 0;
}

static void *wrap_object(void *obj, H5I_type_t type, void *wrap_ctx)
{
    pv_wrap_ctx *ctx = wrap_ctx;
    void *under = H5VLwrap_object(obj, type, ctx->under_vol_id, ctx->under_wrap_ctx);
    return under ? pv_new(under, ctx->under_vol_id) : NULL;
}

static void *unwrap_object(void *obj)
{
    pv_obj *o = obj;
    void *under = H5VLunwrap_object(o->under_object, o->under_vol_id);
    if (under)
        pv_free(o);
    return under;
}

static herr_t free_wrap_ctx(void *wrap_ctx)
{
    pv_wrap_ctx *ctx = wrap_ctx;
    hid_t err = H5Eget_current_stack();
    if (ctx->under_wrap_ctx)
        H5VLfree_wrap_ctx(ctx->under_wrap_ctx, ctx->under_vol_id);
    H5Idec_ref(ctx->under_vol_id);
    H5Eset_current_stack(err);
    free(ctx);
    return 0;
}

/* --------------------------------------------------------------- introspection */
static herr_t get_conn_cls(void *obj, H5VL_get_conn_lvl_t lvl, const H5VL_class_t **cls)
{
    pv_obj *o = obj;
    if (lvl == H5VL_GET_CONN_LVL_CURR) {
        *cls = &pv_class;
        return 0;
    }
    return H5VLintrospect_get_conn_cls(o->under_object, o->under_vol_id, lvl, cls);
}

static herr_t get_cap_flags(const void *p, uint64_t *flags)
{
    const pv_info *info = p;
    hid_t vol = info ? info->under_vol_id : native_id();
    herr_t rc = H5VLintrospect_get_cap_flags(info ? info->under_vol_info : NULL, vol, flags);
    if (rc >= 0)
        *flags |= pv_class.cap_flags;
    return rc;
}

static herr_t opt_query(void *obj, H5VL_subclass_t cls, int opt_type, uint64_t *flags)
{
    pv_obj *o = obj;
    return H5VLintrospect_opt_query(o->under_object, o->under_vol_id, cls, opt_type, flags);
}

/* -------------------------------------------------------------------- requests */
/* A request the connector beneath is done with: its wrapper goes too. */
static herr_t consumed(herr_t rc, pv_obj *o)
{
    if (rc >= 0)
        pv_free(o);
    return rc;
}

static herr_t req_wait(void *req, uint64_t timeout, H5VL_request_status_t *status)
{
    pv_obj *o = req;
    herr_t rc = H5VLrequest_wait(o->under_object, o->under_vol_id, timeout, status);
    return *status == H5VL_REQUEST_STATUS_IN_PROGRESS ? rc : consumed(rc, o);
}

static herr_t req_notify(void *req, H5VL_request_notify_t cb, void *ctx)
{
    pv_obj *o = req;
    return consumed(H5VLrequest_notify(o->under_object, o->under_vol_id, cb, ctx), o);
}

static herr_t req_cancel(void *req, H5VL_request_status_t *status)
{
    pv_obj *o = req;
    return consumed(H5VLrequest_cancel(o->under_object, o->under_vol_id, status), o);
}

static herr_t req_specific(void *req, H5VL_request_specific_args_t *args)
{
    pv_obj *o = req;
    return H5VLrequest_specific(o->under_object, o->under_vol_id, args);
}

static herr_t req_optional(void *req, H5VL_optional_args_t *args)
{
    pv_obj *o = req;
    return H5VLrequest_optional(o->under_object, o->under_vol_id, args);
}

static herr_t req_free(void *req)
{
    pv_obj *o = req;
    return consumed(H5VLrequest_free(o->under_object, o->under_vol_id), o);
}

/* ----------------------------------------------------------- blobs and tokens */
static herr_t blob_put(void *obj, const void *buf, size_t size, void *blob_id, void *ctx)
{
    pv_obj *o = obj;
    return H5VLblob_put(o->under_object, o->under_vol_id, buf, size, blob_id, ctx);
}

static herr_t blob_get(void *obj, const void *blob_id, void *buf, size_t size, void *ctx)
{
    pv_obj *o = obj;
    return H5VLblob_get(o->under_object, o->under_vol_id, blob_id, buf, size, ctx);
}

static herr_t blob_specific(void *obj, void *blob_id, H5VL_blob_specific_args_t *args)
{
    pv_obj *o = obj;
    return H5VLblob_specific(o->under_object, o->under_vol_id, blob_id, args);
}

static herr_t blob_optional(void *obj, void *blob_id, H5VL_optional_args_t *args)
{
    pv_obj *o = obj;
    return H5VLblob_optional(o->under_object, o->under_vol_id, blob_id, args);
}

static herr_t token_cmp(void *obj, const H5O_token_t *a, const H5O_token_t *b, int *cmp)
{
    pv_obj *o = obj;
    return H5VLtoken_cmp(o->under_object, o->under_vol_id, a, b, cmp);
}

static herr_t token_to_str(void *obj, H5I_type_t type, const H5O_token_t *token, char **str)
{
    pv_obj *o = obj;
    return H5VLtoken_to_str(o->under_object, type, o->under_vol_id, token, str);
}

static herr_t token_from_str(void *obj, H5I_type_t type, const char *str, H5O_token_t *token)
{
    pv_obj *o = obj;
    return H5VLtoken_from_str(o->under_object, type, o->under_vol_id, str, token);
}

static herr_t optional(void *obj, H5VL_optional_args_t *args, hid_t dxpl_id, void **req)
{
    pv_obj *o = obj;
    herr_t rc = H5VLoptional(o->under_object, o->under_vol_id, args, dxpl_id, req);
    pv_wrap_req(req, o->under_vol_id);
    return rc;
}

/* ------------------------------------------------------------------ lifecycle */
static herr_t initialize(hid_t vipl_id)
{
    (void)vipl_id;
    pv_record_init();
    return 0;
}

static herr_t terminate(void)
{
    pv_serve_term();
    pv_record_term();
    return 0;
}

const H5VL_class_t pv_class = {
    .version = H5VL_VERSION,
    .value = PV_VALUE,
    .name = PV_NAME,
    .conn_version = PV_VERSION,
    .cap_flags = H5VL_CAP_FLAG_NONE,
    .initialize = initialize,
    .terminate = terminate,
    .info_cls = {sizeof(pv_info), info_copy, info_cmp, info_free, info_to_str, str_to_info},
    .wrap_cls = {get_object, get_wrap_ctx, wrap_object, unwrap_object, free_wrap_ctx},
    .attr_cls = PV_ATTR_CLS,
    .dataset_cls = PV_DATASET_CLS,
    .datatype_cls = PV_DATATYPE_CLS,
    .file_cls = PV_FILE_CLS,
    .group_cls = PV_GROUP_CLS,
    .link_cls = PV_LINK_CLS,
    .object_cls = PV_OBJECT_CLS,
    .introspect_cls = {get_conn_cls, get_cap_flags, opt_query},
    .request_cls = {req_wait, req_notify, req_cancel, req_specific, req_optional, req_free},
    .blob_cls = {blob_put, blob_get, blob_specific, blob_optional},
    .token_cls = {token_cmp, token_to_str, token_from_str},
    .optional = optional,
};

H5PL_type_t H5PLget_plugin_type(void)
{
    return H5PL_TYPE_VOL;
}

const void *H5PLget_plugin_info(void)
{
    return &pv_class;
}
