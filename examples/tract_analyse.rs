//! tract's counterpart of `diamond check`, for `fixtures/bench/compare_check.py`:
//! load an ONNX file into tract's inference model and run its shape and type
//! analysis (`analyse`, obstinate: a node it cannot analyse does not stop the
//! rest), the inputs left at their declared (symbolic) facts. Prints the node
//! count, how many outlets have a known rank, and the first error, if any.
//!
//! `cargo run --release --example tract_analyse -- MODEL.onnx`

use tract_onnx::prelude::*;

fn main() -> TractResult<()> {
    let path = std::env::args().nth(1).ok_or_else(|| anyhow::anyhow!("usage: tract_analyse MODEL.onnx"))?;
    let mut model = tract_onnx::onnx().model_for_path(&path)?;
    let outcome = model.analyse(true);
    let mut outlets = 0usize;
    let mut ranked = 0usize;
    for node in model.nodes() {
        for output in &node.outputs {
            outlets += 1;
            if !output.fact.shape.is_open() {
                ranked += 1;
            }
        }
    }
    println!("{path}: {} nodes, {outlets} outlets, {ranked} with a known rank", model.nodes().len());
    if let Err(e) = outcome {
        println!("first error: {}", format!("{e:#}").lines().next().unwrap_or(""));
    }
    Ok(())
}
