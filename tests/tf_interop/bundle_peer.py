"""TensorFlow's side of the tensor bundle interop tests (tests/tf_interop.rs).

    bundle_peer.py IN_PREFIX OUT_PREFIX NAMES_FILE
    bundle_peer.py --slices IN_PREFIX OUT_PREFIX REQUESTS_JSON

The first form restores every tensor NAMES_FILE lists (one per line, in order)
from the bundle actorflow wrote at IN_PREFIX with TensorFlow's RestoreV2
(dtypes from TensorFlow's own checkpoint reader), then saves them in that order
with SaveV2 at OUT_PREFIX, and prints "ok". The test compares the two bundles
byte for byte and reads TensorFlow's with actorflow's reader.

The second form reads a bundle actorflow saved with slices (partitioned
tensors): REQUESTS_JSON is {"tensor_names": [...], "shape_and_slices": [...]},
the SaveV2 request actorflow made. It restores each of those slices with
RestoreV2 and saves them again with the same request at OUT_PREFIX (for the
test to compare bytes), then prints "ok" and, on the next line, one JSON object:
"tensors", every tensor TensorFlow's checkpoint reader lists, with its dtype,
shape and (numeric ones) values as the reader assembles it from the slices, and
"restored", the values of each slice RestoreV2 read.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf


def whole(src, dst, names_file):
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


def sliced(src, dst, requests_file):
    with open(requests_file, encoding="utf-8") as f:
        req = json.load(f)
    names, specs = req["tensor_names"], req["shape_and_slices"]
    reader = tf.train.load_checkpoint(src)
    dtypes = reader.get_variable_to_dtype_map()
    values = tf.raw_ops.RestoreV2(
        prefix=src,
        tensor_names=names,
        shape_and_slices=specs,
        dtypes=[dtypes[n] for n in names],
    )
    tf.raw_ops.SaveV2(prefix=dst, tensor_names=names, shape_and_slices=specs, tensors=values)

    def listed(value):
        flat = value.ravel().tolist()
        return [v.decode("utf-8") if isinstance(v, bytes) else v for v in flat]

    tensors = {}
    for name, shape in sorted(reader.get_variable_to_shape_map().items()):
        entry = {"dtype": dtypes[name].name, "shape": list(shape)}
        # TensorFlow's reader puts numeric tensors together from their slices;
        # it cannot do so for strings ("Dtype string not supported").
        if dtypes[name] != tf.string:
            entry["values"] = listed(reader.get_tensor(name))
        tensors[name] = entry
    restored = [listed(v.numpy()) for v in values]
    print("ok", flush=True)
    print(json.dumps({"tensors": tensors, "restored": restored}), flush=True)


def main():
    if sys.argv[1] == "--slices":
        sliced(*sys.argv[2:5])
    else:
        whole(*sys.argv[1:4])


if __name__ == "__main__":
    main()
