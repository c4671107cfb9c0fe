/* vol.h - shared definitions of patio's pass-through VOL connector (libpatio_vol.so).
 *
 * Every HDF5 object the connector hands back wraps the object of the connector beneath
 * it (normally the native one); the callbacks in connector.c, objects.c, file.c and
 * dataset.c unwrap their arguments, call the same callback beneath, and wrap what
 * comes back. record.c records dataset reads through the layout core's C ABI.
 */
#ifndef PATIO_VOL_H
#define PATIO_VOL_H

#include <hdf5.h>

/* The connector's name (HDF5_VOL_CONNECTOR="patio ...") and value (an unregistered
 * value from the range HDF5 leaves for such connectors, 256-511). */
#define PV_NAME "patio"
#define PV_VALUE ((H5VL_class_value_t)509)
#define PV_VERSION 1

struct pv_dset;

/* A wrapped object: the object beneath and its connector; datasets also carry what
 * recording needs (made at their first read). */
typedef struct pv_obj {
    hid_t under_vol_id;
    void *under_object;
    struct pv_dset *dset;
} pv_obj;

/* The connector's info: the connector beneath and its own info. */
typedef struct pv_info {
    hid_t under_vol_id;
    void *under_vol_info;
} pv_info;

/* The object wrapping context. */
typedef struct pv_wrap_ctx {
    hid_t under_vol_id;
    void *under_wrap_ctx;
} pv_wrap_ctx;

extern const H5VL_class_t pv_class;

/* The object and connector beneath a wrapped object. */
#define UNDER(o) ((pv_obj *)(o))->under_object
#define VOL(o) ((pv_obj *)(o))->under_vol_id

pv_obj *pv_new(void *under_object, hid_t under_vol_id);
void pv_free(pv_obj *o);
/* An asynchronous request of the connector beneath, wrapped in place. */
void pv_wrap_req(void **req, hid_t under_vol_id);
/* The connector beneath for a file access property list (ours, or the native one when
 * the list carries no info of ours): a copy of the list set to it, or -1. */
hid_t pv_under_fapl(hid_t fapl_id, hid_t *under_vol_id);
void pv_info_release(void *info);
void pv_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* objects.c, file.c, dataset.c: the callbacks, and their tables for the class. */
#define PV_CB_ARGS hid_t dxpl_id, void **req
void *pv_attr_create(void *, const H5VL_loc_params_t *, const char *, hid_t, hid_t, hid_t, hid_t,
                     PV_CB_ARGS);
void *pv_attr_open(void *, const H5VL_loc_params_t *, const char *, hid_t, PV_CB_ARGS);
herr_t pv_attr_read(void *, hid_t, void *, PV_CB_ARGS);
herr_t pv_attr_write(void *, hid_t, const void *, PV_CB_ARGS);
herr_t pv_attr_get(void *, H5VL_attr_get_args_t *, PV_CB_ARGS);
herr_t pv_attr_specific(void *, const H5VL_loc_params_t *, H5VL_attr_specific_args_t *,
                        PV_CB_ARGS);
herr_t pv_attr_optional(void *, H5VL_optional_args_t *, PV_CB_ARGS);
herr_t pv_attr_close(void *, PV_CB_ARGS);
#define PV_ATTR_CLS                                                                               \
    {pv_attr_create, pv_attr_open,     pv_attr_read,     pv_attr_write,                           \
     pv_attr_get,    pv_attr_specific, pv_attr_optional, pv_attr_close}

void *pv_dataset_create(void *, const H5VL_loc_params_t *, const char *, hid_t, hid_t, hid_t,
                        hid_t, hid_t, PV_CB_ARGS);
void *pv_dataset_open(void *, const H5VL_loc_params_t *, const char *, hid_t, PV_CB_ARGS);
herr_t pv_dataset_read(size_t, void *[], hid_t[], hid_t[], hid_t[], hid_t, void *[], void **);
herr_t pv_dataset_write(size_t, void *[], hid_t[], hid_t[], hid_t[], hid_t, const void *[],
                        void **);
herr_t pv_dataset_get(void *, H5VL_dataset_get_args_t *, PV_CB_ARGS);
herr_t pv_dataset_specific(void *, H5VL_dataset_specific_args_t *, PV_CB_ARGS);
herr_t pv_dataset_optional(void *, H5VL_optional_args_t *, PV_CB_ARGS);
herr_t pv_dataset_close(void *, PV_CB_ARGS);
#define PV_DATASET_CLS                                                                            \
    {pv_dataset_create, pv_dataset_open,     pv_dataset_read,     pv_dataset_write,               \
     pv_dataset_get,    pv_dataset_specific, pv_dataset_optional, pv_dataset_close}

void *pv_datatype_commit(void *, const H5VL_loc_params_t *, const char *, hid_t, hid_t, hid_t,
                         hid_t, PV_CB_ARGS);
void *pv_datatype_open(void *, const H5VL_loc_params_t *, const char *, hid_t, PV_CB_ARGS);
herr_t pv_datatype_get(void *, H5VL_datatype_get_args_t *, PV_CB_ARGS);
herr_t pv_datatype_specific(void *, H5VL_datatype_specific_args_t *, PV_CB_ARGS);
herr_t pv_datatype_optional(void *, H5VL_optional_args_t *, PV_CB_ARGS);
herr_t pv_datatype_close(void *, PV_CB_ARGS);
#define PV_DATATYPE_CLS                                                                           \
    {pv_datatype_commit,   pv_datatype_open,     pv_datatype_get,                                 \
     pv_datatype_specific, pv_datatype_optional, pv_datatype_close}

