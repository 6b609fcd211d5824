"""Writes tests/fixtures/functions/nested.pbtxt (and .pb, the same graph in
binary) and nested.json: the graph of a TensorFlow 2.21 concrete function that
calls a nested tf.function, which reads and updates a tf.Variable and calls a
third, pure one; and the input, TensorFlow's outputs and the variable's value
before and after one call. tests/functions.rs imports the graph (its library
and its StatefulPartitionedCall / PartitionedCall nodes are inlined), runs it in
actorflow and compares.

The function's graph reads the variable through a captured resource
placeholder; the JSON names it, with the variable's initial value, so that the
test can stand a variable in for it.

Run with the TensorFlow 2.21 Python (.ci/tf-python prints its path):
    $ACTORFLOW_TF_PYTHON tests/tf_interop/make_function_fixture.py
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "functions")

INITIAL = np.array([0.5, -1.0, 2.0], dtype=np.float32)
X = np.array([3.0, 0.25, -2.0], dtype=np.float32)


def main():
    v = tf.Variable(INITIAL, name="v")

    @tf.function
    def square_plus(a, b):
        # Pure: called through PartitionedCall.
        return a * a + b

    @tf.function
    def inner(x):
        # Reads and updates the variable: called through StatefulPartitionedCall.
        w = v.read_value()
        y = square_plus(x, w)
        s = tf.reduce_sum(x * w)
        # Nothing reads this update: only the function's control outputs make it run.
        v.assign_add(x)
        return y, s

    @tf.function
    def outer(x):
        y, s = inner(x)
        return y * 2.0 + s, tf.stack([s, s + 1.0])

    cf = outer.get_concrete_function(tf.TensorSpec([3], tf.float32, name="x"))
    gd = cf.graph.as_graph_def()
    ops = sorted({n.op for n in gd.node})
    funcs = sorted(f.signature.name for f in gd.library.function)
    body_calls = sorted({n.op for f in gd.library.function for n in f.node_def if "Call" in n.op})
    print("graph ops:", ops)
    print("library:", funcs)
    print("calls in bodies:", body_calls)
    assert "StatefulPartitionedCall" in ops and "PartitionedCall" in body_calls, (ops, body_calls)

    captures = [t.name for t in cf.graph.internal_captures]
    assert len(captures) == 1, captures
    inputs = [t.name for t in cf.inputs if t.name not in captures]
    outputs = [t.name for t in cf.outputs]

    result = cf(tf.constant(X))
    os.makedirs(OUT, exist_ok=True)
    tf.io.write_graph(gd, OUT, "nested.pbtxt", as_text=True)
    tf.io.write_graph(gd, OUT, "nested.pb", as_text=False)
    with open(os.path.join(OUT, "nested.json"), "w") as f:
        json.dump(
            {
                "inputs": {inputs[0]: X.tolist()},
                "outputs": {n: r.numpy().tolist() for n, r in zip(outputs, result)},
                "variable": {
                    "placeholder": captures[0],
                    "initial": INITIAL.tolist(),
                    "after": v.numpy().tolist(),
                },
            },
            f,
            indent=1,
            sort_keys=True,
        )
        f.write("\n")


if __name__ == "__main__":
    main()
