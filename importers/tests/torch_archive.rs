//! Reading TorchScript `.pt` archives: the committed fixtures (written by
//! `fixtures/torch/gen_torch.py` with torch 2.15), archives rewritten from
//! them or built here, and the corrupt ones, which must fail with a message
//! that names the file and the problem.

use diamond_importers::torch::archive::Archive;
use diamond_importers::torch::values::{StoredTensor, TsObject, TsValue};
use diamond_importers::ImportError;
use diamond_ir::ElemType;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/torch").join(name)
}

fn open(name: &str) -> Archive {
    Archive::open(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn open_err(path: &Path) -> String {
    match Archive::open(path) {
        Ok(_) => panic!("{} opened but should not", path.display()),
        Err(e) => e.to_string(),
    }
}

fn object<'a>(value: Option<&'a TsValue>, what: &str) -> &'a TsObject {
    match value {
        Some(TsValue::Object(object)) => object,
        other => panic!("{what} is not an object: {other:?}"),
    }
}

fn tensor<'a>(value: Option<&'a TsValue>, what: &str) -> &'a StoredTensor {
    match value {
        Some(TsValue::Tensor(tensor)) => tensor,
        other => panic!("{what} is not a tensor: {other:?}"),
    }
}

fn f32_at(bytes: &[u8], index: usize) -> f32 {
    f32::from_le_bytes(bytes[index * 4..index * 4 + 4].try_into().unwrap())
}

#[test]
fn resnet_tiny_module_tree_and_weights() {
    let archive = open("resnet_tiny.pt");
    assert_eq!(archive.root(), "resnet_tiny");
    assert_eq!(archive.version(), Some(3));
    assert_eq!(archive.data().class, "__torch__.TinyResNet");
    assert_eq!(archive.data().attr("training"), Some(&TsValue::Bool(false)));
    assert!(archive.constants().is_empty());

    let conv1 = object(archive.data().attr("conv1"), "conv1");
    assert!(conv1.class.ends_with("Conv2d"), "{}", conv1.class);
    let weight = tensor(conv1.attr("weight"), "conv1.weight");
    assert_eq!(weight.sizes, [8, 3, 7, 7]);
    assert_eq!(weight.strides, [147, 49, 7, 1]);
    assert_eq!(weight.elem, ElemType::Float);
    assert_eq!((weight.key.as_str(), weight.constant, weight.offset), ("0", false, 0));

    let bytes = archive.storage(weight).unwrap();
    assert_eq!(bytes.len(), 8 * 3 * 7 * 7 * 4);
    // torch.jit.load("resnet_tiny.pt").conv1.weight.flatten()[0].item() and [-1].item()
    // with /tmp/tv/bin/python (torch 2.15): -0.0006175025482662022, 0.001434825244359672.
    assert_eq!(f32_at(&bytes, 0), -0.000_617_502_55_f32);
    assert_eq!(f32_at(&bytes, 8 * 3 * 7 * 7 - 1), 0.001_434_825_2_f32);

    // Nested modules: layer1 is a Sequential of BasicBlocks, batch norms count batches in int64.
    let layer1 = object(archive.data().attr("layer1"), "layer1");
    assert!(layer1.class.ends_with("Sequential"), "{}", layer1.class);
    let block = object(layer1.attr("0"), "layer1.0");
    assert!(block.class.ends_with("BasicBlock"), "{}", block.class);
    let bn1 = object(block.attr("bn1"), "layer1.0.bn1");
    let batches = tensor(bn1.attr("num_batches_tracked"), "num_batches_tracked");
    assert_eq!((batches.elem, batches.sizes.as_slice()), (ElemType::Int64, &[][..]));
    assert_eq!(archive.storage(batches).unwrap().len(), 8);
}

