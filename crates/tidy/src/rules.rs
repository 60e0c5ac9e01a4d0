//! The crate table of `ARCHITECTURE.md`: one row per crate, whose last column says which
//! workspace crates it may depend on. Any workspace crate named in that column counts
//! (remarks in parentheses included); other words (external crates, remarks) are ignored.

use std::collections::{BTreeMap, BTreeSet};

/// The heading of the section that holds the table.
const SECTION: &str = "## Crates";

/// Crate name -> the workspace crates its row allows it to depend on.
pub type CrateRules = BTreeMap<String, BTreeSet<String>>;

/// Reads the table from the text of `ARCHITECTURE.md`; `workspace` names the crates a row's
/// last column is searched for.
pub fn parse(architecture: &str, workspace: &BTreeSet<String>) -> CrateRules {
    let mut rules = CrateRules::new();
    let section = architecture
        .split_once(SECTION)
        .map_or("", |(_, rest)| rest.split("\n## ").next().unwrap_or(""));
    for line in section.lines() {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        let Some(name) = cells
            .first()
            .and_then(|c| c.trim().strip_prefix('`'))
            .and_then(|c| c.strip_suffix('`'))
        else {
            continue;
        };
        let allowed = cells.last().map_or_else(BTreeSet::new, |column| {
            words(column)
                .filter(|word| workspace.contains(*word))
                .map(str::to_owned)
                .collect()
        });
        rules.insert(name.to_owned(), allowed);
    }
    rules
}

/// The words of a table cell: crate names are letters, digits, '-' and '_'.
fn words(cell: &str) -> impl Iterator<Item = &str> {
    cell.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_give_the_workspace_crates_of_their_last_column() {
        let text = "# A\n\n## Crates\n\n| crate | what | may depend on |\n|---|---|---|\n\
                    | `base` | words | — |\n\
                    | `cli` | the tool | sst (progress), group and transport (to forge) |\n\
                    | `tls` | TLS | — (rustls) |\n\n## Next\n\n| `late` | x | base |\n";
        let workspace: BTreeSet<String> = ["base", "cli", "sst", "group", "transport", "tls"]
            .map(String::from)
            .into();
        let rules = parse(text, &workspace);
        assert_eq!(rules.keys().collect::<Vec<_>>(), ["base", "cli", "tls"]);
        assert!(rules["base"].is_empty());
        assert!(rules["tls"].is_empty(), "rustls is not a workspace crate");
        assert_eq!(
            rules["cli"].iter().collect::<Vec<_>>(),
            ["group", "sst", "transport"]
        );
    }
}
