//! Conditions people can read: the sizes in warnings and assumptions are
//! printed in their readable form (`ceil(H/4)`, not
//! `floor(floor((H-1)/2)/2)+1`) and an equation is stated as the condition on
//! its symbol it amounts to (`H mod 32 is 0 or at least 29`), while each
//! assumption keeps the exact sizes (`Display`). Snapshots of a
//! detector-style stride chain (the fixture and the solver's sizes built by
//! hand), pools and element counts, checked against the exact equation by
//! evaluation; and every fixture model `check` accepts prints no size with
//! more than two nested roundings in a warning or an assumption.
//! Refresh the snapshots with `UPDATE_EXPECT=1`.

use diamond_infer::{check_model, Assumption, CheckOptions, Code, Diagnostic, Severity};
use diamond_ir::term::SizeExpr;
use expect_test::{expect, Expect};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn check_file(path: &Path) -> Option<Vec<Diagnostic>> {
    let model = diamond_importers::onnx::load_model(path).ok()?;
    Some(check_model(&model, &CheckOptions::default()).diagnostics)
}

fn s(name: &str) -> SizeExpr {
    SizeExpr::symbol(name)
}
fn c(n: i64) -> SizeExpr {
    SizeExpr::constant(n)
}

/// ONNX's window formula `floor((x + pads - k)/stride) + 1`, as the Conv and Pool rules state it.
fn window(x: &SizeExpr, k: i64, pads: i64, stride: u64) -> SizeExpr {
    x.add(&c(pads - k)).unwrap().floor_div(stride).unwrap().add(&c(1)).unwrap()
}

/// `n` 3×3 stride-2 convolutions with pads 1 (2 in all per axis).
fn convs(x: &SizeExpr, n: usize) -> SizeExpr {
    (0..n).fold(x.clone(), |e, _| window(&e, 3, 2, 2))
}

/// The deepest nesting of `floor(`/`ceil(` in a text.
fn rounding_depth(text: &str) -> usize {
    let (mut stack, mut deepest) = (Vec::new(), 0);
    for (i, ch) in text.char_indices() {
        match ch {
            '(' => {
                let rounding = text[..i].ends_with("floor") || text[..i].ends_with("ceil");
                stack.push(rounding);
                deepest = deepest.max(stack.iter().filter(|r| **r).count());
            }
            ')' => {
                stack.pop();
            }
            _ => {}
        }
    }
    deepest
}

/// The assumption's plain and exact texts, checked to agree with each
/// other at every value of `symbol` in 1..=`upto` (other symbols at 1..=3):
/// the plain text is re-read by [`plain_holds`].
#[track_caller]
fn snapshot(a: &Assumption, upto: i64, expected: Expect) {
    let symbols: Vec<String> = a.symbols().into_iter().map(str::to_string).collect();
    let plain = a.plain();
    for v in 1..=upto {
        for w in [1, 2, 3, 29, 32, 64] {
            let at = |n: &str| {
                Some(if n == symbols[0] {
                    v
                } else if n == "C" {
                    3
                } else {
                    w
                })
            };
            let exact = a.holds(&at).unwrap();
            if let Some(stated) = plain_holds(&plain, &at) {
                assert_eq!(stated, exact, "{plain} at {v}, {w}");
            }
        }
    }
    expected.assert_eq(&format!("plain: {plain}\nexact: {a}\n"));
}

