"""TensorFlow 2.21 clients (tf.compat.v1, graph mode) driving a cluster, for
tests/tf_interop.rs: `scenarios.py TARGET [NAME ...]`.

Each scenario builds a graph and runs it twice: in a local TensorFlow session
(the reference) and through the master at TARGET (`grpc://host:port`, a
two-task cluster `worker=[task 0, task 1]`). It prints one line per scenario:
`PASS name` when both give the same values, else `FAIL name: why`. Devices name
`/job:worker/task:1` where a scenario spreads over the cluster; the reference
session runs the same graph with devices cleared.
"""

import os
import sys
import tempfile
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import config_pb2  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
tf1.disable_control_flow_v2()
tf1.disable_resource_variables()

T1 = "/job:worker/task:1"
T0 = "/job:worker/task:0"


def session(target, graph):
    """A session on `target` ('' for the local reference)."""
    if target:
        return tf1.Session(target, graph=graph)
    config = tf1.ConfigProto(allow_soft_placement=True)
    return tf1.Session(graph=graph, config=config)


def dev(target, d):
    """`d` on the cluster; no device for the local reference."""
    return tf.device(d if target else None)


def arithmetic(target):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [2, 3], name="x")
        with dev(target, T1):
            y = tf.matmul(x, tf.transpose(x)) * 0.5 + 1.0
            z = tf.reduce_max(tf.nn.relu(x - 1.0), axis=1)
        w = tf.concat([tf.reshape(y, [-1]), z], 0)
    with session(target, g) as s:
        feed = {x: np.arange(6, dtype=np.float32).reshape(2, 3)}
        return s.run([y, z, w], feed)


def variables(target):
    g = tf.Graph()
    with g.as_default():
        with dev(target, T1):
            v = tf1.Variable(tf.ones([3]), name="v")
            c = tf1.Variable(0, name="counter")
        add = tf1.assign_add(v, [1.0, 2.0, 3.0])
        inc = tf1.assign_add(c, 1)
        init = tf1.global_variables_initializer()
    with session(target, g) as s:
        s.run(init)
        for _ in range(3):
            s.run([add, inc])
        uninit = s.run(tf1.report_uninitialized_variables(var_list=[v, c]))
        return [s.run(v), s.run(c), uninit.size]


def control_flow(target):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [], name="x")
        with dev(target, T1):
            y = tf.cond(x > 0.0, lambda: x * x, lambda: -x)
            i0 = tf.constant(0)

            def body(i, acc):
                return i + 1, acc * 1.5 + x

            _, acc = tf1.while_loop(lambda i, a: i < 5, body, [i0, x])
        gy, gacc = tf.gradients([y], [x])[0], tf.gradients([acc], [x])[0]
    with session(target, g) as s:
        return [s.run([y, acc, gy, gacc], {x: v}) for v in (2.0, -3.0)]


def queues(target):
    g = tf.Graph()
    with g.as_default():
        with dev(target, T1):
            q = tf1.FIFOQueue(10, [tf.float32], shapes=[[]])
            counter = tf1.Variable(0.0, name="counter")
            nxt = tf1.assign_add(counter, 1.0)
            enq = q.enqueue([nxt + 0.0])
        qr = tf1.train.QueueRunner(q, [enq])
        tf1.train.add_queue_runner(qr)
        batch = q.dequeue_many(4)
        init = tf1.global_variables_initializer()
    with session(target, g) as s:
        s.run(init)
        coord = tf1.train.Coordinator()
        threads = tf1.train.start_queue_runners(s, coord=coord)
        got = [s.run(batch) for _ in range(3)]
        coord.request_stop()
        s.run(q.close(cancel_pending_enqueues=True))
        coord.join(threads, stop_grace_period_secs=10)
    # Values arrive in order: 1..12.
    return [np.concatenate(got)]


def training(target):
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(7)
        x = tf1.placeholder(tf.float32, [None, 4], name="x")
        t = tf1.placeholder(tf.float32, [None, 1], name="t")
        with dev(target, T1):
            w = tf1.Variable(tf.constant([[0.1], [-0.2], [0.3], [0.05]]), name="w")
            b = tf1.Variable(tf.zeros([1]), name="b")
        y = tf.matmul(x, w) + b
        loss = tf.reduce_mean(tf.square(y - t))
        step = tf1.train.MomentumOptimizer(0.05, 0.9).minimize(loss)
        init = tf1.global_variables_initializer()
    rng = np.random.RandomState(0)
    xs = rng.rand(32, 4).astype(np.float32)
    ts = (xs @ np.array([[1.0], [2.0], [-1.0], [0.5]], np.float32)) + 0.25
    with session(target, g) as s:
        s.run(init)
        losses = [s.run([loss, step], {x: xs, t: ts})[0] for _ in range(20)]
        return [np.array(losses), s.run(w), s.run(b)]


def saver(target):
    g = tf.Graph()
    with g.as_default():
        with dev(target, T1):
            v = tf1.Variable(tf.constant([1.0, 2.0]), name="v")
        bump = tf1.assign(v, v * 10.0)
        sv = tf1.train.Saver([v])
        init = tf1.global_variables_initializer()
    d = tempfile.mkdtemp()
    with session(target, g) as s:
        s.run(init)
        path = sv.save(s, os.path.join(d, "model"))
        s.run(bump)
        bumped = s.run(v)
        sv.restore(s, path)
        return [bumped, s.run(v)]


