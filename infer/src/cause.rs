//! Provenance: why each constraint exists.
//!
//! Causes form a forest in an arena: a constraint read from a `.rows` line or
//! emitted for an operator operand is a root; a constraint derived from
//! another (axis `i` of a row inequality, a template growth, a bound check)
//! points at its parent. Following parents gives the chain a diagnostic
//! prints, in the manner of rustc's `note:` lines.

use rustc_hash::FxHashMap;
use std::fmt;
use std::sync::Arc;

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
    /// An operand of a graph node. The node is shared by every cause made
    /// at it (a node makes several, one per operand and axis), and the
    /// operand's text by every cause that names it.
    Operand {
        /// The node.
        site: Arc<NodeSite>,
        /// Which operand (`input 1`, `output 0`, `node` for the node as a whole).
        operand: Arc<str>,
    },
    /// Something the solver itself decided (closing, a template).
    Solver(&'static str),
}

/// The graph node a cause was made at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSite {
    /// The node's own name (empty when it has none).
    pub name: Box<str>,
    /// The node's operator type.
    pub op: Arc<str>,
    /// The node's index in its graph.
    pub index: u32,
    /// Where the graph sits: `""` for the main graph, `If_0/then_branch/` inside a subgraph.
    pub graph: Arc<str>,
}

/// The node's display label: `Add 'fc1' (node 3)`, or `Add (node 3)`
/// without a name.
impl fmt::Display for NodeSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.is_empty() {
            write!(f, "{} (node {})", self.op, self.index)
        } else {
            write!(f, "{} '{}' (node {})", self.op, self.name, self.index)
        }
    }
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

/// One link of a provenance chain: a root (with its origin) or a rule
/// applied to a parent, as [`Causes::get`] gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// What the rule did, e.g. `axis 2 of the row constraint`.
    pub rule: Rule,
    /// The cause this one was derived from, or the origin of a root.
    link: Link,
}

impl Cause {
    /// The cause this one was derived from; `None` for a root.
    pub fn parent(&self) -> Option<CauseId> {
        match self.link {
            Link::Parent(p) => Some(p),
            Link::Origin(_) => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Origin(u32),
    Parent(CauseId),
}

/// A cause as stored: 8 bytes, since solving a large graph records several
/// per constraint. `rule` is tagged in its top two bits — an axis number, an
/// index into the static descriptions, or an index into the texts — and
/// `link`'s top bit says whether the rest is an origin or a parent id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Packed {
    rule: u32,
    link: u32,
}

const TAG: u32 = 3 << 30;
const AXIS: u32 = 0;
const STATIC: u32 = 1 << 30;
const TEXT: u32 = 2 << 30;
const ORIGIN: u32 = 1 << 31;

/// All causes of one solver run.
#[derive(Clone, Debug, Default)]
pub struct Causes {
    items: Vec<Packed>,
    origins: Vec<Origin>,
    /// The static descriptions in use, and their indices by address.
    statics: Vec<&'static str>,
    static_index: FxHashMap<(usize, usize), u32>,
    /// The static description added last, and its index: most causes repeat it.
    last_static: Option<(&'static str, u32)>,
    texts: Vec<Box<str>>,
}

impl Causes {
    /// Adds a root cause.
    pub fn root(&mut self, origin: Origin, rule: impl Into<Rule>) -> CauseId {
        self.origins.push(origin);
        let link = (self.origins.len() as u32 - 1) | ORIGIN;
        self.push(rule.into(), link)
    }

    /// Adds a cause derived from `parent`.
    pub fn derived(&mut self, parent: CauseId, rule: impl Into<Rule>) -> CauseId {
        self.push(rule.into(), parent.0)
    }

    /// Adds `axis n of the row constraint`, derived from `parent`.
    pub(crate) fn axis_of(&mut self, parent: CauseId, n: usize) -> CauseId {
        match u32::try_from(n) {
            Ok(n) if n & TAG == 0 => self.push_packed(Packed { rule: AXIS | n, link: parent.0 }),
            _ => self.push(Rule::Axis(n), parent.0),
        }
    }