/// Re-reads the phrasings `Condition` writes (`H mod 32 is 0 or at least
/// 29`, `H is a multiple of 4`, `H is 15 or 16`, joined by ` and `),
/// ignoring the remarks in parentheses, with a broadcast's `, or when
/// ceil(H/4) = 1` after them; `None` for any other text.
fn plain_holds(plain: &str, at: &dyn Fn(&str) -> Option<i64>) -> Option<bool> {
    if let Some((first, one)) = plain.split_once(", or when ") {
        let (a, b) = one.split_once(" = ")?;
        let (a, b) = (SizeExpr::parse(a).ok()?.eval(at)?, SizeExpr::parse(b).ok()?.eval(at)?);
        return Some(plain_holds(first, at)? || a == b);
    }
    let text = plain.split(" (").next()?;
    let mut all = true;
    for part in text.split(" and ") {
        let (x, rest) = part.split_once(' ')?;
        let v = at(x)?;
        let holds = if let Some(m) = rest.strip_prefix("is a multiple of ") {
            v % m.parse::<i64>().ok()? == 0
        } else if let Some(rest) = rest.strip_prefix("mod ") {
            let (m, runs) = rest.split_once(" is ")?;
            let r = v.rem_euclid(m.parse().ok()?);
            let mut any = false;
            for run in runs.replace(" or ", ", ").split(", ") {
                any |= if let Some(a) = run.strip_prefix("at least ") {
                    r >= a.parse().ok()?
                } else if let Some(b) = run.strip_prefix("at most ") {
                    r <= b.parse().ok()?
                } else if let Some((a, b)) = run.split_once(" to ") {
                    (a.parse().ok()?..=b.parse().ok()?).contains(&r)
                } else {
                    r == run.parse::<i64>().ok()?
                };
            }
            any
        } else {
            let values = rest.strip_prefix("is ")?;
            let mut any = false;
            for p in values.replace(" or ", ", ").split(", ") {
                any |= match p.split_once(" to ") {
                    Some((a, b)) => (a.parse().ok()?..=b.parse().ok()?).contains(&v),
                    None => p.parse::<i64>().ok()? == v,
                };
            }
            any
        };
        all &= holds;
    }
    Some(all)
}

