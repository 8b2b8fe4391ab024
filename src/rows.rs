//! The solver on its own: a `.rows` file states tensors' shapes as rows of
//! dims and the broadcast, equality and size constraints between them (the
//! format `docs/rows-format.md` describes); [`solve`] gives each tensor's
//! principal and closed shape and the diagnostics, as `diamond solve`
//! prints them.
//!
//! ```
//! // a leaf closes upward to what its uses require
//! let solved = diamond::rows::solve("tensor x : leaf [..a]\nx <= [3, 4]\n")?;
//! assert_eq!(solved.errors(), 0);
//! assert_eq!(solved.to_json()["tensors"]["x"]["closed"], "[3, 4]");
//! assert_eq!(diamond::rows::solve("[3] <= [5]\n")?.errors(), 1);
//! # Ok::<(), diamond::Error>(())
//! ```

use crate::error::{Error, Result};

/// A solved `.rows` file, with the text it was read from.
pub struct Solved {
    solution: diamond_infer::Solution,
    source: String,
}

/// Parses and solves `.rows` text; a syntax error is [`Error::Read`]
/// naming the line and column.
pub fn solve(source: &str) -> Result<Solved> {
    let file =
        diamond_infer::rows::parse::parse_rows(source).map_err(|e| Error::Read(format!("syntax error at {e}")))?;
    let solution = diamond_infer::rows::lower::solve_rows(&file);
    Ok(Solved { solution, source: source.to_string() })
}

impl Solved {
    /// The errors among the diagnostics.
    pub fn errors(&self) -> usize {
        diamond_infer::rows::render::count(&self.solution.diagnostics).0
    }

    /// The diagnostics and every tensor's shapes, as text, each diagnostic
    /// pointing at the line of the file it comes from.
    pub fn render_text(&self) -> String {
        diamond_infer::rows::render::render_text(&self.solution, &self.source)
    }

    /// Every tensor's `principal` and `closed` shape, and the diagnostics,
    /// as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        let solution = &self.solution;
        let tensors: serde_json::Map<String, serde_json::Value> = solution
            .tensors
            .iter()
            .map(|t| {
                let (principal, closed) = (solution.names.row(&t.principal), solution.names.row(&t.closed));
                (t.name.clone(), serde_json::json!({ "principal": principal, "closed": closed }))
            })
            .collect();
        serde_json::json!({ "tensors": tensors, "diagnostics": solution.diagnostics })
    }
}
