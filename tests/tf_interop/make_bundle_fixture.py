"""Writes the tensor bundle fixtures of kernels/tests/tf_bundle.rs, saved by
TensorFlow 2.21 itself:

- kernels/tests/fixtures/bundle/tf_basic.{index,data-00000-of-00001}: SaveV2 of
  whole tensors of every dtype, which the test reads back and rewrites byte for
  byte;
- kernels/tests/fixtures/bundle/tf_sliced.{index,data-00000-of-00001}: what
  tf.compat.v1.train.Saver saves (graph mode) for a variable partitioned into
  3 slices (fixed_size_partitioner(3)) and one not partitioned, and
  tf_sliced.json: the SaveV2 and RestoreV2 requests of that Saver's graph
  (names and shape_and_slices specs, in order), each variable's full value as
  TensorFlow's checkpoint reader assembles it, and some slices as RestoreV2
  reads them.

Run with the TensorFlow 2.21 Python (.ci/tf-python prints its path):
    $ACTORFLOW_TF_PYTHON tests/tf_interop/make_bundle_fixture.py
The tensors and their order are the test's `fixture_tensors`; change both
together.
"""

import json
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "kernels", "tests", "fixtures", "bundle")

# Deliberately unsorted: the data file keeps this order, the index sorts.
TENSORS = [
    ("w", tf.constant([[1.5, -2.0, 3.25], [0.0, 0.125, 7.0]], tf.float32)),
    ("global_step", tf.constant(42, tf.int64)),
    ("mask", tf.constant([True, False, True])),
    ("b16", tf.constant([1.5, -0.25], tf.bfloat16)),
    ("names", tf.constant([b"hello", b"", b"x" * 200])),
    ("h", tf.constant([0.5, -3.0], tf.float16)),
    ("empty", tf.zeros([0, 3], tf.float32)),
    ("no_strings", tf.constant([], tf.string)),
    ("u8", tf.constant([0, 1, 254, 255], tf.uint8)),
    ("i32", tf.constant([[1, -1], [2**31 - 1, -(2**31)]], tf.int32)),
    ("f64", tf.constant([3.5, -1e300], tf.float64)),
    ("layer/1/kernel", tf.constant([2.0], tf.float32)),
    ("layer/0/kernel", tf.constant([1.0], tf.float32)),
]

# Slices read back with RestoreV2 for the test to compare: within one stored
# slice, across two, the whole tensor, and of the variable saved whole.
SLICE_READS = [
    ("part", "10 4 0,4:0,4"),
    ("part", "10 4 2,5:1,2"),
    ("part", "10 4 -:-"),
    ("part", "10 4 9,1:3,1"),
    ("plain", "3 1,2"),
]


def basic():
    os.makedirs(OUT, exist_ok=True)
    prefix = os.path.join(OUT, "tf_basic")
    names = [n for n, _ in TENSORS]
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[t for _, t in TENSORS],
    )


def const_strings(graph, name):
    value = graph.get_operation_by_name(name).get_attr("value")
    return [s.decode() for s in tf.make_ndarray(value).tolist()]


def sliced():
    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        tf1.get_variable(
            "part",
            initializer=tf.constant(np.arange(40, dtype=np.float32).reshape(10, 4) - 8.5),
            partitioner=tf1.fixed_size_partitioner(3),
            use_resource=False,
        )
        tf1.get_variable(
            "plain",
            initializer=tf.constant([1.5, -2.0, 3.0], tf.float32),
            use_resource=False,
        )
        saver = tf1.train.Saver()
        with tf1.Session(graph=g) as sess:
            sess.run(tf1.global_variables_initializer())
            tmp = tempfile.mkdtemp()
            try:
                saved = saver.save(
                    sess,
                    os.path.join(tmp, "tf_sliced"),
                    write_meta_graph=False,
                    write_state=False,
                )
                for suffix in (".index", ".data-00000-of-00001"):
                    shutil.copy(saved + suffix, os.path.join(OUT, "tf_sliced" + suffix))
            finally:
                shutil.rmtree(tmp)
        record = {
            "save": {
                "tensor_names": const_strings(g, "save/SaveV2/tensor_names"),
                "shape_and_slices": const_strings(g, "save/SaveV2/shape_and_slices"),
            },
            "restore": {
                "tensor_names": const_strings(g, "save/RestoreV2/tensor_names"),
                "shape_and_slices": const_strings(g, "save/RestoreV2/shape_and_slices"),
            },
        }
    prefix = os.path.join(OUT, "tf_sliced")
    reader = tf.train.load_checkpoint(prefix)
    record["tensors"] = {
        name: {"shape": list(shape), "values": reader.get_tensor(name).ravel().tolist()}
        for name, shape in sorted(reader.get_variable_to_shape_map().items())
    }
    reads = []
    for name, spec in SLICE_READS:
        (value,) = tf.raw_ops.RestoreV2(
            prefix=prefix, tensor_names=[name], shape_and_slices=[spec], dtypes=[tf.float32]
        )
        reads.append(
            {
                "name": name,
                "spec": spec,
                "shape": value.shape.as_list(),
                "values": value.numpy().ravel().tolist(),
            }
        )
    record["slice_reads"] = reads
    with open(os.path.join(OUT, "tf_sliced.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


def main():
    basic()
    sliced()
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)))


if __name__ == "__main__":
    main()
