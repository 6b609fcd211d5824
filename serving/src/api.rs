//! What the REST and gRPC front ends share: reading a request's `ModelSpec`,
//! building the responses both return (the response's `ModelSpec`,
//! `GetModelStatusResponse`, `GetModelMetadataResponse`), and turning a
//! [`graph::Status`] into a gRPC status.
//!
//! Each function fills its message as TensorFlow Serving does (the function of
//! TensorFlow Serving it follows is named on each), so both front ends answer
//! the same request with the same bytes and the same error messages.

use actors::saved_model::DEFAULT_SERVING_SIGNATURE_DEF_KEY;
use graph::{Code, Result, Status};
use prost::{Message, Name};
use proto::tensorflow::serving::{
    model_spec::VersionChoice, GetModelMetadataResponse, GetModelStatusResponse, ModelSpec,
    ModelVersionStatus, SignatureDefMap, StatusProto,
};

use crate::manager::{VersionRequest, VersionStatus};
use crate::servable::Servable;

/// The one metadata field TensorFlow Serving serves
/// (`GetModelMetadataImpl::kSignatureDef`).
pub const SIGNATURE_DEF_FIELD: &str = "signature_def";

/// The longest error message a gRPC status carries; longer ones are cut and end
/// in `...TRUNCATED` (TensorFlow Serving's `ToGRPCStatus`).
pub const GRPC_ERROR_MESSAGE_LIMIT: usize = 1024;

/// What a request's `ModelSpec` asks for: the model's name, which version, and
/// the signature as the request gave it (empty: the default signature, which
/// [`Servable::signature`] resolves).
///
/// A missing spec is `InvalidArgument` `Missing ModelSpec`, an empty name
/// `InvalidArgument` `ModelSpec has no name specified.` (TensorFlow Serving's
/// request handlers and `ServerCore::ServableRequestFromModelSpec`).
pub fn version_request(spec: Option<&ModelSpec>) -> Result<(String, VersionRequest, String)> {
    let spec = spec.ok_or_else(|| Status::invalid_argument("Missing ModelSpec"))?;
    if spec.name.is_empty() {
        return Err(Status::invalid_argument("ModelSpec has no name specified."));
    }
    let version = match &spec.version_choice {
        None => VersionRequest::Latest,
        Some(VersionChoice::Version(v)) => VersionRequest::Specific(*v),
        Some(VersionChoice::VersionLabel(l)) => VersionRequest::Label(l.clone()),
    };
    Ok((spec.name.clone(), version, spec.signature_name.clone()))
}

/// The `ModelSpec` of a response from `servable` run with signature
/// `signature`: its name, its version, and the signature's key (the default
/// one's when `signature` is empty), as TensorFlow Serving's `MakeModelSpec`
/// fills it for predict, classify, regress and multi-inference.
pub fn model_spec(servable: &Servable, signature: &str) -> ModelSpec {
    let id = servable.id();
    ModelSpec {
        name: id.name.clone(),
        version_choice: Some(VersionChoice::Version(id.version)),
        signature_name: if signature.is_empty() {
            DEFAULT_SERVING_SIGNATURE_DEF_KEY.to_owned()
        } else {
            signature.to_owned()
        },
    }
}

/// A `StatusProto` of `status`: its code and, unless it is OK, its message
/// (TensorFlow Serving's `ToStatusProto`).
pub fn status_proto(status: Option<&Status>) -> StatusProto {
    match status {
        None => StatusProto::default(),
        Some(s) => StatusProto {
            error_code: s.code() as i32,
            error_message: if s.code() == Code::Ok {
                String::new()
            } else {
                message_with_node(s)
            },
        },
    }
}

/// The `GetModelStatusResponse` for model `name` whose versions are
/// `statuses` (as [`Models::status`](crate::Models::status) lists them): one
/// `ModelVersionStatus` per version, in the given order, each with its state's
/// number and a `StatusProto` that is OK (code 0, no message) unless the
/// version failed to load, when it carries the load's error (TensorFlow
/// Serving's `GetModelStatusImpl`). The response itself does not repeat the
/// name.
pub fn status_response(name: &str, statuses: &[VersionStatus]) -> GetModelStatusResponse {
    tracing::trace!(model = name, versions = statuses.len(), "model status");
    GetModelStatusResponse {
        model_version_status: statuses
            .iter()
            .map(|s| ModelVersionStatus {
                version: s.version,
                state: s.state.code(),
                status: Some(status_proto(s.error.as_ref())),
            })
            .collect(),
    }
}

