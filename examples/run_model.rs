//! Load a model, prepare a session, run it: `cargo run --example run_model`.
use diamond::{Model, Session, SessionOptions, Tensor, Value};

fn main() -> Result<(), diamond::Error> {
    let model = Model::open("fixtures/check/exported_transformer.onnx")?;
    let mut session = Session::new(&model, &SessionOptions::default())?;
    let ids = Tensor::from_i64s(vec![7, 3, 9, 1]).reshaped(vec![1, 4]).expect("4 ids");
    let mask = Tensor::from_i64s(vec![1; 4]).reshaped(vec![1, 4]).expect("4 flags");
    let outputs =
        session.run(vec![("input_ids".into(), Value::Tensor(ids)), ("attention_mask".into(), Value::Tensor(mask))])?;
    for (name, value) in outputs.iter() {
        println!("{name}: {:?}", value.as_tensor().map(|t| &t.shape));
    }
    Ok(())
}
