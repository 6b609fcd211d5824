//! The spec syntax of `REGISTER_OP`: arguments (`"x: T"`, `"values: N * T"`,
//! `"ref: Ref(T)"`, `"y: float"`) and attributes (`"T: {float, int32} = DT_FLOAT"`,
//! `"N: int >= 1"`, `"padding: {'SAME', 'VALID'}"`, `"shape: shape = { unknown_rank: true }"`).

use crate::op_def::{ArgDef, ArgType, AttrDef, AttrType, ElemType};
use crate::{AttrValue, DType, Result, Shape, Status};

fn bad(spec: &str, why: &str) -> Status {
    Status::invalid_argument(format!("bad spec '{spec}': {why}"))
}

fn split_name(spec: &str) -> Result<(&str, &str)> {
    let (n, rest) = spec
        .split_once(':')
        .ok_or_else(|| bad(spec, "missing ':'"))?;
    let n = n.trim();
    if n.is_empty() || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(bad(spec, "bad name"));
    }
    Ok((n, rest.trim()))
}

/// Parses a dtype as spelled in op specs (`float`, `int32`, `DT_FLOAT`).
pub fn parse_spec_dtype(s: &str) -> Option<DType> {
    s.trim().parse().ok()
}

fn elem(s: &str) -> ElemType {
    match parse_spec_dtype(s) {
        Some(d) => ElemType::Fixed(d),
        None => ElemType::Attr(s.trim().to_owned()),
    }
}

/// Parses an input or output argument spec.
pub fn parse_arg(spec: &str) -> Result<ArgDef> {
    let (name, mut ty) = split_name(spec)?;
    let mut is_ref = false;
    if let Some(inner) = ty.strip_prefix("Ref(").and_then(|t| t.strip_suffix(')')) {
        is_ref = true;
        ty = inner.trim();
    }
    let ty = match ty.split_once('*') {
        Some((n, t)) => ArgType::Repeated {
            number_attr: n.trim().to_owned(),
            elem: elem(t),
        },
        None if ty.is_empty() => return Err(bad(spec, "missing type")),
        None => ArgType::Single(elem(ty)),
    };
    Ok(ArgDef {
        name: name.to_owned(),
        ty,
        is_ref,
    })
}

/// TensorFlow's named type sets.
fn type_set(name: &str) -> Option<Vec<DType>> {
    use DType::*;
    let real = vec![F32, F64, I32, U8, I16, I8, I64, BF16, U16, F16, U32, U64];
    Some(match name {
        "numbertype" | "realnumbertype" => real,
        "all" => crate::dtype::ALL_DTYPES.to_vec(),
        "float_types" => vec![F16, BF16, F32, F64],
        "integral_types" => vec![I32, I64],
        _ => return None,
    })
}

/// An attribute kind with its allowed types and allowed strings.
type Kind = (AttrType, Option<Vec<DType>>, Option<Vec<String>>);

fn parse_set(spec: &str, body: &str) -> Result<Kind> {
    let items: Vec<&str> = body
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items
        .iter()
        .all(|s| s.starts_with('\'') || s.starts_with('"'))
        && !items.is_empty()
    {
        let strings = items
            .iter()
            .map(|s| s.trim_matches(['\'', '"']).to_owned())
            .collect();
        return Ok((AttrType::String, None, Some(strings)));
    }
    let mut types = vec![];
    for s in items {
        match parse_spec_dtype(s) {
            Some(d) => types.push(d),
            None if s.starts_with("complex") || s.starts_with("q") || s == "variant" => {}
            None => return Err(bad(spec, &format!("unknown type '{s}'"))),
        }
    }
    Ok((AttrType::Type, Some(types), None))
}

