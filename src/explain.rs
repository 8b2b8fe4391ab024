//! The long explanation of each diagnostic code: what it means, a minimal
//! model that shows it (a committed fixture and the command that reports
//! it), and how to fix it. The text is `docs/diagnostics/CODE.md`, built in,
//! so `diamond explain CODE` and the documentation are one source.

use crate::check::Code;

/// The explanation of `code`, as Markdown.
///
/// ```
/// let page = diamond::check::explain(diamond::check::Code::Divisibility);
/// assert!(page.starts_with("# `divisibility`"));
/// ```
pub fn explain(code: Code) -> &'static str {
    match code {
        Code::BroadcastConflict => include_str!("../docs/diagnostics/broadcast-conflict.md"),
        Code::RankConflict => include_str!("../docs/diagnostics/rank-conflict.md"),
        Code::DimMismatch => include_str!("../docs/diagnostics/dim-mismatch.md"),
        Code::ElementCountMismatch => include_str!("../docs/diagnostics/element-count-mismatch.md"),
        Code::DynamicAxisSpecialized => include_str!("../docs/diagnostics/dynamic-axis-specialized.md"),
        Code::UndeterminedParameter => include_str!("../docs/diagnostics/undetermined-parameter.md"),
        Code::DtypeMismatch => include_str!("../docs/diagnostics/dtype-mismatch.md"),
        Code::DeclaredShapeMismatch => include_str!("../docs/diagnostics/declared-shape-mismatch.md"),
        Code::InvalidAttribute => include_str!("../docs/diagnostics/invalid-attribute.md"),
        Code::InvalidGraph => include_str!("../docs/diagnostics/invalid-graph.md"),
        Code::UnsupportedOp => include_str!("../docs/diagnostics/unsupported-op.md"),
        Code::ImpliedBound => include_str!("../docs/diagnostics/implied-bound.md"),
        Code::Divisibility => include_str!("../docs/diagnostics/divisibility.md"),
        Code::UnitAxisWidened => include_str!("../docs/diagnostics/unit-axis-widened.md"),
        Code::SizeOverflow => include_str!("../docs/diagnostics/size-overflow.md"),
        Code::DeclaredDimResolved => include_str!("../docs/diagnostics/declared-dim-resolved.md"),
        Code::OnesVector => include_str!("../docs/diagnostics/ones-vector.md"),
    }
}
