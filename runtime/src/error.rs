//! Why a model could not be run.

/// Every failure of the executor. `Unsupported` is a refusal (the model may
/// be fine; this executor lacks something); the others are errors in the
/// model or in what was fed to it.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// An operator, element type or attribute the executor does not implement.
    #[error("node '{node}' ({op}): unsupported: {reason}")]
    Unsupported {
        /// The node's name (or its first output's name when it has none).
        node: String,
        /// The operator.
        op: String,
        /// What is missing.
        reason: String,
    },
    /// A node's operands or attributes break the operator's contract.
    #[error("node '{node}' ({op}): {problem}")]
    Kernel {
        /// The node.
        node: String,
        /// The operator.
        op: String,
        /// What is wrong.
        problem: String,
    },
    /// A fed input does not fit the model's declaration, or is missing.
    #[error("input '{name}': {problem}")]
    Input {
        /// The graph input.
        name: String,
        /// What clashes.
        problem: String,
    },
    /// A fed input's shape contradicts what the model states or relies on:
    /// a rank or a fixed size it declares, a symbol another input bound to
    /// another size, a bound or divisibility the model assumes. Found by the
    /// execution plan before anything runs.
    #[error("input '{input}'{}: {problem} [rule: {rule}]", axis_text(*.axis))]
    Binding {
        /// The graph input.
        input: String,
        /// The axis of it, when the contradiction is about one.
        axis: Option<usize>,
        /// The rule broken: `declared-rank`, `declared-size`,
        /// `declared-element-type`, `declared-kind`, `one-size-per-symbol`,
        /// or the code of the check's warning that stated the assumption
        /// (`implied-bound`, `divisibility`, `dynamic-axis-specialized`).
        rule: String,
        /// What clashes.
        problem: String,
    },
    /// The graph itself is malformed (cycle, undefined name, no main graph).
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// A stored tensor (initializer, attribute) cannot be decoded.
    #[error("tensor '{name}': {problem}")]
    Tensor {
        /// The tensor's name.
        name: String,
        /// What is wrong.
        problem: String,
    },
}

impl RunError {
    /// Whether this is a refusal (something the executor lacks) rather than a
    /// fault of the model or its inputs.
    pub fn is_refusal(&self) -> bool {
        matches!(self, RunError::Unsupported { .. })
    }

    /// A short reason for grouping refusals: the operator and the reason's
    /// first words, without node names.
    pub fn group(&self) -> String {
        match self {
            RunError::Unsupported { op, reason, .. } => format!("{op}: {reason}"),
            RunError::Kernel { op, problem, .. } => format!("{op}: error: {problem}"),
            RunError::Input { problem, .. } => format!("input: {problem}"),
            RunError::Binding { rule, .. } => format!("input: {rule}"),
            RunError::InvalidModel(m) => format!("invalid model: {m}"),
            RunError::Tensor { problem, .. } => format!("tensor: {problem}"),
        }
    }
}

/// ` axis N` for an error about one axis.
fn axis_text(axis: Option<usize>) -> String {
    axis.map_or_else(String::new, |a| format!(" axis {a}"))
}

/// A shorthand for results of the executor.
pub type Result<T, E = RunError> = std::result::Result<T, E>;