def run_metadata(target):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [], name="x")
        with dev(target, T1):
            y = tf.square(x, name="sq")
    with session(target, g) as s:
        opts = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE)
        md = tf1.RunMetadata()
        out = s.run(y, {x: 3.0}, options=opts, run_metadata=md)
        nodes = {n.node_name for d in md.step_stats.dev_stats for n in d.node_stats}
        # The node ran and its statistics came back.
        return [out, "sq" in nodes]


def callables(target):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [2], name="x")
        with dev(target, T1):
            y = tf.reduce_sum(x * x)
    with session(target, g) as s:
        f = s.make_callable(y, feed_list=[x])
        return [f(np.array([1.0, 2.0], np.float32)), f(np.array([3.0, 4.0], np.float32))]


def partial_run(target):
    g = tf.Graph()
    with g.as_default():
        a = tf1.placeholder(tf.float32, [], name="a")
        b = tf1.placeholder(tf.float32, [], name="b")
        with dev(target, T1):
            v = tf1.Variable(10.0, name="acc")
            c = a + b
            inc = tf1.assign_add(v, c)
        d = inc * a
        init = tf1.global_variables_initializer()
    out = []
    with session(target, g) as s:
        s.run(init)
        h = s.partial_run_setup([c, d], [a, b])
        out.append(s.partial_run(h, [], feed_dict={a: 2.0}))
        try:
            s.partial_run(h, c)
            out.append("no error")
        except tf.errors.OpError as e:
            out.append(type(e).__name__)
        out.append(s.partial_run(h, c, feed_dict={b: 3.0}))
        out.append(s.partial_run(h, d))
        # The increment ran once.
        out.append(s.run(v))
    return out


def callable_from_options(target):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [3], name="x")
        with dev(target, T1):
            y = tf.reduce_sum(x * 2.0)
        z = tf.reduce_max(x)
    with session(target, g) as s:
        opts = config_pb2.CallableOptions()
        opts.feed.append(x.name)
        opts.fetch.extend([y.name, z.name])
        f = s._make_callable_from_options(opts)
        out = [f(np.array([1.0, 2.0, 3.0], np.float32)), f(np.array([-1.0, 5.0, 0.5], np.float32))]
        del f  # ReleaseCallable
        return out


def errors(target):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None], name="x")
        with dev(target, T1):
            q = tf1.FIFOQueue(1, [tf.float32], shapes=[[]])
            idx = tf1.placeholder(tf.int32, [], name="idx")
            pick = tf.gather(x, idx)
        deq = q.dequeue()
        closeq = q.close()
    names = []
    with session(target, g) as s:
        for run in (
            lambda: s.run(pick, {x: [1.0, 2.0], idx: 5}),
            lambda: s.run(pick, {idx: 0}),
            lambda: s.run(deq, options=tf1.RunOptions(timeout_in_ms=200)),
            lambda: (s.run(closeq), s.run(deq)),
            lambda: s.run("no_such_node:0"),
        ):
            try:
                run()
                names.append("no error")
            except (tf.errors.OpError, KeyError, ValueError) as e:
                names.append(type(e).__name__)
        # The session still works after every error.
        names.append(float(s.run(pick, {x: [1.0, 2.0], idx: 1})))
    return names


def list_devices(target):
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(1.0)
    with session(target, g) as s:
        s.run(c)
        names = sorted(d.name for d in s.list_devices())
    if not target:
        return [True]
    want = {"%s/replica:0/task:%d/device:CPU:0" % ("/job:worker", t) for t in (0, 1)}
    return [want.issubset(set(names))]


def reset(target):
    g = tf.Graph()
    with g.as_default():
        with dev(target, T1):
            v = tf1.Variable(5.0, name="kept")
        init = tf1.global_variables_initializer()
    if not target:
        return [True]
    with session(target, g) as s:
        s.run(init)
    # Reset drops the cluster's variables: a new session sees v uninitialised.
    tf1.Session.reset(target)
    with session(target, g) as s:
        try:
            s.run(v)
            return [False]
        except tf.errors.FailedPreconditionError:
            return [True]


SCENARIOS = [
    arithmetic,
    variables,
    control_flow,
    queues,
    training,
    saver,
    run_metadata,
    callables,
    partial_run,
    callable_from_options,
    errors,
    list_devices,
    reset,
]


def same(a, b):
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (str, bool)) or a is None:
        return a == b
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6)


def main():
    target = sys.argv[1]
    names = sys.argv[2:]
    for f in SCENARIOS:
        if names and f.__name__ not in names:
            continue
        try:
            want = f("")
            # Variables and queues outlive sessions in a cluster's containers
            # (as in TensorFlow's): each scenario starts from a reset cluster.
            tf1.Session.reset(target)
            got = f(target)
            if same(want, got):
                print("PASS %s" % f.__name__, flush=True)
            else:
                print("FAIL %s: got %r, TensorFlow %r" % (f.__name__, got, want), flush=True)
        except Exception:  # noqa: BLE001 - reported, not raised
            why = traceback.format_exc().strip().splitlines()[-1]
            print("FAIL %s: %s" % (f.__name__, why), flush=True)


if __name__ == "__main__":
    main()
