"""Writes the SavedModel fixtures of tests/saved_model.rs with TensorFlow 2.21.

    $ACTORFLOW_TF_PYTHON tests/tf_interop/make_saved_model_fixture.py tests/fixtures/saved_model

Three SavedModels, each with the inputs fed and the outputs TensorFlow computed
in expected.json:

- tf1_builder: tf.compat.v1.saved_model.Builder in graph mode, reference
  variables (VariableV2), two tag sets ("serve" with variables, "train" without),
  two signatures, an asset file whose path is a signature output, and a main_op
  that assigns a variable (so a loader that skips it gives another answer).
- tf2_module: tf.saved_model.save of a tf.Module whose tf.function reads and
  updates resource variables (StatefulPartitionedCall into the function library).
- tf2_keras: tf.saved_model.save of a small tf-keras (Keras 2) model (Dense,
  relu, softmax): needs `pip install --no-deps tf-keras==2.21.*`.
- keras3_export: the same model in Keras 3 (TensorFlow 2.21's `keras`), written
  by its `model.export()`, the SavedModel export Keras 3 supports.
- keras3_tf_save: Keras 3 through tf.saved_model.save, whose serving function
  reads variables its restore function never writes: TensorFlow's own graph
  loader (`tf.compat.v1.saved_model.load`, what TensorFlow Serving uses) fails
  on it with FAILED_PRECONDITION naming the variable, and so must actorflow
  (expected.json records TensorFlow's error).

The variables hold values their initializers do not give, so only a restore
from variables/ reproduces the outputs.
"""
import json
import os
import re
import shutil
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
out_root = sys.argv[1]
expected = {}


def fresh(name):
    path = os.path.join(out_root, name)
    shutil.rmtree(path, ignore_errors=True)
    return path


def tf1_builder():
    path = fresh("tf1_builder")
    g = tf1.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        w = tf1.Variable(tf.zeros([3, 2]), name="w", use_resource=False)
        b = tf1.Variable(tf.zeros([2]), name="b", use_resource=False)
        counter = tf1.Variable(1, name="counter", use_resource=False)
        label = tf1.Variable("", name="label", use_resource=False)
        y = tf.nn.relu(tf.matmul(x, w) + b, name="y")
        total = tf.reduce_sum(y, name="total")
        vocab = os.path.join(path + "_assets_src", "vocab.txt")
        os.makedirs(os.path.dirname(vocab), exist_ok=True)
        with open(vocab, "w") as f:
            f.write("alpha\nbeta\n")
        asset_path = tf.constant(vocab, name="asset_path")
        tf1.add_to_collection(tf1.GraphKeys.ASSET_FILEPATHS, asset_path)
        vocab_var = tf1.Variable("", name="vocab_path", use_resource=False)
        counter_out = tf.identity(counter, name="counter_value")
        label_out = tf.identity(label, name="label_value")
        # the main op runs with the asset tensor fed the asset's path in the
        # loaded model (what a table initializer reading a vocabulary sees)
        main_op = tf.group(tf1.assign(counter, 7), tf1.assign(vocab_var, asset_path),
                           name="main_op")
        vocab_out = tf.identity(vocab_var, name="vocab_file")
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run([
                tf1.assign(w, [[1.0, -2.0], [0.5, 3.0], [1.5, 0.25]]),
                tf1.assign(b, [0.125, -0.5]),
                tf1.assign(counter, 3),
                tf1.assign(label, "trained"),
            ])
            info = tf1.saved_model.utils.build_tensor_info
            predict = tf1.saved_model.signature_def_utils.build_signature_def(
                inputs={"x": info(x)},
                outputs={"y": info(y), "total": info(total)},
                method_name=tf1.saved_model.signature_constants.PREDICT_METHOD_NAME,
            )
            state = tf1.saved_model.signature_def_utils.build_signature_def(
                inputs={},
                outputs={"counter": info(counter_out), "label": info(label_out),
                         "vocab": info(vocab_out)},
                method_name=tf1.saved_model.signature_constants.PREDICT_METHOD_NAME,
            )
            builder = tf1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(
                sess, ["serve"],
                signature_def_map={"serving_default": predict, "state": state},
                assets_collection=tf1.get_collection(tf1.GraphKeys.ASSET_FILEPATHS),
                main_op=main_op,
            )
            builder.add_meta_graph(["train"], signature_def_map={"serving_default": predict})
            builder.save()
            xs = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], np.float32)
            yv, tv = sess.run([y, total], {x: xs})
    shutil.rmtree(path + "_assets_src")
    expected["tf1_builder"] = {
        "tags": ["serve"],
        "signature": "serving_default",
        "inputs": {"x": xs.tolist()},
        "outputs": {"y": yv.tolist(), "total": float(tv)},
        # after the main_op: counter assigned 7 (restored as 3 before it)
        "state": {"counter": 7, "label": "trained", "vocab_basename": "vocab.txt"},
    }