#[test]
fn resnet_tiny_code_files() {
    let archive = open("resnet_tiny.pt");
    let paths: Vec<&str> = archive.code_files().iter().map(|(path, _)| path.as_str()).collect();
    assert!(paths.windows(2).all(|w| w[0] < w[1]), "code files are sorted by path");
    assert!(paths.iter().all(|p| p.starts_with("code/") && p.ends_with(".py")), "{paths:?}");
    assert!(paths.contains(&"code/__torch__.py"));

    let (path, text) = archive.code_for_class("__torch__.torch.nn.modules.conv.Conv2d").expect("conv.py");
    assert_eq!(path, "code/__torch__/torch/nn/modules/conv.py");
    assert!(text.contains("torch._convolution"), "{text}");
    assert!(text.contains("class Conv2d(Module)"), "{text}");
    let (path, text) = archive.code_for_class("__torch__.TinyResNet").expect("__torch__.py");
    assert_eq!(path, "code/__torch__.py");
    assert!(text.contains("class TinyResNet"), "{text}");
    let (path, _) =
        archive.code_for_class("__torch__.torch.nn.modules.conv.___torch_mangle_0.Conv2d").expect("mangled");
    assert_eq!(path, "code/__torch__/torch/nn/modules/conv/___torch_mangle_0.py");
    assert!(archive.code_for_class("__torch__.nowhere.Missing").is_none());
    assert!(archive.code_for_class("NoDots").is_none());
}

#[test]
fn resnet_tiny_traced_inputs() {
    let archive = open("resnet_tiny.pt");
    let Some(TsValue::Dict(entries)) = archive.traced_inputs() else {
        panic!("traced_inputs: {:?}", archive.traced_inputs())
    };
    let [(TsValue::Str(method), TsValue::List(inputs))] = entries.as_slice() else { panic!("{entries:?}") };
    assert_eq!(method, "forward");
    let [TsValue::Tensor(input)] = inputs.as_slice() else { panic!("{inputs:?}") };
    assert_eq!((input.elem, input.sizes.as_slice()), (ElemType::Float, &[2u64, 3, 32, 32][..]));
    assert_eq!(input.key, "traced_inputs/0");
    // torch writes traced inputs' storages empty: asking for the data fails clearly.
    let err = archive.storage(input).unwrap_err().to_string();
    assert!(err.contains("resnet_tiny.pt") && err.contains("traced_inputs/0") && err.contains("too small"), "{err}");
}

#[test]
fn gpt_tiny_opens_with_a_tensor_constant() {
    let archive = open("gpt_tiny.pt");
    assert_eq!(archive.root(), "gpt_tiny");
    assert_eq!(archive.version(), Some(10), "from .data/version");
    assert_eq!(archive.data().class, "__torch__.TinyGPT");
    let wte = object(archive.data().attr("wte"), "wte");
    assert!(wte.class.ends_with("Embedding"), "{}", wte.class);
    assert_eq!(tensor(wte.attr("weight"), "wte.weight").sizes, [50, 32]);
    let blocks = object(archive.data().attr("blocks"), "blocks");
    assert!(blocks.class.ends_with("ModuleList"), "{}", blocks.class);
    assert_eq!(blocks.attrs.iter().filter(|(_, v)| matches!(v, TsValue::Object(_))).count(), 2);

    let [TsValue::Tensor(constant)] = archive.constants() else { panic!("{:?}", archive.constants()) };
    assert!(constant.constant);
    assert_eq!((constant.elem, constant.sizes.as_slice()), (ElemType::Int64, &[][..]));
    let bytes = archive.storage(constant).unwrap();
    assert_eq!(bytes.as_ref(), 4i64.to_le_bytes());

    let Some(TsValue::Dict(entries)) = archive.traced_inputs() else { panic!("no traced inputs") };
    let (_, TsValue::List(inputs)) = &entries[0] else { panic!("{entries:?}") };
    let [TsValue::Tensor(ids)] = inputs.as_slice() else { panic!("{inputs:?}") };
    assert_eq!((ids.elem, ids.sizes.as_slice()), (ElemType::Int64, &[2u64, 8][..]));
}

