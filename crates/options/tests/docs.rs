//! `docs/options.md` is generated from the option tables: this test fails when it is out of
//! date, and `TRIREME_UPDATE_DOCS=1 cargo test -p options --test docs` rewrites it.

use std::path::PathBuf;

use options::galera::GALERA_OPTIONS;
use options::options_table_markdown;

fn docs_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/options.md")
}

#[test]
fn docs_options_md_is_up_to_date() {
    let generated = options_table_markdown();
    let path = docs_path();
    if std::env::var_os("TRIREME_UPDATE_DOCS").is_some_and(|v| v == "1") {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        }
        std::fs::write(&path, &generated)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == generated,
        "{} is out of date with the option tables; regenerate it with \
         TRIREME_UPDATE_DOCS=1 cargo test -p options --test docs",
        path.display()
    );
}

/// The row of `name` in the table, as its cells.
fn row(table: &str, name: &str) -> Vec<String> {
    let start = format!("| `{name}` |");
    let line = table
        .lines()
        .find(|line| line.starts_with(&start))
        .unwrap_or_else(|| panic!("no row for {name}"));
    line.trim_matches('|')
        .split(" | ")
        .map(|cell| cell.trim().to_owned())
        .collect()
}

#[test]
fn the_table_has_a_row_per_option_saying_what_trireme_does() {
    let table = options_table_markdown();
    for option in GALERA_OPTIONS.iter() {
        let cells = row(&table, option.name);
        assert_eq!(cells.len(), 5, "{cells:?}");
    }
    assert_eq!(
        row(&table, "gcache.size"),
        [
            "`gcache.size`",
            "`128M`",
            "`128M`",
            "takes effect",
            "refused (startup only)"
        ]
    );
    assert_eq!(
        row(&table, "evs.send_window"),
        [
            "`evs.send_window`",
            "`4`",
            "—",
            "not implemented: ignored, with a warning",
            "not implemented: ignored, with a warning"
        ]
    );
    assert_eq!(row(&table, "pc.linger")[4], "refused (startup only)");
    let pc_weight = row(&table, "pc.weight");
    assert_eq!(pc_weight[2], "`1`");
    assert_eq!(pc_weight[3..], ["takes effect", "takes effect"]);
    let bootstrap = row(&table, "pc.bootstrap");
    assert_eq!(bootstrap[1], "not listed");
    assert_eq!(bootstrap[3], "takes effect");
    assert_eq!(bootstrap[4], "takes effect");
    assert!(row(&table, "gcache.page_size")[4].starts_with("no effect: "));
    assert_eq!(row(&table, "gcs.fc_limit")[4], "takes effect");
    // Trireme's own options come after the Galera ones.
    let own = table.find("## Trireme's own options").unwrap();
    assert!(table.find("| `gcache.keep_seconds` |").unwrap() > own);
    assert!(table.find("| `pc.weight` |").unwrap() < own);
}
