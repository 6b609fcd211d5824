"""Prints the bytes TensorFlow Serving's own Python messages (the
tensorflow-serving-api package) give for two messages, as hex, for the
interop checks of proto/src/tests.rs (`serving_*_bytes_are_tf_servings`):

- predict_request: the PredictRequest a tensorflow-serving-api client sends
  for model "m", version 3, signature "serving_default", with one input "x",
  tf.make_tensor_proto([[1.0, 2.0]]) (a 1x2 float tensor in tensor_content);
- model_server_config: MODEL_CONFIG (the same text as the test's
  SERVING_MODEL_CONFIG) parsed by protobuf's text_format into TF Serving's
  ModelServerConfig and serialized deterministically (map keys sorted, as
  actorflow's BTreeMaps encode them).

Run with the TensorFlow 2.21 Python (.ci/tf-python prints its path), with
tensorflow-serving-api installed beside TensorFlow (it needs nothing else but
grpcio, which TensorFlow already pulls in):
    $ACTORFLOW_TF_PYTHON -m pip install --no-deps 'tensorflow-serving-api==2.21.*'
    $ACTORFLOW_TF_PYTHON tests/tf_interop/make_serving_proto_bytes.py
and paste the two hex strings into the test (PREDICT_REQUEST_HEX,
MODEL_SERVER_CONFIG_HEX). Change MODEL_CONFIG and the test's text together.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.config import model_server_config_pb2

MODEL_CONFIG = """\
# Two models, as in TensorFlow Serving's model config files.
model_config_list {
  config {
    name: 'resnet'
    base_path: '/models/resnet'
    model_platform: 'tensorflow'
    model_version_policy {
      specific {
        versions: 1
        versions: 2
      }
    }
    version_labels {
      key: 'stable'
      value: 1
    }
    version_labels {
      key: 'canary'
      value: 2
    }
  }
  config {
    name: 'half_plus_two'
    base_path: '/models/half_plus_two'
    model_platform: "tensorflow"
    model_version_policy {
      latest {
        num_versions: 2
      }
    }
  }
}
"""


def predict_request():
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    request.model_spec.version.value = 3
    request.model_spec.signature_name = "serving_default"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto([[1.0, 2.0]]))
    return request


def main():
    request = predict_request()
    print("predict_request:", request.SerializeToString(deterministic=True).hex())
    config = text_format.Parse(MODEL_CONFIG, model_server_config_pb2.ModelServerConfig())
    print("model_server_config:", config.SerializeToString(deterministic=True).hex())


if __name__ == "__main__":
    main()
