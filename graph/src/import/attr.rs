//! Conversion between TensorFlow's [`proto::AttrValue`](crate::proto::attr::AttrValue)
//! and actorflow's [`AttrValue`], member for member: strings must be UTF-8 (actorflow
//! keeps them as `String`), types must be value types actorflow has, shapes and
//! tensors convert as in [`super::tensor`], and function references keep their
//! nested attributes. An `AttrValue` with no member set is an error.

use crate::AttrMap;

use super::tensor::{
    dtype_from_proto, shape_from_proto, shape_to_proto, tensor_from_proto_limited, tensor_to_proto,
};
use crate::proto::attr as pb;
use crate::{AttrValue, ListValue, NameAttrList, Result, Status};

fn utf8(b: &[u8]) -> Result<String> {
    String::from_utf8(b.to_vec()).map_err(|_| {
        Status::invalid_argument(format!(
            "string value \"{}\" is not valid UTF-8",
            crate::proto::text::escape_bytes(b)
        ))
    })
}

/// The actorflow attribute for a TensorFlow one; tensors larger than
/// `max_tensor_bytes` are refused.
pub fn attr_from_proto(p: &pb::AttrValue, max_tensor_bytes: usize) -> Result<AttrValue> {
    use pb::AttrValueKind as K;
    let Some(v) = &p.value else {
        return Err(Status::invalid_argument("the attr value has no member set"));
    };
    Ok(match v {
        K::S(s) => AttrValue::S(utf8(s)?),
        K::I(i) => AttrValue::I(*i),
        K::F(f) => AttrValue::F(*f),
        K::B(b) => AttrValue::B(*b),
        K::Type(t) => AttrValue::Type(dtype_from_proto(*t)?),
        K::Shape(s) => AttrValue::Shape(shape_from_proto(s)?),
        K::Tensor(t) => AttrValue::Tensor(tensor_from_proto_limited(t, max_tensor_bytes)?),
        K::Placeholder(s) => AttrValue::Placeholder(s.clone()),
        K::Func(f) => AttrValue::Func(func_from_proto(f, max_tensor_bytes)?),
        K::List(l) => AttrValue::from(list_from_proto(l, max_tensor_bytes)?),
    })
}

fn func_from_proto(f: &pb::NameAttrList, max_tensor_bytes: usize) -> Result<NameAttrList> {
    let mut attr = AttrMap::new();
    for (k, v) in &f.attr {
        let a = attr_from_proto(v, max_tensor_bytes)
            .map_err(|e| e.context(format_args!("attr '{k}' of function '{}'", f.name)))?;
        attr.insert(k.clone(), a);
    }
    Ok(NameAttrList {
        name: f.name.clone(),
        attr,
    })
}

fn list_from_proto(l: &pb::ListValue, max_tensor_bytes: usize) -> Result<ListValue> {
    Ok(ListValue {
        s: l.s.iter().map(|s| utf8(s)).collect::<Result<_>>()?,
        i: l.i.clone(),
        f: l.f.clone(),
        b: l.b.clone(),
        type_: l
            .r#type
            .iter()
            .map(|&t| dtype_from_proto(t))
            .collect::<Result<_>>()?,
        shape: l
            .shape
            .iter()
            .map(shape_from_proto)
            .collect::<Result<_>>()?,
        tensor: l
            .tensor
            .iter()
            .map(|t| tensor_from_proto_limited(t, max_tensor_bytes))
            .collect::<Result<_>>()?,
        func: l
            .func
            .iter()
            .map(|f| func_from_proto(f, max_tensor_bytes))
            .collect::<Result<_>>()?,
    })
}

fn func_to_proto(f: &NameAttrList) -> pb::NameAttrList {
    pb::NameAttrList {
        name: f.name.clone(),
        attr: f
            .attr
            .iter()
            .map(|(k, v)| (k.clone(), attr_to_proto(v)))
            .collect(),
    }
}

