//! [`Session`]: a model prepared once for a backend and run many times, on
//! any input shapes the model allows — the session is bound to the shapes
//! of the first run and bound again, keeping its decoded weights, when a
//! run brings other shapes. Files:
//! - `mod.rs` — the session, its options and its outputs;
//! - `simd.rs` — the model made ready for the SIMD backend (widened,
//!   optimized, lowered) and the backend's session over it;
//! - `info.rs` — [`ValueInfo`]: declared and inferred types of the inputs
//!   and outputs;
//! - `linger.rs` — a session's own pool kept awake for a moment after each
//!   run, so that the next call does not wait for its threads to wake;
//! - `planned.rs` — one run on the reference executor with its plan made
//!   first ([`Model::plan`], [`Model::run_planned`]), for reporting the
//!   plan and dumping intermediate values.

mod info;
mod linger;
mod planned;
pub mod simd;

use crate::error::{Error, Result};
use crate::model::Model;
use diamond_runtime::{run_planned, Fed, RunOptions, Value};
use std::sync::Arc;

pub use diamond_runtime::simd::{Fallback, FallbackReason, StepKind, StepTime};
pub use info::{Dim, ValueInfo};
pub use planned::{Dump, Plan, RunResult};

/// The executor a session runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// Fused kernel programs on the CPU's vector units (AVX-512, AVX2+FMA,
    /// or portable code), nodes they do not cover on the reference kernels.
    #[default]
    Simd,
    /// The reference executor: plain kernels, every operator diamond knows.
    Reference,
    /// Fused kernel programs as CUDA kernels on an NVIDIA GPU (needs a
    /// device; today a session on it is refused with why).
    Cuda,
}

impl Backend {
    /// The backend's name, as `--backend` and Python's `backend=` take it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Simd => "simd",
            Backend::Reference => "reference",
            Backend::Cuda => "cuda",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Backend> {
        match s {
            "simd" => Ok(Backend::Simd),
            "reference" => Ok(Backend::Reference),
            "cuda" => Ok(Backend::Cuda),
            other => Err(Error::Input(format!("unknown backend '{other}' (simd, reference or cuda)"))),
        }
    }
}

/// How a session is prepared.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// The executor.
    pub backend: Backend,
    /// Threads the kernels run on: `None` shares the process's pool (one
    /// thread per core), `Some(n)` gives the session a pool of its own.
    pub threads: Option<usize>,
    /// Apply `diamond optimize`'s default passes before the SIMD backend
    /// lowers the model (the reference backend runs the model as it is).
    pub optimize: bool,
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions { backend: Backend::Simd, threads: None, optimize: true }
    }
}

/// What one run returns: the graph's outputs by name, in the graph's order.
#[derive(Clone, Debug)]
pub struct Outputs {
    values: Vec<(String, Value)>,
    peak_bytes: u64,
}

impl Outputs {
    /// The output named `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The outputs, by name, in the graph's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.values.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// How many outputs there are.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the graph has no outputs.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The executor's peak of live bytes during the run (weights, fed
    /// inputs and every value alive at once).
    pub fn peak_bytes(&self) -> u64 {
        self.peak_bytes
    }

    /// The outputs, by name, in the graph's order, taken out.
    pub fn into_vec(self) -> Vec<(String, Value)> {
        self.values
    }
}

/// The backend's state.
enum Engine {
    /// The reference executor over the model as read, with the plan of the
    /// last input shapes.
    Reference { model: Box<diamond_ir::Model>, plan: Option<(Vec<(String, Fed)>, Plan)> },
    /// The SIMD backend.
    Simd(Box<simd::SimdEngine>),
}

/// A model prepared for a backend, run many times.
///
/// ```
/// use diamond::{Model, Session, SessionOptions, Tensor, Value};
/// let model = Model::open("fixtures/check/exported_transformer.onnx")?;
/// let mut session = Session::new(&model, &SessionOptions::default())?;
/// for seq in [4, 9] {
///     // int64[batch, seq] token ids and mask: any batch and seq run
///     let ids = Tensor::from_i64s(vec![1; 2 * seq]).reshaped(vec![2, seq]).unwrap();
///     let mask = Tensor::from_i64s(vec![1; 2 * seq]).reshaped(vec![2, seq]).unwrap();
///     let outputs = session.run(vec![
///         ("input_ids".into(), Value::Tensor(ids)),
///         ("attention_mask".into(), Value::Tensor(mask)),
///     ])?;
///     let hidden = outputs.get("last_hidden_state").and_then(Value::as_tensor).unwrap();
///     assert_eq!(hidden.shape, [2, seq, 64]);
/// }
/// # Ok::<(), diamond::Error>(())
/// ```
pub struct Session {
    label: String,
    backend: Backend,
    /// The graph's inputs, in its order, and whether each must be fed (an
    /// input with an initializer may be, overriding it).
    input_names: Vec<(String, bool)>,
    /// The inputs and outputs described, once asked for (it takes a check).
    described: std::sync::OnceLock<(Vec<ValueInfo>, Vec<ValueInfo>)>,
    engine: Engine,
    pool: Option<Arc<rayon::ThreadPool>>,
    /// Keeps the pool's threads awake for a moment after a run.
    linger: Arc<linger::Linger>,
}

