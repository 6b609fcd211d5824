use super::*;
use crate::{AttrValue, DType, NodeDef, Shape};

fn concat() -> OpDef {
    OpDef::build("ConcatV2")
        .input("values: N * T")
        .input("axis: Tidx")
        .output("output: T")
        .attr("N: int >= 2")
        .attr("T: type")
        .attr("Tidx: {int32, int64} = DT_INT32")
        .finish()
        .unwrap()
}

#[test]
fn parses_specs() {
    let a = parse::parse_attr("padding: {'SAME', 'VALID'} = 'VALID'").unwrap();
    assert_eq!(a.ty, AttrType::String);
    assert_eq!(a.allowed_strings.as_ref().unwrap().len(), 2);
    assert_eq!(a.default, Some(AttrValue::S("VALID".into())));
    let a = parse::parse_attr("shape: shape = { unknown_rank: true }").unwrap();
    assert_eq!(a.default, Some(AttrValue::Shape(Shape::unknown())));
    let a = parse::parse_attr("dims: list(int) >= 1 = [1, 2]").unwrap();
    assert_eq!(a.minimum, Some(1));
    assert_eq!(a.default, Some(AttrValue::from(vec![1i64, 2])));
    let a = parse::parse_attr("T: numbertype").unwrap();
    assert!(a.allowed_types.unwrap().contains(&DType::F32));
    let r = parse::parse_arg("ref: Ref(T)").unwrap();
    assert!(r.is_ref);
    assert!(parse::parse_arg("nocolon").is_err());
    assert!(parse::parse_attr("x: bogus").is_err());
}

#[test]
fn finish_checks_consistency() {
    let e = OpDef::build("Bad").input("x: T").finish().unwrap_err();
    assert!(e.message().contains("undefined attr 'T'"), "{e}");
    let e = OpDef::build("Bad2")
        .input("x: N * T")
        .attr("N: type")
        .attr("T: type")
        .finish()
        .unwrap_err();
    assert!(e.message().contains("needs int"), "{e}");
    // A single argument named by a list(type) attr is a type list.
    let d = OpDef::build("Tuple")
        .input("components: Tcomponents")
        .attr("Tcomponents: list(type) >= 1")
        .finish()
        .unwrap();
    assert_eq!(d.inputs[0].ty, ArgType::TypeList("Tcomponents".into()));
}

#[test]
fn validates_nodes_and_resolves_types() {
    let d = concat();
    let mut n = NodeDef::new("c", "ConcatV2")
        .with_input("a")
        .with_input("b")
        .with_input("axis")
        .with_input("^ctl")
        .with_attr("N", 2i64)
        .with_attr("T", DType::F32)
        .with_attr("_class", vec!["loc:@a".to_string()]);
    let sig = d.validate(&mut n).unwrap();
    assert_eq!(sig.inputs.len(), 3);
    assert_eq!(sig.inputs[2].dtype, DType::I32);
    assert_eq!(n.attr["Tidx"], AttrValue::Type(DType::I32));
    assert_eq!(d.input_range(&n.attr, "axis").unwrap(), 2..3);

    let mut wrong_count = n.clone();
    wrong_count.input.remove(0);
    let e = d.validate(&mut wrong_count).unwrap_err();
    assert!(e.message().contains("expects 3 data inputs"), "{e}");
    assert_eq!(e.node(), Some("c"));

    let mut bad_type = n.clone().with_attr("Tidx", DType::F32);
    let e = d.validate(&mut bad_type).unwrap_err();
    assert!(
        e.message().contains("not in the list of allowed values"),
        "{e}"
    );

    let mut too_few = n.clone().with_attr("N", 1i64);
    too_few.input.remove(0);
    assert!(d
        .validate(&mut too_few)
        .unwrap_err()
        .message()
        .contains("minimum"));

    let mut missing = NodeDef::new("c", "ConcatV2").with_input("a");
    assert!(d
        .validate(&mut missing)
        .unwrap_err()
        .message()
        .contains("missing required attr 'N'"));

    let mut unknown = n.clone().with_attr("bogus", 1i64);
    assert!(d
        .validate(&mut unknown)
        .unwrap_err()
        .message()
        .contains("no attr named 'bogus'"));

    let mut wrong_kind = n.clone().with_attr("N", DType::F32);
    assert!(d
        .validate(&mut wrong_kind)
        .unwrap_err()
        .message()
        .contains("kind type, expected int"));

    let mut ctl_first = n.clone();
    ctl_first.input.swap(0, 3);
    assert!(d.validate(&mut ctl_first).is_err());
}

/// Counts of 2^31 … 2^62 used to reach `SmallVec::extend` (a capacity-overflow
/// panic or an allocation abort); now they are `InvalidArgument` naming the node,
/// before anything is sized by them.
#[test]
fn huge_counts_are_refused_before_allocating() {
    let split = OpDef::build("Split")
        .input("split_dim: int32")
        .input("value: T")
        .output("output: num_split * T")
        .attr("num_split: int >= 1")
        .attr("T: type")
        .finish()
        .unwrap();
    for shift in [31u32, 40, 62] {
        let huge = 1i64 << shift;
        let mut n = NodeDef::new("s", "Split")
            .with_input("d")
            .with_input("v")
            .with_attr("num_split", huge)
            .with_attr("T", DType::F32);
        let e = split.validate(&mut n).unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument, "{e}");
        assert_eq!(e.node(), Some("s"));
        assert!(e.message().contains("more than"), "{e}");
        assert!(split.signature(&n.attr).is_err());
        assert!(split.output_range(&n.attr, "output").is_err());

        // An input count must match the node's inputs, whatever it claims.
        let mut c = NodeDef::new("c", "ConcatV2")
            .with_input("a")
            .with_input("b")
            .with_input("axis")
            .with_attr("N", huge)
            .with_attr("T", DType::F32);
        let e = concat().validate(&mut c).unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument, "{e}");
        assert_eq!(e.node(), Some("c"));
    }
    let mut neg = NodeDef::new("s", "Split")
        .with_input("d")
        .with_input("v")
        .with_attr("num_split", -1i64)
        .with_attr("T", DType::F32);
    assert!(split.validate(&mut neg).is_err());
    let mut most = NodeDef::new("s", "Split")
        .with_input("d")
        .with_input("v")
        .with_attr("num_split", MAX_ARITY as i64)
        .with_attr("T", DType::F32);
    assert_eq!(split.validate(&mut most).unwrap().outputs.len(), MAX_ARITY);
}
