"""TensorFlow Serving's own Python client against a model server, for
serving/tests/tf_serving_client.rs:

    serving_client.py TARGET MODEL INPUTS_JSON

TARGET is the gRPC address (host:port), MODEL the model's name, INPUTS_JSON an
object of nested lists, each a float32 input of the default signature
(`{"x": [[1.0, 2.0, 3.0]]}`). Calls the server as a tensorflow-serving-api 2.21
client does (the generated stubs of prediction_service_pb2_grpc and
model_service_pb2_grpc over grpc, tensors from tf.make_tensor_proto and back
through tf.make_ndarray) and prints one JSON object:

- predict: Predict on the default signature with every output: the response's
  model_spec (name, version, signature_name) and each output's dtype, shape and
  values (strings decoded as UTF-8);
- predict_filtered: the same with output_filter naming the first output only;
- metadata: GetModelMetadata(["signature_def"]): the model_spec, the Any's
  type_url, and per signature (unpacked into get_model_metadata_pb2's
  SignatureDefMap) its method_name and each input's and output's tensor name,
  dtype and shape (null for an unknown rank; -1 for an unknown dimension);
- status: GetModelStatus: each version's number, state name, error code and
  message;
- errors: the gRPC code name of Predict calls that must fail: an unknown model,
  an unknown input key, an int32 tensor for a float input, an unknown
  signature, and GetModelMetadata of an unsupported metadata field.

Run with the TensorFlow 2.21 Python (.ci/tf-python prints its path; it installs
tensorflow-serving-api there too).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import grpc  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow_serving.apis import (  # noqa: E402
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

TIMEOUT_S = 60.0


def plain(v):
    """A value of ndarray.tolist() as JSON holds it (bytes as UTF-8)."""
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def model_spec(spec):
    return {
        "name": spec.name,
        "version": spec.version.value if spec.HasField("version") else None,
        "signature_name": spec.signature_name,
    }


def tensor_info(info):
    shape = info.tensor_shape
    return {
        "name": info.name,
        "dtype": tf.dtypes.as_dtype(info.dtype).name,
        "shape": None if shape.unknown_rank else [d.size for d in shape.dim],
    }


def predict(stub, model, inputs, output_filter=(), signature=""):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = signature
    for k, v in inputs.items():
        req.inputs[k].CopyFrom(v)
    req.output_filter.extend(output_filter)
    return stub.Predict(req, timeout=TIMEOUT_S)


def predicted(resp):
    outputs = {}
    for k, p in resp.outputs.items():
        a = tf.make_ndarray(p)
        outputs[k] = {
            "dtype": tf.dtypes.as_dtype(p.dtype).name,
            "shape": list(a.shape),
            "values": plain(a.tolist()),
        }
    return {"model_spec": model_spec(resp.model_spec), "outputs": outputs}


def error_code(call):
    try:
        call()
    except grpc.RpcError as e:
        return e.code().name
    return "OK"


def main():
    target, model, inputs_json = sys.argv[1], sys.argv[2], sys.argv[3]
    inputs = {
        k: tf.make_tensor_proto(np.array(v, dtype=np.float32))
        for k, v in json.loads(inputs_json).items()
    }
    out = {}
    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        models = model_service_pb2_grpc.ModelServiceStub(channel)

        out["predict"] = predicted(predict(stub, model, inputs))
        first = sorted(out["predict"]["outputs"])[0]
        out["predict_filtered"] = predicted(predict(stub, model, inputs, [first]))

        req = get_model_metadata_pb2.GetModelMetadataRequest()
        req.model_spec.name = model
        req.metadata_field.append("signature_def")
        resp = stub.GetModelMetadata(req, timeout=TIMEOUT_S)
        sigs = get_model_metadata_pb2.SignatureDefMap()
        if not resp.metadata["signature_def"].Unpack(sigs):
            raise SystemExit("metadata['signature_def'] is not a SignatureDefMap")
        out["metadata"] = {
            "model_spec": model_spec(resp.model_spec),
            "type_url": resp.metadata["signature_def"].type_url,
            "signatures": {
                key: {
                    "method_name": s.method_name,
                    "inputs": {k: tensor_info(i) for k, i in s.inputs.items()},
                    "outputs": {k: tensor_info(i) for k, i in s.outputs.items()},
                }
                for key, s in sigs.signature_def.items()
            },
        }

        req = get_model_status_pb2.GetModelStatusRequest()
        req.model_spec.name = model
        resp = models.GetModelStatus(req, timeout=TIMEOUT_S)
        out["status"] = [
            {
                "version": s.version,
                "state": get_model_status_pb2.ModelVersionStatus.State.Name(s.state),
                "error_code": s.status.error_code,
                "error_message": s.status.error_message,
            }
            for s in resp.model_version_status
        ]

        key = sorted(inputs)[0]
        as_int = {
            key: tf.make_tensor_proto(
                tf.make_ndarray(inputs[key]).astype(np.int32)
            )
        }
        bad_field = get_model_metadata_pb2.GetModelMetadataRequest()
        bad_field.model_spec.name = model
        bad_field.metadata_field.append("tags")
        out["errors"] = {
            "unknown_model": error_code(lambda: predict(stub, model + "_nope", inputs)),
            "unknown_input": error_code(
                lambda: predict(stub, model, {key + "_nope": inputs[key]})
            ),
            "int32_input": error_code(lambda: predict(stub, model, as_int)),
            "unknown_signature": error_code(
                lambda: predict(stub, model, inputs, signature="nope")
            ),
            "metadata_field": error_code(
                lambda: stub.GetModelMetadata(bad_field, timeout=TIMEOUT_S)
            ),
        }
        # The server still answers after the errors.
        out["predict_after_errors"] = predicted(predict(stub, model, inputs))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
