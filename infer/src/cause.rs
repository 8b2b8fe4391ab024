//! Provenance: why each constraint exists.
//!
//! Causes form a forest in an arena: a constraint read from a `.rows` line or
//! emitted for an operator operand is a root; a constraint derived from
//! another (axis `i` of a row inequality, a template growth, a bound check)
//! points at its parent. Following parents gives the chain a diagnostic
//! prints, in the manner of rustc's `note:` lines.

use std::fmt;

/// The rule of a root fact that was simply stated (a `.rows` line).
pub const STATED: &str = "stated here";

/// Where a root fact comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A line of a `.rows` file, with its text.
    Line {
        /// 1-based line number.
        line: u32,
        /// The statement as written.
        text: String,
    },
    /// An operand of a graph node.
    Operand {
        /// The node's display name (`Add 'fc1' (n3)`).
        node: String,
        /// The node's own name (empty when it has none).
        name: String,
        /// The node's operator type.
        op: String,
        /// The node's index in its graph.
        index: u32,
        /// Where the graph sits: `""` for the main graph, `If_0/then_branch/` inside a subgraph.
        graph: String,
        /// Which operand (`input 1`, `output 0`).
        operand: String,
    },
    /// Something the solver itself decided (closing, a template).
    Solver(&'static str),
}

/// The id of a cause in the solver's cause arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CauseId(pub(crate) u32);

/// What a rule did, kept cheap to record: text is made only when a
/// diagnostic is rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A fixed description.
    Static(&'static str),
    /// Axis `n` of a row constraint.
    Axis(usize),
    /// A description made at the time.
    Text(Box<str>),
}

impl From<&'static str> for Rule {
    fn from(s: &'static str) -> Rule {
        Rule::Static(s)
    }
}

impl From<String> for Rule {
    fn from(s: String) -> Rule {
        Rule::Text(s.into_boxed_str())
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Static(s) => f.write_str(s),
            Rule::Axis(n) => write!(f, "axis {n} of the row constraint"),
            Rule::Text(s) => f.write_str(s),
        }
    }
}

/// One link of a provenance chain: a root (an index into the origins) or a
/// rule applied to a parent. Kept small — solving a large graph records
/// several per constraint — so origins live in their own table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// What the rule did, e.g. `axis 2 of the row constraint`.
    pub rule: Rule,
    /// The cause this one was derived from, or the origin of a root.
    link: Link,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Origin(u32),
    Parent(CauseId),
}

/// All causes of one solver run.
#[derive(Clone, Debug, Default)]
pub struct Causes {
    items: Vec<Cause>,
    origins: Vec<Origin>,
}

impl Causes {
    /// Adds a root cause.
    pub fn root(&mut self, origin: Origin, rule: impl Into<Rule>) -> CauseId {
        self.origins.push(origin);
        let link = Link::Origin(self.origins.len() as u32 - 1);
        self.push(Cause { rule: rule.into(), link })
    }

    /// Adds a cause derived from `parent`.
    pub fn derived(&mut self, parent: CauseId, rule: impl Into<Rule>) -> CauseId {
        self.push(Cause { rule: rule.into(), link: Link::Parent(parent) })
    }

    fn push(&mut self, cause: Cause) -> CauseId {
        let id = CauseId(self.items.len() as u32);
        self.items.push(cause);
        id
    }

    /// The cause `id`.
    pub fn get(&self, id: CauseId) -> &Cause {
        &self.items[id.0 as usize]
    }

    /// The root origin of `id`'s chain.
    pub fn origin(&self, id: CauseId) -> Option<&Origin> {
        let mut at = id;
        loop {
            match self.get(at).link {
                Link::Origin(o) => return self.origins.get(o as usize),
                Link::Parent(parent) => at = parent,
            }
        }
    }

    /// The chain from `id` up to its root, innermost first; a root reads as
    /// its origin (`line 4 \`x = [3]\``), followed by its rule unless the
    /// rule only says the fact was stated there.
    pub fn chain(&self, id: CauseId) -> Vec<String> {
        let mut out = Vec::new();
        let mut at = Some(id);
        while let Some(current) = at {
            let cause = self.get(current);
            at = None;
            match cause.link {
                Link::Origin(o) => {
                    let origin = &self.origins[o as usize];
                    if cause.rule == Rule::Static(STATED) {
                        out.push(origin.to_string());
                    } else {
                        out.push(format!("{origin}: {}", cause.rule));
                    }
                }
                Link::Parent(parent) => {
                    out.push(cause.rule.to_string());
                    at = Some(parent);
                }
            }
        }
        out
    }

    /// The chain as one line, innermost link first: `axis 0 of the row constraint ← line 5 \`x = [5]\``.
    pub fn chain_text(&self, id: CauseId) -> String {
        self.chain(id).join(" ← ")
    }

    /// The axis of the innermost `axis n of the row constraint` link of
    /// `id`'s chain: which axis of the operand a failed constraint was about.
    pub fn axis(&self, id: CauseId) -> Option<usize> {
        let mut at = id;
        loop {
            let cause = self.get(at);
            if let Rule::Axis(n) = cause.rule {
                return Some(n);
            }
            match cause.link {
                Link::Origin(_) => return None,
                Link::Parent(parent) => at = parent,
            }
        }
    }

    /// The 1-based `.rows` line of `id`'s root, if it has one.
    pub fn line(&self, id: CauseId) -> Option<u32> {
        match self.origin(id) {
            Some(Origin::Line { line, .. }) => Some(*line),
            _ => None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Line { line, text } => write!(f, "line {line} `{text}`"),
            Origin::Operand { node, operand, .. } => write!(f, "{node} {operand}"),
            Origin::Solver(what) => write!(f, "{what}"),
        }
    }
}
