/* Independent C statement of the wsrep v26 layouts, written from the project's contract
 * notes (wsrep-contract.md section 2), used only by tests/c_layout.rs. It prints one line
 * per fact: "size T N", "align T N" or "off T.field N". */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef int64_t wsrep_seqno_t;
typedef uint64_t wsrep_trx_id_t;
typedef uint64_t wsrep_conn_id_t;
typedef uint32_t wsrep_cap_t;
typedef _Bool wsrep_bool_t;
typedef enum { ST_A, ST_B } wsrep_status_t;
typedef enum { CB_A, CB_B } wsrep_cb_status_t;
typedef enum { E_A, E_B } any_enum_t;

typedef union { uint8_t data[16]; size_t alignment; } wsrep_uuid_t;
typedef struct { wsrep_uuid_t uuid; wsrep_seqno_t seqno; } wsrep_gtid_t;
typedef struct { wsrep_uuid_t node; wsrep_trx_id_t trx; wsrep_conn_id_t conn; } wsrep_stid_t;
typedef struct { wsrep_gtid_t gtid; wsrep_stid_t stid; wsrep_seqno_t depends_on; } wsrep_trx_meta_t;
typedef struct { const void *ptr; size_t len; } wsrep_buf_t;
typedef struct { wsrep_trx_id_t trx_id; void *opaque; } wsrep_ws_handle_t;
typedef struct { const wsrep_buf_t *key_parts; size_t key_parts_num; } wsrep_key_t;
typedef struct { wsrep_uuid_t id; char name[32]; char incoming[256]; } wsrep_member_info_t;
typedef struct {
    wsrep_gtid_t state_id;
    wsrep_seqno_t view;
    any_enum_t status;
    wsrep_cap_t capabilities;
    int my_idx;
    int memb_num;
    int proto_ver;
    wsrep_member_info_t members[1];
} wsrep_view_info_t;
struct wsrep_stats_var {
    const char *name;
    any_enum_t type;
    union { int64_t _int64; double _double; const char *_string; } value;
};
typedef wsrep_buf_t wsrep_enc_key_t;
typedef char wsrep_enc_iv_t[32];
typedef struct { const wsrep_enc_key_t *key; const wsrep_enc_iv_t *iv; void *ctx; } wsrep_enc_ctx_t;
typedef struct { void *opaque; } wsrep_po_handle_t;
typedef struct { void *ctx; void (*fn)(void *); } wsrep_seq_cb_t;
typedef struct { wsrep_status_t (*allowlist_cb)(void *, any_enum_t, const wsrep_buf_t *); void *context; }
    wsrep_allowlist_service_v1_t;
typedef struct { void (*event_cb)(void *, const char *, const char *); void *context; }
    wsrep_event_service_v1_t;

struct wsrep_init_args {
    void *app_ctx;
    const char *node_name;
    const char *node_address;
    const char *node_incoming;
    const char *data_dir;
    const char *options;
    int proto_ver;
    const wsrep_gtid_t *state_id;
    const wsrep_buf_t *state;
    void (*logger_cb)(any_enum_t, const char *);
    wsrep_cb_status_t (*connected_cb)(void *, const wsrep_view_info_t *);
    wsrep_cb_status_t (*view_cb)(void *, void *, const wsrep_view_info_t *, const char *, size_t);
    wsrep_cb_status_t (*sst_request_cb)(void *, void **, size_t *);
    int (*encrypt_cb)(void *, wsrep_enc_ctx_t *, const wsrep_buf_t *, void *, any_enum_t, bool);
    wsrep_cb_status_t (*apply_cb)(void *, const wsrep_ws_handle_t *, uint32_t, const wsrep_buf_t *,
                                  const wsrep_trx_meta_t *, wsrep_bool_t *);
    wsrep_cb_status_t (*unordered_cb)(void *, const wsrep_buf_t *);
    wsrep_cb_status_t (*sst_donate_cb)(void *, void *, const wsrep_buf_t *, const wsrep_gtid_t *,
                                       const wsrep_buf_t *, wsrep_bool_t);
    wsrep_cb_status_t (*synced_cb)(void *);
};

