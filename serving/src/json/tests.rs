//! Expectations computed by hand from TensorFlow Serving's sources and its
//! `json_tensor_test.cc`, `http_rest_api_handler_test.cc` and REST API
//! documentation examples: the error, status and metadata bodies, and the
//! helpers the tests of the other modules share. Each module's own tests sit
//! beside it.

use std::collections::BTreeMap;

use graph::{DType, Tensor};

use super::*;

/// A response body as text.
pub(super) fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

/// Output tensors by key.
pub(super) fn outputs(list: Vec<(&str, Tensor)>) -> BTreeMap<String, Tensor> {
    list.into_iter().map(|(k, t)| (k.to_owned(), t)).collect()
}

#[test]
fn error_bodies() {
    // json_tensor_test.cc's MakeJsonFromTensors.StatusError.
    assert_eq!(
        text(error_body("Bad key: \"key\"")),
        "{\n    \"error\": \"Bad key: \\\"key\\\"\"\n}"
    );
    assert_eq!(
        text(error_body("tab\there \u{1}")),
        "{\n    \"error\": \"tab\\there \\u0001\"\n}"
    );
}

// --- Status and metadata.

#[test]
fn status_json_matches_tensorflow_servings_printer() {
    let response = pb::GetModelStatusResponse {
        model_version_status: vec![
            pb::ModelVersionStatus {
                version: 123,
                state: 30,
                status: Some(pb::StatusProto::default()),
            },
            pb::ModelVersionStatus {
                version: 124,
                state: 50,
                status: Some(pb::StatusProto {
                    error_code: 5,
                    error_message: "not <found>\n".to_owned(),
                }),
            },
        ],
    };
    assert_eq!(
        text(status_json(&response).unwrap()),
        r#"{
 "model_version_status": [
  {
   "version": "123",
   "state": "AVAILABLE",
   "status": {
    "error_code": "OK",
    "error_message": ""
   }
  },
  {
   "version": "124",
   "state": "END",
   "status": {
    "error_code": "NOT_FOUND",
    "error_message": "not \u003cfound\u003e\n"
   }
  }
 ]
}
"#
    );
    assert_eq!(
        text(status_json(&pb::GetModelStatusResponse::default()).unwrap()),
        "{\n \"model_version_status\": []\n}\n"
    );
}

#[test]
fn metadata_json_is_joined_as_tensorflow_serving_joins_it() {
    use graph::proto::tf::{
        tensor_info, tensor_shape_proto, SignatureDef, TensorInfo, TensorShapeProto,
    };
    use prost::{Message, Name};
    let dim = |size| tensor_shape_proto::Dim {
        size,
        name: String::new(),
    };
    let sig = SignatureDef {
        inputs: [(
            "x".to_owned(),
            TensorInfo {
                encoding: Some(tensor_info::Encoding::Name("x:0".to_owned())),
                dtype: DType::F32.tf_enum(),
                tensor_shape: Some(TensorShapeProto {
                    dim: vec![dim(-1), dim(3)],
                    unknown_rank: false,
                }),
            },
        )]
        .into_iter()
        .collect(),
        method_name: "tensorflow/serving/predict".to_owned(),
        ..SignatureDef::default()
    };
    let map = pb::SignatureDefMap {
        signature_def: [("serving_default".to_owned(), sig)].into_iter().collect(),
    };
    let response = pb::GetModelMetadataResponse {
        model_spec: Some(pb::ModelSpec {
            name: "m".to_owned(),
            version_choice: Some(pb::model_spec::VersionChoice::Version(1)),
            signature_name: String::new(),
        }),
        metadata: [(
            "signature_def".to_owned(),
            prost_types::Any {
                type_url: pb::SignatureDefMap::type_url(),
                value: map.encode_to_vec(),
            },
        )]
        .into_iter()
        .collect(),
    };
    assert_eq!(
        text(metadata_json(&response).unwrap()),
        r#"{
"model_spec":{
 "name": "m",
 "version": "1",
 "signature_name": ""
}
,
"metadata": {"signature_def": {
 "signature_def": {
  "serving_default": {
   "inputs": {
    "x": {
     "name": "x:0",
     "dtype": "DT_FLOAT",
     "tensor_shape": {
      "dim": [
       {
        "size": "-1",
        "name": ""
       },
       {
        "size": "3",
        "name": ""
       }
      ],
      "unknown_rank": false
     }
    }
   },
   "outputs": {},
   "method_name": "tensorflow/serving/predict",
   "defaults": {}
  }
 }
}
}
}
"#
    );
    let e = metadata_json(&pb::GetModelMetadataResponse::default()).unwrap_err();
    assert_eq!(e.code(), graph::Code::Internal);
}
