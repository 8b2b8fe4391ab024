//! Reading single tensors — what `--bind` will take: serialized TensorProto
//! `.pb` files (every tensor-typed input and output of the node suite) and
//! NumPy `.npy` files (`fixtures/npy/`, made by `fixtures/npy/gen_npy.py`).

mod common;

use diamond_importers::tensor_file::read_tensor_file;
use diamond_ir::{DimValue, ElemType, Tensor, TypeValue};
use std::path::PathBuf;

fn npy(name: &str) -> PathBuf {
    common::root().join("fixtures/npy").join(name)
}

fn raw(t: &Tensor) -> &[u8] {
    t.data.raw.as_deref().expect("raw data")
}

fn f32s(t: &Tensor) -> Vec<f32> {
    raw(t).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn npy_arrays_read_with_their_dtype_shape_and_values() {
    let t = read_tensor_file(&npy("f32_2x3.npy")).unwrap();
    assert_eq!((t.elem_type(), t.dims.clone()), (ElemType::Float, vec![2, 3]));
    assert_eq!(f32s(&t), [0.0, 0.25, 0.5, 0.75, 1.0, 1.25]);

    let t = read_tensor_file(&npy("i64_scalar.npy")).unwrap();
    assert_eq!((t.elem_type(), t.dims.len()), (ElemType::Int64, 0));
    assert_eq!(i64::from_le_bytes(raw(&t).try_into().unwrap()), -7);

    let t = read_tensor_file(&npy("u8_4.npy")).unwrap();
    assert_eq!((t.elem_type(), raw(&t)), (ElemType::Uint8, &[0u8, 1, 254, 255][..]));

    let t = read_tensor_file(&npy("bool_2x2.npy")).unwrap();
    assert_eq!((t.elem_type(), raw(&t)), (ElemType::Bool, &[1u8, 0, 0, 1][..]));

    let t = read_tensor_file(&npy("f16_empty_0x5.npy")).unwrap();
    assert_eq!((t.elem_type(), t.dims.clone(), raw(&t).len()), (ElemType::Float16, vec![0, 5], 0));

    let t = read_tensor_file(&npy("c8_2.npy")).unwrap();
    assert_eq!((t.elem_type(), f32s(&t)), (ElemType::Complex64, vec![1.0, 2.0, -3.0, -4.0]));

    let t = read_tensor_file(&npy("i16_rank40_v2.npy")).unwrap();
    assert_eq!(t.dims, vec![1; 40]);
}

#[test]
fn big_endian_npy_data_is_swapped() {
    let t = read_tensor_file(&npy("f64_be_3.npy")).unwrap();
    let values: Vec<f64> = raw(&t).chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!((t.elem_type(), values), (ElemType::Double, vec![1.5, -2.25, 1e300]));
}

#[test]
fn unsupported_or_broken_npy_files_are_clear_errors() {
    let err = read_tensor_file(&npy("fortran_2x2.npy")).unwrap_err().to_string();
    assert!(err.contains("Fortran-ordered") && err.contains("fortran_2x2.npy"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(npy("f32_2x3.npy")).unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("truncated.npy", good[..good.len() - 3].to_vec(), "needs 24 bytes of data but the file has 21"),
        ("magic.npy", b"NOTNUMPY-file-that-is-long-enough".to_vec(), "magic"),
        ("header.npy", good[..40].to_vec(), "the header claims"),
        ("version.npy", [&good[..6], &[9u8, 0][..], &good[8..]].concat(), "version 9"),
    ];
    for (name, bytes, needle) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = read_tensor_file(&path).unwrap_err().to_string();
        assert!(err.contains(needle) && err.contains(name), "{name}: {err}");
    }
}

#[test]
fn every_tensor_file_of_the_node_suite_reads_as_its_model_declares() {
    let (mut read, mut failures) = (0, Vec::new());
    for case in common::node_cases() {
        let model = diamond_importers::onnx::load_model(&case.join("model.onnx")).unwrap();
        let graph = model.main_graph().unwrap();
        for (prefix, declared) in [("input", &graph.inputs), ("output", &graph.outputs)] {
            for (i, file) in common::data_files(&case, prefix).iter().enumerate() {
                let ty = declared.get(i).and_then(|v| v.ty.as_ref()).and_then(|t| t.value.as_ref());
                let Some(TypeValue::Tensor { elem, shape }) = ty else { continue };
                match read_tensor_file(file) {
                    Err(e) => failures.push(e.to_string()),
                    Ok(t) => {
                        read += 1;
                        if elem.is_some_and(|e| e != t.elem_type()) {
                            failures.push(format!("{}: {} vs declared {elem:?}", file.display(), t.elem_type()));
                        }
                        let known: Option<Vec<i64>> = shape.as_ref().and_then(|s| {
                            s.dims
                                .iter()
                                .map(|d| match d.value {
                                    Some(DimValue::Known(n)) => Some(n),
                                    _ => None,
                                })
                                .collect()
                        });
                        if known.as_ref().is_some_and(|dims| *dims != t.dims) {
                            failures.push(format!("{}: dims {:?} vs declared {:?}", file.display(), t.dims, known));
                        }
                    }
                }
            }
        }
    }
    eprintln!("{read} tensor files read");
    assert!(read > 6000, "only {read} tensor files read");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
