//! [`Model`]: a model read once — from an ONNX file (memory-mapped, its
//! external data found beside it), a TorchScript archive or IR text, or
//! ONNX bytes — and what can be done with it: [`Model::check`] (every
//! value's inferred type and the diagnostics), [`Model::optimize`] (the
//! passes of `diamond optimize`), [`Model::convert`] (the model with its
//! inferred types written into it) and [`Model::write`] / [`Model::to_bytes`].

use crate::error::{Error, Result};
use diamond_importers::torch::lower::InputShape;
use std::path::Path;

pub use crate::check::{CheckOptions, Report};
pub use diamond_optimize::verify::Verdict;
pub use diamond_optimize::{OptimizeError, Options as OptimizeOptions, PassRun, SkippedBody, PASS_NAMES};

/// How to read a model: what a TorchScript input's shape is (an ONNX file
/// declares its own).
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Shapes of TorchScript graph inputs, as `NAME=D0,D1,...` parses
    /// (sizes or symbols); unused for ONNX.
    pub input_shapes: Vec<InputShape>,
}

/// A model read into diamond's graph IR, with how reports name it.
#[derive(Clone)]
pub struct Model {
    pub(crate) ir: diamond_ir::Model,
    pub(crate) label: String,
    /// The ONNX file's map, which the model's tensors borrow (none for
    /// bytes and TorchScript): [`Model::release_pages`] gives its pages back.
    pub(crate) file: Option<diamond_importers::onnx::MappedFile>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("label", &self.label).field("ir", &self.ir).finish_non_exhaustive()
    }
}

/// The result of [`Model::optimize`]: the optimized model and what the
/// passes did.
#[derive(Debug)]
pub struct Optimized {
    /// The optimized model (same inputs and outputs, dim names kept).
    pub model: Model,
    /// Nodes per operator before, over every graph and function.
    pub before: std::collections::BTreeMap<String, usize>,
    /// Nodes per operator after.
    pub after: std::collections::BTreeMap<String, usize>,
    /// Each pass run that rewrote something, in order.
    pub passes: Vec<PassRun>,
    /// Control-flow bodies left as they were, and why.
    pub skipped: Vec<SkippedBody>,
    /// How verification went, when `verify` was asked for.
    pub verdict: Option<Verdict>,
}

