//! The SIMD backend's half of a session: the model made ready for it once
//! — widened to `f32` when it computes in 16-bit floats, optimized by the
//! default passes (as onnxruntime and tract optimize a model they load),
//! lowered to kernel programs — and the backend's session over it, bound
//! to one set of input shapes and bound again (its decoded weights kept)
//! when a run brings others.
//!
//! The backend's session borrows the model it runs; [`SimdEngine`] owns
//! both, the borrow made safe by `self_cell`.

use diamond_ir::Model;
use diamond_runtime::kernel::LoweredModel;
use diamond_runtime::simd::{Options, Session};
use diamond_runtime::{Fed, RunError, Value};
use std::borrow::Cow;

/// The model the SIMD backend lowers: `model` after the default passes of
/// `diamond optimize` unless `optimize` is false or the optimizer refuses
/// the model (it then runs as it is). The passes keep the graph's inputs and
/// outputs, and each is held to the reference executor by the optimizer's
/// tests. A float16 or bfloat16 model is first rewritten to compute in
/// `f32`, converting at its inputs and outputs
/// ([`diamond_optimize::widen::compute_in_f32`]): the SIMD kernels are
/// `f32` kernels.
pub fn simd_model(model: &Model, optimize: bool) -> Cow<'_, Model> {
    let model = match diamond_optimize::widen::compute_in_f32(model) {
        Some(wide) => Cow::Owned(wide),
        None => Cow::Borrowed(model),
    };
    if !optimize {
        return model;
    }
    match diamond_optimize::optimize(&model, &diamond_optimize::Options::default()) {
        Ok(outcome) => Cow::Owned(outcome.model),
        Err(_) => model,
    }
}

/// The backend's options: from the environment (`DIAMOND_SIMD=off` forces
/// the portable code, `avx2` the AVX2 code), with `If` branches prepared
/// as the main graph is — widened to `f32`, optimized when `optimize`,
/// lowered.
pub fn simd_options(optimize: bool) -> Options {
    let mut options = Options::from_env();
    options.prepare_body = Some(std::sync::Arc::new(move |body: &Model| {
        let prepared = simd_model(body, optimize).into_owned();
        let lowered = diamond_optimize::lower::lower(&prepared)?;
        Some((prepared, lowered))
    }));
    options
}

/// The model as the backend runs it, and its lowering.
pub struct Prepared {
    model: Model,
    lowered: LoweredModel,
}

/// The backend's session over a [`Prepared`], once a run has bound it.
type Bound<'a> = Option<Session<'a>>;

self_cell::self_cell!(
    struct Cell {
        owner: Prepared,
        #[not_covariant]
        dependent: Bound,
    }
);

/// A model prepared for the SIMD backend and its session.
pub struct SimdEngine {
    cell: Cell,
    options: Options,
    /// Whether each session bound times its steps.
    profiling: bool,
}

impl SimdEngine {
    /// Prepares `model` (optimized when `optimize`); `None` when it has no graph.
    pub fn new(model: &Model, optimize: bool) -> Option<SimdEngine> {
        let model = simd_model(model, optimize).into_owned();
        let lowered = diamond_optimize::lower::lower(&model)?;
        Some(SimdEngine {
            cell: Cell::new(Prepared { model, lowered }, |_| None),
            options: simd_options(optimize),
            profiling: false,
        })
    }

    /// The model the backend runs (optimized, widened).
    pub fn model(&self) -> &Model {
        &self.cell.borrow_owner().model
    }

    /// Binds the session to inputs shaped as `fed`, unless it already is:
    /// first time from the stored weights, later by replanning (the decoded
    /// weights kept).
    pub fn bind(&mut self, fed: &[(String, Fed)]) -> Result<(), RunError> {
        let (options, profiling) = (&self.options, self.profiling);
        self.cell.with_dependent_mut(|prepared, slot| {
            if slot.as_ref().is_some_and(|s| s.fed() == fed) {
                return Ok(());
            }
            let mut session = match slot.take() {
                Some(old) => old.replan(&prepared.lowered, fed)?,
                None => Session::new(&prepared.model, &prepared.lowered, fed, options)?,
            };
            if profiling {
                session.start_profiling();
            }
            *slot = Some(session);
            Ok(())
        })
    }

    /// Runs the bound session on `inputs` (in the order they were bound).
    pub fn run(&mut self, inputs: Vec<(String, Value)>) -> Result<(Vec<(String, Value)>, u64), RunError> {
        self.cell.with_dependent_mut(|_, slot| {
            let session = slot.as_mut().ok_or_else(|| RunError::InvalidModel("the session is not bound".into()))?;
            let run = session.run(inputs)?;
            Ok((run.outputs, run.peak_bytes))
        })
    }

    /// Times every step from now on, in this session and those bound later.
    pub fn start_profiling(&mut self) {
        self.profiling = true;
        self.with_session(|s| s.map(Session::start_profiling));
    }

    /// Calls `f` with the bound session, if any.
    pub fn with_session<R>(&mut self, f: impl FnOnce(Option<&mut Session<'_>>) -> R) -> R {
        self.cell.with_dependent_mut(|_, slot| f(slot.as_mut()))
    }
}
