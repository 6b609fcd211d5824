"""Writes, under tests/fixtures/functions/, graphs of TensorFlow 2.21 concrete
functions (NAME.pbtxt, and NAME.pb: the same graph in binary) with NAME.json:
the inputs of one or more calls, TensorFlow's outputs, and the value of the
variable the function uses before and after. tests/functions.rs imports each
graph (its library calls inlined, its functional control flow lowered), runs
it in actorflow and compares.

- nested: a function calling a nested tf.function (StatefulPartitionedCall),
  which reads and updates a tf.Variable and calls a third, pure one
  (PartitionedCall).
- control_flow: a tf.while_loop and a tf.cond (While, If) inside a tf.function,
  the cond's true branch updating a tf.Variable; two calls, one per branch.

A function's graph reads its variable through a captured resource placeholder;
the JSON names it, with the variable's initial value, so that the test can
stand a variable in for it.

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


def write(name, cf, variable, initial, cases):
    """Writes concrete function `cf`'s graph and its answers for `cases` (one
    list of input arrays per call, run in order on `variable`)."""
    gd = cf.graph.as_graph_def()
    ops = sorted({n.op for n in gd.node})
    body_ops = sorted({n.op for f in gd.library.function for n in f.node_def})
    print(name, "graph ops:", ops)
    print(name, "library:", sorted(f.signature.name for f in gd.library.function))
    print(name, "ops in bodies:", body_ops)
    captures = [t.name for t in cf.graph.internal_captures]
    assert len(captures) == 1, captures
    inputs = [t.name for t in cf.inputs if t.name not in captures]
    outputs = [t.name for t in cf.outputs]
    calls = []
    for args in cases:
        result = cf(*[tf.constant(a) for a in args])
        calls.append(
            {
                "inputs": {n: a.tolist() for n, a in zip(inputs, args)},
                "outputs": {n: r.numpy().tolist() for n, r in zip(outputs, result)},
                "variable_after": variable.numpy().tolist(),
            }
        )
    os.makedirs(OUT, exist_ok=True)
    tf.io.write_graph(gd, OUT, name + ".pbtxt", as_text=True)
    tf.io.write_graph(gd, OUT, name + ".pb", as_text=False)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(
            {
                "calls": calls,
                "variable": {"placeholder": captures[0], "initial": initial.tolist()},
            },
            f,
            indent=1,
            sort_keys=True,
        )
        f.write("\n")
    return ops, body_ops


def nested():
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
    ops, body_ops = write("nested", cf, v, INITIAL, [[X]])
    assert "StatefulPartitionedCall" in ops and "PartitionedCall" in body_ops


def control_flow():
    initial = np.array(0.0, dtype=np.float32)
    v = tf.Variable(initial, name="count")

    @tf.function
    def f(x, n):
        # acc <- acc * x + 1, n times.
        _, acc = tf.while_loop(
            lambda i, acc: i < n, lambda i, acc: (i + 1, acc * x + 1.0), [0, tf.ones_like(x)]
        )

        def big():
            v.assign_add(1.0)
            return acc * 2.0

        y = tf.cond(tf.reduce_sum(acc) > 10.0, big, lambda: acc - 1.0)
        return y, acc

    cf = f.get_concrete_function(
        tf.TensorSpec([2], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name="n")
    )
    cases = [
        [np.array([0.5, 1.0], np.float32), np.array(1, np.int32)],
        [np.array([2.0, 3.0], np.float32), np.array(3, np.int32)],
        [np.array([1.5, -1.0], np.float32), np.array(0, np.int32)],
        [np.array([1.0, 2.0], np.float32), np.array(4, np.int32)],
    ]
    ops, _ = write("control_flow", cf, v, initial, cases)
    assert "While" in ops or "StatelessWhile" in ops, ops
    assert "If" in ops, ops


def main():
    nested()
    control_flow()


if __name__ == "__main__":
    main()
