//! [`AttrValue`]: the value of a node attribute (TensorFlow's `AttrValue` proto), and
//! [`FromAttr`], the typed read of one.

use crate::AttrMap;

use serde::{Deserialize, Serialize};

use crate::{DType, Result, Shape, Status, Tensor};

/// A function name with attributes (TensorFlow's `NameAttrList`).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct NameAttrList {
    /// The function's name.
    pub name: String,
    /// Its attributes.
    #[serde(default)]
    pub attr: AttrMap,
}

/// A list attribute. TensorFlow keeps one repeated field per kind; a list uses one of
/// them, and an empty list matches any `list(…)` attribute.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct ListValue {
    /// Strings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub s: Vec<String>,
    /// Integers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub i: Vec<i64>,
    /// Floats.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub f: Vec<f32>,
    /// Booleans.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub b: Vec<bool>,
    /// Types.
    #[serde(default, rename = "type", skip_serializing_if = "Vec::is_empty")]
    pub type_: Vec<DType>,
    /// Shapes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<Shape>,
    /// Tensors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tensor: Vec<Tensor>,
    /// Functions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub func: Vec<NameAttrList>,
}

impl ListValue {
    /// The number of elements of the kind in use.
    pub fn len(&self) -> usize {
        self.s.len()
            + self.i.len()
            + self.f.len()
            + self.b.len()
            + self.type_.len()
            + self.shape.len()
            + self.tensor.len()
            + self.func.len()
    }

    /// True for an empty list.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kind of element in use (`"int"`, …), or `None` for an empty list.
    pub fn kind(&self) -> Option<&'static str> {
        [
            (!self.s.is_empty(), "string"),
            (!self.i.is_empty(), "int"),
            (!self.f.is_empty(), "float"),
            (!self.b.is_empty(), "bool"),
            (!self.type_.is_empty(), "type"),
            (!self.shape.is_empty(), "shape"),
            (!self.tensor.is_empty(), "tensor"),
            (!self.func.is_empty(), "func"),
        ]
        .into_iter()
        .find(|(used, _)| *used)
        .map(|(_, k)| k)
    }
}

/// The value of one node attribute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttrValue {
    /// A string.
    S(String),
    /// An integer.
    I(i64),
    /// A float.
    F(f32),
    /// A boolean.
    B(bool),
    /// A dtype.
    Type(DType),
    /// A (partial) shape.
    Shape(Shape),
    /// A constant tensor.
    Tensor(Tensor),
    /// A list of one of the kinds above (boxed: a list holds one vector per
    /// kind, and unboxed it would make every attribute value that large).
    List(Box<ListValue>),
    /// A function reference.
    Func(NameAttrList),
    /// A placeholder for a function attribute, resolved at instantiation.
    Placeholder(String),
}

impl AttrValue {
    /// The attribute kind, as TensorFlow's op specs spell it (`"int"`, `"list(type)"`).
    pub fn kind(&self) -> String {
        match self {
            AttrValue::S(_) => "string".into(),
            AttrValue::I(_) => "int".into(),
            AttrValue::F(_) => "float".into(),
            AttrValue::B(_) => "bool".into(),
            AttrValue::Type(_) => "type".into(),
            AttrValue::Shape(_) => "shape".into(),
            AttrValue::Tensor(_) => "tensor".into(),
            AttrValue::List(l) => format!("list({})", l.kind().unwrap_or("")),
            AttrValue::Func(_) => "func".into(),
            AttrValue::Placeholder(_) => "placeholder".into(),
        }
    }

    /// An empty list.
    pub fn empty_list() -> AttrValue {
        AttrValue::List(Box::default())
    }
}

impl From<ListValue> for AttrValue {
    fn from(l: ListValue) -> AttrValue {
        AttrValue::List(Box::new(l))
    }
}

macro_rules! attr_from {
    ($($t:ty => |$v:ident| $e:expr),* $(,)?) => {$(
        impl From<$t> for AttrValue {
            fn from($v: $t) -> AttrValue { $e }
        }
    )*};
}

attr_from! {
    &str => |v| AttrValue::S(v.to_owned()),
    String => |v| AttrValue::S(v),
    i64 => |v| AttrValue::I(v),
    i32 => |v| AttrValue::I(v as i64),
    usize => |v| AttrValue::I(v as i64),
    f32 => |v| AttrValue::F(v),
    bool => |v| AttrValue::B(v),
    DType => |v| AttrValue::Type(v),
    Shape => |v| AttrValue::Shape(v),
    Tensor => |v| AttrValue::Tensor(v),
    Vec<i64> => |v| AttrValue::from(ListValue { i: v, ..Default::default() }),
    Vec<f32> => |v| AttrValue::from(ListValue { f: v, ..Default::default() }),
    Vec<DType> => |v| AttrValue::from(ListValue { type_: v, ..Default::default() }),
    Vec<String> => |v| AttrValue::from(ListValue { s: v, ..Default::default() }),
    Vec<Shape> => |v| AttrValue::from(ListValue { shape: v, ..Default::default() }),
    Vec<bool> => |v| AttrValue::from(ListValue { b: v, ..Default::default() }),
    NameAttrList => |v| AttrValue::Func(v),
}

