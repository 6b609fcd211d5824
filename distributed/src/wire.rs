//! How statuses and tensors travel: TensorFlow's conventions, so a TensorFlow
//! peer reads what we send and we read what it sends.
//!
//! - A status crosses as its canonical code and a message; the node it names rides
//!   in the message as TensorFlow writes it (`… [[{{node NAME}}]]`) and is parsed
//!   back on receipt.
//! - `RunStep`/`RunGraph` errors travel in the response body
//!   (`store_errors_in_response_body`); other RPCs' errors are gRPC statuses, whose
//!   codes are the same numbers.
//! - A transport failure (connection refused, reset, the peer gone) is
//!   `Unavailable` naming the peer, which is what makes a master fail the step
//!   rather than wait.
//! - Graph optimizations travel as TensorFlow's `GraphOptions.optimizer_options`,
//!   with TensorFlow's reading: level L1 (the proto's default) turns constant
//!   folding and CSE on whatever the flags say, and a zero size limit is the
//!   default one; `GraphOptions.rewrite_options.remapping` switches the remapper
//!   (off also when `disable_meta_optimizer` turns every grappler pass off).

use graph::passes::optimize::{OptLevel, OptimizerOptions, RewriterConfig, Toggle};
use graph::passes::partition::PartitionOptions;
use graph::{Code, Status, Tensor};
use proto::tensorflow::{self as pb, NamedTensorProto, TensorProto};

/// The status's message as it travels: the node, if any, in TensorFlow's
/// `[[{{node NAME}}]]` form.
pub fn message_of(s: &Status) -> String {
    match s.node() {
        Some(n) if !s.message().contains("{{node ") => {
            format!("{}\n\t [[{{{{node {n}}}}}]]", s.message())
        }
        _ => s.message().to_owned(),
    }
}

/// A status from its wire form (code number and message).
pub fn status_from_wire(code: i32, message: &str) -> Status {
    let code = if code == 0 {
        Code::Unknown
    } else {
        Code::from_i32(code)
    };
    let node = message.find("{{node ").and_then(|i| {
        let rest = &message[i + 7..];
        rest.find("}}").map(|j| rest[..j].to_owned())
    });
    let st = Status::new(code, message.to_owned());
    match node {
        Some(n) => st.with_node(n),
        None => st,
    }
}

/// The gRPC status of an error.
pub fn to_grpc(s: &Status) -> tonic::Status {
    tonic::Status::new(tonic::Code::from_i32(s.code() as i32), message_of(s))
}

/// The error a failed RPC to `peer` gives: its status, or `Unavailable` naming the
/// peer when the transport failed.
pub fn from_grpc(s: &tonic::Status, peer: &str) -> Status {
    // A status the transport made (the connection failed or was reset), not one
    // the peer sent, carries its cause.
    if std::error::Error::source(s).is_some() {
        return Status::unavailable(format!("{peer} is unreachable: {}", s.message()));
    }
    match s.code() {
        tonic::Code::Ok => Status::unknown(format!("{peer} answered an error with code OK")),
        tonic::Code::Unavailable | tonic::Code::Unknown if s.message().is_empty() => {
            Status::unavailable(format!("{peer} is unreachable"))
        }
        tonic::Code::Unavailable => Status::unavailable(format!("{peer}: {}", s.message())),
        c => status_from_wire(c as i32, s.message()),
    }
}

/// A tensor by name, for a request or a response.
pub fn named(name: &str, t: &Tensor) -> NamedTensorProto {
    NamedTensorProto {
        name: name.to_owned(),
        tensor: Some(graph::import::tensor_to_content_proto(t)),
    }
}

