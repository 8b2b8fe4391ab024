//! [`Error`]: why a call of the library failed, in the four kinds a caller
//! acts on differently — the model could not be read, it has errors, what
//! was fed does not fit it, or the backend cannot run it — each with a
//! message that names the file, the value or node, and the problem.

/// Why a call failed. The message names the model (its path, or `<bytes>`)
/// and the problem; [`Error::exit_code`] maps each kind to the command
/// line's exit status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model could not be read: a missing, truncated or corrupt file, a
    /// malformed graph (a cycle, a dangling name), an unknown format.
    #[error("{0}")]
    Read(String),
    /// The model was read, but checking it found errors (or a pass refused
    /// it): the message says how many and the first.
    #[error("{0}")]
    Model(String),
    /// A value fed to a session does not fit the model: an unknown or
    /// missing input, a wrong element type, a shape that contradicts the
    /// declared one (naming the input, the axis and the rule).
    #[error("{0}")]
    Input(String),
    /// The backend cannot run the model: an operator, element type or
    /// attribute it does not implement.
    #[error("{0}")]
    Unsupported(String),
    /// The backend is not available on this machine (no GPU, no driver):
    /// the message says what is missing.
    #[error("{0}")]
    Unavailable(String),
    /// A file could not be written.
    #[error("{0}")]
    Write(String),
}

impl Error {
    /// The command line's exit status for this error: 1 for errors found
    /// in the model (and a model that cannot run), 2 for input that could
    /// not be read or used.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Model(_) | Error::Unsupported(_) => 1,
            Error::Read(_) | Error::Input(_) | Error::Unavailable(_) | Error::Write(_) => 2,
        }
    }

    /// The same error with `label: ` in front of its message.
    pub(crate) fn labelled(self, label: &str) -> Error {
        match self {
            Error::Read(m) => Error::Read(format!("{label}: {m}")),
            Error::Model(m) => Error::Model(format!("{label}: {m}")),
            Error::Input(m) => Error::Input(format!("{label}: {m}")),
            Error::Unsupported(m) => Error::Unsupported(format!("{label}: {m}")),
            Error::Unavailable(m) => Error::Unavailable(format!("{label}: {m}")),
            Error::Write(m) => Error::Write(format!("{label}: {m}")),
        }
    }

    /// An executor's refusal, told apart by kind, with the model's label in front.
    pub(crate) fn from_run(label: &str, error: diamond_runtime::RunError) -> Error {
        use diamond_runtime::RunError;
        match error {
            RunError::Input { .. } | RunError::Binding { .. } => Error::Input(error.to_string()),
            RunError::Unsupported { .. } => Error::Unsupported(format!("{label}: cannot run: {error}")),
            other => Error::Model(format!("{label}: cannot run: {other}")),
        }
    }
}

impl From<diamond_optimize::OptimizeError> for Error {
    /// The optimizer's refusal as the kind a caller acts on: errors in the
    /// model or a result that computes something else are `Model`, an
    /// unknown pass or impossible upgrade is `Input`, no graph is `Read`.
    fn from(error: diamond_optimize::OptimizeError) -> Error {
        use diamond_optimize::OptimizeError as E;
        match error {
            E::ModelErrors(_) | E::Verification { .. } => Error::Model(error.to_string()),
            E::UnknownPass(_) | E::Upgrade(_) => Error::Input(error.to_string()),
            E::NoGraph => Error::Read(error.to_string()),
        }
    }
}

/// What the library's calls return.
pub type Result<T, E = Error> = std::result::Result<T, E>;