void *pv_file_create(const char *, unsigned, hid_t, hid_t, PV_CB_ARGS);
void *pv_file_open(const char *, unsigned, hid_t, PV_CB_ARGS);
herr_t pv_file_get(void *, H5VL_file_get_args_t *, PV_CB_ARGS);
herr_t pv_file_specific(void *, H5VL_file_specific_args_t *, PV_CB_ARGS);
herr_t pv_file_optional(void *, H5VL_optional_args_t *, PV_CB_ARGS);
herr_t pv_file_close(void *, PV_CB_ARGS);
#define PV_FILE_CLS                                                                               \
    {pv_file_create, pv_file_open, pv_file_get, pv_file_specific, pv_file_optional, pv_file_close}

void *pv_group_create(void *, const H5VL_loc_params_t *, const char *, hid_t, hid_t, hid_t,
                      PV_CB_ARGS);
void *pv_group_open(void *, const H5VL_loc_params_t *, const char *, hid_t, PV_CB_ARGS);
herr_t pv_group_get(void *, H5VL_group_get_args_t *, PV_CB_ARGS);
herr_t pv_group_specific(void *, H5VL_group_specific_args_t *, PV_CB_ARGS);
herr_t pv_group_optional(void *, H5VL_optional_args_t *, PV_CB_ARGS);
herr_t pv_group_close(void *, PV_CB_ARGS);
#define PV_GROUP_CLS                                                                              \
    {pv_group_create,   pv_group_open,     pv_group_get,                                          \
     pv_group_specific, pv_group_optional, pv_group_close}

herr_t pv_link_create(H5VL_link_create_args_t *, void *, const H5VL_loc_params_t *, hid_t, hid_t,
                      PV_CB_ARGS);
herr_t pv_link_copy(void *, const H5VL_loc_params_t *, void *, const H5VL_loc_params_t *, hid_t,
                    hid_t, PV_CB_ARGS);
herr_t pv_link_move(void *, const H5VL_loc_params_t *, void *, const H5VL_loc_params_t *, hid_t,
                    hid_t, PV_CB_ARGS);
herr_t pv_link_get(void *, const H5VL_loc_params_t *, H5VL_link_get_args_t *, PV_CB_ARGS);
herr_t pv_link_specific(void *, const H5VL_loc_params_t *, H5VL_link_specific_args_t *,
                        PV_CB_ARGS);
herr_t pv_link_optional(void *, const H5VL_loc_params_t *, H5VL_optional_args_t *, PV_CB_ARGS);
#define PV_LINK_CLS                                                                               \
    {pv_link_create, pv_link_copy, pv_link_move, pv_link_get, pv_link_specific, pv_link_optional}

void *pv_object_open(void *, const H5VL_loc_params_t *, H5I_type_t *, PV_CB_ARGS);
herr_t pv_object_copy(void *, const H5VL_loc_params_t *, const char *, void *,
                      const H5VL_loc_params_t *, const char *, hid_t, hid_t, PV_CB_ARGS);
herr_t pv_object_get(void *, const H5VL_loc_params_t *, H5VL_object_get_args_t *, PV_CB_ARGS);
herr_t pv_object_specific(void *, const H5VL_loc_params_t *, H5VL_object_specific_args_t *,
                          PV_CB_ARGS);
herr_t pv_object_optional(void *, const H5VL_loc_params_t *, H5VL_optional_args_t *, PV_CB_ARGS);
#define PV_OBJECT_CLS                                                                             \
    {pv_object_open, pv_object_copy, pv_object_get, pv_object_specific, pv_object_optional}

/* record.c */
void pv_record_init(void);
void pv_record_term(void);
/* 0 when a read of the dataset is known not to be recorded (recording off, a dataset
 * that is not recorded, a file without a knowledge base): checked before the read, with
 * no HDF5 call, so such reads cost no timing and no error-stack handling. */
int pv_record_wanted(pv_obj *dset);
/* Records the i-th read of a (possibly multi-dataset) H5Dread that ended at wall time
 * t_end (seconds since the epoch) and took `seconds`. */
void pv_record_read(pv_obj *dset, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id,
                    double t_end, double seconds);
/* The file named `name` was opened: its knowledge base is looked for now. */
void pv_record_file_opened(const char *name);
/* The file named `name` was closed: its reads so far are appended and its log ended. */
void pv_record_file_closed(const char *name);
void pv_record_dset_free(struct pv_dset *d);
/* The file and path names of a dataset whose reads are recorded (0: it is not one). */
int pv_dataset_names(pv_obj *dset, const char **file, const char **name);

/* serve.c: serving reads from layout replicas through the same layout core. */
void pv_serve_init(void *layout_core);
void pv_serve_term(void);
/* 1 when the read was served into buf (from replicas, per the core's plan); 0: the
 * caller reads it from the original. */
int pv_serve_read(pv_obj *dset, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id,
                  hid_t dxpl_id, void *buf);
/* The dataset is about to be written or resized: its replicas become stale. */
void pv_serve_written(pv_obj *dset);
/* The file named `name` was opened: its path is resolved now. */
void pv_serve_file_opened(const char *name);
/* The file named `name` was closed: its replica files are closed, served reads counted. */
void pv_serve_file_closed(const char *name);

#endif