/// The `GetModelMetadataResponse` of `servable`: a `ModelSpec` with its name
/// and version (no signature), and `metadata["signature_def"]`, a
/// `google.protobuf.Any` holding a `tensorflow.serving.SignatureDefMap` of
/// every `SignatureDef` of the loaded meta graph — the `__saved_model_init_op`
/// one included — as TensorFlow Serving's `SavedModelGetSignatureDef` packs it.
pub fn metadata_response(servable: &Servable) -> GetModelMetadataResponse {
    let id = servable.id();
    let map = SignatureDefMap {
        signature_def: servable.model().meta_graph().signature_def.clone(),
    };
    let any = prost_types::Any {
        type_url: SignatureDefMap::type_url(),
        value: map.encode_to_vec(),
    };
    GetModelMetadataResponse {
        model_spec: Some(ModelSpec {
            name: id.name.clone(),
            version_choice: Some(VersionChoice::Version(id.version)),
            signature_name: String::new(),
        }),
        metadata: [(SIGNATURE_DEF_FIELD.to_owned(), any)]
            .into_iter()
            .collect(),
    }
}

/// The gRPC status of an error: the same canonical code (the numbers are the
/// same), and the message with the failing node in TensorFlow's
/// `[[{{node NAME}}]]` form, cut at [`GRPC_ERROR_MESSAGE_LIMIT`] bytes as
/// TensorFlow Serving's `ToGRPCStatus` cuts it. An error that says `OK` (which
/// no error should) is sent as `UNKNOWN`, so the client never takes it for a
/// success.
pub fn status_to_grpc(status: &Status) -> tonic::Status {
    let code = match status.code() {
        Code::Ok => tonic::Code::Unknown,
        c => tonic::Code::from_i32(c as i32),
    };
    let mut message = message_with_node(status);
    if message.len() > GRPC_ERROR_MESSAGE_LIMIT {
        let mut cut = GRPC_ERROR_MESSAGE_LIMIT;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str("...TRUNCATED");
    }
    tonic::Status::new(code, message)
}

/// The status's message as TensorFlow writes it: the node, if any, appended
/// as `[[{{node NAME}}]]`.
fn message_with_node(s: &Status) -> String {
    match s.node() {
        Some(n) if !s.message().contains("{{node ") => {
            format!("{}\n\t [[{{{{node {n}}}}}]]", s.message())
        }
        _ => s.message().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::VersionState;

    #[test]
    fn model_specs_are_read_as_tensorflow_serving_reads_them() {
        let e = version_request(None).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.message(), "Missing ModelSpec");
        let e = version_request(Some(&ModelSpec::default())).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.message(), "ModelSpec has no name specified.");
        let spec = |v: Option<VersionChoice>| ModelSpec {
            name: "m".into(),
            version_choice: v,
            signature_name: "sig".into(),
        };
        assert_eq!(
            version_request(Some(&spec(None))).unwrap(),
            ("m".into(), VersionRequest::Latest, "sig".into())
        );
        assert_eq!(
            version_request(Some(&spec(Some(VersionChoice::Version(3)))))
                .unwrap()
                .1,
            VersionRequest::Specific(3)
        );
        assert_eq!(
            version_request(Some(&spec(Some(VersionChoice::VersionLabel(
                "stable".into()
            )))))
            .unwrap()
            .1,
            VersionRequest::Label("stable".into())
        );
    }

    #[test]
    fn statuses_are_ok_unless_a_version_failed() {
        let r = status_response(
            "m",
            &[
                VersionStatus {
                    version: 1,
                    state: VersionState::End,
                    error: Some(Status::not_found("no saved_model.pb")),
                },
                VersionStatus {
                    version: 2,
                    state: VersionState::Available,
                    error: None,
                },
            ],
        );
        assert_eq!(r.model_version_status.len(), 2);
        let failed = &r.model_version_status[0];
        assert_eq!((failed.version, failed.state), (1, 50));
        let st = failed.status.as_ref().unwrap();
        assert_eq!(st.error_code, Code::NotFound as i32);
        assert_eq!(st.error_message, "no saved_model.pb");
        let ok = &r.model_version_status[1];
        assert_eq!((ok.version, ok.state), (2, 30));
        assert_eq!(ok.status, Some(StatusProto::default()));
    }

    #[test]
    fn grpc_statuses_keep_the_code_and_cut_long_messages() {
        let g = status_to_grpc(&Status::failed_precondition("x").with_node("a/b"));
        assert_eq!(g.code(), tonic::Code::FailedPrecondition);
        assert_eq!(g.message(), "x\n\t [[{{node a/b}}]]");
        let g = status_to_grpc(&Status::invalid_argument("é".repeat(600)));
        assert_eq!(g.code(), tonic::Code::InvalidArgument);
        assert!(g.message().ends_with("...TRUNCATED"));
        assert_eq!(g.message().len(), 1024 + "...TRUNCATED".len());
        assert_eq!(
            status_to_grpc(&Status::new(Code::Ok, "")).code(),
            tonic::Code::Unknown
        );
        for c in 1..=16 {
            let s = Status::new(Code::from_i32(c), "m");
            assert_eq!(status_to_grpc(&s).code() as i32, c);
        }
    }
}
