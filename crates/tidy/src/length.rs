//! Function and file lengths, and the ratchet that keeps them from growing. A function over
//! [`FUNCTION_LINES_MAX`] or a file over [`FILE_LINES_MAX`] fails the check unless the ratchet
//! file lists it at exactly its length: an offender may only shrink (and the list is then
//! lowered to match), and no new one may appear.

use std::collections::BTreeMap;

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use crate::is_test_only;

/// The longest a function outside tests may be, in lines.
pub const FUNCTION_LINES_MAX: usize = 100;
/// The longest a source file may be, in lines.
pub const FILE_LINES_MAX: usize = 1000;
const _: () = assert!(FUNCTION_LINES_MAX < FILE_LINES_MAX);

/// A measured length: `fn <file> <name>` or `file <file>`, and its lines.
pub type Lengths = BTreeMap<String, usize>;

/// The functions of one parsed file (outside `#[cfg(test)]` items) longer than the limit,
/// keyed `fn <path> <Type::name>`.
pub fn long_functions(path: &str, file: &syn::File) -> Lengths {
    let mut scan = Scan {
        path,
        owner: None,
        found: Lengths::new(),
    };
    scan.visit_file(file);
    scan.found
}

/// A file's key and length if it is longer than the limit.
pub fn long_file(path: &str, text: &str) -> Option<(String, usize)> {
    let lines = text.lines().count();
    (lines > FILE_LINES_MAX).then(|| (format!("file {path}"), lines))
}

/// Reads a ratchet: `<key> <lines>` per line; `#` starts a comment.
pub fn parse_ratchet(text: &str) -> Result<Lengths, String> {
    let mut lengths = Lengths::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, lines) = line
            .rsplit_once(' ')
            .ok_or_else(|| format!("line {}: no length", number + 1))?;
        let lines = lines
            .parse()
            .map_err(|_| format!("line {}: {lines:?} is not a length", number + 1))?;
        lengths.insert(key.to_owned(), lines);
    }
    Ok(lengths)
}

/// What is wrong with `measured` against `ratchet`: new offenders, offenders that grew,
/// offenders that shrank or went (the ratchet must follow them down), one line each.
pub fn compare(measured: &Lengths, ratchet: &Lengths) -> Vec<String> {
    let mut problems = Vec::new();
    for (key, &lines) in measured {
        match ratchet.get(key) {
            None => problems.push(format!("{key}: {lines} lines, over the limit (new)")),
            Some(&allowed) if lines > allowed => {
                problems.push(format!("{key}: grew from {allowed} to {lines} lines"))
            }
            Some(&allowed) if lines < allowed => problems.push(format!(
                "{key}: down from {allowed} to {lines} lines: lower the ratchet to {lines}"
            )),
            Some(_) => {}
        }
    }
    for key in ratchet.keys().filter(|k| !measured.contains_key(*k)) {
        problems.push(format!(
            "{key}: gone or within the limit: remove it from the ratchet"
        ));
    }
    problems
}

struct Scan<'p> {
    path: &'p str,
    /// The type whose `impl` is being read.
    owner: Option<String>,
    found: Lengths,
}

impl Scan<'_> {
    fn measure(&mut self, name: &syn::Ident, span: proc_macro2::Span) {
        let lines = span.end().line + 1 - span.start().line;
        if lines <= FUNCTION_LINES_MAX {
            return;
        }
        let qualified = match &self.owner {
            Some(owner) => format!("{owner}::{name}"),
            None => name.to_string(),
        };
        let mut key = format!("fn {} {qualified}", self.path);
        let mut again = 2;
        while self.found.contains_key(&key) {
            key = format!("fn {} {qualified}#{again}", self.path);
            again += 1;
        }
        self.found.insert(key, lines);
    }
}

impl<'ast> Visit<'ast> for Scan<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_test_only(&item.attrs) {
            visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if is_test_only(&item.attrs) {
            return;
        }
        self.measure(&item.sig.ident, item.span());
        visit::visit_item_fn(self, item);
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if is_test_only(&item.attrs) {
            return;
        }
        let outer = self.owner.replace(type_name(&item.self_ty));
        visit::visit_item_impl(self, item);
        self.owner = outer;
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if is_test_only(&item.attrs) {
            return;
        }
        self.measure(&item.sig.ident, item.span());
        visit::visit_impl_item_fn(self, item);
    }
}

/// The last segment of a type path (`Dispatcher` for `crate::Dispatcher<T>`), or `_`.
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| "_".into(), |s| s.ident.to_string()),
        _ => "_".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_functions_are_found_by_owner_and_tests_left_out() {
        let body = "    let _x = 1;\n".repeat(FUNCTION_LINES_MAX);
        let source = format!(
            "fn free() {{\n{body}}}\nstruct S;\nimpl S {{\n    fn method(&self) {{\n{body}}}\n    \
             fn short(&self) {{}}\n}}\n#[cfg(test)]\nmod tests {{\n    fn long() {{\n{body}}}\n}}\n"
        );
        let file = syn::parse_file(&source).unwrap();
        let found = long_functions("a.rs", &file);
        let lines = FUNCTION_LINES_MAX + 2;
        assert_eq!(
            found,
            [
                ("fn a.rs S::method".to_owned(), lines),
                ("fn a.rs free".to_owned(), lines)
            ]
            .into()
        );
    }

    #[test]
    fn the_ratchet_only_goes_down() {
        let ratchet =
            parse_ratchet("# comment\nfn a.rs f 120\nfile b.rs 1500\nfn c.rs g 130\n").unwrap();
        let measured: Lengths = [
            ("fn a.rs f".to_owned(), 125),
            ("file b.rs".to_owned(), 1400),
            ("fn d.rs h".to_owned(), 101),
        ]
        .into();
        let problems = compare(&measured, &ratchet);
        assert_eq!(problems.len(), 4, "{problems:?}");
        let says = |text: &str| problems.iter().any(|p| p.contains(text));
        assert!(says("fn a.rs f: grew from 120 to 125"));
        assert!(says(
            "file b.rs: down from 1500 to 1400 lines: lower the ratchet to 1400"
        ));
        assert!(says("fn d.rs h: 101 lines, over the limit (new)"));
        assert!(says("fn c.rs g: gone"));
        assert!(compare(&ratchet, &ratchet).is_empty());
        assert!(parse_ratchet("fn a.rs f many").is_err());
    }
}