impl From<&[i64]> for AttrValue {
    fn from(v: &[i64]) -> AttrValue {
        AttrValue::from(v.to_vec())
    }
}

impl From<&[DType]> for AttrValue {
    fn from(v: &[DType]) -> AttrValue {
        AttrValue::from(v.to_vec())
    }
}

/// A Rust type that an attribute can be read as.
pub trait FromAttr: Sized {
    /// The attribute kind it reads, for error messages.
    const KIND: &'static str;
    /// The value, or `None` when the attribute is of another kind.
    fn from_attr(v: &AttrValue) -> Option<Self>;
}

macro_rules! from_attr {
    ($($t:ty, $kind:literal => |$v:ident| $e:expr),* $(,)?) => {$(
        impl FromAttr for $t {
            const KIND: &'static str = $kind;
            fn from_attr($v: &AttrValue) -> Option<Self> { $e }
        }
    )*};
}

from_attr! {
    String, "string" => |v| match v { AttrValue::S(s) => Some(s.clone()), _ => None },
    i64, "int" => |v| match v { AttrValue::I(i) => Some(*i), _ => None },
    f32, "float" => |v| match v { AttrValue::F(f) => Some(*f), _ => None },
    bool, "bool" => |v| match v { AttrValue::B(b) => Some(*b), _ => None },
    DType, "type" => |v| match v { AttrValue::Type(t) => Some(*t), _ => None },
    Shape, "shape" => |v| match v { AttrValue::Shape(s) => Some(s.clone()), _ => None },
    Tensor, "tensor" => |v| match v { AttrValue::Tensor(t) => Some(t.clone()), _ => None },
    NameAttrList, "func" => |v| match v { AttrValue::Func(f) => Some(f.clone()), _ => None },
    Vec<i64>, "list(int)" => |v| match v { AttrValue::List(l) => Some(l.i.clone()), _ => None },
    Vec<f32>, "list(float)" => |v| match v { AttrValue::List(l) => Some(l.f.clone()), _ => None },
    Vec<bool>, "list(bool)" => |v| match v { AttrValue::List(l) => Some(l.b.clone()), _ => None },
    Vec<String>, "list(string)" => |v| match v { AttrValue::List(l) => Some(l.s.clone()), _ => None },
    Vec<DType>, "list(type)" => |v| match v { AttrValue::List(l) => Some(l.type_.clone()), _ => None },
    Vec<Shape>, "list(shape)" => |v| match v { AttrValue::List(l) => Some(l.shape.clone()), _ => None },
    Vec<Tensor>, "list(tensor)" => |v| match v { AttrValue::List(l) => Some(l.tensor.clone()), _ => None },
}

/// Reads attribute `name` of `attrs` as `T`; `InvalidArgument` naming the attribute
/// when it is missing or of another kind.
pub fn get_attr<T: FromAttr>(attrs: &AttrMap, name: &str) -> Result<T> {
    let v = attrs
        .get(name)
        .ok_or_else(|| Status::invalid_argument(format!("missing attr '{name}'")))?;
    T::from_attr(v).ok_or_else(|| {
        Status::invalid_argument(format!(
            "attr '{name}' has kind {}, expected {}",
            v.kind(),
            T::KIND
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_reads_and_kind_errors() {
        let mut m = AttrMap::new();
        m.insert("T".to_string(), AttrValue::from(DType::F32));
        m.insert("axes".to_string(), AttrValue::from(vec![1i64, 2]));
        assert_eq!(get_attr::<DType>(&m, "T").unwrap(), DType::F32);
        assert_eq!(get_attr::<Vec<i64>>(&m, "axes").unwrap(), vec![1, 2]);
        let e = get_attr::<i64>(&m, "T").unwrap_err();
        assert!(e.message().contains("kind type, expected int"), "{e}");
        assert!(get_attr::<i64>(&m, "nope").is_err());
        assert_eq!(AttrValue::empty_list().kind(), "list()");
    }

    #[test]
    fn json_form() {
        let v = AttrValue::from(vec![DType::F32, DType::I64]);
        let j = serde_json::to_string(&v).unwrap();
        assert_eq!(j, r#"{"list":{"type":["float32","int64"]}}"#);
        assert_eq!(serde_json::from_str::<AttrValue>(&j).unwrap(), v);
        let s = serde_json::to_string(&AttrValue::from(Shape::from_dims(&[None]))).unwrap();
        assert_eq!(s, r#"{"shape":[-1]}"#);
    }
}