typedef struct wsrep_st wsrep_t;
struct wsrep_st {
    const char *version;
    wsrep_status_t (*init)(wsrep_t *, const struct wsrep_init_args *);
    wsrep_cap_t (*capabilities)(wsrep_t *);
    wsrep_status_t (*options_set)(wsrep_t *, const char *);
    char *(*options_get)(wsrep_t *);
    wsrep_status_t (*enc_set_key)(wsrep_t *, const wsrep_enc_key_t *);
    wsrep_status_t (*connect)(wsrep_t *, const char *, const char *, const char *, wsrep_bool_t);
    wsrep_status_t (*disconnect)(wsrep_t *);
    wsrep_status_t (*recv)(wsrep_t *, void *);
    wsrep_status_t (*assign_read_view)(wsrep_t *, wsrep_ws_handle_t *, const wsrep_gtid_t *);
    wsrep_status_t (*certify)(wsrep_t *, wsrep_conn_id_t, wsrep_ws_handle_t *, uint32_t,
                              wsrep_trx_meta_t *);
    wsrep_status_t (*commit_order_enter)(wsrep_t *, const wsrep_ws_handle_t *,
                                         const wsrep_trx_meta_t *);
    wsrep_status_t (*commit_order_leave)(wsrep_t *, const wsrep_ws_handle_t *,
                                         const wsrep_trx_meta_t *, const wsrep_buf_t *);
    wsrep_status_t (*release)(wsrep_t *, wsrep_ws_handle_t *);
    wsrep_status_t (*replay_trx)(wsrep_t *, const wsrep_ws_handle_t *, void *);
    wsrep_status_t (*abort_certification)(wsrep_t *, wsrep_seqno_t, wsrep_trx_id_t, wsrep_seqno_t *);
    wsrep_status_t (*rollback)(wsrep_t *, wsrep_trx_id_t, const wsrep_buf_t *);
    wsrep_status_t (*append_key)(wsrep_t *, wsrep_ws_handle_t *, const wsrep_key_t *, size_t,
                                 any_enum_t, wsrep_bool_t);
    wsrep_status_t (*append_data)(wsrep_t *, wsrep_ws_handle_t *, const wsrep_buf_t *, size_t,
                                  any_enum_t, wsrep_bool_t);
    wsrep_status_t (*sync_wait)(wsrep_t *, wsrep_gtid_t *, int, wsrep_gtid_t *);
    wsrep_status_t (*last_committed_id)(wsrep_t *, wsrep_gtid_t *);
    wsrep_status_t (*free_connection)(wsrep_t *, wsrep_conn_id_t);
    wsrep_status_t (*to_execute_start)(wsrep_t *, wsrep_conn_id_t, const wsrep_key_t *, size_t,
                                       const wsrep_buf_t *, size_t, uint32_t, wsrep_trx_meta_t *);
    wsrep_status_t (*to_execute_end)(wsrep_t *, wsrep_conn_id_t, const wsrep_buf_t *);
    wsrep_status_t (*preordered_collect)(wsrep_t *, wsrep_po_handle_t *, const wsrep_buf_t *,
                                         size_t, wsrep_bool_t);
    wsrep_status_t (*preordered_commit)(wsrep_t *, wsrep_po_handle_t *, const wsrep_uuid_t *,
                                        uint32_t, int, wsrep_bool_t);
    wsrep_status_t (*sst_sent)(wsrep_t *, const wsrep_gtid_t *, int);
    wsrep_status_t (*sst_received)(wsrep_t *, const wsrep_gtid_t *, const wsrep_buf_t *, int);
    wsrep_status_t (*snapshot)(wsrep_t *, const wsrep_buf_t *, const char *);
    struct wsrep_stats_var *(*stats_get)(wsrep_t *);
    void (*stats_free)(wsrep_t *, struct wsrep_stats_var *);
    void (*stats_reset)(wsrep_t *);
    wsrep_seqno_t (*pause)(wsrep_t *);
    wsrep_status_t (*resume)(wsrep_t *);
    wsrep_status_t (*desync)(wsrep_t *);
    wsrep_status_t (*resync)(wsrep_t *);
    wsrep_status_t (*lock)(wsrep_t *, const char *, wsrep_bool_t, uint64_t, int64_t);
    wsrep_status_t (*unlock)(wsrep_t *, const char *, uint64_t);
    wsrep_bool_t (*is_locked)(wsrep_t *, const char *, uint64_t *, wsrep_uuid_t *);
    const char *provider_name;
    const char *provider_version;
    const char *provider_vendor;
    void (*free)(wsrep_t *);
    void *dlh;
    void *ctx;
};

#define TY(T) printf("size %s %zu\nalign %s %zu\n", #T, sizeof(T), #T, _Alignof(T))
#define OFF(T, f) printf("off %s.%s %zu\n", #T, #f, offsetof(T, f))

