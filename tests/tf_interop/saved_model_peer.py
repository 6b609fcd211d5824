"""TensorFlow 2.21 reads what actorflow wrote (tests/saved_model.rs).

    saved_model_peer.py saved_model DIR TAG SIGNATURE INPUTS.json
        loads the SavedModel twice — TensorFlow 1's loader in a graph-mode
        session and TensorFlow 2's tf.saved_model.load — runs SIGNATURE on the
        inputs ({key: nested list}) with each, and prints one JSON line
        {"v1": {output key: value}, "v2": {...}}.
    saved_model_peer.py meta PREFIX FETCHES.json
        tf.compat.v1.train.import_meta_graph(PREFIX.meta), restores PREFIX with
        the Saver it returns, fetches the tensors named in FETCHES.json and
        prints {name: value}.
Values are lists (numbers) or strings (bytes decoded as UTF-8).
"""
import json
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def plain(v):
    v = np.asarray(v)
    if v.dtype.kind in "SO":
        return [x.decode() for x in v.reshape(-1)] if v.ndim else v.item().decode()
    return v.tolist()


def main():
    mode = sys.argv[1]
    if mode == "saved_model":
        export_dir, tag, key, inputs_path = sys.argv[2:6]
        with open(inputs_path) as f:
            inputs = json.load(f)
        result = {}
        g = tf1.Graph()
        with g.as_default(), tf1.Session(graph=g) as sess:
            mg = tf1.saved_model.load(sess, [tag], export_dir)
            sig = mg.signature_def[key]
            feeds = {sig.inputs[k].name: np.asarray(v, np.float32) for k, v in inputs.items()}
            names = sorted(sig.outputs)
            got = sess.run([sig.outputs[k].name for k in names], feeds)
            result["v1"] = {k: plain(v) for k, v in zip(names, got)}
        loaded = tf.saved_model.load(export_dir, tags=[tag])
        fn = loaded.signatures[key]
        got = fn(**{k: tf.constant(np.asarray(v, np.float32)) for k, v in inputs.items()})
        result["v2"] = {k: plain(v.numpy()) for k, v in got.items()}
        print(json.dumps(result))
    elif mode == "meta":
        prefix, fetches_path = sys.argv[2:4]
        with open(fetches_path) as f:
            fetches = json.load(f)
        g = tf1.Graph()
        with g.as_default(), tf1.Session(graph=g) as sess:
            saver = tf1.train.import_meta_graph(prefix + ".meta")
            saver.restore(sess, prefix)
            got = sess.run(fetches)
            print(json.dumps({n: plain(v) for n, v in zip(fetches, got)}))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
