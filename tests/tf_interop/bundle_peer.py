"""TensorFlow's side of the tensor bundle interop test (tests/tf_interop.rs).

    bundle_peer.py IN_PREFIX OUT_PREFIX NAMES_FILE

Restores every tensor NAMES_FILE lists (one per line, in order) from the bundle
actorflow wrote at IN_PREFIX with TensorFlow's RestoreV2 (dtypes from
TensorFlow's own checkpoint reader), then saves them in that order with
SaveV2 at OUT_PREFIX, and prints "ok". The test compares the two bundles byte
for byte and reads TensorFlow's with actorflow's reader.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf


def main():
    src, dst, names_file = sys.argv[1:4]
    with open(names_file, encoding="utf-8") as f:
        names = [line.rstrip("\n") for line in f if line.strip()]
    dtypes = tf.train.load_checkpoint(src).get_variable_to_dtype_map()
    values = tf.raw_ops.RestoreV2(
        prefix=src,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        dtypes=[dtypes[n] for n in names],
    )
    tf.raw_ops.SaveV2(
        prefix=dst,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=values,
    )
    print("ok", flush=True)


if __name__ == "__main__":
    main()
