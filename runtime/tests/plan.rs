//! The execution plan against the executor on real models: for the light
//! models (`fixtures/light/`) and the PyTorch exports (`fixtures/exports/`,
//! symbolic `batch`/`seq` bound from their sample inputs) the plan's
//! predicted peak of live bytes is exactly the peak the run measures, and
//! every value's predicted size is the size the run produced. A model with
//! data-dependent sizes gets a partial prediction that says which value;
//! fed shapes that contradict a model are refused before running, naming
//! the input, the axis and the rule.

use diamond_importers::tensor_file::read_tensor_file;
use diamond_ir::Model;
use diamond_runtime::exec::DumpSet;
use diamond_runtime::plan::Size;
use diamond_runtime::{run_planned, Data, Fed, Plan, RunError, RunOptions, Tensor, Value};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(path: &Path) -> Model {
    diamond_importers::onnx::load_model(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fed(inputs: &[(String, Value)]) -> Vec<(String, Fed)> {
    inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect()
}

/// Names of the graph inputs that are not initializers, in order.
fn input_names(model: &Model) -> Vec<String> {
    let graph = model.main_graph().unwrap();
    graph.required_inputs().iter().map(|i| graph.value_name(i.value.unwrap()).to_string()).collect()
}

/// Plans and runs `model` on `inputs`; with `every_value`, keeps every
/// computed value and checks its predicted size against it (the light
/// models' intermediates add up to gigabytes, so they are checked by the
/// peak alone). Returns the plan and the measured peak.
fn plan_and_run(label: &str, model: &Model, inputs: Vec<(String, Value)>, every_value: bool) -> (Plan, u64) {
    let plan = Plan::new(model, &fed(&inputs)).unwrap_or_else(|e| panic!("{label}: plan: {e}"));
    let options = RunOptions { dump: every_value.then_some(DumpSet::All) };
    let result = run_planned(model, &plan, inputs, &options).unwrap_or_else(|e| panic!("{label}: run: {e}"));
    for (name, value) in &result.dumped {
        let Some(planned) = plan.values().iter().find(|v| v.name == *name) else {
            panic!("{label}: '{name}' was computed but the plan does not hold it");
        };
        if let Size::Bytes(b) = planned.size {
            assert_eq!(b, value.byte_size(), "{label}: '{name}' predicted {b} bytes");
        }
    }
    (plan, result.peak_bytes)
}

#[test]
fn the_plan_predicts_the_peak_of_every_light_model() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures/light"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 9);
    for path in files {
        let label = path.file_stem().unwrap().to_string_lossy().into_owned();
        let model = load(&path);
        // Each light model has one input, float[1,3,224,224] (declared fixed).
        let names = input_names(&model);
        assert_eq!(names.len(), 1, "{label}");
        let shape = vec![1, 3, 224, 224];
        let values: Vec<f32> = (0..shape.iter().product::<usize>()).map(|i| ((i % 7) as f32) * 0.1).collect();
        let x = Tensor { shape, data: Data::F32(values) };
        let (plan, measured) = plan_and_run(&label, &model, vec![(names[0].clone(), Value::Tensor(x))], false);
        assert!(plan.partial().is_empty(), "{label}: {:?}", plan.partial());
        assert_eq!(plan.predicted_peak_bytes(), Some(measured), "{label}");
        eprintln!("{label}: predicted {measured} bytes, measured the same");
    }
}

#[test]
fn the_plan_predicts_the_peak_of_every_export_at_its_sample_shapes() {
    let dir = root().join("fixtures/exports");
    let mut stems: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".onnx").map(str::to_string))
        .collect();
    stems.sort();
    assert_eq!(stems.len(), 32);
    for stem in stems {
        let model = load(&dir.join(format!("{stem}.onnx")));
        let inputs: Vec<(String, Value)> = input_names(&model)
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                let t = read_tensor_file(&dir.join(format!("{stem}.input_{i}.npy"))).unwrap();
                (name, Value::Tensor(Tensor::from_ir(&t).unwrap()))
            })
            .collect();
        let (plan, measured) = plan_and_run(&stem, &model, inputs, true);
        let bound: Vec<String> = plan.bindings().iter().map(|b| format!("{}={}", b.symbol, b.size)).collect();
        assert!(bound.iter().any(|b| b == "batch=2"), "{stem}: {bound:?}");
        assert!(plan.partial().is_empty(), "{stem}: {:?}", plan.partial());
        assert_eq!(plan.predicted_peak_bytes(), Some(measured), "{stem}");
        eprintln!("{stem} ({}): predicted {measured} bytes, measured the same", bound.join(", "));
    }
}