int main(void)
{
    TY(wsrep_bool_t);
    TY(wsrep_status_t);
    TY(wsrep_uuid_t);
    OFF(wsrep_uuid_t, data);
    TY(wsrep_gtid_t);
    OFF(wsrep_gtid_t, uuid);
    OFF(wsrep_gtid_t, seqno);
    TY(wsrep_stid_t);
    OFF(wsrep_stid_t, node);
    OFF(wsrep_stid_t, trx);
    OFF(wsrep_stid_t, conn);
    TY(wsrep_trx_meta_t);
    OFF(wsrep_trx_meta_t, gtid);
    OFF(wsrep_trx_meta_t, stid);
    OFF(wsrep_trx_meta_t, depends_on);
    TY(wsrep_buf_t);
    OFF(wsrep_buf_t, ptr);
    OFF(wsrep_buf_t, len);
    TY(wsrep_ws_handle_t);
    OFF(wsrep_ws_handle_t, trx_id);
    OFF(wsrep_ws_handle_t, opaque);
    TY(wsrep_key_t);
    OFF(wsrep_key_t, key_parts);
    OFF(wsrep_key_t, key_parts_num);
    TY(wsrep_member_info_t);
    OFF(wsrep_member_info_t, id);
    OFF(wsrep_member_info_t, name);
    OFF(wsrep_member_info_t, incoming);
    TY(wsrep_view_info_t);
    OFF(wsrep_view_info_t, state_id);
    OFF(wsrep_view_info_t, view);
    OFF(wsrep_view_info_t, status);
    OFF(wsrep_view_info_t, capabilities);
    OFF(wsrep_view_info_t, my_idx);
    OFF(wsrep_view_info_t, memb_num);
    OFF(wsrep_view_info_t, proto_ver);
    OFF(wsrep_view_info_t, members);
    TY(struct wsrep_stats_var);
    OFF(struct wsrep_stats_var, name);
    OFF(struct wsrep_stats_var, type);
    OFF(struct wsrep_stats_var, value);
    TY(wsrep_enc_ctx_t);
    OFF(wsrep_enc_ctx_t, key);
    OFF(wsrep_enc_ctx_t, iv);
    OFF(wsrep_enc_ctx_t, ctx);
    TY(wsrep_po_handle_t);
    TY(wsrep_seq_cb_t);
    OFF(wsrep_seq_cb_t, ctx);
    OFF(wsrep_seq_cb_t, fn);
    TY(wsrep_allowlist_service_v1_t);
    OFF(wsrep_allowlist_service_v1_t, allowlist_cb);
    OFF(wsrep_allowlist_service_v1_t, context);
    TY(wsrep_event_service_v1_t);
    OFF(wsrep_event_service_v1_t, event_cb);
    OFF(wsrep_event_service_v1_t, context);
    TY(struct wsrep_init_args);
    OFF(struct wsrep_init_args, app_ctx);
    OFF(struct wsrep_init_args, node_name);
    OFF(struct wsrep_init_args, node_address);
    OFF(struct wsrep_init_args, node_incoming);
    OFF(struct wsrep_init_args, data_dir);
    OFF(struct wsrep_init_args, options);
    OFF(struct wsrep_init_args, proto_ver);
    OFF(struct wsrep_init_args, state_id);
    OFF(struct wsrep_init_args, state);
    OFF(struct wsrep_init_args, logger_cb);
    OFF(struct wsrep_init_args, connected_cb);
    OFF(struct wsrep_init_args, view_cb);
    OFF(struct wsrep_init_args, sst_request_cb);
    OFF(struct wsrep_init_args, encrypt_cb);
    OFF(struct wsrep_init_args, apply_cb);
    OFF(struct wsrep_init_args, unordered_cb);
    OFF(struct wsrep_init_args, sst_donate_cb);
    OFF(struct wsrep_init_args, synced_cb);
    TY(wsrep_t);
    OFF(wsrep_t, version);
    OFF(wsrep_t, init);
    OFF(wsrep_t, capabilities);
    OFF(wsrep_t, options_set);
    OFF(wsrep_t, options_get);
    OFF(wsrep_t, enc_set_key);
    OFF(wsrep_t, connect);
    OFF(wsrep_t, disconnect);
    OFF(wsrep_t, recv);
    OFF(wsrep_t, assign_read_view);
    OFF(wsrep_t, certify);
    OFF(wsrep_t, commit_order_enter);
    OFF(wsrep_t, commit_order_leave);
    OFF(wsrep_t, release);
    OFF(wsrep_t, replay_trx);
    OFF(wsrep_t, abort_certification);
    OFF(wsrep_t, rollback);
    OFF(wsrep_t, append_key);
    OFF(wsrep_t, append_data);
    OFF(wsrep_t, sync_wait);
    OFF(wsrep_t, last_committed_id);
    OFF(wsrep_t, free_connection);
    OFF(wsrep_t, to_execute_start);
    OFF(wsrep_t, to_execute_end);
    OFF(wsrep_t, preordered_collect);
    OFF(wsrep_t, preordered_commit);
    OFF(wsrep_t, sst_sent);
    OFF(wsrep_t, sst_received);
    OFF(wsrep_t, snapshot);
    OFF(wsrep_t, stats_get);
    OFF(wsrep_t, stats_free);
    OFF(wsrep_t, stats_reset);
    OFF(wsrep_t, pause);
    OFF(wsrep_t, resume);
    OFF(wsrep_t, desync);
    OFF(wsrep_t, resync);
    OFF(wsrep_t, lock);
    OFF(wsrep_t, unlock);
    OFF(wsrep_t, is_locked);
    OFF(wsrep_t, provider_name);
    OFF(wsrep_t, provider_version);
    OFF(wsrep_t, provider_vendor);
    OFF(wsrep_t, free);
    OFF(wsrep_t, dlh);
    OFF(wsrep_t, ctx);
    return 0;
}