impl Model {
    /// Reads the model at `path`: ONNX (by its first bytes), a TorchScript
    /// archive (`.pt`) or TorchScript IR text.
    ///
    /// ```
    /// let model = diamond::Model::open("fixtures/check/exported_transformer.onnx")?;
    /// assert_eq!(model.input_names(), ["input_ids", "attention_mask"]);
    /// # Ok::<(), diamond::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Model> {
        Model::open_with(path, &LoadOptions::default())
    }

    /// [`Model::open`] with TorchScript input shapes.
    pub fn open_with(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Model> {
        let path = path.as_ref();
        let (ir, file) = diamond_importers::torch::load::load_any_mapped(path, &options.input_shapes)
            .map_err(|e| Error::Read(e.to_string()))?;
        let mut model = Model::from_ir(ir, path.display().to_string())?;
        model.file = file;
        Ok(model)
    }

    /// Reads serialized ONNX. External data is looked up relative to the
    /// current directory; reports name the model `<bytes>`.
    pub fn from_bytes(bytes: impl Into<bytes::Bytes>) -> Result<Model> {
        let label = Path::new("<bytes>");
        let ir = diamond_importers::onnx::decode_model(bytes.into(), label, Path::new("."))
            .map_err(|e| Error::Read(e.to_string()))?;
        Model::from_ir(ir, "<bytes>".into())
    }

    /// Wraps a model already in diamond's IR; `label` names it in reports.
    /// A model without a main graph is refused.
    pub fn from_ir(ir: diamond_ir::Model, label: String) -> Result<Model> {
        if ir.main_graph().is_none() {
            return Err(Error::Read(format!("{label}: the model has no graph")));
        }
        Ok(Model { ir, label, file: None })
    }

    /// How reports name the model: the path as given, or `<bytes>`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The model in diamond's graph IR.
    pub fn ir(&self) -> &diamond_ir::Model {
        &self.ir
    }

    /// The model in diamond's graph IR, taken out.
    pub fn into_ir(self) -> diamond_ir::Model {
        self.ir
    }

    /// The main graph.
    pub(crate) fn graph(&self) -> &diamond_ir::Graph {
        self.ir.main_graph().expect("a Model has a main graph")
    }

    /// The names of the inputs a caller feeds (initializers excluded), in order.
    pub fn input_names(&self) -> Vec<&str> {
        let graph = self.graph();
        graph.required_inputs().iter().filter_map(|i| i.value).map(|v| graph.value_name(v)).collect()
    }

    /// The names of the graph's outputs, in order.
    pub fn output_names(&self) -> Vec<&str> {
        let graph = self.graph();
        graph.outputs.iter().filter_map(|o| o.value).map(|v| graph.value_name(v)).collect()
    }

    /// Infers every value's element type and shape and audits the model,
    /// as `diamond check` does (ones-vector notes included).
    ///
    /// ```
    /// let model = diamond::Model::open("fixtures/check/exported_transformer.onnx")?;
    /// let report = model.check(&diamond::CheckOptions::default());
    /// assert_eq!(report.errors(), 0);
    /// # Ok::<(), diamond::Error>(())
    /// ```
    pub fn check(&self, options: &CheckOptions) -> Report {
        diamond_optimize::audit::check(&self.ir, options)
    }

    /// Runs the optimizer's passes (`options.passes`, in order, to a fixed
    /// point), verifying the result on the reference executor when
    /// `options.verify` is set. The error says which kind of refusal it is
    /// (errors in the model, a result that computes something else and the
    /// pass that made it, an unknown pass, an impossible opset upgrade);
    /// `?` turns it into an [`Error`] of the kind a caller acts on.
    pub fn optimize(&self, options: &OptimizeOptions) -> std::result::Result<Optimized, OptimizeError> {
        let outcome = diamond_optimize::optimize(&self.ir, options)?;
        Ok(Optimized {
            model: Model { ir: outcome.model, label: self.label.clone(), file: None },
            before: outcome.before,
            after: outcome.after,
            passes: outcome.runs,
            skipped: outcome.skipped,
            verdict: outcome.verdict,
        })
    }

    /// Infers every value's element type and shape and finds the errors,
    /// without the audit's ones-vector notes: the check `convert` makes
    /// before it writes the inferred types back ([`Model::with_types`]).
    pub fn infer(&self, options: &CheckOptions) -> Report {
        diamond_infer::check_model(&self.ir, options)
    }

    /// The model with the types `report` inferred for it ([`Model::infer`]
    /// or [`Model::check`] on this model) written in as `value_info`; with
    /// `output_dims`, exporter-invented dim names in the graph outputs are
    /// replaced too.
    pub fn with_types(&self, report: &Report, output_dims: bool) -> Model {
        let annotate = diamond_infer::graph::AnnotateOptions { output_dims };
        let ir = diamond_infer::graph::annotate_with(&self.ir, &report.inferred, annotate);
        Model { ir, label: self.label.clone(), file: None }
    }

    /// The model with every value's inferred type written into it as
    /// `value_info`, as `diamond convert` does. A model whose check finds
    /// errors is refused with [`Error::Model`] naming the first.
    pub fn convert(&self) -> Result<Model> {
        let report = self.infer(&CheckOptions::default());
        if let Some(first) = report.diagnostics.iter().find(|d| d.severity == diamond_infer::Severity::Error) {
            return Err(Error::Model(format!(
                "{}: {} error(s) in the model; the first: {}",
                self.label,
                report.errors(),
                first.message
            )));
        }
        Ok(self.with_types(&report, false))
    }

    /// Encodes the model as ONNX bytes (weights inline).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        diamond_exporters::onnx::encode_model(&self.ir)
            .map_err(|e| Error::Write(format!("{}: cannot encode: {e}", self.label)))
    }

    /// Writes the model as ONNX to `path` (large weights as external data
    /// beside it, as the exporter decides), the file appearing whole; the
    /// folder it goes in is made when missing.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::Write(format!("cannot create {}: {e}", dir.display())))?;
        }
        diamond_exporters::onnx::write_model(&self.ir, path)
            .map(drop)
            .map_err(|e| Error::Write(format!("cannot write {}: {e}", path.display())))
    }
}