#[test]
fn a_stride_chain_joined_to_its_upsampled_end() {
    let h = s("H");
    // Stride 4 (two convolutions) against stride 32 (five) upsampled x8, as at an Add.
    let (skip, deep) = (convs(&h, 2), convs(&h, 5));
    let up = deep.mul(&c(8)).unwrap();
    snapshot(
        &Assumption::Equal(skip.clone(), up.clone()),
        2000,
        expect![[r#"
            plain: H mod 32 is 0 or at least 29 (in particular when H is a multiple of 32)
            exact: floor(floor((H-1)/2)/2)+1 = 8*floor(floor(floor(floor(floor((H-1)/2)/2)/2)/2)/2)+8
        "#]],
    );
    // A broadcast: the upsampled axis may also be 1, which it never is.
    snapshot(
        &Assumption::EqualOrOne(up.clone(), skip.clone()),
        2000,
        expect![[r#"
            plain: H mod 32 is 0 or at least 29 (in particular when H is a multiple of 32)
            exact: 8*floor(floor(floor(floor(floor((H-1)/2)/2)/2)/2)/2)+8 = floor(floor((H-1)/2)/2)+1 or 8*floor(floor(floor(floor(floor((H-1)/2)/2)/2)/2)/2)+8 = 1
        "#]],
    );
    // The stride-4 axis may be 1 (H at most 4): said too.
    snapshot(
        &Assumption::EqualOrOne(skip.clone(), up.clone()),
        2000,
        expect![[r#"
            plain: H mod 32 is 0 or at least 29 (in particular when H is a multiple of 32), or when ceil(H/4) = 1
            exact: floor(floor((H-1)/2)/2)+1 = 8*floor(floor(floor(floor(floor((H-1)/2)/2)/2)/2)/2)+8 or floor(floor((H-1)/2)/2)+1 = 1
        "#]],
    );
    // Stride 8 against stride 16 upsampled x2: a plain divisibility? No: H mod 16 in {0, 9..15}.
    snapshot(
        &Assumption::Equal(convs(&h, 3), convs(&h, 4).mul(&c(2)).unwrap()),
        2000,
        expect![[r#"
            plain: H mod 16 is 0 or at least 9 (in particular when H is a multiple of 16)
            exact: floor(floor(floor((H-1)/2)/2)/2)+1 = 2*floor(floor(floor(floor((H-1)/2)/2)/2)/2)+2
        "#]],
    );
}

#[test]
fn pools_and_exact_multiples() {
    let h = s("H");
    // Two 2x2 stride-2 pools (floor(H/2) each) against H/4 upsampled: exactly a multiple of 4.
    let pools = window(&window(&h, 2, 0, 2), 2, 0, 2);
    snapshot(
        &Assumption::Equal(pools.mul(&c(4)).unwrap(), h.clone()),
        1000,
        expect![[r#"
            plain: H is a multiple of 4
            exact: 4*floor((floor((H-2)/2)-1)/2)+4 = H
        "#]],
    );
    // A conv, a pool and a conv (ceil, floor, ceil) against stride 8 of convs only.
    let mixed = window(&window(&convs(&h, 1), 2, 0, 2), 3, 2, 2);
    snapshot(
        &Assumption::Equal(mixed, convs(&h, 3)),
        1000,
        expect![[r#"
            plain: H mod 8 is 0 or at least 3 (in particular when H is a multiple of 4)
            exact: floor(floor((floor((H-1)/2)-1)/2)/2)+1 = floor(floor(floor((H-1)/2)/2)/2)+1
        "#]],
    );
    // A fixed size: finitely many H.
    snapshot(
        &Assumption::Equal(convs(&h, 3), c(8)),
        1000,
        expect![[r#"
            plain: H is 57 to 64
            exact: floor(floor(floor((H-1)/2)/2)/2)+1 = 8
        "#]],
    );
    snapshot(
        &Assumption::Equal(convs(&h, 1), c(8)),
        1000,
        expect![[r#"
            plain: H is 15 or 16
            exact: floor((H-1)/2)+1 = 8
        "#]],
    );
}

#[test]
fn element_counts_of_strided_feature_maps() {
    let (h, w, ch) = (s("H"), s("W"), s("C"));
    // Reshape of [C, ceil(H/2), ceil(W/2)] against [C, 2*ceil(H/4), 2*ceil(W/4)].
    let lhs = ch.mul(&convs(&h, 1)).unwrap().mul(&convs(&w, 1)).unwrap();
    let rhs = ch.mul(&convs(&h, 2)).unwrap().mul(&convs(&w, 2)).unwrap().mul(&c(4)).unwrap();
    snapshot(
        &Assumption::Equal(lhs, rhs),
        300,
        expect![[r#"
            plain: H mod 4 is 0 or 3 and W mod 4 is 0 or 3 (for sizes of at least 1) (in particular when H is a multiple of 4 and W is a multiple of 4)
            exact: C*floor((H-1)/2)*floor((W-1)/2)+C*floor((H-1)/2)+C*floor((W-1)/2)+C = 4*C*floor(floor((H-1)/2)/2)*floor(floor((W-1)/2)/2)+4*C*floor(floor((H-1)/2)/2)+4*C*floor(floor((W-1)/2)/2)+4*C
        "#]],
    );
    // Flattened against 64 stride-32 cells: each axis as at the Add above.
    let lhs = ch.mul(&convs(&h, 2)).unwrap().mul(&convs(&w, 2)).unwrap();
    let rhs = ch.mul(&convs(&h, 5)).unwrap().mul(&convs(&w, 5)).unwrap().mul(&c(64)).unwrap();
    let a = Assumption::Equal(lhs, rhs);
    assert_eq!(
        a.plain(),
        "H mod 32 is 0 or at least 29 and W mod 32 is 0 or at least 29 (for sizes of at least 1) \
         (in particular when H is a multiple of 32 and W is a multiple of 32)"
    );
    snapshot(
        &a,
        200,
        expect![[r#"
        plain: H mod 32 is 0 or at least 29 and W mod 32 is 0 or at least 29 (for sizes of at least 1) (in particular when H is a multiple of 32 and W is a multiple of 32)
        exact: C*floor(floor((H-1)/2)/2)*floor(floor((W-1)/2)/2)+C*floor(floor((H-1)/2)/2)+C*floor(floor((W-1)/2)/2)+C = 64*C*floor(floor(floor(floor(floor((H-1)/2)/2)/2)/2)/2)*floor(floor(floor(floor(floor((W-1)/2)/2)/2)/2)/2)+64*C*floor(floor(floor(floor(floor((H-1)/2)/2)/2)/2)/2)+64*C*floor(floor(floor(floor(floor((W-1)/2)/2)/2)/2)/2)+64*C
    "#]],
    );
}

#[test]
fn the_detector_fixture_warns_in_plain_words() {
    let diagnostics = check_file(&root().join("fixtures/check/stride_chain.onnx")).unwrap();
    let text: String = diagnostics
        .iter()
        .map(|d| {
            let exact: Vec<String> = d.assumes.iter().map(Assumption::to_string).collect();
            format!("{d}  = exact: {}\n", exact.join(" and "))
        })
        .collect();
    expect![[r#"
        warning[dynamic-axis-specialized]: dynamic axis 8*ceil((H-8)/32) assumed to be ceil(H/4): `8*ceil((H-8)/32) ⊑ ceil(H/4)` holds only when H mod 32 is 0 or at least 29 (in particular when H is a multiple of 32)
          = note: '_11 is ceil(H/4) because of axis 2 of the row constraint ← Add 'fuse' (node 6) input 0: broadcasts to the output
          = note: required by axis 2 of the row constraint ← Add 'fuse' (node 6) input 1: broadcasts to the output
          = exact: 8*floor(floor((floor(floor(floor((H-1)/2)/2)/2)-1)/2)/2)+8 = floor(floor((H-1)/2)/2)+1 or 8*floor(floor((floor(floor(floor((H-1)/2)/2)/2)-1)/2)/2)+8 = 1
        warning[dynamic-axis-specialized]: dynamic axis 8*ceil((W-8)/32) assumed to be ceil(W/4): `8*ceil((W-8)/32) ⊑ ceil(W/4)` holds only when W mod 32 is 0 or at least 29 (in particular when W is a multiple of 32)
          = note: '_12 is ceil(W/4) because of axis 3 of the row constraint ← Add 'fuse' (node 6) input 0: broadcasts to the output
          = note: required by axis 3 of the row constraint ← Add 'fuse' (node 6) input 1: broadcasts to the output
          = exact: 8*floor(floor((floor(floor(floor((W-1)/2)/2)/2)-1)/2)/2)+8 = floor(floor((W-1)/2)/2)+1 or 8*floor(floor((floor(floor(floor((W-1)/2)/2)/2)-1)/2)/2)+8 = 1
    "#]]
    .assert_eq(&text);
    for d in &diagnostics {
        assert_eq!((d.code, d.severity), (Code::DynamicAxisSpecialized, Severity::Warning));
        for a in &d.assumes {
            // The plain statement is what the message says, and exact: brute force over the size.
            assert!(d.message.ends_with(&a.plain()), "{}", d.message);
            let x = a.symbols()[0].to_string();
            for v in 1..=2000 {
                let at = |n: &str| (n == x).then_some(v);
                assert_eq!(plain_holds(&a.plain(), &at), Some(a.holds(&at).unwrap()), "{x} = {v}");
            }
        }
    }
}

/// Every `.onnx` file under `dir`, sorted, skipping those above 4 MB.
fn models_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            models_under(&p, out);
        } else if p.extension().is_some_and(|e| e == "onnx") && p.metadata().is_ok_and(|m| m.len() <= 4 << 20) {
            out.push(p);
        }
    }
}

#[test]
fn no_fixture_warning_nests_more_than_two_roundings() {
    let started = Instant::now();
    let mut models = Vec::new();
    models_under(&root().join("fixtures"), &mut models);
    assert!(models.len() > 2000, "the fixtures, onnx-node included: {}", models.len());
    let (mut checked, mut with_rounding) = (0, 0);
    for path in &models {
        let Some(diagnostics) = check_file(path) else { continue };
        checked += 1;
        for d in diagnostics.iter().filter(|d| d.severity == Severity::Warning || d.code.is_assumption()) {
            let plain: Vec<String> = d.assumes.iter().map(Assumption::plain).collect();
            let texts = std::iter::once(&d.message).chain(&d.notes).chain(&d.help).chain(&plain);
            for text in texts {
                let depth = rounding_depth(text);
                with_rounding += usize::from(depth > 0);
                assert!(depth <= 2, "{}: {text}", path.display());
            }
        }
    }
    assert!(checked > 2000, "{checked} models checked");
    assert!(with_rounding > 0, "the stride-chain fixture prints roundings");
    // Debug builds walk the whole suite in well under a minute.
    eprintln!("{checked} models in {:?}", started.elapsed());
}

#[test]
fn nesting_is_counted_in_text() {
    assert_eq!(rounding_depth("floor(floor((H-1)/2)/2)+1 = 8*ceil(H/32)"), 2);
    assert_eq!(rounding_depth("ceil(H/4) = 8*ceil(H/32)"), 1);
    assert_eq!(rounding_depth("min(64, (seq))"), 0);
}