class Module(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(tf.zeros([3, 2]), name="w")
        self.b = tf.Variable(tf.zeros([2]), name="b")
        self.calls = tf.Variable(0, dtype=tf.int64, name="calls")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def __call__(self, x):
        self.calls.assign_add(1)
        return {"y": tf.nn.relu(tf.matmul(x, self.w) + self.b),
                "s": tf.reduce_sum(x, axis=1),
                "calls": self.calls.read_value()}


def tf2_module():
    path = fresh("tf2_module")
    m = Module()
    m.w.assign([[1.0, -2.0], [0.5, 3.0], [1.5, 0.25]])
    m.b.assign([0.125, -0.5])
    m.calls.assign(40)
    tf.saved_model.save(m, path, signatures=m.__call__)
    xs = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], np.float32)
    # loaded fresh, the first call sees calls == 41
    loaded = tf.saved_model.load(path)
    got = loaded.signatures["serving_default"](x=tf.constant(xs))
    expected["tf2_module"] = {
        "tags": ["serve"],
        "signature": "serving_default",
        "inputs": {"x": xs.tolist()},
        "outputs": {k: v.numpy().tolist() for k, v in got.items()},
    }


KERAS_INPUT = np.array([[0.5, -1.0, 2.0, 0.25], [1.5, 0.0, -0.5, 1.0]], np.float32)


def keras_model(keras):
    keras.utils.set_random_seed(7)
    inp = keras.Input((4,), name="features")
    h = keras.layers.Dense(5, activation="relu", name="hidden")(inp)
    o = keras.layers.Dense(3, activation="softmax", name="probs")(h)
    return keras.Model(inp, o)


def record_signature(name, path):
    """Records what TensorFlow 2's loader computes for KERAS_INPUT."""
    loaded = tf.saved_model.load(path)
    sig = loaded.signatures["serving_default"]
    (in_key,) = sig.structured_input_signature[1].keys()
    got = sig(**{in_key: tf.constant(KERAS_INPUT)})
    expected[name] = {
        "tags": ["serve"],
        "signature": "serving_default",
        "inputs": {in_key: KERAS_INPUT.tolist()},
        "outputs": {k: v.numpy().tolist() for k, v in got.items()},
    }


def tf2_keras():
    import tf_keras

    path = fresh("tf2_keras")
    tf.saved_model.save(keras_model(tf_keras), path)
    record_signature("tf2_keras", path)


def keras3_export():
    import keras

    path = fresh("keras3_export")
    keras_model(keras).export(path, verbose=False)
    record_signature("keras3_export", path)


def keras3_tf_save():
    import keras

    path = fresh("keras3_tf_save")
    tf.saved_model.save(keras_model(keras), path)
    g = tf1.Graph()
    with g.as_default(), tf1.Session(graph=g) as sess:
        mg = tf1.saved_model.load(sess, ["serve"], path)
        sig = mg.signature_def["serving_default"]
        feeds = {v.name: KERAS_INPUT for v in sig.inputs.values()}
        try:
            sess.run([v.name for v in sig.outputs.values()], feeds)
            error = None
        except tf.errors.OpError as e:
            missing = re.search(r"Could not find variable ([^ .]+(?:\.[^ .]+)*)\.", e.message)
            error = {"code": e.error_code, "variable": missing and missing.group(1)}
    assert error is not None, "TensorFlow's graph loader now serves this model"
    expected["keras3_tf_save"] = {"tags": ["serve"], "signature": "serving_default",
                                  "inputs": {k: KERAS_INPUT.tolist() for k in sig.inputs},
                                  "tensorflow_error": error}


tf1_builder()
tf2_module()
tf2_keras()
keras3_export()
keras3_tf_save()
with open(os.path.join(out_root, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
