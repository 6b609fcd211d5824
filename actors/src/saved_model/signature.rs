//! [`Signature`]: a SavedModel's named function — input and output keys mapped
//! to tensors of its graph with their dtypes and shapes (TensorFlow's
//! `SignatureDef`).

use std::collections::BTreeMap;

use graph::import::{shape_from_proto, shape_to_proto, tensor_from_proto, tensor_to_proto};
use graph::proto::tf::{tensor_info, SignatureDef, TensorInfo};
use graph::{DType, Result, Shape, Status, Tensor};

/// One tensor of a signature.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    /// The tensor's name in the graph (`node:index`).
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its shape as far as it is known (`None` dimensions vary, e.g. the batch).
    pub shape: Shape,
}

impl TensorSpec {
    /// A spec of tensor `name`.
    pub fn new(name: impl Into<String>, dtype: DType, shape: Shape) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            dtype,
            shape,
        }
    }

    /// The spec of a graph-builder output (its static dtype and shape).
    pub fn of(output: &graph::builder::Output) -> TensorSpec {
        TensorSpec::new(output.name(), output.dtype(), output.shape())
    }

    fn from_proto(p: &TensorInfo) -> Result<TensorSpec> {
        let name = match &p.encoding {
            Some(tensor_info::Encoding::Name(n)) => n.clone(),
            Some(tensor_info::Encoding::CooSparse(_)) => {
                return Err(Status::unimplemented(
                    "sparse (COO) signature tensors are not supported",
                ))
            }
            None => return Err(Status::invalid_argument("a signature tensor has no name")),
        };
        let dtype = graph::import::tensor::dtype_from_proto(p.dtype)?;
        let shape = match &p.tensor_shape {
            Some(s) => shape_from_proto(s)?,
            None => Shape::unknown(),
        };
        Ok(TensorSpec { name, dtype, shape })
    }

    fn to_proto(&self) -> TensorInfo {
        TensorInfo {
            encoding: Some(tensor_info::Encoding::Name(self.name.clone())),
            dtype: self.dtype.tf_enum(),
            tensor_shape: Some(shape_to_proto(&self.shape)),
        }
    }
}

/// A named function of a SavedModel; see the module docs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Signature {
    /// `tensorflow/serving/predict`, `…/classify`, `…/regress`, or empty.
    pub method_name: String,
    /// Input keys and their tensors.
    pub inputs: BTreeMap<String, TensorSpec>,
    /// Output keys and their tensors.
    pub outputs: BTreeMap<String, TensorSpec>,
    /// Values of inputs a caller may leave out.
    pub defaults: BTreeMap<String, Tensor>,
}

impl Signature {
    /// An empty signature of method `method_name` (e.g. [`PREDICT_METHOD_NAME`](super::PREDICT_METHOD_NAME)).
    pub fn new(method_name: impl Into<String>) -> Signature {
        Signature {
            method_name: method_name.into(),
            ..Signature::default()
        }
    }

    /// Adds input `key`.
    pub fn input(mut self, key: impl Into<String>, spec: TensorSpec) -> Signature {
        self.inputs.insert(key.into(), spec);
        self
    }

    /// Adds output `key`.
    pub fn output(mut self, key: impl Into<String>, spec: TensorSpec) -> Signature {
        self.outputs.insert(key.into(), spec);
        self
    }

    /// Reads TensorFlow's `SignatureDef`.
    pub fn from_proto(p: &SignatureDef) -> Result<Signature> {
        let specs = |m: &BTreeMap<String, TensorInfo>, what: &str| {
            m.iter()
                .map(|(k, v)| {
                    TensorSpec::from_proto(v)
                        .map(|s| (k.clone(), s))
                        .map_err(|e| e.context(format!("{what} '{k}'")))
                })
                .collect::<Result<BTreeMap<_, _>>>()
        };
        let defaults = p
            .defaults
            .iter()
            .map(|(k, v)| {
                tensor_from_proto(v)
                    .map(|t| (k.clone(), t))
                    .map_err(|e| e.context(format!("default of input '{k}'")))
            })
            .collect::<Result<BTreeMap<_, _>>>()?;
        Ok(Signature {
            method_name: p.method_name.clone(),
            inputs: specs(&p.inputs, "input")?,
            outputs: specs(&p.outputs, "output")?,
            defaults,
        })
    }

    /// TensorFlow's `SignatureDef` of this signature.
    pub fn to_proto(&self) -> SignatureDef {
        SignatureDef {
            inputs: self
                .inputs
                .iter()
                .map(|(k, v)| (k.clone(), v.to_proto()))
                .collect(),
            outputs: self
                .outputs
                .iter()
                .map(|(k, v)| (k.clone(), v.to_proto()))
                .collect(),
            method_name: self.method_name.clone(),
            defaults: self
                .defaults
                .iter()
                .map(|(k, v)| (k.clone(), tensor_to_proto(v)))
                .collect(),
        }
    }

    /// The session feeds for `inputs` given by input key, defaults filling the
    /// keys left out; checks keys, dtypes and shapes (`InvalidArgument`).
    pub fn feeds(&self, key: &str, inputs: &[(&str, Tensor)]) -> Result<Vec<(String, Tensor)>> {
        let mut feeds = Vec::with_capacity(self.inputs.len());
        let mut given = std::collections::BTreeSet::new();
        for (k, t) in inputs {
            let spec = self.inputs.get(*k).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "input key '{k}' is not in signature '{key}' (its inputs: {})",
                    super::list(self.inputs.keys())
                ))
            })?;
            if !given.insert(*k) {
                return Err(Status::invalid_argument(format!(
                    "input '{k}' of signature '{key}' is given twice"
                )));
            }
            if t.dtype() != spec.dtype {
                return Err(Status::invalid_argument(format!(
                    "input '{k}' of signature '{key}' expects {}, got {}",
                    spec.dtype.name(),
                    t.dtype().name()
                )));
            }
            if !spec.shape.is_compatible_with(t.shape()) {
                return Err(Status::invalid_argument(format!(
                    "input '{k}' of signature '{key}' expects shape {}, got {}",
                    spec.shape,
                    t.shape()
                )));
            }
            feeds.push((spec.name.clone(), t.clone()));
        }
        for (k, spec) in &self.inputs {
            if given.contains(k.as_str()) {
                continue;
            }
            match self.defaults.get(k) {
                Some(t) => feeds.push((spec.name.clone(), t.clone())),
                None => {
                    return Err(Status::invalid_argument(format!(
                        "input '{k}' of signature '{key}' is missing"
                    )))
                }
            }
        }
        Ok(feeds)
    }
}
