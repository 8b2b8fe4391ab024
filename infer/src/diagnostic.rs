//! Diagnostics: stable codes, a message naming the facts that clash, and the
//! provenance chain of each fact.

use diamond_ir::term::{Condition, SizeExpr};
use serde::Serialize;
use std::fmt;

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The constraints cannot all hold.
    Error,
    /// They hold only under an assumption worth knowing.
    Warning,
    /// Nothing is wrong; something the file left open was found out.
    Info,
}

impl Severity {
    /// The word printed for it (`error`, `warning`, `info`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// The stable diagnostic codes of the solver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    /// Two dimensions cannot broadcast to each other.
    BroadcastConflict,
    /// A row has too few (or too many) axes for what is required of it.
    RankConflict,
    /// Two dimensions that must be equal (an exact-match pair) differ.
    DimMismatch,
    /// Two shapes that must hold the same number of elements do not.
    ElementCountMismatch,
    /// A dynamic axis (rigid symbol) is forced to a constant or another symbol.
    DynamicAxisSpecialized,
    /// Nothing determines an axis of a parameter.
    UndeterminedParameter,
    /// Operands' element types break the operator's type constraints.
    DtypeMismatch,
    /// A stated `value_info` or graph-output shape disagrees with the graph.
    DeclaredShapeMismatch,
    /// An attribute or constant operand is out of range or malformed.
    InvalidAttribute,
    /// The graph itself is malformed (dangling names, cycles, duplicate outputs).
    InvalidGraph,
    /// An operator the checker has no rule for.
    UnsupportedOp,
    /// The graph is valid only under a bound on a dynamic axis.
    ImpliedBound,
    /// The graph is valid only when a dynamic size is divisible by a constant
    /// (a `Reshape` splitting symbolic axes into fixed factors).
    Divisibility,
    /// A stated unit axis is widened by broadcasting (`--strict-units`).
    UnitAxisWidened,
    /// A value holds more elements than 64 bits can count.
    SizeOverflow,
    /// A declared dim the exporter named without knowing it (`unk__3`) was sized by inference.
    DeclaredDimResolved,
    /// A uniform tensor (a ones-vector) that only sums an axis: `optimize` folds it into a reduction.
    OnesVector,
}

impl Code {
    /// Every code, in the order of the enum.
    pub const ALL: [Code; 17] = [
        Code::BroadcastConflict,
        Code::RankConflict,
        Code::DimMismatch,
        Code::ElementCountMismatch,
        Code::DynamicAxisSpecialized,
        Code::UndeterminedParameter,
        Code::DtypeMismatch,
        Code::DeclaredShapeMismatch,
        Code::InvalidAttribute,
        Code::InvalidGraph,
        Code::UnsupportedOp,
        Code::ImpliedBound,
        Code::Divisibility,
        Code::UnitAxisWidened,
        Code::SizeOverflow,
        Code::DeclaredDimResolved,
        Code::OnesVector,
    ];

    /// The code printed as `text` (`broadcast-conflict`), if there is one.
    pub fn parse(text: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// The code as printed (`broadcast-conflict`).
    pub fn as_str(self) -> &'static str {
        match self {
            Code::BroadcastConflict => "broadcast-conflict",
            Code::RankConflict => "rank-conflict",
            Code::DimMismatch => "dim-mismatch",
            Code::ElementCountMismatch => "element-count-mismatch",
            Code::DynamicAxisSpecialized => "dynamic-axis-specialized",
            Code::UndeterminedParameter => "undetermined-parameter",
            Code::DtypeMismatch => "dtype-mismatch",
            Code::DeclaredShapeMismatch => "declared-shape-mismatch",
            Code::InvalidAttribute => "invalid-attribute",
            Code::InvalidGraph => "invalid-graph",
            Code::UnsupportedOp => "unsupported-op",
            Code::ImpliedBound => "implied-bound",
            Code::Divisibility => "divisibility",
            Code::UnitAxisWidened => "unit-axis-widened",
            Code::SizeOverflow => "size-overflow",
            Code::DeclaredDimResolved => "declared-dim-resolved",
            Code::OnesVector => "ones-vector",
        }
    }

    /// Whether a diagnostic of this code records an assumption the check
    /// went on under (its results hold only if the assumption does).
    pub fn is_assumption(self) -> bool {
        matches!(self, Code::DynamicAxisSpecialized | Code::ImpliedBound | Code::Divisibility)
    }

    /// The severity this code always has.
    pub fn severity(self) -> Severity {
        match self {
            Code::DynamicAxisSpecialized
            | Code::UnsupportedOp
            | Code::ImpliedBound
            | Code::Divisibility
            | Code::UnitAxisWidened => Severity::Warning,
            Code::DeclaredDimResolved | Code::OnesVector => Severity::Info,
            _ => Severity::Error,
        }
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The stable code.
    pub code: Code,
    /// What clashes, naming the facts.
    pub message: String,
    /// The `.rows` line of the constraint that failed, if any.
    pub line: Option<u32>,
    /// The graph node the failed constraint came from, if any (its name, or its display when unnamed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// That node's operator type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// That node's index in its graph.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_index: Option<u32>,
    /// The graph holding that node: `""` (omitted) for the main graph, `If_0/then_branch/` for a subgraph.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<String>,
    /// The node's operand the failed constraint is about (`input 1`, `output 0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operand: Option<String>,
    /// The axis of that operand, when the failure is about one axis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub axis: Option<usize>,
    /// How to fix it, where that is clear.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    /// For each clashing fact, where it came from, outermost cause last.
    pub notes: Vec<String>,
    /// The two sizes that clash, for a dimension conflict (the message says them too).
    #[serde(skip)]
    pub clash: Option<(String, String)>,
    /// For a warning that the model holds only under a condition on its
    /// dynamic sizes (`implied-bound`, `divisibility`,
    /// `dynamic-axis-specialized`): that condition, every part of which must
    /// hold, for whoever binds the symbols to check (`diamond run`).
    #[serde(skip)]
    pub assumes: Vec<Assumption>,
}

/// One condition on the dynamic sizes that a model relies on, over the
/// rigid symbols (`seq ≤ 64`, `batch*seq` divisible by 32, `batch = 1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assumption {
    /// `lhs ≤ rhs`.
    AtMost(SizeExpr, SizeExpr),
    /// `lhs ≥ rhs`.
    AtLeast(SizeExpr, SizeExpr),
    /// `lhs = rhs`.
    Equal(SizeExpr, SizeExpr),
    /// `lhs = rhs` or `lhs = 1` (a dynamic axis broadcasting to a fixed one).
    EqualOrOne(SizeExpr, SizeExpr),
    /// `expr` is a multiple of the constant.
    Divisible(SizeExpr, u64),
}

