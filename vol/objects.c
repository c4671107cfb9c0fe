/* objects.c - the connector's attribute, named datatype, group, link and object
 * callbacks: patio leaves all of them to the connector beneath (unwrap, call, wrap
 * what comes back).
 */
#include <stdlib.h>

#include "vol.h"

/* Wraps a new object of the connector beneath (NULL stays NULL). */
static void *wrapped(void *under, hid_t vol, void **req)
{
    if (!under)
        return NULL;
    pv_wrap_req(req, vol);
    return pv_new(under, vol);
}

/* Closes `o` beneath and frees its wrapper when that worked. */
static herr_t closed(herr_t rc, void *o, void **req)
{
    pv_wrap_req(req, VOL(o));
    if (rc >= 0)
        pv_free(o);
    return rc;
}

static herr_t passed(herr_t rc, hid_t vol, void **req)
{
    pv_wrap_req(req, vol);
    return rc;
}

/* ------------------------------------------------------------------ attributes */
void *pv_attr_create(void *obj, const H5VL_loc_params_t *loc, const char *name, hid_t type_id,
                     hid_t space_id, hid_t acpl_id, hid_t aapl_id, hid_t dxpl_id, void **req)
{
    return wrapped(H5VLattr_create(UNDER(obj), loc, VOL(obj), name, type_id, space_id, acpl_id,
                                   aapl_id, dxpl_id, req),
                   VOL(obj), req);
}

void *pv_attr_open(void *obj, const H5VL_loc_params_t *loc, const char *name, hid_t aapl_id,
                   hid_t dxpl_id, void **req)
{
    return wrapped(H5VLattr_open(UNDER(obj), loc, VOL(obj), name, aapl_id, dxpl_id, req), VOL(obj),
                   req);
}

herr_t pv_attr_read(void *attr, hid_t type_id, void *buf, hid_t dxpl_id, void **req)
{
    return passed(H5VLattr_read(UNDER(attr), VOL(attr), type_id, buf, dxpl_id, req), VOL(attr), req);
}

herr_t pv_attr_write(void *attr, hid_t type_id, const void *buf, hid_t dxpl_id, void **req)
{
    return passed(H5VLattr_write(UNDER(attr), VOL(attr), type_id, buf, dxpl_id, req), VOL(attr),
                  req);
}