fn parse_kind(spec: &str, k: &str) -> Result<Kind> {
    let k = k.trim();
    if let Some(body) = k.strip_prefix('{').and_then(|b| b.strip_suffix('}')) {
        return parse_set(spec, body);
    }
    if let Some(inner) = k.strip_prefix("list(").and_then(|b| b.strip_suffix(')')) {
        let (t, at, as_) = parse_kind(spec, inner)?;
        return Ok((AttrType::List(Box::new(t)), at, as_));
    }
    if let Some(set) = type_set(k) {
        return Ok((AttrType::Type, Some(set), None));
    }
    let t = match k {
        "string" => AttrType::String,
        "int" => AttrType::Int,
        "float" => AttrType::Float,
        "bool" => AttrType::Bool,
        "type" => AttrType::Type,
        "shape" => AttrType::Shape,
        "tensor" => AttrType::Tensor,
        "func" => AttrType::Func,
        _ => return Err(bad(spec, &format!("unknown attr kind '{k}'"))),
    };
    Ok((t, None, None))
}

fn parse_shape(spec: &str, s: &str) -> Result<Shape> {
    let s = s.trim();
    if s.contains("unknown_rank") {
        return Ok(Shape::unknown());
    }
    let body = s
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .ok_or_else(|| bad(spec, "bad shape default"))?;
    let dims: Result<Vec<i64>> = body
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<i64>().map_err(|_| bad(spec, "bad shape dim")))
        .collect();
    Ok(Shape::from_tf_dims(&dims?))
}

fn parse_default(spec: &str, ty: &AttrType, s: &str) -> Result<AttrValue> {
    let s = s.trim();
    let unquote = |x: &str| x.trim().trim_matches(['\'', '"']).to_owned();
    Ok(match ty {
        AttrType::String => AttrValue::S(unquote(s)),
        AttrType::Int => AttrValue::I(s.parse().map_err(|_| bad(spec, "bad int default"))?),
        AttrType::Float => AttrValue::F(s.parse().map_err(|_| bad(spec, "bad float default"))?),
        AttrType::Bool => AttrValue::B(s.parse().map_err(|_| bad(spec, "bad bool default"))?),
        AttrType::Type => {
            AttrValue::Type(parse_spec_dtype(s).ok_or_else(|| bad(spec, "bad type default"))?)
        }
        AttrType::Shape => AttrValue::Shape(parse_shape(spec, s)?),
        AttrType::List(inner) => {
            let body = s
                .strip_prefix('[')
                .and_then(|b| b.strip_suffix(']'))
                .ok_or_else(|| bad(spec, "bad list default"))?;
            let items: Vec<&str> = body
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .collect();
            let mut l = crate::attr_value::ListValue::default();
            for it in items {
                match parse_default(spec, inner, it)? {
                    AttrValue::S(v) => l.s.push(v),
                    AttrValue::I(v) => l.i.push(v),
                    AttrValue::F(v) => l.f.push(v),
                    AttrValue::B(v) => l.b.push(v),
                    AttrValue::Type(v) => l.type_.push(v),
                    _ => return Err(bad(spec, "unsupported list default")),
                }
            }
            AttrValue::from(l)
        }
        AttrType::Tensor | AttrType::Func => return Err(bad(spec, "no defaults for this kind")),
    })
}

/// Parses an attribute spec.
pub fn parse_attr(spec: &str) -> Result<AttrDef> {
    let (name, rest) = split_name(spec)?;
    // The default follows the first '=' that is not part of '>='.
    let bytes = rest.as_bytes();
    let eq = (0..bytes.len()).find(|&i| bytes[i] == b'=' && (i == 0 || bytes[i - 1] != b'>'));
    let (kind, default) = match eq {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (kind, minimum) = match kind.split_once(">=") {
        Some((k, m)) => (
            k,
            Some(
                m.trim()
                    .parse::<i64>()
                    .map_err(|_| bad(spec, "bad minimum"))?,
            ),
        ),
        None => (kind, None),
    };
    let (ty, allowed_types, allowed_strings) = parse_kind(spec, kind)?;
    let default = default.map(|d| parse_default(spec, &ty, d)).transpose()?;
    Ok(AttrDef {
        name: name.to_owned(),
        ty,
        default,
        allowed_types,
        allowed_strings,
        minimum,
    })
}