/// The TensorFlow attribute for an actorflow one.
pub fn attr_to_proto(a: &AttrValue) -> pb::AttrValue {
    use pb::AttrValueKind as K;
    let v = match a {
        AttrValue::S(s) => K::S(s.as_bytes().to_vec()),
        AttrValue::I(i) => K::I(*i),
        AttrValue::F(f) => K::F(*f),
        AttrValue::B(b) => K::B(*b),
        AttrValue::Type(t) => K::Type(t.tf_enum()),
        AttrValue::Shape(s) => K::Shape(shape_to_proto(s)),
        AttrValue::Tensor(t) => K::Tensor(Box::new(tensor_to_proto(t))),
        AttrValue::Placeholder(p) => K::Placeholder(p.clone()),
        AttrValue::Func(f) => K::Func(func_to_proto(f)),
        AttrValue::List(l) => K::List(pb::ListValue {
            s: l.s.iter().map(|s| s.as_bytes().to_vec()).collect(),
            i: l.i.clone(),
            f: l.f.clone(),
            b: l.b.clone(),
            r#type: l.type_.iter().map(|t| t.tf_enum()).collect(),
            shape: l.shape.iter().map(shape_to_proto).collect(),
            tensor: l.tensor.iter().map(tensor_to_proto).collect(),
            func: l.func.iter().map(func_to_proto).collect(),
        }),
    };
    pb::AttrValue { value: Some(v) }
}

/// The names of the functions an attribute refers to (`func` and `list(func)`
/// values, and those nested in their attributes).
pub(crate) fn referenced_functions<'a>(a: &'a AttrValue, out: &mut Vec<&'a str>) {
    fn func<'a>(f: &'a NameAttrList, out: &mut Vec<&'a str>) {
        out.push(&f.name);
        for v in f.attr.values() {
            referenced_functions(v, out);
        }
    }
    match a {
        AttrValue::Func(f) => func(f, out),
        AttrValue::List(l) => l.func.iter().for_each(|f| func(f, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::tensor::DEFAULT_MAX_TENSOR_BYTES;
    use crate::{Code, DType, Shape, Tensor};

    fn round_trip(a: AttrValue) {
        let p = attr_to_proto(&a);
        assert_eq!(attr_from_proto(&p, DEFAULT_MAX_TENSOR_BYTES).unwrap(), a);
    }

    #[test]
    fn every_kind_round_trips() {
        round_trip(AttrValue::from("loc:@x"));
        round_trip(AttrValue::I(-3));
        round_trip(AttrValue::F(0.25));
        round_trip(AttrValue::B(true));
        round_trip(AttrValue::Type(DType::BF16));
        round_trip(AttrValue::Shape(Shape::unknown()));
        round_trip(AttrValue::Shape(Shape::from_dims(&[None, Some(3)])));
        round_trip(AttrValue::Tensor(Tensor::vector(&[1i64, 2])));
        round_trip(AttrValue::Placeholder("T".into()));
        round_trip(AttrValue::empty_list());
        round_trip(AttrValue::from(vec![DType::F32, DType::I64]));
        round_trip(AttrValue::from(vec![Shape::scalar(), Shape::unknown()]));
        round_trip(AttrValue::from(ListValue {
            tensor: vec![Tensor::scalar(1u8)],
            func: vec![NameAttrList {
                name: "f".into(),
                attr: AttrMap::from([("T".into(), AttrValue::Type(DType::F32))]),
            }],
            ..Default::default()
        }));
    }

    #[test]
    fn bad_values_are_errors() {
        use pb::AttrValueKind as K;
        let mk = |v| pb::AttrValue { value: Some(v) };
        let lim = DEFAULT_MAX_TENSOR_BYTES;
        let e = attr_from_proto(&pb::AttrValue::default(), lim).unwrap_err();
        assert!(e.message().contains("no member"), "{e}");
        let e = attr_from_proto(&mk(K::S(vec![0xff])), lim).unwrap_err();
        assert!(e.message().contains("\\377"), "{e}");
        assert_eq!(
            attr_from_proto(&mk(K::Type(8)), lim).unwrap_err().code(),
            Code::Unimplemented
        );
        assert_eq!(
            attr_from_proto(&mk(K::Type(101)), lim).unwrap_err().code(),
            Code::InvalidArgument
        );
        let nested = pb::NameAttrList {
            name: "f".into(),
            attr: std::collections::BTreeMap::from([("x".into(), mk(K::Type(0)))]),
        };
        let e = attr_from_proto(&mk(K::Func(nested)), lim).unwrap_err();
        assert!(e.message().contains("attr 'x' of function 'f'"), "{e}");
    }

    #[test]
    fn finds_referenced_functions() {
        let a = AttrValue::Func(NameAttrList {
            name: "outer".into(),
            attr: AttrMap::from([(
                "g".into(),
                AttrValue::from(ListValue {
                    func: vec![NameAttrList {
                        name: "inner".into(),
                        attr: AttrMap::new(),
                    }],
                    ..Default::default()
                }),
            )]),
        });
        let mut v = vec![];
        referenced_functions(&a, &mut v);
        assert_eq!(v, ["outer", "inner"]);
    }
}
