//! The library's session on any model: each input fed a tensor of ones
//! (symbolic sizes 2), one run, then every step of the SIMD backend that
//! runs on the reference kernels, with why.
//!
//! `cargo run --release --example session_routes -- MODEL`
use diamond::{Data, Dim, ElemType, Model, Session, SessionOptions, Tensor, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: session_routes MODEL")?;
    let model = Model::open(&path)?;
    let mut session = Session::new(&model, &SessionOptions::default())?;
    let mut feeds = Vec::new();
    for input in session.inputs().to_vec() {
        let dims: Vec<usize> = input
            .shape
            .unwrap_or_default()
            .iter()
            .map(|d| match d {
                Dim::Known(n) => *n as usize,
                _ => 2,
            })
            .collect();
        let n = dims.iter().product();
        let data = match input.elem {
            Some(ElemType::Int64) => Data::I64(vec![1; n]),
            Some(ElemType::Int32) => Data::I32(vec![1; n]),
            Some(ElemType::Bool) => Data::Bool(vec![true; n]),
            _ => Data::F32(vec![1.0; n]),
        };
        let tensor = Tensor::new(dims, data).ok_or("a shape that does not fit its data")?;
        feeds.push((input.name.clone(), Value::Tensor(tensor)));
    }
    let outputs = session.run(feeds)?;
    for (name, value) in outputs.iter() {
        let shape = value.as_tensor().map(|t| format!("{:?}", t.shape)).unwrap_or_else(|| "(not a tensor)".into());
        println!("output {name}: {shape}");
    }
    let on_reference = session.reference_steps();
    println!("{} of {} steps on the reference kernels", on_reference.len(), session.routes().len());
    for line in on_reference {
        println!("  {line}");
    }
    Ok(())
}