    fn push(&mut self, rule: Rule, link: u32) -> CauseId {
        let rule = match rule {
            Rule::Axis(n) if (n as u64) < (1 << 30) => AXIS | n as u32,
            Rule::Static(s) if self.last_static.is_some_and(|(last, _)| std::ptr::eq(last, s)) => {
                STATIC | self.last_static.map_or(0, |(_, i)| i)
            }
            Rule::Static(s) => {
                let key = (s.as_ptr() as usize, s.len());
                let next = self.statics.len() as u32;
                let index = *self.static_index.entry(key).or_insert(next);
                if index == next {
                    self.statics.push(s);
                }
                self.last_static = Some((s, index));
                STATIC | index
            }
            Rule::Axis(n) => {
                self.texts.push(Rule::Axis(n).to_string().into_boxed_str());
                TEXT | (self.texts.len() as u32 - 1)
            }
            Rule::Text(t) => {
                self.texts.push(t);
                TEXT | (self.texts.len() as u32 - 1)
            }
        };
        self.push_packed(Packed { rule, link })
    }

    fn push_packed(&mut self, cause: Packed) -> CauseId {
        let id = CauseId(self.items.len() as u32);
        self.items.push(cause);
        id
    }

    fn rule(&self, rule: u32) -> Rule {
        let index = (rule & !TAG) as usize;
        match rule & TAG {
            AXIS => Rule::Axis(index),
            STATIC => Rule::Static(self.statics[index]),
            _ => Rule::Text(self.texts[index].clone()),
        }
    }

    fn is_stated(&self, rule: u32) -> bool {
        rule & TAG == STATIC && self.statics[(rule & !TAG) as usize] == STATED
    }

    fn link(&self, id: CauseId) -> Link {
        let link = self.items[id.0 as usize].link;
        if link & ORIGIN != 0 {
            Link::Origin(link & !ORIGIN)
        } else {
            Link::Parent(CauseId(link))
        }
    }

    /// The cause `id`.
    pub fn get(&self, id: CauseId) -> Cause {
        Cause { rule: self.rule(self.items[id.0 as usize].rule), link: self.link(id) }
    }

    /// The root origin of `id`'s chain.
    pub fn origin(&self, id: CauseId) -> Option<&Origin> {
        let mut at = id;
        loop {
            match self.link(at) {
                Link::Origin(o) => return self.origins.get(o as usize),
                Link::Parent(parent) => at = parent,
            }
        }
    }

    /// The chain from `id` up to its root, innermost first; a root reads as
    /// its origin (`` line 4 `x = [3]` ``), followed by its rule unless the
    /// rule only says the fact was stated there.
    pub fn chain(&self, id: CauseId) -> Vec<String> {
        let mut out = Vec::new();
        let mut at = Some(id);
        while let Some(current) = at {
            let rule = self.items[current.0 as usize].rule;
            at = None;
            match self.link(current) {
                Link::Origin(o) => {
                    let origin = &self.origins[o as usize];
                    if self.is_stated(rule) {
                        out.push(origin.to_string());
                    } else {
                        out.push(format!("{origin}: {}", self.rule(rule)));
                    }
                }
                Link::Parent(parent) => {
                    out.push(self.rule(rule).to_string());
                    at = Some(parent);
                }
            }
        }
        out
    }

    /// The chain as one line, innermost link first: `` axis 0 of the row constraint ← line 5 `x = [5]` ``.
    pub fn chain_text(&self, id: CauseId) -> String {
        self.chain(id).join(" ← ")
    }

    /// The axis of the innermost `axis n of the row constraint` link of
    /// `id`'s chain: which axis of the operand a failed constraint was about.
    pub fn axis(&self, id: CauseId) -> Option<usize> {
        let mut at = id;
        loop {
            let rule = self.items[at.0 as usize].rule;
            if rule & TAG == AXIS {
                return Some(rule as usize);
            }
            match self.link(at) {
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
            Origin::Operand { site, operand } => write!(f, "{site} {operand}"),
            Origin::Solver(what) => write!(f, "{what}"),
        }
    }
}
