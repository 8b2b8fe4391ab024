//! Prints how each step of a model's SIMD session runs after one run on
//! random-free inputs of ones: `cargo run --example routes -- MODEL`.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: routes MODEL")?;
    let model = diamond::Model::open(&path)?;
    let mut session = diamond::Session::new(&model, &diamond::SessionOptions::default())?;
    let mut feeds = Vec::new();
    for input in session.inputs().to_vec() {
        let dims: Vec<usize> = input
            .shape
            .unwrap_or_default()
            .iter()
            .map(|d| match d {
                diamond::Dim::Known(n) => *n as usize,
                _ => 2,
            })
            .collect();
        let n: usize = dims.iter().product();
        let data = match input.elem {
            Some(diamond_ir::ElemType::Int64) => diamond::Data::I64(vec![1; n]),
            _ => diamond::Data::F32(vec![0.5; n]),
        };
        feeds.push((input.name.clone(), diamond::Value::Tensor(diamond::Tensor::new(dims, data).unwrap())));
    }
    session.run(feeds)?;
    for line in session.reference_steps() {
        println!("{line}");
    }
    Ok(())
}