#[test]
fn scripted_control_opens() {
    let archive = open("scripted_control.pt");
    assert_eq!(archive.data().class, "__torch__.Scripted");
    assert_eq!(archive.data().attr("use_bias"), Some(&TsValue::Bool(true)));
    let lin = object(archive.data().attr("lin"), "lin");
    let weight = tensor(lin.attr("weight"), "lin.weight");
    assert_eq!(weight.sizes, [6, 6]);
    assert_eq!(archive.storage(weight).unwrap().len(), 36 * 4);
    assert!(archive.traced_inputs().is_none());
    let (_, text) = archive.code_for_class("__torch__.Scripted").expect("__torch__.py");
    assert!(text.contains("def forward"), "{text}");
}

#[test]
fn archives_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Archive>();
    let debug = format!("{:?}", open("scripted_control.pt"));
    assert!(debug.contains("scripted_control") && debug.len() < 10_000, "{debug}");
}

#[test]
fn stored_storages_are_slices_of_the_file() {
    let archive = open("resnet_tiny.pt");
    let weight = tensor(object(archive.data().attr("conv1"), "conv1").attr("weight"), "weight");
    let bytes = archive.storage(weight).unwrap();
    let file = std::fs::read(fixture("resnet_tiny.pt")).unwrap();
    // The first entry's data starts after its 30-byte local header, name and extra field (64-byte aligned).
    let start = file.windows(bytes.len()).position(|w| w == bytes.as_ref()).unwrap();
    assert_eq!(start % 64, 0);
}

// ---- corrupt fixtures ----

fn assert_fails(name: &str, phrases: &[&str]) {
    let path = fixture(name);
    let err = open_err(&path);
    assert!(err.contains(path.file_name().unwrap().to_str().unwrap()), "names the file: {err}");
    for phrase in phrases {
        assert!(err.contains(phrase), "{name}: '{phrase}' missing from: {err}");
    }
}

#[test]
fn corrupt_truncated() {
    assert_fails("corrupt/truncated.pt", &["not a zip archive or truncated"]);
}

#[test]
fn corrupt_bad_pickle() {
    assert_fails("corrupt/bad_pickle.pt", &["data.pkl", "truncated pickle at byte 3015"]);
}

#[test]
fn corrupt_missing_storage() {
    assert_fails("corrupt/missing_storage.pt", &["missing storage", "data/0", "key '0'"]);
}

#[test]
fn corrupt_path_traversal() {
    assert_fails("corrupt/path_traversal.pt", &["zip entry path escapes the archive: resnet_tiny/../../escape.txt"]);
}

#[test]
fn corrupt_zip_bomb() {
    assert_fails("corrupt/zip_bomb.pt", &["zip bomb", "data/99", "ratio over the limit of 200"]);
}

#[test]
fn corrupt_plain_checkpoint() {
    assert_fails("corrupt/plain_checkpoint.pt", &["plain torch.save checkpoint", "not a TorchScript archive"]);
}

#[test]
fn errors_convert_into_import_error_torch() {
    let err = Archive::open(&fixture("corrupt/plain_checkpoint.pt")).unwrap_err();
    assert!(matches!(err, ImportError::Torch(_)), "{err:?}");
    let err = Archive::open(&fixture("does_not_exist.pt")).unwrap_err();
    assert!(matches!(err, ImportError::Io { .. }), "{err:?}");
    let err = Archive::open(&fixture("")).unwrap_err();
    assert!(matches!(err, ImportError::IsDirectory { .. }), "{err:?}");
}

// ---- archives rewritten from resnet_tiny.pt or built here ----

/// A file in the temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> TempFile {
        TempFile(std::env::temp_dir().join(format!("diamond-torch-archive-{}-{name}", std::process::id())))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The entries of a fixture, in order.
fn fixture_entries(name: &str) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(fixture(name)).unwrap()).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut file = zip.by_index(i).unwrap();
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).unwrap();
            (file.name().unwrap().to_string(), bytes)
        })
        .collect()
}

