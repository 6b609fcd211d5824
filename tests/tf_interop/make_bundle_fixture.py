"""Writes kernels/tests/fixtures/bundle/tf_basic.{index,data-00000-of-00001}: a
tensor bundle (checkpoint V2) saved by TensorFlow's own SaveV2, which
kernels/tests/tf_bundle.rs reads and rewrites byte for byte.

Run with the TensorFlow 2.21 Python (.ci/tf-python prints its path):
    $ACTORFLOW_TF_PYTHON tests/tf_interop/make_bundle_fixture.py
The tensors and their order are the test's `fixture_tensors`; change both
together.
"""

import os

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


def main():
    os.makedirs(OUT, exist_ok=True)
    prefix = os.path.join(OUT, "tf_basic")
    names = [n for n, _ in TENSORS]
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[t for _, t in TENSORS],
    )
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)))


if __name__ == "__main__":
    main()