impl Session {
    /// Prepares `model` for `options.backend`: for the SIMD backend the
    /// model is widened, optimized and lowered here, once; the first run
    /// binds it to its input shapes.
    pub fn new(model: &Model, options: &SessionOptions) -> Result<Session> {
        let label = model.label().to_string();
        let pool = match options.threads {
            Some(0) => return Err(Error::Input("threads must be at least 1".into())),
            Some(n) => Some(Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .map_err(|e| Error::Input(format!("cannot start {n} threads: {e}")))?,
            )),
            None => None,
        };
        let engine = match options.backend {
            Backend::Cuda => return Err(Error::Unavailable(diamond_runtime::cuda::device::unavailable())),
            Backend::Reference => Engine::Reference { model: Box::new(model.ir().clone()), plan: None },
            Backend::Simd => Engine::Simd(Box::new(
                simd::SimdEngine::new(model.ir(), options.optimize)
                    .ok_or_else(|| Error::Read(format!("{label}: the model has no graph")))?,
            )),
        };
        let graph = model.graph();
        let required = model.input_names();
        let input_names = graph
            .inputs
            .iter()
            .filter_map(|i| i.value)
            .map(|v| graph.value_name(v))
            .map(|n| (n.to_string(), required.contains(&n)))
            .collect();
        let described = std::sync::OnceLock::new();
        let linger = Arc::default();
        Ok(Session { label, backend: options.backend, input_names, described, engine, pool, linger })
    }

    /// The model the backend runs: as read (reference), or widened and
    /// optimized (SIMD); its inputs and outputs are the model's.
    fn model(&self) -> &diamond_ir::Model {
        match &self.engine {
            Engine::Reference { model, .. } => model,
            Engine::Simd(engine) => engine.model(),
        }
    }

    /// The inputs and outputs with their declared and inferred types,
    /// checked the first time they are asked for.
    fn described(&self) -> &(Vec<ValueInfo>, Vec<ValueInfo>) {
        self.described.get_or_init(|| {
            let model = self.model();
            let check = diamond_infer::CheckOptions { skip_inferred_types: true, ..Default::default() };
            let report = diamond_infer::check_model(model, &check);
            let graph = model.main_graph().expect("a session's model has a main graph");
            let inputs = info::describe(
                graph,
                graph.required_inputs().iter().filter_map(|i| Some((i.value?, i.ty.as_ref()))),
                &report,
            );
            let outputs =
                info::describe(graph, graph.outputs.iter().filter_map(|o| Some((o.value?, o.ty.as_ref()))), &report);
            (inputs, outputs)
        })
    }

    /// The inputs a run feeds, in the graph's order (initializers excluded),
    /// with their declared and inferred types.
    pub fn inputs(&self) -> &[ValueInfo] {
        &self.described().0
    }

    /// The outputs a run returns, in the graph's order.
    pub fn outputs(&self) -> &[ValueInfo] {
        &self.described().1
    }

    /// The backend the session runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Runs the model on `inputs` (graph input name → value, any order;
    /// every input the graph requires fed once). Shapes other than the last
    /// run's bind the session again. A feed that does not fit the model is
    /// [`Error::Input`] naming the input (and the axis, for a shape).
    pub fn run(&mut self, inputs: Vec<(String, Value)>) -> Result<Outputs> {
        let inputs = self.ordered(inputs)?;
        match &self.pool {
            Some(pool) if pool.current_thread_index().is_none() => {
                let pool = Arc::clone(pool);
                let outputs = pool.install(|| self.run_here(inputs));
                self.linger.after_run(&pool);
                outputs
            }
            _ => self.run_here(inputs),
        }
    }

    /// Binds the session to the shapes (and element types) of `inputs`
    /// without running, so that the first [`Session::run`] on such inputs
    /// does no preparing: a fed shape that contradicts the model is found
    /// here.
    pub fn prepare(&mut self, inputs: &[(String, Value)]) -> Result<()> {
        let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
        let fed = self.ordered(fed)?;
        self.bind(&fed)
    }

    /// Calls `f` on the session's thread pool with the pool's threads kept
    /// spinning between the runs `f` makes, as a benchmark loop wants (a run
    /// alone lets them sleep once it ends).
    pub fn hot<R: Send>(&mut self, f: impl FnOnce(&mut Session) -> R + Send) -> R {
        match &self.pool {
            Some(pool) => {
                let pool = Arc::clone(pool);
                pool.install(|| diamond_runtime::simd::hot_pool::while_hot(|| f(self)))
            }
            None => diamond_runtime::simd::hot_pool::while_hot(|| f(self)),
        }
    }

    /// Times every step of the SIMD backend's runs from now on (a clock
    /// read per step), for [`Session::profile`].
    pub fn start_profiling(&mut self) {
        if let Engine::Simd(engine) = &mut self.engine {
            engine.start_profiling();
        }
    }

    /// Each step's total time over the runs since [`Session::start_profiling`]
    /// (empty on the reference backend, or before the first run).
    pub fn profile(&mut self) -> Vec<StepTime> {
        match &mut self.engine {
            Engine::Simd(engine) => engine.with_session(|s| s.map(|s| s.profile()).unwrap_or_default()),
            Engine::Reference { .. } => Vec::new(),
        }
    }

    /// The SIMD backend's steps that run on the reference kernels, and why
    /// (empty on the reference backend, or before the first run).
    pub fn fallbacks(&mut self) -> Vec<Fallback> {
        match &mut self.engine {
            Engine::Simd(engine) => engine.with_session(|s| s.map(|s| s.fallbacks()).unwrap_or_default()),
            Engine::Reference { .. } => Vec::new(),
        }
    }

    /// Every step of the SIMD backend's binding and how it runs (a fused
    /// program, a contraction, a kernel of the session's own, an `If`
    /// branch, or the reference kernels with the reason), in run order;
    /// empty on the reference backend, or before the first run.
    pub fn routes(&mut self) -> Vec<StepTime> {
        match &mut self.engine {
            Engine::Simd(engine) => engine.with_session(|s| s.map(|s| s.routes()).unwrap_or_default()),
            Engine::Reference { .. } => Vec::new(),
        }
    }

    /// The steps of [`Session::routes`] that run on the reference kernels,
    /// each as a line naming the step, its operators, its first nodes and
    /// why: `step #3 CumSum [c]: operator`.
    pub fn reference_steps(&mut self) -> Vec<String> {
        self.routes()
            .iter()
            .filter_map(|step| {
                let why = step.reason?;
                Some(format!("step #{} {} [{}]: {}", step.index, step.ops, step.nodes, why.name()))
            })
            .collect()
    }

    /// `inputs` in the graph's order, each a graph input fed once, every
    /// required input present.
    fn ordered<T>(&self, mut inputs: Vec<(String, T)>) -> Result<Vec<(String, T)>> {
        if let Some((name, _)) = inputs.iter().find(|(n, _)| !self.input_names.iter().any(|(m, _)| m == n)) {
            let required: Vec<&str> = self.input_names.iter().filter(|(_, r)| *r).map(|(n, _)| n.as_str()).collect();
            return Err(Error::Input(format!(
                "input '{name}': the model has no input of that name (inputs: {})",
                if required.is_empty() { "none".to_string() } else { required.join(", ") }
            )));
        }
        let mut ordered = Vec::with_capacity(inputs.len());
        for (name, required) in &self.input_names {
            let mut fed = inputs.iter().filter(|(n, _)| n == name);
            match (fed.next(), fed.next()) {
                (Some(_), Some(_)) => return Err(Error::Input(format!("input '{name}': fed more than once"))),
                (None, _) if *required => return Err(Error::Input(format!("input '{name}': not fed"))),
                (None, _) => continue,
                _ => {}
            }
            let at = inputs.iter().position(|(n, _)| n == name).expect("found above");
            ordered.push(inputs.swap_remove(at));
        }
        Ok(ordered)
    }

    /// Binds the backend to inputs shaped as `fed` (in the graph's order),
    /// unless it already is.
    fn bind(&mut self, fed: &[(String, Fed)]) -> Result<()> {
        let label = &self.label;
        let refused = |e| Error::from_run(label, e);
        match &mut self.engine {
            Engine::Reference { model, plan } => {
                if plan.as_ref().is_none_or(|(shapes, _)| shapes != fed) {
                    *plan = Some((fed.to_vec(), Plan::new(model, fed).map_err(refused)?));
                }
                Ok(())
            }
            Engine::Simd(engine) => engine.bind(fed).map_err(refused),
        }
    }

    fn run_here(&mut self, inputs: Vec<(String, Value)>) -> Result<Outputs> {
        let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
        self.bind(&fed)?;
        let label = &self.label;
        let refused = |e| Error::from_run(label, e);
        match &mut self.engine {
            Engine::Reference { model, plan } => {
                let (_, plan) = plan.as_ref().expect("bound above");
                let result = run_planned(model, plan, inputs, &RunOptions::default()).map_err(refused)?;
                Ok(Outputs { values: result.outputs, peak_bytes: result.peak_bytes })
            }
            Engine::Simd(engine) => {
                let (values, peak_bytes) = engine.run(inputs).map_err(refused)?;
                Ok(Outputs { values, peak_bytes })
            }
        }
    }
}