impl Assumption {
    /// Whether the condition holds when every symbol has the value
    /// `value_of` gives; `None` when a symbol has none (or the arithmetic
    /// overflows), so that nothing can be said.
    pub fn holds(&self, value_of: &dyn Fn(&str) -> Option<i64>) -> Option<bool> {
        Some(match self {
            Assumption::AtMost(a, b) => a.eval(value_of)? <= b.eval(value_of)?,
            Assumption::AtLeast(a, b) => a.eval(value_of)? >= b.eval(value_of)?,
            Assumption::Equal(a, b) => a.eval(value_of)? == b.eval(value_of)?,
            Assumption::EqualOrOne(a, b) => {
                let x = a.eval(value_of)?;
                x == 1 || x == b.eval(value_of)?
            }
            Assumption::Divisible(e, k) => e.eval(value_of)?.rem_euclid(i64::try_from(*k).ok()?.max(1)) == 0,
        })
    }

    /// The condition in plain words, for messages and reports: sizes in
    /// their readable form ([`SizeExpr::readable`]) and an equation stated
    /// as the condition on its symbol it amounts to where that is exact
    /// ([`equal_text`]). The [`fmt::Display`] form is the exact one.
    pub fn plain(&self) -> String {
        match self {
            Assumption::AtMost(a, b) => format!("{} ≤ {}", a.readable(), b.readable()),
            Assumption::AtLeast(a, b) => format!("{} ≥ {}", a.readable(), b.readable()),
            Assumption::Equal(a, b) => equal_text(a, b),
            Assumption::EqualOrOne(a, b) => {
                let one = SizeExpr::constant(1);
                if Condition::never_equal(a, &one) {
                    return equal_text(a, b);
                }
                let a_text = a.readable();
                match Condition::of_equal(a, b) {
                    Some(c) => format!("{c}, or when {a_text} = 1"),
                    None => format!("{a_text} = {} or {a_text} = 1", b.readable()),
                }
            }
            Assumption::Divisible(e, k) => format!("{} is divisible by {k}", e.readable()),
        }
    }

    /// The symbols the condition is about, each once.
    pub fn symbols(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let exprs: Vec<&SizeExpr> = match self {
            Assumption::AtMost(a, b)
            | Assumption::AtLeast(a, b)
            | Assumption::Equal(a, b)
            | Assumption::EqualOrOne(a, b) => vec![a, b],
            Assumption::Divisible(e, _) => vec![e],
        };
        for name in exprs.into_iter().flat_map(SizeExpr::symbols) {
            if !out.contains(&name) {
                out.push(name);
            }
        }
        out
    }
}

impl fmt::Display for Assumption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Assumption::AtMost(a, b) => write!(f, "{a} ≤ {b}"),
            Assumption::AtLeast(a, b) => write!(f, "{a} ≥ {b}"),
            Assumption::Equal(a, b) => write!(f, "{a} = {b}"),
            Assumption::EqualOrOne(a, b) => write!(f, "{a} = {b} or {a} = 1"),
            Assumption::Divisible(e, k) => write!(f, "{e} is divisible by {k}"),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = self.severity.as_str();
        writeln!(f, "{severity}[{}]: {}", self.code.as_str(), self.message)?;
        if let Some(line) = self.line {
            writeln!(f, "  --> line {line}")?;
        }
        for note in &self.notes {
            writeln!(f, "  = note: {note}")?;
        }
        Ok(())
    }
}

/// `a = b` as a person would state it: the condition on its one symbol
/// it amounts to where that is exact (`H mod 32 is 0 or at least 29 (in
/// particular when H is a multiple of 32)`, see [`Condition::of_equal`]),
/// else the equation with both sides readable (`ceil(H/4) = 8*ceil(H/32)`).
pub fn equal_text(a: &SizeExpr, b: &SizeExpr) -> String {
    match Condition::of_equal(a, b) {
        Some(c) => c.to_string(),
        None => format!("{} = {}", a.readable(), b.readable()),
    }
}

/// The longest message a rule may give; longer ones (a 50,000-entry `perm`
/// quoted back) are cut, saying how much was left out.
pub const MAX_MESSAGE_CHARS: usize = 400;

/// `text` cut to [`MAX_MESSAGE_CHARS`] characters, with a note of the rest.
pub fn shorten(text: String) -> String {
    let count = text.chars().count();
    if count <= MAX_MESSAGE_CHARS {
        return text;
    }
    let kept: String = text.chars().take(MAX_MESSAGE_CHARS).collect();
    format!("{kept}… ({} more characters)", count - MAX_MESSAGE_CHARS)
}
