//! Cross-check against a C compiler: `tests/c/layout.c` states the v26 layouts in C (written
//! from the contract notes), is compiled with the system C compiler and prints every size,
//! alignment and field offset; each must equal what the Rust declarations give.
//!
//! If no C compiler can be started the test says so on stderr and passes: the Rust-side
//! assertions in `src/tests.rs` are the requirement, this is a second opinion.

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use wsrep_sys::*;

/// Records size, alignment and field offsets of a Rust type under its C spelling.
macro_rules! facts {
    ($map:ident, $cname:expr, $ty:ty $(, $field:ident)* $(,)?) => {{
        $map.insert(format!("size {}", $cname), size_of::<$ty>());
        $map.insert(format!("align {}", $cname), align_of::<$ty>());
        $(
            let field = stringify!($field);
            let field = field.strip_prefix("r#").unwrap_or(field);
            $map.insert(format!("off {}.{}", $cname, field), offset_of!($ty, $field));
        )*
    }};
}

fn rust_facts() -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    facts!(m, "wsrep_bool_t", wsrep_bool_t);
    facts!(m, "wsrep_status_t", wsrep_status_t);
    facts!(m, "wsrep_uuid_t", wsrep_uuid_t, data);
    facts!(m, "wsrep_gtid_t", wsrep_gtid_t, uuid, seqno);
    facts!(m, "wsrep_stid_t", wsrep_stid_t, node, trx, conn);
    facts!(
        m,
        "wsrep_trx_meta_t",
        wsrep_trx_meta_t,
        gtid,
        stid,
        depends_on
    );
    facts!(m, "wsrep_buf_t", wsrep_buf_t, ptr, len);
    facts!(m, "wsrep_ws_handle_t", wsrep_ws_handle_t, trx_id, opaque);
    facts!(m, "wsrep_key_t", wsrep_key_t, key_parts, key_parts_num);
    facts!(
        m,
        "wsrep_member_info_t",
        wsrep_member_info_t,
        id,
        name,
        incoming
    );
    facts!(
        m,
        "wsrep_view_info_t",
        wsrep_view_info_t,
        state_id,
        view,
        status,
        capabilities,
        my_idx,
        memb_num,
        proto_ver,
        members,
    );
    // C declares `members[1]`; Rust declares a zero-length tail. C's sizeof is the constant.
    m.insert("size wsrep_view_info_t".to_owned(), WSREP_VIEW_INFO_C_SIZE);
    facts!(
        m,
        "struct wsrep_stats_var",
        wsrep_stats_var,
        name,
        r#type,
        value
    );
    facts!(m, "wsrep_enc_ctx_t", wsrep_enc_ctx_t, key, iv, ctx);
    facts!(m, "wsrep_po_handle_t", wsrep_po_handle_t);
    facts!(m, "wsrep_seq_cb_t", wsrep_seq_cb_t, ctx, r#fn);
    facts!(
        m,
        "wsrep_allowlist_service_v1_t",
        wsrep_allowlist_service_v1_t,
        allowlist_cb,
        context
    );
    facts!(
        m,
        "wsrep_event_service_v1_t",
        wsrep_event_service_v1_t,
        event_cb,
        context
    );
    facts!(
        m,
        "struct wsrep_init_args",
        wsrep_init_args,
        app_ctx,
        node_name,
        node_address,
        node_incoming,
        data_dir,
        options,
        proto_ver,
        state_id,
        state,
        logger_cb,
        connected_cb,
        view_cb,
        sst_request_cb,
        encrypt_cb,
        apply_cb,
        unordered_cb,
        sst_donate_cb,
        synced_cb,
    );
    facts!(
        m,
        "wsrep_t",
        wsrep_t,
        version,
        init,
        capabilities,
        options_set,
        options_get,
        enc_set_key,
        connect,
        disconnect,
        recv,
        assign_read_view,
        certify,
        commit_order_enter,
        commit_order_leave,
        release,
        replay_trx,
        abort_certification,
        rollback,
        append_key,
        append_data,
        sync_wait,
        last_committed_id,
        free_connection,
        to_execute_start,
        to_execute_end,
        preordered_collect,
        preordered_commit,
        sst_sent,
        sst_received,
        snapshot,
        stats_get,
        stats_free,
        stats_reset,
        pause,
        resume,
        desync,
        resync,
        lock,
        unlock,
        is_locked,
        provider_name,
        provider_version,
        provider_vendor,
        free,
        dlh,
        ctx,
    );
    m
}

fn c_facts() -> Option<BTreeMap<String, usize>> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/layout.c");
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("wsrep_sys_c_layout_{}", std::process::id()));
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let compiled = match Command::new(&compiler)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("skipping the C layout cross-check: cannot run `{compiler}`: {e}");
            return None;
        }
    };
    assert!(
        compiled.status.success(),
        "compiling {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&compiled.stderr)
    );
    let run = Command::new(&exe)
        .output()
        .expect("run the compiled layout probe");
    // Best effort: the file lives in Cargo's scratch directory anyway.
    let _ = std::fs::remove_file(&exe);
    assert!(
        run.status.success(),
        "layout probe exited with {}",
        run.status
    );
    let text = String::from_utf8(run.stdout).expect("probe output is UTF-8");
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let (key, value) = line.rsplit_once(' ').expect("line is `<key> <number>`");
        let value: usize = value.parse().expect("number");
        assert!(
            m.insert(key.to_owned(), value).is_none(),
            "duplicate line {key}"
        );
    }
    Some(m)
}

#[test]
fn c_compiler_agrees_with_rust_layouts() {
    let Some(c) = c_facts() else { return };
    let rust = rust_facts();
    let mut mismatches = Vec::new();
    for (key, c_value) in &c {
        match rust.get(key) {
            Some(r) if r == c_value => {}
            Some(r) => mismatches.push(format!("{key}: C {c_value}, Rust {r}")),
            None => mismatches.push(format!("{key}: C {c_value}, not checked on the Rust side")),
        }
    }
    for key in rust.keys().filter(|k| !c.contains_key(*k)) {
        mismatches.push(format!("{key}: Rust only, missing from the C probe"));
    }
    assert!(
        mismatches.is_empty(),
        "layout mismatches:\n{}",
        mismatches.join("\n")
    );
    // 45 members of wsrep_t plus its size and alignment, at least.
    assert!(c.len() >= 47, "the C probe printed only {} facts", c.len());
}