/// The tensor a peer sent under `name`; a malformed one is `InvalidArgument`
/// naming it.
pub fn tensor_of(p: Option<&TensorProto>, name: &str) -> graph::Result<Tensor> {
    let p =
        p.ok_or_else(|| Status::invalid_argument(format!("no tensor was sent for '{name}'")))?;
    graph::import::tensor_from_proto_limited(p, usize::MAX)
        .map_err(|e| e.context(format!("tensor '{name}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_with_their_node() {
        let s = Status::invalid_argument("bad shape").with_node("layer/mul");
        let back = status_from_wire(s.code() as i32, &message_of(&s));
        assert_eq!(back.code(), Code::InvalidArgument);
        assert_eq!(back.node(), Some("layer/mul"));
        assert!(back.message().starts_with("bad shape"));
        let g = to_grpc(&Status::not_found("x"));
        assert_eq!(g.code(), tonic::Code::NotFound);
        let e = from_grpc(&tonic::Status::unavailable(""), "/job:w/replica:0/task:1");
        assert_eq!(e.code(), Code::Unavailable);
        assert!(e.message().contains("task:1"));
    }

    #[test]
    fn tensors_round_trip() {
        let t = Tensor::vector(&[1.0f32, 2.0, 3.0]);
        let n = named("x:0", &t);
        assert_eq!(tensor_of(n.tensor.as_ref(), "x:0").unwrap(), t);
        // Numbers travel in tensor_content as TensorFlow's peers send them, even a
        // uniform tensor (no scan for a splat, no single float_val).
        let ones = Tensor::vector(&[1.0f32; 1000]);
        let p = named("ones", &ones).tensor.unwrap();
        assert_eq!(p.tensor_content.len(), 4000);
        assert!(p.float_val.is_empty());
        assert_eq!(tensor_of(Some(&p), "ones").unwrap(), ones);
        let s = Tensor::from_strings(&[2], vec!["a", "bc"]).unwrap();
        assert_eq!(tensor_of(named("s", &s).tensor.as_ref(), "s").unwrap(), s);
        assert_eq!(
            tensor_of(None, "y").unwrap_err().code(),
            Code::InvalidArgument
        );
    }
}

/// The optimizer options a client's `ConfigProto.graph_options` ask for; see the
/// module docs. No `graph_options` reads as the proto's defaults: level L1.
pub fn optimizer_options_from_proto(config: &pb::ConfigProto) -> OptimizerOptions {
    let o = config
        .graph_options
        .as_ref()
        .and_then(|g| g.optimizer_options)
        .unwrap_or_default();
    OptimizerOptions::default()
        .with_do_common_subexpression_elimination(o.do_common_subexpression_elimination)
        .with_do_constant_folding(o.do_constant_folding)
        .with_max_folded_constant_in_bytes(
            usize::try_from(o.max_folded_constant_in_bytes).unwrap_or(0),
        )
        .with_opt_level(if o.opt_level >= pb::optimizer_options::Level::L1 as i32 {
            OptLevel::L1
        } else {
            OptLevel::L0
        })
}

/// The grappler rewrites a client's `ConfigProto.graph_options.rewrite_options`
/// ask for; see the module docs.
pub fn rewriter_config_from_proto(config: &pb::ConfigProto) -> RewriterConfig {
    let r = config
        .graph_options
        .as_ref()
        .and_then(|g| g.rewrite_options.clone())
        .unwrap_or_default();
    if r.disable_meta_optimizer {
        return RewriterConfig::disabled();
    }
    RewriterConfig::default().with_remapping(Toggle::from_proto(r.remapping))
}

/// `options` and `rewriter` as the `GraphOptions` a master reads back with
/// [`optimizer_options_from_proto`] and [`rewriter_config_from_proto`].
pub fn graph_options_of(options: &OptimizerOptions, rewriter: &RewriterConfig) -> pb::GraphOptions {
    pb::GraphOptions {
        rewrite_options: Some(pb::RewriterConfig {
            remapping: rewriter.remapping.to_proto(),
            ..Default::default()
        }),
        optimizer_options: Some(pb::OptimizerOptions {
            do_common_subexpression_elimination: options.do_common_subexpression_elimination,
            do_constant_folding: options.do_constant_folding,
            max_folded_constant_in_bytes: i64::try_from(options.max_folded_constant_in_bytes)
                .unwrap_or(i64::MAX),
            opt_level: match options.opt_level {
                OptLevel::L1 => pb::optimizer_options::Level::L1 as i32,
                OptLevel::L0 => pb::optimizer_options::Level::L0 as i32,
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The partitioning options `GraphOptions` ask for (`enable_bfloat16_sendrecv`,
/// `enable_recv_scheduling`); none: the defaults, both off.
pub fn partition_options_from_proto(g: Option<&pb::GraphOptions>) -> PartitionOptions {
    g.map_or_else(PartitionOptions::default, |g| PartitionOptions {
        bfloat16_transfers: g.enable_bfloat16_sendrecv,
        recv_scheduling: g.enable_recv_scheduling,
    })
}

/// `partition` as the `GraphOptions` fields [`partition_options_from_proto`]
/// reads back, every other field at its default.
pub fn graph_options_of_partition(partition: &PartitionOptions) -> pb::GraphOptions {
    pb::GraphOptions {
        enable_bfloat16_sendrecv: partition.bfloat16_transfers,
        enable_recv_scheduling: partition.recv_scheduling,
        ..Default::default()
    }
}

#[cfg(test)]
mod optimizer_tests {
    use super::*;

    #[test]
    fn optimizer_options_read_as_tensorflow_reads_them() {
        // No graph_options, or all defaults: L1, both passes on.
        let none = optimizer_options_from_proto(&pb::ConfigProto::default());
        assert!(none.cse_enabled() && none.folding_enabled());
        assert_eq!(none.max_folded_bytes(), 10 << 20);
        // L0 with only folding.
        let config = |o: &OptimizerOptions| pb::ConfigProto {
            graph_options: Some(graph_options_of(o, &RewriterConfig::default())),
            ..Default::default()
        };
        let o = optimizer_options_from_proto(&config(
            &OptimizerOptions::disabled()
                .with_do_constant_folding(true)
                .with_max_folded_constant_in_bytes(1024),
        ));
        assert!(!o.cse_enabled() && o.folding_enabled());
        assert_eq!(o.max_folded_bytes(), 1024);
        assert!(optimizer_options_from_proto(&config(&OptimizerOptions::disabled())).is_disabled());
    }

    #[test]
    fn remapping_reads_as_tensorflow_reads_it() {
        // Absent, DEFAULT or ON: on; OFF, or the meta-optimizer off: off.
        assert!(rewriter_config_from_proto(&pb::ConfigProto::default()).remapping_enabled());
        let with = |r: pb::RewriterConfig| {
            rewriter_config_from_proto(&pb::ConfigProto {
                graph_options: Some(pb::GraphOptions {
                    rewrite_options: Some(r),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        assert!(with(pb::RewriterConfig::default()).remapping_enabled());
        assert!(with(pb::RewriterConfig {
            remapping: 1,
            ..Default::default()
        })
        .remapping_enabled());
        assert!(!with(pb::RewriterConfig {
            remapping: 2,
            ..Default::default()
        })
        .remapping_enabled());
        assert!(!with(pb::RewriterConfig {
            disable_meta_optimizer: true,
            ..Default::default()
        })
        .remapping_enabled());
        // Written and read back.
        let off = RewriterConfig::default().with_remapping(Toggle::Off);
        let c = pb::ConfigProto {
            graph_options: Some(graph_options_of(&OptimizerOptions::default(), &off)),
            ..Default::default()
        };
        assert_eq!(rewriter_config_from_proto(&c), off);
    }
}