herr_t pv_attr_get(void *obj, H5VL_attr_get_args_t *args, hid_t dxpl_id, void **req)
{
    return passed(H5VLattr_get(UNDER(obj), VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_attr_specific(void *obj, const H5VL_loc_params_t *loc, H5VL_attr_specific_args_t *args,
                        hid_t dxpl_id, void **req)
{
    return passed(H5VLattr_specific(UNDER(obj), loc, VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_attr_optional(void *obj, H5VL_optional_args_t *args, hid_t dxpl_id, void **req)
{
    return passed(H5VLattr_optional(UNDER(obj), VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_attr_close(void *attr, hid_t dxpl_id, void **req)
{
    return closed(H5VLattr_close(UNDER(attr), VOL(attr), dxpl_id, req), attr, req);
}

/* ----------------------------------------------------------- named datatypes */
void *pv_datatype_commit(void *obj, const H5VL_loc_params_t *loc, const char *name, hid_t type_id,
                         hid_t lcpl_id, hid_t tcpl_id, hid_t tapl_id, hid_t dxpl_id, void **req)
{
    return wrapped(H5VLdatatype_commit(UNDER(obj), loc, VOL(obj), name, type_id, lcpl_id, tcpl_id,
                                       tapl_id, dxpl_id, req),
                   VOL(obj), req);
}

void *pv_datatype_open(void *obj, const H5VL_loc_params_t *loc, const char *name, hid_t tapl_id,
                       hid_t dxpl_id, void **req)
{
    return wrapped(H5VLdatatype_open(UNDER(obj), loc, VOL(obj), name, tapl_id, dxpl_id, req),
                   VOL(obj), req);
}

herr_t pv_datatype_get(void *dt, H5VL_datatype_get_args_t *args, hid_t dxpl_id, void **req)
{
    return passed(H5VLdatatype_get(UNDER(dt), VOL(dt), args, dxpl_id, req), VOL(dt), req);
}

herr_t pv_datatype_specific(void *obj, H5VL_datatype_specific_args_t *args, hid_t dxpl_id,
                            void **req)
{
    return passed(H5VLdatatype_specific(UNDER(obj), VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_datatype_optional(void *obj, H5VL_optional_args_t *args, hid_t dxpl_id, void **req)
{
    return passed(H5VLdatatype_optional(UNDER(obj), VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_datatype_close(void *dt, hid_t dxpl_id, void **req)
{
    return closed(H5VLdatatype_close(UNDER(dt), VOL(dt), dxpl_id, req), dt, req);
}

/* ---------------------------------------------------------------------- groups */
void *pv_group_create(void *obj, const H5VL_loc_params_t *loc, const char *name, hid_t lcpl_id,
                      hid_t gcpl_id, hid_t gapl_id, hid_t dxpl_id, void **req)
{
    return wrapped(H5VLgroup_create(UNDER(obj), loc, VOL(obj), name, lcpl_id, gcpl_id, gapl_id,
                                    dxpl_id, req),
                   VOL(obj), req);
}

void *pv_group_open(void *obj, const H5VL_loc_params_t *loc, const char *name, hid_t gapl_id,
                    hid_t dxpl_id, void **req)
{
    return wrapped(H5VLgroup_open(UNDER(obj), loc, VOL(obj), name, gapl_id, dxpl_id, req), VOL(obj),
                   req);
}

herr_t pv_group_get(void *obj, H5VL_group_get_args_t *args, hid_t dxpl_id, void **req)
{
    return passed(H5VLgroup_get(UNDER(obj), VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_group_specific(void *obj, H5VL_group_specific_args_t *args, hid_t dxpl_id, void **req)
{
    return passed(H5VLgroup_specific(UNDER(obj), VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_group_optional(void *obj, H5VL_optional_args_t *args, hid_t dxpl_id, void **req)
{
    return passed(H5VLgroup_optional(UNDER(obj), VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_group_close(void *grp, hid_t dxpl_id, void **req)
{
    return closed(H5VLgroup_close(UNDER(grp), VOL(grp), dxpl_id, req), grp, req);
}

/* ----------------------------------------------------------------------- links */
/* Either object may be NULL (the library's root); the connector beneath is the other's. */
static hid_t either_vol(void *a, void *b)
{
    return a ? VOL(a) : b ? VOL(b) : H5I_INVALID_HID;
}

#define UNDER_OR_NULL(o) ((o) ? UNDER(o) : NULL)

herr_t pv_link_create(H5VL_link_create_args_t *args, void *obj, const H5VL_loc_params_t *loc,
                      hid_t lcpl_id, hid_t lapl_id, hid_t dxpl_id, void **req)
{
    hid_t vol = obj ? VOL(obj) : H5I_INVALID_HID;
    if (args->op_type == H5VL_LINK_CREATE_HARD && args->args.hard.curr_obj) {
        void *target = args->args.hard.curr_obj;
        if (vol < 0)
            vol = VOL(target);
        args->args.hard.curr_obj = UNDER(target);
    }
    return passed(H5VLlink_create(args, UNDER_OR_NULL(obj), loc, vol, lcpl_id, lapl_id, dxpl_id, req),
                  vol, req);
}

/* H5VLlink_copy and H5VLlink_move take the same arguments. */
typedef herr_t (*copy_or_move)(void *, const H5VL_loc_params_t *, void *, const H5VL_loc_params_t *,
                               hid_t, hid_t, hid_t, hid_t, void **);

static herr_t relink(copy_or_move fn, void *src, const H5VL_loc_params_t *loc1, void *dst,
                     const H5VL_loc_params_t *loc2, hid_t lcpl_id, hid_t lapl_id, hid_t dxpl_id,
                     void **req)
{
    hid_t vol = either_vol(src, dst);
    return passed(fn(UNDER_OR_NULL(src), loc1, UNDER_OR_NULL(dst), loc2, vol, lcpl_id, lapl_id,
                     dxpl_id, req),
                  vol, req);
}

herr_t pv_link_copy(void *src, const H5VL_loc_params_t *loc1, void *dst,
                    const H5VL_loc_params_t *loc2, hid_t lcpl_id, hid_t lapl_id, hid_t dxpl_id,
                    void **req)
{
    return relink(H5VLlink_copy, src, loc1, dst, loc2, lcpl_id, lapl_id, dxpl_id, req);
}

herr_t pv_link_move(void *src, const H5VL_loc_params_t *loc1, void *dst,
                    const H5VL_loc_params_t *loc2, hid_t lcpl_id, hid_t lapl_id, hid_t dxpl_id,
                    void **req)
{
    return relink(H5VLlink_move, src, loc1, dst, loc2, lcpl_id, lapl_id, dxpl_id, req);
}

herr_t pv_link_get(void *obj, const H5VL_loc_params_t *loc, H5VL_link_get_args_t *args,
                   hid_t dxpl_id, void **req)
{
    return passed(H5VLlink_get(UNDER(obj), loc, VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_link_specific(void *obj, const H5VL_loc_params_t *loc, H5VL_link_specific_args_t *args,
                        hid_t dxpl_id, void **req)
{
    return passed(H5VLlink_specific(UNDER(obj), loc, VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_link_optional(void *obj, const H5VL_loc_params_t *loc, H5VL_optional_args_t *args,
                        hid_t dxpl_id, void **req)
{
    return passed(H5VLlink_optional(UNDER(obj), loc, VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

/* --------------------------------------------------------------------- objects */
void *pv_object_open(void *obj, const H5VL_loc_params_t *loc, H5I_type_t *opened_type,
                     hid_t dxpl_id, void **req)
{
    return wrapped(H5VLobject_open(UNDER(obj), loc, VOL(obj), opened_type, dxpl_id, req), VOL(obj),
                   req);
}

herr_t pv_object_copy(void *src, const H5VL_loc_params_t *loc1, const char *src_name, void *dst,
                      const H5VL_loc_params_t *loc2, const char *dst_name, hid_t ocpypl_id,
                      hid_t lcpl_id, hid_t dxpl_id, void **req)
{
    return passed(H5VLobject_copy(UNDER(src), loc1, src_name, UNDER(dst), loc2, dst_name, VOL(src),
                                  ocpypl_id, lcpl_id, dxpl_id, req),
                  VOL(src), req);
}

herr_t pv_object_get(void *obj, const H5VL_loc_params_t *loc, H5VL_object_get_args_t *args,
                     hid_t dxpl_id, void **req)
{
    return passed(H5VLobject_get(UNDER(obj), loc, VOL(obj), args, dxpl_id, req), VOL(obj), req);
}

herr_t pv_object_specific(void *obj, const H5VL_loc_params_t *loc,
                          H5VL_object_specific_args_t *args, hid_t dxpl_id, void **req)
{
    return passed(H5VLobject_specific(UNDER(obj), loc, VOL(obj), args, dxpl_id, req), VOL(obj),
                  req);
}

herr_t pv_object_optional(void *obj, const H5VL_loc_params_t *loc, H5VL_optional_args_t *args,
                          hid_t dxpl_id, void **req)
{
    return passed(H5VLobject_optional(UNDER(obj), loc, VOL(obj), args, dxpl_id, req), VOL(obj),
                  req);
}
