//! Chain notes rephrased for reading. The solver writes each note as a
//! provenance chain, innermost link first, joined by ` ← `
//! (`'_1 is 4 because of axis 1 of the row constraint ← Add 'add1' (node 0)
//! input 0: broadcasts to the output`). For display, a solver variable's
//! value reads as where it comes from (`4 comes from Add 'add1' (node 0)
//! input 0: broadcasts to the output, axis 1`), and an axis link in front of
//! its root moves behind it. Notes of any other shape are shown as written.

/// The separator between links of a chain.
const LINK: &str = " ← ";

/// `note` as displayed.
pub fn display(note: &str) -> String {
    if let Some((value, chain)) = variable_value(note) {
        return format!("{value} comes from {}", chain_text(chain));
    }
    if let Some(chain) = note.strip_prefix("required by ") {
        return format!("required by {}", chain_text(chain));
    }
    note.to_string()
}

/// Splits `'a is VALUE because of CHAIN` into its value and chain.
fn variable_value(note: &str) -> Option<(&str, &str)> {
    let rest = note.strip_prefix('\'')?;
    let (name, rest) = rest.split_once(" is ")?;
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    rest.split_once(" because of ")
}

/// A chain of exactly `axis N of the row constraint ← ROOT` reads `ROOT, axis N`
/// (or `ROOT` when its rule already names axis N); any other chain as written.
fn chain_text(chain: &str) -> String {
    let links: Vec<&str> = chain.split(LINK).collect();
    if let [first, root] = links[..] {
        let axis = first.strip_prefix("axis ").and_then(|r| r.strip_suffix(" of the row constraint"));
        if let Some(n) = axis.filter(|n| n.parse::<usize>().is_ok()) {
            // A rule that already says which axis it is about needs no suffix.
            if root.split(": ").nth(1).is_some_and(|why| why.contains(&format!("axis {n}"))) {
                return root.to_string();
            }
            return format!("{root}, axis {n}");
        }
    }
    chain.to_string()
}

#[cfg(test)]
mod tests {
    use super::display;

    #[test]
    fn a_variable_value_reads_as_where_it_comes_from() {
        assert_eq!(
            display("'_1 is 4 because of axis 1 of the row constraint ← Add 'add1' (node 0) input 0: broadcasts"),
            "4 comes from Add 'add1' (node 0) input 0: broadcasts, axis 1"
        );
    }

    #[test]
    fn required_by_moves_the_axis_behind_the_root() {
        assert_eq!(
            display("required by axis 1 of the row constraint ← Add 'add1' (node 0) input 1: broadcasts"),
            "required by Add 'add1' (node 0) input 1: broadcasts, axis 1"
        );
    }

    #[test]
    fn longer_chains_and_other_notes_are_kept() {
        let long = "required by axis 0 of the row constraint ← template growth ← Concat 'c' (node 2) input 0";
        assert_eq!(display(long), long);
        assert_eq!(display("declared [2, 4], inferred [2, 3]"), "declared [2, 4], inferred [2, 3]");
        assert_eq!(display("'a b is 3 because of x"), "'a b is 3 because of x");
    }
}
