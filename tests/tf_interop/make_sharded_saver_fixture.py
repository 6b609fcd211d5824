"""Writes tests/fixtures/saver/sharded.pbtxt and sharded.json: the graph that
TensorFlow 2.21's tf.compat.v1.train.Saver(sharded=True) builds for two
variables on two CPU devices (two shards: ShardedFilename, StringJoin,
StaticRegexFullMatch, Select, SaveV2 per device, MergeV2Checkpoints, and the
RestoreV2/Assign restore), and the SaverDef names. tests/sharded_saver.rs runs
it in actorflow.

Run with the TensorFlow 2.21 Python (.ci/tf-python prints its path):
    $ACTORFLOW_TF_PYTHON tests/tf_interop/make_sharded_saver_fixture.py
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "saver")


def main():
    tf.compat.v1.disable_eager_execution()
    g = tf.Graph()
    with g.as_default():
        with tf.device("/device:CPU:0"):
            a = tf.compat.v1.Variable([1.0, 2.0, 3.0], name="a", use_resource=False)
        with tf.device("/device:CPU:1"):
            b = tf.compat.v1.Variable([[7, 8], [9, 10]], dtype=tf.int64, name="b", use_resource=False)
        init = tf.compat.v1.global_variables_initializer()
        saver = tf.compat.v1.train.Saver(sharded=True)
        sd = saver.saver_def
    os.makedirs(OUT, exist_ok=True)
    tf.io.write_graph(g.as_graph_def(), OUT, "sharded.pbtxt", as_text=True)
    with open(os.path.join(OUT, "sharded.json"), "w") as f:
        json.dump(
            {
                "filename_tensor_name": sd.filename_tensor_name,
                "save_tensor_name": sd.save_tensor_name,
                "restore_op_name": sd.restore_op_name,
                "init_op_name": init.name,
                "variables": {"a": a.name, "b": b.name},
                "sharded": sd.sharded,
            },
            f,
            indent=1,
            sort_keys=True,
        )
        f.write("\n")
    print(sorted(n.op for n in g.as_graph_def().node if n.name.startswith("save")))


if __name__ == "__main__":
    main()