fn write_zip(path: &Path, entries: &[(String, Vec<u8>)], method: CompressionMethod) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = SimpleFileOptions::default().compression_method(method);
    for (name, bytes) in entries {
        zip.start_file(name.as_str(), options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

/// resnet_tiny.pt's entries changed by `change` (None drops an entry), written to a temporary file.
fn rewritten(
    name: &str,
    method: CompressionMethod,
    change: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>,
    extra: &[(&str, &[u8])],
) -> TempFile {
    let mut entries: Vec<(String, Vec<u8>)> = fixture_entries("resnet_tiny.pt")
        .into_iter()
        .filter_map(|(n, bytes)| change(&n, bytes).map(|bytes| (n, bytes)))
        .collect();
    entries.extend(extra.iter().map(|(n, bytes)| (n.to_string(), bytes.to_vec())));
    let file = TempFile::new(name);
    write_zip(&file.0, &entries, method);
    file
}

#[test]
fn deflated_storages_are_read_into_memory() {
    let file = rewritten("deflated.pt", CompressionMethod::Deflated, |_, bytes| Some(bytes), &[]);
    let archive = Archive::open(&file.0).unwrap();
    let weight = tensor(object(archive.data().attr("conv1"), "conv1").attr("weight"), "weight");
    let bytes = archive.storage(weight).unwrap();
    assert_eq!(bytes.len(), 8 * 3 * 7 * 7 * 4);
    assert_eq!(f32_at(&bytes, 0), -0.000_617_502_55_f32);
    assert!(archive.code_for_class("__torch__.torch.nn.modules.conv.Conv2d").is_some());
}

#[test]
fn legacy_format_is_named() {
    let file = rewritten("legacy.pt", CompressionMethod::Stored, |_, b| Some(b), &[("resnet_tiny/model.json", b"{}")]);
    let err = open_err(&file.0);
    assert!(err.contains("legacy TorchScript format (model.json"), "{err}");
}

#[test]
fn big_endian_archives_are_refused() {
    let file = rewritten(
        "big.pt",
        CompressionMethod::Stored,
        |n, b| Some(if n.ends_with("/byteorder") { b"big".to_vec() } else { b }),
        &[],
    );
    let err = open_err(&file.0);
    assert!(err.contains("byteorder") && err.contains("big-endian"), "{err}");
}

#[test]
fn a_storage_smaller_than_its_tensor_is_refused() {
    let file = rewritten(
        "small.pt",
        CompressionMethod::Stored,
        |n, b| Some(if n.ends_with("/data/0") { b[..100].to_vec() } else { b }),
        &[],
    );
    let err = open_err(&file.0);
    assert!(err.contains("data/0") && err.contains("storage too small") && err.contains("holds 100 bytes"), "{err}");
}

#[test]
fn absolute_and_backslash_entry_names_escape() {
    for (case, extra) in [("abs.pt", "/etc/x"), ("backslash.pt", "resnet_tiny\\..\\x")] {
        let file = rewritten(case, CompressionMethod::Stored, |_, b| Some(b), &[(extra, b"x")]);
        let err = open_err(&file.0);
        assert!(err.contains("zip entry path escapes the archive"), "{err}");
    }
}

#[test]
fn entries_outside_the_root_are_ignored() {
    let file = rewritten("outside.pt", CompressionMethod::Stored, |_, b| Some(b), &[("elsewhere/readme.txt", b"x")]);
    let archive = Archive::open(&file.0).unwrap();
    assert_eq!(archive.root(), "resnet_tiny");
}

#[test]
fn an_empty_or_foreign_file_is_not_a_zip() {
    let file = TempFile::new("empty.pt");
    std::fs::write(&file.0, b"").unwrap();
    assert!(open_err(&file.0).contains("not a zip archive or truncated: the file is empty"));
    std::fs::write(&file.0, b"\x80\x02}q\x00.").unwrap();
    let err = open_err(&file.0);
    assert!(err.contains("not a zip archive or truncated") && err.contains("pre-1.6 torch.save"), "{err}");
}

/// Pickle bytes for a module `__torch__.M` with one attribute `w`: a tensor
/// on storage `0` (`numel` floats) with the given offset, sizes and strides.
fn module_pickle(numel: u8, offset: u8, sizes: &[u8], strides: &[u8]) -> Vec<u8> {
    let mut p = b"\x80\x02c__torch__\nM\n)\x81}(X\x01\x00\x00\x00w".to_vec();
    p.extend_from_slice(b"ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\n");
    p.extend_from_slice(b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK");
    p.extend_from_slice(&[numel, b't', b'Q', b'K', offset, b'(']);
    sizes.iter().for_each(|&s| p.extend_from_slice(&[b'K', s]));
    p.extend_from_slice(b"t(");
    strides.iter().for_each(|&s| p.extend_from_slice(&[b'K', s]));
    p.extend_from_slice(b"t\x89ccollections\nOrderedDict\n)RtRub.");
    p
}

/// A minimal TorchScript archive: `data.pkl`, one float storage, empty constants.
fn tiny_archive(name: &str, data_pkl: Vec<u8>, floats: &[f32]) -> TempFile {
    let storage: Vec<u8> = floats.iter().flat_map(|f| f.to_le_bytes()).collect();
    let entries = vec![
        ("tiny/data.pkl".to_string(), data_pkl),
        ("tiny/data/0".to_string(), storage),
        ("tiny/constants.pkl".to_string(), b"\x80\x02).".to_vec()),
        ("tiny/version".to_string(), b"3\n".to_vec()),
    ];
    let file = TempFile::new(name);
    write_zip(&file.0, &entries, CompressionMethod::Stored);
    file
}

#[test]
fn views_with_an_offset_are_sliced() {
    let file = tiny_archive("offset.pt", module_pickle(6, 2, &[2, 2], &[2, 1]), &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let archive = Archive::open(&file.0).unwrap();
    assert_eq!(archive.data().class, "__torch__.M");
    let w = tensor(archive.data().attr("w"), "w");
    let bytes = archive.storage(w).unwrap();
    let values: Vec<f32> = (0..4).map(|i| f32_at(&bytes, i)).collect();
    assert_eq!(values, [2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn non_contiguous_views_are_copied_row_major() {
    // A 2x3 storage viewed transposed: sizes [3, 2], strides [1, 3].
    let file = tiny_archive("transpose.pt", module_pickle(6, 0, &[3, 2], &[1, 3]), &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let archive = Archive::open(&file.0).unwrap();
    let w = tensor(archive.data().attr("w"), "w");
    let bytes = archive.storage(w).unwrap();
    let values: Vec<f32> = (0..6).map(|i| f32_at(&bytes, i)).collect();
    assert_eq!(values, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
}

#[test]
fn views_past_their_storage_are_refused() {
    let file = tiny_archive("past.pt", module_pickle(4, 1, &[4], &[1]), &[0.0; 4]);
    let err = open_err(&file.0);
    assert!(err.contains("data.pkl") && err.contains("storage '0'") && err.contains("reaches element 5"), "{err}");
}

#[test]
fn unsupported_globals_are_named() {
    let data = b"\x80\x02c__torch__\nM\n)\x81}(X\x01\x00\x00\x00xcos\nsystem\nX\x02\x00\x00\x00ls\x85Rub.".to_vec();
    let file = tiny_archive("global.pt", data, &[]);
    let err = open_err(&file.0);
    assert!(err.contains("data.pkl: unsupported global os.system"), "{err}");
}

#[test]
fn unknown_opcodes_are_named_with_their_offset() {
    let file = tiny_archive("opcode.pt", b"\x80\x02\xf0.".to_vec(), &[]);
    let err = open_err(&file.0);
    assert!(err.contains("data.pkl: unknown pickle opcode 0xf0 at byte 2"), "{err}");
}
