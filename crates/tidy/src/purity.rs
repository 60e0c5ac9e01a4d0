//! What the core crates must not do outside their tests: I/O (files, sockets, processes,
//! the environment, the terminal), threads (spawning, sleeping) and clocks. `clippy.toml`
//! bans a few calls by name; this reads every path and macro in the sources, `use` lists
//! included, so that `thread::Builder` or `std::fs` cannot slip past under another name.

use std::path::{Path, PathBuf};

use proc_macro2::Span;
use syn::visit::{self, Visit};

use crate::is_test_only;

/// One forbidden use: where, and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Line in the file.
    pub line: usize,
    /// The path or macro, as written.
    pub what: String,
    /// The rule it breaks.
    pub rule: &'static str,
}

/// The rule a path breaks, if any. `segments` is the path as written, `::` apart.
pub fn rule_for(segments: &[String]) -> Option<&'static str> {
    let has = |name: &str| segments.iter().any(|s| s == name);
    let after = |first: &str, then: &[&str]| {
        segments
            .windows(2)
            .any(|w| w[0] == first && then.contains(&w[1].as_str()))
    };
    let io = after("std", &["fs", "net", "process", "env"])
        || after("io", &["stdin", "stdout", "stderr"])
        || segments.first().is_some_and(|s| s == "tokio");
    if io {
        Some("no I/O")
    } else if after("thread", &["spawn", "Builder", "sleep", "scope"]) {
        Some("no threads")
    } else if has("Instant") || has("SystemTime") {
        Some("no clock")
    } else {
        None
    }
}

/// Macros that write to the terminal.
const PRINTING_MACROS: [&str; 5] = ["print", "println", "eprint", "eprintln", "dbg"];

/// The forbidden uses in one parsed file, outside `#[cfg(test)]` items.
pub fn findings(file: &syn::File) -> Vec<Finding> {
    let mut scan = Scan::default();
    scan.visit_file(file);
    scan.findings
}

/// The files declared as `#[cfg(test)] mod name;` by the file at `path` (relative paths,
/// as Rust resolves them), so that a scan can leave them out.
pub fn test_module_files(path: &Path, file: &syn::File) -> Vec<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new(""));
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    // A `foo.rs` keeps its modules in `foo/`; `lib.rs`, `main.rs` and `mod.rs` beside them.
    let base = if matches!(stem, "lib" | "main" | "mod") {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    file.items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) if m.content.is_none() && is_test_only(&m.attrs) => {
                Some(m.ident.to_string())
            }
            _ => None,
        })
        .flat_map(|name| {
            [
                base.join(format!("{name}.rs")),
                base.join(name).join("mod.rs"),
            ]
        })
        .collect()
}

#[derive(Default)]
struct Scan {
    findings: Vec<Finding>,
}

impl Scan {
    fn check(&mut self, segments: Vec<String>, span: Span) {
        if let Some(rule) = rule_for(&segments) {
            self.findings.push(Finding {
                line: span.start().line,
                what: segments.join("::"),
                rule,
            });
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                path.push(n.ident.to_string());
                self.check(path, n.ident.span());
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                path.push(r.ident.to_string());
                self.check(path, r.ident.span());
            }
            syn::UseTree::Glob(g) => self.check(prefix.clone(), g.star_token.spans[0]),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Scan {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            _ => return visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if !is_test_only(&item.attrs) {
            visit::visit_impl_item_fn(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.check(
            segments,
            path.segments
                .first()
                .map_or(Span::call_site(), |s| s.ident.span()),
        );
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if let Some(name) = mac.path.get_ident() {
            if PRINTING_MACROS.contains(&name.to_string().as_str()) {
                self.findings.push(Finding {
                    line: name.span().start().line,
                    what: format!("{name}!"),
                    rule: "no I/O",
                });
            }
        }
        visit::visit_macro(self, mac);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(source: &str) -> Vec<(usize, String, &'static str)> {
        let file = syn::parse_file(source).unwrap();
        findings(&file)
            .into_iter()
            .map(|f| (f.line, f.what, f.rule))
            .collect()
    }

    #[test]
    fn io_threads_and_clocks_are_found_however_they_are_named() {
        let source = "use std::{fs, time::Instant};\n\
                      use std::thread;\n\
                      fn a() { thread::Builder::new(); }\n\
                      fn b() { std::thread::panicking(); let _ = std::io::Cursor::new(1); }\n\
                      fn c() { println!(\"x\"); std::process::exit(1); }\n";
        assert_eq!(
            scan(source),
            [
                (1, "std::fs".into(), "no I/O"),
                (1, "std::time::Instant".into(), "no clock"),
                (3, "thread::Builder::new".into(), "no threads"),
                (5, "println!".into(), "no I/O"),
                (5, "std::process::exit".into(), "no I/O"),
            ]
        );
    }

    #[test]
    fn test_only_code_is_left_out() {
        let source = "#[cfg(test)]\nmod tests { fn t() { std::thread::spawn(|| ()); } }\n\
                      #[cfg(test)]\nfn helper() { let _ = std::time::Instant::now(); }\n\
                      #[cfg(test)]\nmod more;\n";
        assert!(scan(source).is_empty());
        let file = syn::parse_file(source).unwrap();
        let files = test_module_files(Path::new("crates/x/src/node.rs"), &file);
        assert_eq!(
            files,
            [
                PathBuf::from("crates/x/src/node/more.rs"),
                PathBuf::from("crates/x/src/node/more/mod.rs")
            ]
        );
    }
}
