//! [`NodeDef`] and [`GraphDef`]: the serialisable form of a graph, as in TensorFlow
//! (`node_def.proto`, `graph.proto`), and [`TensorId`], the parsed form of an input
//! string (`name`, `name:port`, `^name`).

use crate::AttrMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::attr_value::{get_attr, FromAttr};
use crate::{AttrValue, Result, Status};

/// One node: an op instance with its inputs, requested device and attributes.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct NodeDef {
    /// Unique name in the graph.
    pub name: String,
    /// The op's registered name (`AddV2`, `MatMul`, …).
    pub op: String,
    /// Inputs: `node`, `node:port` for data, `^node` for control, data first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input: Vec<String>,
    /// Requested device (full or partial spec), empty for any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub device: String,
    /// Attributes.
    #[serde(default, skip_serializing_if = "AttrMap::is_empty")]
    pub attr: AttrMap,
}

impl NodeDef {
    /// A node with this name and op, no inputs and no attributes.
    pub fn new(name: impl Into<String>, op: impl Into<String>) -> NodeDef {
        NodeDef {
            name: name.into(),
            op: op.into(),
            ..Default::default()
        }
    }

    /// Adds an input (builder style).
    pub fn with_input(mut self, input: impl Into<String>) -> NodeDef {
        self.input.push(input.into());
        self
    }

    /// Sets an attribute (builder style).
    pub fn with_attr(mut self, name: &str, v: impl Into<AttrValue>) -> NodeDef {
        self.attr.insert(name.to_owned(), v.into());
        self
    }

    /// Sets the device (builder style).
    pub fn with_device(mut self, device: impl Into<String>) -> NodeDef {
        self.device = device.into();
        self
    }

    /// Reads an attribute as `T`; errors name this node.
    pub fn get_attr<T: FromAttr>(&self, name: &str) -> Result<T> {
        get_attr(&self.attr, name).map_err(|e| e.with_node(&self.name))
    }

    /// Reads an attribute as `T`, or `default` when it is absent.
    pub fn get_attr_or<T: FromAttr>(&self, name: &str, default: T) -> Result<T> {
        if self.attr.contains_key(name) {
            self.get_attr(name)
        } else {
            Ok(default)
        }
    }

    /// The parsed inputs.
    pub fn parsed_inputs(&self) -> Result<Vec<TensorId<'_>>> {
        self.input
            .iter()
            .map(|s| TensorId::parse(s).map_err(|e| e.with_node(&self.name)))
            .collect()
    }

    /// The data inputs (those not starting with `^`).
    pub fn data_inputs(&self) -> impl Iterator<Item = &str> {
        self.input
            .iter()
            .map(String::as_str)
            .filter(|s| !s.starts_with('^'))
    }

    /// The names of control inputs (without the `^`).
    pub fn control_inputs(&self) -> impl Iterator<Item = &str> {
        self.input.iter().filter_map(|s| s.strip_prefix('^'))
    }
}

/// TensorFlow's version stamp of a `GraphDef`.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VersionDef {
    /// The version of the code that produced the graph.
    #[serde(default)]
    pub producer: i32,
    /// The oldest consumer version able to read it.
    #[serde(default)]
    pub min_consumer: i32,
}

/// A whole graph in serialisable form.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct GraphDef {
    /// The nodes, in any order.
    pub node: Vec<NodeDef>,
    /// Version stamp.
    #[serde(default)]
    pub versions: VersionDef,
}

impl GraphDef {
    /// Serialises to pretty JSON.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self)
            .map_err(|e| Status::invalid_argument(format!("cannot serialise GraphDef: {e}")))
    }

    /// Parses JSON.
    pub fn from_json(s: &str) -> Result<GraphDef> {
        serde_json::from_str(s).map_err(|e| {
            Status::invalid_argument(format!("malformed GraphDef JSON: {e}")).with_source(e)
        })
    }

    /// The node with this name.
    pub fn find(&self, name: &str) -> Option<&NodeDef> {
        self.node.iter().find(|n| n.name == name)
    }
}

/// Port of a control edge.
pub const CONTROL_PORT: i32 = -1;

/// A reference to a node output (`name:port`) or to a node as a control input
/// (`^name`, port [`CONTROL_PORT`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorId<'a> {
    /// The node's name.
    pub node: &'a str,
    /// The output index, or [`CONTROL_PORT`].
    pub port: i32,
}

impl<'a> TensorId<'a> {
    /// Parses `name`, `name:port` or `^name`.
    pub fn parse(s: &'a str) -> Result<TensorId<'a>> {
        if let Some(n) = s.strip_prefix('^') {
            if n.is_empty() || n.contains(':') {
                return Err(Status::invalid_argument(format!(
                    "malformed control input '{s}'"
                )));
            }
            return Ok(TensorId {
                node: n,
                port: CONTROL_PORT,
            });
        }
        match s.rsplit_once(':') {
            Some((n, p))
                if !n.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) =>
            {
                let port = p
                    .parse::<i32>()
                    .map_err(|_| Status::invalid_argument(format!("bad port in '{s}'")))?;
                Ok(TensorId { node: n, port })
            }
            None if !s.is_empty() => Ok(TensorId { node: s, port: 0 }),
            _ => Err(Status::invalid_argument(format!(
                "malformed tensor name '{s}'"
            ))),
        }
    }

    /// True for a control reference.
    pub fn is_control(&self) -> bool {
        self.port == CONTROL_PORT
    }
}

impl fmt::Display for TensorId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_control() {
            write!(f, "^{}", self.node)
        } else {
            write!(f, "{}:{}", self.node, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn parses_tensor_names() {
        assert_eq!(
            TensorId::parse("a").unwrap(),
            TensorId { node: "a", port: 0 }
        );
        assert_eq!(
            TensorId::parse("a/b:3").unwrap(),
            TensorId {
                node: "a/b",
                port: 3
            }
        );
        assert_eq!(TensorId::parse("^c").unwrap().port, CONTROL_PORT);
        for bad in ["", ":1", "^", "^a:1", "a:", "x:y"] {
            assert!(TensorId::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(TensorId::parse("n:2").unwrap().to_string(), "n:2");
    }

    #[test]
    fn graph_def_json_round_trip() {
        let g = GraphDef {
            node: vec![
                NodeDef::new("x", "Placeholder").with_attr("dtype", DType::F32),
                NodeDef::new("y", "Identity")
                    .with_input("x")
                    .with_input("^x")
                    .with_attr("T", DType::F32)
                    .with_device("/device:CPU:0"),
            ],
            versions: VersionDef::default(),
        };
        let j = g.to_json().unwrap();
        assert_eq!(GraphDef::from_json(&j).unwrap(), g);
        assert!(GraphDef::from_json("{").is_err());
        let y = g.find("y").unwrap();
        assert_eq!(y.data_inputs().collect::<Vec<_>>(), vec!["x"]);
        assert_eq!(y.control_inputs().collect::<Vec<_>>(), vec!["x"]);
        assert_eq!(y.get_attr::<DType>("T").unwrap(), DType::F32);
        assert_eq!(y.get_attr::<i64>("T").unwrap_err().node(), Some("y"));
    }
}