#[test]
fn data_dependent_sizes_make_the_prediction_partial() {
    // NonZero's output has one column per nonzero element: known only at run time.
    let case = root().join("fixtures/onnx-node/test_nonzero_example");
    let model = load(&case.join("model.onnx"));
    let x = Tensor::from_ir(&read_tensor_file(&case.join("test_data_set_0/input_0.pb")).unwrap()).unwrap();
    let name = input_names(&model).remove(0);
    let (plan, measured) = plan_and_run("nonzero", &model, vec![(name, Value::Tensor(x))], true);
    assert_eq!(plan.predicted_peak_bytes(), None);
    assert!(measured > 0);
    let why = plan.partial().join("; ");
    assert!(why.contains("axis 1: its size depends on the data"), "{why}");
    let out = plan.values().iter().find(|v| matches!(v.size, Size::UnknownUntilRun(_))).unwrap();
    assert!(why.contains(&format!("'{}'", out.name)), "names the value: {why}");
}

/// The `Binding` error of planning `stem` with the sample inputs, input
/// `which` replaced by int64 `shape` (token ids 3).
fn refused(stem: &str, which: usize, shape: &[usize]) -> (String, Option<usize>, String, String) {
    let dir = root().join("fixtures/exports");
    let model = load(&dir.join(format!("{stem}.onnx")));
    let mut inputs: Vec<(String, Fed)> = Vec::new();
    for (i, name) in input_names(&model).into_iter().enumerate() {
        let t = Tensor::from_ir(&read_tensor_file(&dir.join(format!("{stem}.input_{i}.npy"))).unwrap()).unwrap();
        let t = if i == which {
            Tensor { shape: shape.to_vec(), data: Data::I64(vec![3; shape.iter().product()]) }
        } else {
            t
        };
        inputs.push((name, Fed::of(&Value::Tensor(t))));
    }
    match Plan::new(&model, &inputs) {
        Err(RunError::Binding { input, axis, rule, problem }) => (input, axis, rule, problem),
        Err(other) => panic!("{stem}: another error: {other}"),
        Ok(_) => panic!("{stem}: planned {shape:?}"),
    }
}

#[test]
fn fed_shapes_that_contradict_the_model_are_refused_naming_input_axis_and_rule() {
    // bert slices a 64-row position table by seq: seq ≤ 64 is implied. All
    // three inputs at seq 65 bind seq consistently, and break the bound.
    let dir = root().join("fixtures/exports");
    let model = load(&dir.join("bert.legacy.onnx"));
    let long = Value::Tensor(Tensor { shape: vec![2, 65], data: Data::I64(vec![3; 130]) });
    let inputs: Vec<(String, Fed)> = input_names(&model).into_iter().map(|n| (n, Fed::of(&long))).collect();
    let err = Plan::new(&model, &inputs).unwrap_err();
    let RunError::Binding { input, axis, rule, problem } = &err else { panic!("{err}") };
    assert_eq!((input.as_str(), *axis, rule.as_str()), ("input_ids", Some(1), "implied-bound"));
    assert!(problem.contains("binds 'seq' to 65, but the model assumes seq ≤ 64"), "{problem}");
    assert!(err.to_string().starts_with("input 'input_ids' axis 1: binds 'seq' to 65"), "{err}");
    // At the bound itself the plan is made.
    let at_bound = Value::Tensor(Tensor { shape: vec![2, 64], data: Data::I64(vec![3; 128]) });
    let inputs: Vec<(String, Fed)> = input_names(&model).into_iter().map(|n| (n, Fed::of(&at_bound))).collect();
    assert!(Plan::new(&model, &inputs).is_ok());

    // gpt2 gathers positions [0, seq) from 64 rows: the same bound, found by
    // another rule (Gather's indices carry the bound of the Range).
    let model = load(&dir.join("gpt2.dynamo.onnx"));
    let long = Value::Tensor(Tensor { shape: vec![2, 70], data: Data::I64(vec![1; 140]) });
    let inputs: Vec<(String, Fed)> = input_names(&model).into_iter().map(|n| (n, Fed::of(&long))).collect();
    let err = Plan::new(&model, &inputs).unwrap_err();
    let RunError::Binding { input, axis, rule, problem } = &err else { panic!("{err}") };
    assert_eq!((input.as_str(), *axis, rule.as_str()), ("input_ids", Some(1), "implied-bound"));
    assert!(problem.contains("binds 'seq' to 70, but the model assumes seq ≤ 64"), "{problem}");
    assert!(problem.contains("the indices (input 1) are all below seq"), "{problem}");

    // seq bound two ways: input_ids at 70, attention_mask at the sample's 7.
    let (input, axis, rule, problem) = refused("gpt2.dynamo", 0, &[2, 70]);
    assert_eq!((input.as_str(), axis, rule.as_str()), ("attention_mask", Some(1), "one-size-per-symbol"));
    assert!(problem.contains("binds 'seq' to 7, but input 'input_ids' axis 1 bound it to 70"), "{problem}");

    // batch bound two ways.
    let (input, axis, rule, problem) = refused("bert.legacy", 1, &[3, 7]);
    assert_eq!((input.as_str(), axis, rule.as_str()), ("attention_mask", Some(0), "one-size-per-symbol"));
    assert!(problem.contains("binds 'batch' to 3"), "{problem}");

    // Wrong rank, and a fixed size that differs (resnet18 declares [batch, 3, 32, 32]).
    let (input, axis, rule, _) = refused("bert.legacy", 0, &[14]);
    assert_eq!((input.as_str(), axis, rule.as_str()), ("input_ids", None, "declared-rank"));
    let model = load(&dir.join("resnet18.legacy.onnx"));
    let image = Value::Tensor(Tensor { shape: vec![2, 3, 32, 31], data: Data::F32(vec![0.0; 2 * 3 * 32 * 31]) });
    let err = Plan::new(&model, &[("pixel_values".to_string(), Fed::of(&image))]).unwrap_err();
    let RunError::Binding { axis, rule, problem, .. } = &err else { panic!("{err}") };
    assert_eq!((*axis, rule.as_str()), (Some(3), "declared-size"));
    assert!(problem.starts_with("size 31 was fed, the model declares 32"), "{problem}");
    // The wrong element type.
    let ints = Value::Tensor(Tensor { shape: vec![2, 3, 32, 32], data: Data::I64(vec![0; 2 * 3 * 32 * 32]) });
    let err = Plan::new(&model, &[("pixel_values".to_string(), Fed::of(&ints))]).unwrap_err();
    assert!(matches!(&err, RunError::Binding { rule, .. } if rule == "declared-element-type"), "{err}");
}

