//! The wire parser's edge cases, the kernels against prost's decoding of random
//! well-formed examples, and random malformed input (never a panic). TensorFlow's
//! own answers are in `kernels/tests/parse_example_fixtures.rs`.

use bytes::Bytes;
use graph::proto::tf::{feature, BytesList, Example, Feature, Features, FloatList, Int64List};
use graph::{AttrValue, Code, DType, Result, Shape, Tensor};
use prost::Message;

use super::wire::{self, FeatureEntry, Kind, Slot, Values};
use crate::testutil::run_op_lists;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn entries(serialized: &[u8]) -> Option<Vec<FeatureEntry<'_>>> {
    let mut out = Vec::new();
    wire::parse_example(serialized, &mut out).then_some(out)
}

fn ld(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    let mut n = payload.len();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            v.push(b);
            break;
        }
        v.push(b | 0x80);
    }
    v.extend_from_slice(payload);
    v
}

fn int64_feature(values: &[i64]) -> Vec<u8> {
    Feature {
        kind: Some(feature::Kind::Int64List(Int64List {
            value: values.to_vec(),
        })),
    }
    .encode_to_vec()
}

#[test]
fn wire_entries_in_order_with_concatenation_and_unknown_fields() {
    let a = ld(
        0x0a,
        &[ld(0x0a, b"a"), ld(0x12, &int64_feature(&[1]))].concat(),
    );
    let b = ld(
        0x0a,
        &[ld(0x12, &int64_feature(&[2])), ld(0x0a, b"b")].concat(),
    );
    let mut ex = ld(0x0a, &[a.clone(), b].concat());
    ex.extend_from_slice(&[0x10, 0x96, 0x01]); // an unknown varint field
    ex.extend_from_slice(&[0x19, 1, 2, 3, 4, 5, 6, 7, 8]); // an unknown fixed64
    ex.extend(ld(0x0a, &a)); // a second, concatenated Features
    let e = entries(&ex).unwrap();
    let names: Vec<&[u8]> = e.iter().map(|e| e.name).collect();
    assert_eq!(names, [&b"a"[..], b"b", b"a"]);
    // groups, and a truncated fixed64, are refused
    assert!(entries(&[0x0b]).is_none());
    assert!(entries(&[0x19, 1, 2]).is_none());
    // an unknown length-delimited field may run past the end: skipped to it
    assert_eq!(entries(&[0x22, 0x7f, 1]).unwrap(), vec![]);
    // a Features field holding anything but map entries is refused
    assert!(entries(&ld(0x0a, &[0x10, 0x01])).is_none());
    // a map entry must have exactly two fields
    assert!(entries(&ld(0x0a, &ld(0x0a, &ld(0x0a, b"a")))).is_none());
    let three = [ld(0x0a, b"a"), ld(0x12, b""), ld(0x0a, b"b")].concat();
    assert!(entries(&ld(0x0a, &ld(0x0a, &three))).is_none());
    // a length past the enclosing limit leaves that limit in force
    let mut over = ld(0x0a, &a);
    over[1] += 9;
    assert_eq!(entries(&over).unwrap().len(), 1);
    // a varint of more than 10 bytes is malformed
    assert!(
        entries(&[0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
            .is_none()
    );
    assert_eq!(entries(b"").unwrap(), vec![]);
}

#[test]
fn wire_feature_kinds_and_lists() {
    assert_eq!(wire::feature_kind(b"").map(|k| k.0), Some(Kind::None));
    assert!(wire::feature_kind(&[0x22, 0]).is_none());
    let f = int64_feature(&[-1, 300, i64::MIN]);
    let (kind, list) = wire::feature_kind(&f).unwrap();
    assert_eq!(kind, Kind::Int64);
    let mut v: Vec<i64> = vec![];
    assert!(wire::parse_int64_list(list, &mut v));
    assert_eq!(v, [-1, 300, i64::MIN]);
    // unpacked int64s; a packed field after unpacked ones is refused
    let mut v = vec![];
    assert!(wire::parse_int64_list(&[4, 8, 5, 8, 0x7f], &mut v));
    assert_eq!(v, [5, 127]);
    assert!(!wire::parse_int64_list(&[4, 8, 5, 10, 0], &mut vec![]));
    // after a packed field, the rest of the list is ignored
    let mut v = vec![];
    assert!(wire::parse_int64_list(&[5, 10, 1, 7, 8, 9], &mut v));
    assert_eq!(v, [7]);
    // floats: packed (a trailing partial value ignored) and unpacked
    let mut packed = vec![7, 10, 5];
    packed.extend(1.5f32.to_le_bytes());
    packed.push(0xaa);
    let mut v: Vec<f32> = vec![];
    assert!(wire::parse_float_list(&packed, &mut v));
    assert_eq!(v, [1.5]);
    let mut unpacked = vec![10, 13];
    unpacked.extend(2.0f32.to_le_bytes());
    unpacked.push(13);
    unpacked.extend((-0.5f32).to_le_bytes());
    let mut v = vec![];
    assert!(wire::parse_float_list(&unpacked, &mut v));
    assert_eq!(v, [2.0, -0.5]);
    // a packed length claiming more than there is fails without allocating it
    let mut v = vec![];
    assert!(!wire::parse_float_list(
        &[6, 10, 0xff, 0xff, 0xff, 0xff, 0x0f],
        &mut v
    ));
    assert!(v.capacity() < 1 << 20);
    // bytes: values are slices of the input
    let base = Bytes::from(vec![9, 10, 2, b'h', b'i', 10, 0, 10, 1, b'!']);
    let mut v: Vec<Bytes> = vec![];
    assert!(wire::parse_bytes_list(&base, &base, &mut v));
    assert_eq!(v, [&b"hi"[..], b"", b"!"]);
    assert!(!wire::parse_bytes_list(
        &[4, 10, 9, b'x', b'y'],
        &base,
        &mut vec![]
    ));
    // a list length past the end of the feature leaves the feature's end as the limit
    let mut v = vec![];
    assert!(wire::parse_int64_list(&[100, 8, 3], &mut v));
    assert_eq!(v, [3]);
}

#[test]
fn slots_count_what_does_not_fit() {
    let mut out = [0i64; 2];
    let mut s = Slot::new(&mut out);
    for x in [1, 2, 3] {
        s.push(x);
    }
    assert_eq!((s.count(), s.is_full()), (3, false));
    assert_eq!(out, [1, 2]);
    let mut out = [0.0f32; 3];
    let mut s = Slot::new(&mut out);
    assert_eq!(s.room(5), 3);
    assert_eq!(s.grow(5).len(), 3);
    assert_eq!(s.count(), 5);
    let mut out = vec![Bytes::new(); 1];
    let mut s = Slot::new(&mut out);
    assert!(s.try_push(Bytes::from_static(b"a")));
    assert!(!s.try_push(Bytes::from_static(b"b")));
    assert!(s.is_full());
}

fn strings(v: &[&[u8]]) -> Tensor {
    Tensor::from_strings(&[v.len()], v.iter().map(|s| s.to_vec()).collect()).unwrap()
}

fn empty_strings() -> Tensor {
    Tensor::from_strings(&[0], Vec::<Vec<u8>>::new()).unwrap()
}

/// Runs `ParseExampleV2` with `sparse` (key, dtype), `dense` (key, shape, default)
/// and `ragged` (key, dtype, splits dtype) features.
fn parse_v2(
    serialized: Tensor,
    sparse: &[(&str, DType)],
    dense: &[(&str, Shape, Tensor)],
    ragged: &[(&str, DType, DType)],
) -> Result<Vec<Tensor>> {
    let keys = |ks: Vec<&str>| strings(&ks.iter().map(|k| k.as_bytes()).collect::<Vec<_>>());
    let attrs = [
        ("num_sparse", AttrValue::from(sparse.len())),
        (
            "sparse_types",
            AttrValue::from(sparse.iter().map(|s| s.1).collect::<Vec<_>>()),
        ),
        (
            "ragged_value_types",
            AttrValue::from(ragged.iter().map(|r| r.1).collect::<Vec<_>>()),
        ),
        (
            "ragged_split_types",
            AttrValue::from(ragged.iter().map(|r| r.2).collect::<Vec<_>>()),
        ),
        (
            "dense_shapes",
            AttrValue::from(dense.iter().map(|d| d.1.clone()).collect::<Vec<_>>()),
        ),
    ];
    let inputs = vec![
        vec![serialized],
        vec![empty_strings()],
        vec![keys(sparse.iter().map(|s| s.0).collect())],
        vec![keys(dense.iter().map(|d| d.0).collect())],
        vec![keys(ragged.iter().map(|r| r.0).collect())],
        dense.iter().map(|d| d.2.clone()).collect(),
    ];
    run_op_lists(
        "ParseExampleV2",
        &attrs,
        inputs,
        Some(&[false, false, false, false, false, true]),
    )
}

/// A random well-formed example over keys "k0".."k5". With `empty_features`, some
/// features have no list, which prost encodes as a map entry without a value, and
/// TensorFlow refuses.
fn random_example(rng: &mut Rng, empty_features: bool) -> Example {
    let mut features = Features::default();
    for k in 0..6 {
        if rng.below(3) == 0 {
            continue;
        }
        let n = rng.below(5) as usize;
        let kind = match rng.below(4) {
            0 if empty_features => None,
            1 => Some(feature::Kind::BytesList(BytesList {
                value: (0..n)
                    .map(|_| (0..rng.below(4)).map(|_| rng.next() as u8).collect())
                    .collect(),
            })),
            2 => Some(feature::Kind::FloatList(FloatList {
                value: (0..n)
                    .map(|_| rng.below(1000) as f32 / 8.0 - 60.0)
                    .collect(),
            })),
            _ => Some(feature::Kind::Int64List(Int64List {
                value: (0..n).map(|_| rng.next() as i64 >> rng.below(64)).collect(),
            })),
        };
        features.feature.insert(format!("k{k}"), Feature { kind });
    }
    Example {
        features: Some(features),
    }
}

#[test]
fn sparse_and_ragged_values_match_prost() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for round in 0..40 {
        let examples: Vec<Example> = (0..rng.below(6))
            .map(|_| random_example(&mut rng, false))
            .collect();
        let ser: Vec<Vec<u8>> = examples.iter().map(Message::encode_to_vec).collect();
        let n = ser.len();
        let serialized = Tensor::from_strings(&[n], ser.clone()).unwrap();
        // every key as a sparse feature of each dtype: values of that dtype, or a
        // "Data types don't match" error naming the first mismatching example
        for (dtype, want_kind) in [(DType::I64, 3), (DType::F32, 2), (DType::String, 1)] {
            for k in 0..6 {
                let key = format!("k{k}");
                let lists: Vec<Option<&feature::Kind>> = examples
                    .iter()
                    .map(|e| {
                        e.features
                            .as_ref()
                            .and_then(|f| f.feature.get(&key))
                            .and_then(|f| f.kind.as_ref())
                    })
                    .collect();
                let tag = |k: &feature::Kind| match k {
                    feature::Kind::BytesList(_) => 1,
                    feature::Kind::FloatList(_) => 2,
                    feature::Kind::Int64List(_) => 3,
                };
                let got = parse_v2(serialized.clone(), &[(key.as_str(), dtype)], &[], &[]);
                let ragged = parse_v2(
                    serialized.clone(),
                    &[],
                    &[],
                    &[(key.as_str(), dtype, DType::I32)],
                );
                if let Some(bad) = lists
                    .iter()
                    .position(|l| l.is_some_and(|l| tag(l) != want_kind))
                {
                    for e in [got.unwrap_err(), ragged.unwrap_err()] {
                        assert!(
                            e.message().starts_with(&format!(
                                "Name: <unknown>, Key: {key}, Index: {bad}.  Data types don't match."
                            )),
                            "round {round}: {e}"
                        );
                    }
                    continue;
                }
                let out = got.unwrap();
                let ragged = ragged.unwrap();
                let counts: Vec<usize> = lists
                    .iter()
                    .map(|l| match l {
                        None => 0,
                        Some(feature::Kind::BytesList(b)) => b.value.len(),
                        Some(feature::Kind::FloatList(f)) => f.value.len(),
                        Some(feature::Kind::Int64List(i)) => i.value.len(),
                    })
                    .collect();
                let total: usize = counts.iter().sum();
                let max = counts.iter().copied().max().unwrap_or(0);
                assert_eq!(out[0].dims(), &[total, 2], "round {round} {key}");
                assert_eq!(
                    out[2],
                    Tensor::vector(&[n as i64, max as i64]),
                    "round {round} {key}"
                );
                let want = match dtype {
                    DType::I64 => Tensor::vector(
                        &lists
                            .iter()
                            .flat_map(|l| match l {
                                Some(feature::Kind::Int64List(i)) => i.value.clone(),
                                _ => vec![],
                            })
                            .collect::<Vec<_>>(),
                    ),
                    DType::F32 => Tensor::vector(
                        &lists
                            .iter()
                            .flat_map(|l| match l {
                                Some(feature::Kind::FloatList(f)) => f.value.clone(),
                                _ => vec![],
                            })
                            .collect::<Vec<_>>(),
                    ),
                    _ => Tensor::from_strings(
                        &[total],
                        lists
                            .iter()
                            .flat_map(|l| match l {
                                Some(feature::Kind::BytesList(b)) => b.value.clone(),
                                _ => vec![],
                            })
                            .collect(),
                    )
                    .unwrap(),
                };
                assert_eq!(out[1], want, "round {round} {key}");
                assert_eq!(ragged[0], want, "round {round} {key}");
                let mut splits = vec![0i32];
                for c in &counts {
                    splits.push(splits[splits.len() - 1] + *c as i32);
                }
                assert_eq!(ragged[1], Tensor::vector(&splits), "round {round} {key}");
            }
        }
    }
}

/// A random example whose features mostly fit `random_and_mutated_input_never_panics`'s
/// configuration (so that unmutated ones parse).
fn fitting_example(rng: &mut Rng) -> Example {
    let mut f = Features::default();
    let mut put = |k: &str, kind: feature::Kind| {
        f.feature.insert(k.to_owned(), Feature { kind: Some(kind) });
    };
    let floats = |n: u64| FloatList {
        value: (0..n).map(|i| i as f32 * 0.5).collect(),
    };
    let ints = |n: u64| Int64List {
        value: (0..n as i64).map(|i| i - 1).collect(),
    };
    let strs = |n: u64| BytesList {
        value: (0..n).map(|i| vec![b'a' + i as u8; i as usize]).collect(),
    };
    put("k0", feature::Kind::FloatList(floats(2)));
    put("k1", feature::Kind::Int64List(ints(rng.below(5))));
    put("k2", feature::Kind::BytesList(strs(2 * rng.below(3))));
    if rng.below(2) == 0 {
        put("k3", feature::Kind::Int64List(ints(1)));
    }
    put("k4", feature::Kind::BytesList(strs(rng.below(4))));
    put("k5", feature::Kind::FloatList(floats(rng.below(4))));
    put("k1x", feature::Kind::Int64List(ints(rng.below(4))));
    Example { features: Some(f) }
}

#[test]
fn random_and_mutated_input_never_panics() {
    let mut rng = Rng(0xdead_beef_0bad_cafe);
    let dense = [
        ("k0", Shape::known(&[2]), Tensor::vector(&[0.0f32, 1.0])),
        ("k1", Shape::from_tf_dims(&[-1]), Tensor::scalar(7i64)),
        (
            "k2",
            Shape::from_tf_dims(&[-1, 2]),
            Tensor::from_strings(&[1], vec!["p"]).unwrap(),
        ),
        ("k3", Shape::scalar(), Tensor::scalar(0i64)),
    ];
    let sparse = [("k4", DType::String), ("k5", DType::F32)];
    let ragged = [("k1x", DType::I64, DType::I32)];
    let mut outcomes = [0usize; 2];
    for _ in 0..400 {
        let mut ser: Vec<Vec<u8>> = (0..1 + rng.below(4))
            .map(|_| match rng.below(3) {
                0 => random_example(&mut rng, true).encode_to_vec(),
                _ => fitting_example(&mut rng).encode_to_vec(),
            })
            .collect();
        for s in &mut ser {
            match rng.below(8) {
                0 if !s.is_empty() => {
                    let i = rng.below(s.len() as u64) as usize;
                    s[i] ^= 1 << rng.below(8);
                }
                1 => s.truncate(rng.below(s.len() as u64 + 1) as usize),
                2 => {
                    let i = rng.below(s.len() as u64 + 1) as usize;
                    s.insert(i, rng.next() as u8);
                }
                3 => *s = (0..rng.below(24)).map(|_| rng.next() as u8).collect(),
                _ => {}
            }
        }
        let n = ser.len();
        let batch = Tensor::from_strings(&[n], ser.clone()).unwrap();
        for input in [
            batch,
            Tensor::from_strings(&[], vec![ser[0].clone()]).unwrap(),
        ] {
            match parse_v2(input, &sparse, &dense, &ragged) {
                Ok(_) => outcomes[0] += 1,
                Err(e) => {
                    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
                    outcomes[1] += 1;
                }
            }
        }
    }
    assert!(outcomes[0] > 50 && outcomes[1] > 50, "{outcomes:?}");
}

#[test]
fn v1_keys_must_be_scalars() {
    let attrs = [
        ("sparse_types", AttrValue::from(vec![DType::I64])),
        ("dense_shapes", AttrValue::from(Vec::<Shape>::new())),
    ];
    let e = run_op_lists(
        "ParseExample",
        &attrs,
        vec![
            vec![strings(&[b""])],
            vec![empty_strings()],
            vec![strings(&[b"a", b"b"])],
            vec![],
            vec![],
        ],
        Some(&[false, false, true, true, true]),
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "Expected sparse_keys[0] to be a scalar, got shape: [2]"
    );
}

#[test]
fn zero_stride_and_unallocatable_shapes_are_errors_not_crashes() {
    let ex = Example {
        features: Some(Features {
            feature: [(
                "v".to_owned(),
                Feature {
                    kind: Some(feature::Kind::Int64List(Int64List { value: vec![1] })),
                },
            )]
            .into(),
        }),
    }
    .encode_to_vec();
    let empty = Example::default().encode_to_vec();
    let zero = Shape::from_tf_dims(&[-1, 0]);
    // a variable-length feature with no values per row takes none
    let out = parse_v2(
        strings(&[&empty]),
        &[],
        &[("v", zero.clone(), Tensor::scalar(0i64))],
        &[],
    )
    .unwrap();
    assert_eq!(out[0].dims(), &[1, 0, 0]);
    let e = parse_v2(
        strings(&[&ex]),
        &[],
        &[("v", zero.clone(), Tensor::scalar(0i64))],
        &[],
    )
    .unwrap_err();
    assert!(
        e.message().contains("not a multiple of stride length"),
        "{e}"
    );
    let one = Tensor::from_strings(&[], vec![ex.clone()]).unwrap();
    let e = parse_v2(one, &[], &[("v", zero, Tensor::scalar(0i64))], &[]).unwrap_err();
    assert!(e.message().contains("divisible by 0, found 1"), "{e}");
    // a dense shape whose output cannot be allocated
    let huge = Shape::known(&[1 << 62]);
    let e = parse_v2(
        strings(&[&ex]),
        &[],
        &[("v", huge, Tensor::new::<i64>(&[0], vec![]).unwrap())],
        &[],
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
}

#[test]
fn parallel_minibatches_answer_as_sequential_ones() {
    // a batch large enough to be parsed in parallel gives the sequential answers
    let ex = |k: i64, pad: usize| {
        Example {
            features: Some(Features {
                feature: [
                    (
                        "k".to_owned(),
                        Feature {
                            kind: Some(feature::Kind::Int64List(Int64List {
                                value: (0..k % 3).map(|i| k * 10 + i).collect(),
                            })),
                        },
                    ),
                    (
                        "pad".to_owned(),
                        Feature {
                            kind: Some(feature::Kind::BytesList(BytesList {
                                value: vec![vec![b'x'; pad]],
                            })),
                        },
                    ),
                ]
                .into(),
            }),
        }
        .encode_to_vec()
    };
    let big: Vec<Vec<u8>> = (0..300).map(|k| ex(k, 1000)).collect();
    let small: Vec<Vec<u8>> = (0..300).map(|k| ex(k, 0)).collect();
    let run = |v: &[Vec<u8>]| {
        parse_v2(
            Tensor::from_strings(&[v.len()], v.to_vec()).unwrap(),
            &[],
            &[("k", Shape::from_tf_dims(&[-1]), Tensor::scalar(-1i64))],
            &[("k2", DType::I64, DType::I64)],
        )
    };
    let out = run(&big).unwrap();
    assert_eq!(out[0], run(&small).unwrap()[0]);
    assert_eq!(out[0].dims(), &[300, 2]);
    assert_eq!(
        out[0].as_slice::<i64>().unwrap()[..6],
        [-1, -1, 10, -1, 20, 21]
    );
    // the same key as sparse and dense: no feature is found, as in TensorFlow
    let dup = parse_v2(
        Tensor::from_strings(&[300], big.clone()).unwrap(),
        &[("k", DType::I64)],
        &[("k", Shape::from_tf_dims(&[-1]), Tensor::scalar(-1i64))],
        &[],
    )
    .unwrap();
    assert_eq!(dup[0].dims(), &[0, 2]);
    assert_eq!(dup[3].dims(), &[300, 0]);
    let run = |v: &[Vec<u8>]| {
        parse_v2(
            Tensor::from_strings(&[v.len()], v.to_vec()).unwrap(),
            &[("k", DType::I64)],
            &[(
                "pad",
                Shape::known(&[1]),
                Tensor::from_strings(&[1], vec![""]).unwrap(),
            )],
            &[],
        )
    };
    let (b, s) = (run(&big).unwrap(), run(&small).unwrap());
    assert_eq!(b[0], s[0]);
    assert_eq!(b[1], s[1]);
    assert_eq!(b[2], Tensor::vector(&[300i64, 2]));
    assert_eq!(b[3].dims(), &[300, 1]);
    assert_eq!(b[3].as_strings().unwrap()[7].len(), 1000);
    let ragged = |v: &[Vec<u8>]| {
        parse_v2(
            Tensor::from_strings(&[v.len()], v.to_vec()).unwrap(),
            &[],
            &[],
            &[("k", DType::I64, DType::I32)],
        )
        .unwrap()
    };
    let (b, s) = (ragged(&big), ragged(&small));
    assert_eq!(b, s);
    assert_eq!(b[1].dims(), &[301]);
}