#[test]
fn a_plan_runs_only_the_inputs_it_was_made_for() {
    let dir = root().join("fixtures/exports");
    let model = load(&dir.join("resnet18.legacy.onnx"));
    let image = |batch: usize| {
        Value::Tensor(Tensor { shape: vec![batch, 3, 32, 32], data: Data::F32(vec![0.5; batch * 3 * 32 * 32]) })
    };
    let plan = Plan::new(&model, &[("pixel_values".to_string(), Fed::of(&image(2)))]).unwrap();
    assert_eq!(plan.bindings()[0].symbol, "batch");
    let err = run_planned(&model, &plan, vec![("pixel_values".into(), image(3))], &RunOptions::default()).unwrap_err();
    assert!(err.to_string().contains("the plan was made for 'pixel_values' = float[2, 3, 32, 32]"), "{err}");
    // A plan for batch 3 predicts more than one for batch 2, and its run agrees.
    let (three, measured) = plan_and_run("resnet18 batch 3", &model, vec![("pixel_values".into(), image(3))], true);
    assert_eq!(three.predicted_peak_bytes(), Some(measured));
    assert!(measured > plan.predicted_peak_bytes().unwrap());

    // The same inputs, another model: the plan's schedule is not this graph's.
    let legacy = load(&dir.join("bert.legacy.onnx"));
    let dynamo = load(&dir.join("bert.dynamo.onnx"));
    let inputs: Vec<(String, Value)> = input_names(&legacy)
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let t = read_tensor_file(&dir.join(format!("bert.legacy.input_{i}.npy"))).unwrap();
            (name, Value::Tensor(Tensor::from_ir(&t).unwrap()))
        })
        .collect();
    let plan = Plan::new(&dynamo, &fed(&inputs)).unwrap();
    let err = run_planned(&legacy, &plan, inputs, &RunOptions::default()).unwrap_err();
    assert!(err.to_string().contains("made for another graph"), "{err}");
}

#[test]
fn dropout_masks_before_opset_10_have_the_input_type() {
    // Found by comparing the plan's sizes with the run's: alexnet (opset 9)
    // declares Dropout's mask as the input's type T; the executor made bool.
    let model = load(&root().join("fixtures/light/light_bvlc_alexnet.onnx"));
    let name = input_names(&model).remove(0);
    let x = Tensor { shape: vec![1, 3, 224, 224], data: Data::F32(vec![0.25; 3 * 224 * 224]) };
    let inputs = vec![(name, Value::Tensor(x))];
    let plan = Plan::new(&model, &fed(&inputs)).unwrap();
    let dump = DumpSet::Names(["r19".to_string()].into_iter().collect());
    let result = run_planned(&model, &plan, inputs, &RunOptions { dump: Some(dump) }).unwrap();
    let (_, Value::Tensor(mask)) = &result.dumped[0] else { panic!("a tensor mask") };
    assert_eq!((mask.elem(), mask.shape.clone()), (diamond_ir::ElemType::Float, vec![1, 4096]));
    assert!(mask.to_f64s().unwrap().iter().all(|&m| m == 1.0), "inference keeps everything");
    let planned = plan.values().iter().find(|v| v.name == "r19").unwrap();
    assert_eq!(planned.size, Size::Bytes(4 * 4096));
}
