"""TensorFlow reference figures for actorflow's benchmark suite.

Builds the workloads of ``src/bench/workloads.rs`` -- the same graphs, the same sizes,
the same feeds, fetches and targets per call -- in TensorFlow 1.x graph mode and times
them the way ``src/bench/mod.rs`` does: each repetition calibrates an iteration count so
that it lasts about 300 ms, times those calls, and reports a per-call figure; one
warm-up repetition, then ``--repetitions`` measured ones (default 5), median reported.
It prints ONE JSON object, keyed by the figure names of ``actorflow bench``, on stdout
(progress goes to stderr)::

    pip install tensorflow-cpu          # the figures were taken with 2.21
    python bench/tf_reference.py > tf.json
    actorflow bench --compare tf.json   # each figure beside TensorFlow's, with the ratio

    python bench/tf_reference.py --filter chain --repetitions 3

Never run by CI: it needs TensorFlow, and its figures depend on the machine.

Machine settings, for every workload:

- ``tf.compat.v1`` graph mode: ``disable_eager_execution()``, ``disable_control_flow_v2()``
  (so ``while_loop`` builds Enter/Merge/Switch/NextIteration/Exit like actorflow's);
- variables are reference variables (``VariableV2``, ``use_resource=False``), as
  ``actorflow::ops::Variable`` builds them;
- grappler off (``RewriterConfig.disable_meta_optimizer``), and the classic graph
  optimizer at ``L0`` (no common-subexpression elimination, no constant folding):
  actorflow runs the graph as built, so TensorFlow must too -- with CSE on, the chain's
  20 000 ``Const 1.0`` would collapse into one node. The exception is
  ``mlp_step_us_grappler``: ``mlp_step_us``'s graph under TensorFlow's default
  configuration (grappler on: its remapper fuses MatMul+BiasAdd+Relu, constant folding;
  the classic optimizer at ``L1``), against actorflow's default optimizations;
- ``intra_op_parallelism_threads=2``, ``inter_op_parallelism_threads=2``;
- ``device_count={'CPU': 2}`` for the send/recv chain (``/device:CPU:0`` and
  ``/device:CPU:1``), one CPU device otherwise;
- the checkpoint workloads (``ckpt_save_mib_s``, ``ckpt_restore_mib_s``) call
  ``tf.compat.v1.train.Saver.save`` and ``restore`` on 8 float32 variables of 32 MiB in
  a directory under the system's temporary directory; TensorFlow's bundle writer
  renames its temporary files but never fsyncs them, while actorflow's save flushes
  each file to disk before renaming it, so TensorFlow's save figure stops at the page
  cache and actorflow's at the disk;
- ``lstm_step_ms``: ``tf.compat.v1.nn.dynamic_rnn`` over a tf_keras ``LSTMCell`` (the v1
  cells need ``TF_USE_LEGACY_KERAS=1``, set below), v1 control flow, its default Glorot
  initialisation, and one ``GradientDescentOptimizer`` step on the mean squared output,
  as ``lstm_step`` in ``workloads.rs`` builds it with actorflow's ``LstmCell``;
- ``conv_mnist_step_ms``: the Deep-MNIST convnet (5x5 convolutions of 32 and 64 filters
  with bias, ReLU and 2x2 max-pooling, a 1024-unit ReLU layer, 10 logits), batch 64,
  weights from seeded ``TruncatedNormal`` scaled by sqrt(1/fan_in), one
  ``AdamOptimizer(1e-4)`` step on the mean sparse softmax cross-entropy, as
  ``conv_mnist_step`` in ``workloads.rs`` builds it;
- every call goes through ``Session.run`` with a feed dict (not ``make_callable``), as
  actorflow's figures include the feed path; TensorFlow's figures therefore include its
  Python client's per-call cost;
- the serving figures (``serve_mlp_rps``, ``serve_mlp_p99_ms``, ``serve_mlp_batch32_ms``;
  ``src/bench/serving.rs``) are NOT TensorFlow Serving: its model server,
  ``tensorflow_model_server``, is a separate C++ binary that no package registry this
  project reaches ships (PyPI's ``tensorflow-serving-api`` is only the Python client and
  protos; Debian has no package; Google's apt repository and Docker images cannot be
  fetched here), so it cannot be run beside actorflow's server. What they measure
  instead is the best a TensorFlow user without Serving gets: the same MLP
  (784->256 ReLU->10 softmax, ``mlp_step_us``'s seeded TruncatedNormal weights scaled by
  sqrt(1/fan_in), zero biases, input ``[None, 784]``) in a ``tf.compat.v1`` session,
  answering single-example requests one by one from one Python thread:
  ``serve_mlp_rps`` = 1 / (seconds per ``sess.run`` of the softmax on one 784-vector, fed
  as a ``[1, 784]`` float32 array), over a 1 s window (calibrated like the others);
  ``serve_mlp_p99_ms`` = the 99th-percentile (nearest-rank) duration of those single
  ``sess.run`` calls in that window, in milliseconds; ``serve_mlp_batch32_ms`` = ms per
  ``sess.run`` on 32 rows. There is no network, no request decoding and no concurrency
  on TensorFlow's side, so its "requests" cost less than actorflow's gRPC requests, but
  it answers one at a time; actorflow's ``_unbatched``, swap and steady figures have no
  TensorFlow counterpart.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The v1 RNN cells (lstm_step_ms) live in tf_keras; Keras 3 has none.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import config_pb2  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
tf1.disable_control_flow_v2()
tf.get_logger().setLevel("ERROR")  # no deprecation notices for queue pipelines

# One repetition lasts about this long (REPETITION in workloads.rs).
REPETITION_S = 0.3
NODES = 20_000
SENDRECV_NODES = 5_000
LOOP_ITERATIONS = 100_000
MATMUL_N = 1024
BRANCHES = 4
BRANCH_DEPTH = 4
BRANCH_N = 512
MOBILENET_GRAPH = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "tests", "fixtures",
    "mobilenet_graph.pb",
)
FIFO_ENQUEUE = 1000
FIFO_DEQUEUE = 128
MLP_BATCH, MLP_INPUT, MLP_HIDDEN, MLP_CLASSES = 64, 784, 256, 10
LSTM_UNITS, LSTM_STEPS, LSTM_BATCH, LSTM_INPUT = 256, 32, 32, 128
# conv_mnist_step_ms: batch, first and second convolution's filters, hidden units
CONV_BATCH, CONV_C1, CONV_C2, CONV_HIDDEN = 64, 32, 64, 1024
CSV_PIPELINE_SHARDS = 4
CSV_PIPELINE_RECORDS = 2_000
CSV_PIPELINE_BATCH = 128
CKPT_VARIABLES, CKPT_VARIABLE_MIB = 8, 32
CKPT_TOTAL_MIB = CKPT_VARIABLES * CKPT_VARIABLE_MIB
# The serving figures' window (LOAD_WINDOW in serving.rs) and batch (MAX_BATCH_SIZE).
SERVE_WINDOW_S = 1.0
SERVE_BATCH = 32


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def config(devices=1):
    """The session configuration every workload runs with."""
    cfg = tf1.ConfigProto(
        intra_op_parallelism_threads=2,
        inter_op_parallelism_threads=2,
        device_count={"CPU": devices},
    )
    cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    opts = cfg.graph_options.optimizer_options
    opts.opt_level = config_pb2.OptimizerOptions.L0
    opts.do_common_subexpression_elimination = False
    opts.do_constant_folding = False
    return cfg


def session(graph, devices=1, grappler=False):
    cfg = config(devices)
    if grappler:
        # TensorFlow's defaults: grappler (remapper fusions, constant folding, …)
        # and the classic optimizer at L1.
        cfg.graph_options.Clear()
    return tf1.Session(graph=graph, config=cfg)


def time_per_call(iters, f):
    """Seconds per call of `f` over `iters` calls (time_per_call in mod.rs)."""
    t = time.perf_counter()
    for _ in range(iters):
        f()
    return (time.perf_counter() - t) / max(iters, 1)


def calibrate(target_s, f):
    """Iterations so that one repetition of `f` lasts about `target_s` (calibrate)."""
    t = time.perf_counter()
    f()
    once = max(time.perf_counter() - t, 1e-9)
    return min(max(int(target_s / once), 1), 1_000_000)


def measure(target_s, f):
    return time_per_call(calibrate(target_s, f), f)


def step_overhead(sess, x, ident):
    """Seconds per run feeding a scalar placeholder and fetching one Identity of it."""
    return measure(REPETITION_S / 4, lambda: sess.run(ident, {x: np.float32(0.0)}))


# Each workload builds its graph and session and returns (repetition, cleanup).


def run_overhead():
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(1.0, tf.float32)
    sess = session(g)
    return (lambda: measure(REPETITION_S, lambda: sess.run(c)) * 1e6), sess.close


def chain():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [])
        ident = tf.identity(x)
        y = x
        for _ in range(NODES):
            y = tf.add(y, tf.constant(1.0, tf.float32))
    sess = session(g)

    def rep():
        overhead = step_overhead(sess, x, ident)
        t = measure(REPETITION_S, lambda: sess.run(y, {x: np.float32(0.0)}))
        return (t - overhead) * 1e9 / NODES

    return rep, sess.close


def wide():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [])
        ident = tf.identity(x)
        outs = [tf.add(x, tf.constant(float(i), tf.float32)) for i in range(NODES)]
        group = tf.group(*outs)
    sess = session(g)

    def rep():
        overhead = step_overhead(sess, x, ident)
        t = measure(REPETITION_S, lambda: sess.run(group, {x: np.float32(0.0)}))
        return (t - overhead) * 1e9 / NODES

    return rep, sess.close


def sendrecv_chain():
    g = tf.Graph()
    with g.as_default():
        with tf.device("/device:CPU:0"):
            x = tf1.placeholder(tf.float32, [])
        y = x
        for i in range(SENDRECV_NODES):
            with tf.device("/device:CPU:%d" % ((i + 1) % 2)):
                y = tf.add(y, tf.constant(1.0, tf.float32))
    sess = session(g, devices=2)

    def rep():
        t = measure(REPETITION_S, lambda: sess.run(y, {x: np.float32(0.0)}))
        return t * 1e9 / SENDRECV_NODES

    return rep, sess.close


def while_loop_iterations():
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [])
        i0 = tf.constant(0, tf.int32)
        a0 = tf.constant(0.0, tf.float32)
        outs = tf1.while_loop(
            lambda i, a: tf.less(i, n),
            lambda i, a: (
                tf.add(i, tf.constant(1, tf.int32)),
                tf.add(a, tf.constant(1.0, tf.float32)),
            ),
            [i0, a0],
            parallel_iterations=10,
        )
    sess = session(g)
    feed = {n: np.int32(LOOP_ITERATIONS)}

    def rep():
        t = measure(REPETITION_S, lambda: sess.run(outs[1], feed))
        return t * 1e9 / LOOP_ITERATIONS

    return rep, sess.close


def matmul():
    n = MATMUL_N
    pattern = (np.arange(n * n) % 17).astype(np.float32) - 8.0
    g = tf.Graph()
    with g.as_default():
        a = tf1.Variable(
            tf.constant((pattern * np.float32(0.01)).reshape(n, n)),
            name="a",
            trainable=False,
            use_resource=False,
        )
        b = tf1.Variable(
            tf.constant((pattern * np.float32(0.02)).reshape(n, n)),
            name="b",
            trainable=False,
            use_resource=False,
        )
        p = tf.matmul(a, b)
        total = tf.reduce_sum(p, tf.constant([0, 1], tf.int32))
        inits = [a.initializer, b.initializer]
    sess = session(g)
    sess.run(inits)

    def rep():
        t = measure(REPETITION_S, lambda: sess.run(total))
        return 2.0 * n**3 / t / 1e9

    return rep, sess.close


def branches():
    """BRANCHES independent chains of BRANCH_DEPTH 512x512 products: a step on one
    inter-op and one intra-op thread over a step on the defaults (every core)."""
    n = BRANCH_N
    g = tf.Graph()
    with g.as_default():
        ends = []
        for b in range(BRANCHES):
            i = np.arange(n * n)
            w = ((((i * 7 + b * 13) % 11).astype(np.float32) - np.float32(5.0))
                 * np.float32(0.1) / np.float32(np.sqrt(n))).reshape(n, n)
            w = tf.constant(w)
            x = tf.constant(np.ones((n, n), np.float32))
            for _ in range(BRANCH_DEPTH):
                x = tf.matmul(x, w)
            ends.append(x)
        group = tf.group(*ends)

    def make(threads):
        cfg = config()
        cfg.inter_op_parallelism_threads = threads
        cfg.intra_op_parallelism_threads = threads
        return tf1.Session(graph=g, config=cfg)

    serial, parallel = make(1), make(0)

    def rep():
        t1 = measure(REPETITION_S / 2, lambda: serial.run(group))
        tn = measure(REPETITION_S / 2, lambda: parallel.run(group))
        return t1 / tn

    def close():
        serial.close()
        parallel.close()

    return rep, close


def mobilenet_images(batch):
    """gen_mobilenet.py's (and workloads::mobilenet_images') input images."""
    size = 96 * 96 * 3
    i = np.arange(batch * size, dtype=np.uint64)
    noise = ((i * np.uint64(2654435761)) % np.uint64(1 << 32)).astype(np.float64) / 2.0**32
    b = (i // np.uint64(size)).astype(np.float64)
    x = (noise * 2.0 - 1.0) * (0.3 + 0.1 * b) + 0.15 * (b - 3.5)
    return x.astype(np.float32).reshape(batch, 96, 96, 3)


def mobilenet_infer():
    """The frozen MobileNetV2 fixture on a batch of 8, under TensorFlow's default
    graph optimizations as actorflow's session runs it under its own."""
    graph_def = tf1.GraphDef()
    with open(MOBILENET_GRAPH, "rb") as fh:
        graph_def.ParseFromString(fh.read())
    g = tf.Graph()
    with g.as_default():
        tf1.import_graph_def(graph_def, name="")
    sess = session(g, grappler=True)
    feed = {"input:0": mobilenet_images(8)}
    return (lambda: measure(REPETITION_S, lambda: sess.run("Identity:0", feed)) * 1e3), sess.close


def fifo_batched():
    """enqueue_many of FIFO_ENQUEUE scalars, then dequeue_many of FIFO_DEQUEUE while
    that many are queued (the rest waits for the next call): per element."""
    g = tf.Graph()
    with g.as_default():
        q = tf1.FIFOQueue(-1, [tf.float32], shapes=[[]])
        x = tf1.placeholder(tf.float32, [FIFO_ENQUEUE])
        enq = q.enqueue_many([x])
        deq = q.dequeue_many(tf.constant(FIFO_DEQUEUE, tf.int32))
    sess = session(g)
    data = np.arange(FIFO_ENQUEUE, dtype=np.float32)
    queued = [0]

    def call():
        sess.run(enq, {x: data})
        left = queued[0] + FIFO_ENQUEUE
        while left >= FIFO_DEQUEUE:
            sess.run(deq)
            left -= FIFO_DEQUEUE
        queued[0] = left

    return (lambda: measure(REPETITION_S, call) * 1e9 / FIFO_ENQUEUE), sess.close


def fifo_roundtrip():
    g = tf.Graph()
    with g.as_default():
        q = tf1.FIFOQueue(-1, [tf.float32], shapes=[[]])
        x = tf1.placeholder(tf.float32, [])
        enq = q.enqueue([x])
        deq = q.dequeue()
    sess = session(g)

    def call():
        sess.run(enq, {x: np.float32(1.0)})
        sess.run(deq)

    return (lambda: measure(REPETITION_S, call) * 1e6), sess.close


def mlp_step(grappler=False):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [MLP_BATCH, MLP_INPUT])
        y = tf1.placeholder(tf.int32, [MLP_BATCH])

        def weights(name, rows, cols, seed):
            dims = tf.constant([rows, cols], tf.int32)
            scale = tf.constant(np.float32(np.sqrt(1.0 / rows)))
            normal = tf.raw_ops.TruncatedNormal(
                shape=dims, dtype=tf.float32, seed=seed, seed2=0
            )
            return tf1.Variable(tf.multiply(normal, scale), name=name, use_resource=False)

        def bias(name, n):
            return tf1.Variable(
                tf.constant(np.zeros(n, np.float32)), name=name, use_resource=False
            )

        w1, b1 = weights("w1", MLP_INPUT, MLP_HIDDEN, 1), bias("b1", MLP_HIDDEN)
        w2, b2 = weights("w2", MLP_HIDDEN, MLP_CLASSES, 2), bias("b2", MLP_CLASSES)
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
        logits = tf.nn.bias_add(tf.matmul(h, w2), b2)
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        loss = tf.reduce_mean(xent, axis=[0])
        train = tf1.train.GradientDescentOptimizer(0.01).minimize(loss)
        inits = [v.initializer for v in (w1, b1, w2, b2)]
    sess = session(g, grappler=grappler)
    sess.run(inits)
    i = np.arange(MLP_BATCH * MLP_INPUT)
    images = (((i * 7) % 17).astype(np.float32) / np.float32(16.0)).reshape(
        MLP_BATCH, MLP_INPUT
    )
    labels = (np.arange(MLP_BATCH) % MLP_CLASSES).astype(np.int32)
    feed = {x: images, y: labels}

    return (lambda: measure(REPETITION_S, lambda: sess.run(train, feed)) * 1e6), sess.close


def conv_mnist_step():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [CONV_BATCH, 28, 28, 1])
        y = tf1.placeholder(tf.int32, [CONV_BATCH])

        def weights(name, dims, seed):
            scale = tf.constant(np.float32(np.sqrt(1.0 / np.prod(dims[:-1]))))
            normal = tf.raw_ops.TruncatedNormal(
                shape=tf.constant(dims, tf.int32), dtype=tf.float32, seed=seed, seed2=0
            )
            return tf1.Variable(tf.multiply(normal, scale), name=name, use_resource=False)

        def zeros(name, n):
            return tf1.Variable(
                tf.constant(np.zeros(n, np.float32)), name=name, use_resource=False
            )

        def conv_relu_pool(t, k, b):
            t = tf.nn.bias_add(tf.nn.conv2d(t, k, strides=[1, 1, 1, 1], padding="SAME"), b)
            return tf.nn.max_pool2d(tf.nn.relu(t), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")

        flat = 7 * 7 * CONV_C2
        h = conv_relu_pool(x, weights("k1", [5, 5, 1, CONV_C1], 1), zeros("cb1", CONV_C1))
        h = conv_relu_pool(h, weights("k2", [5, 5, CONV_C1, CONV_C2], 2), zeros("cb2", CONV_C2))
        h = tf.reshape(h, [CONV_BATCH, flat])
        w1, b1 = weights("fc1", [flat, CONV_HIDDEN], 3), zeros("fb1", CONV_HIDDEN)
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(h, w1), b1))
        logits = tf.matmul(h, weights("w", [CONV_HIDDEN, 10], 4))
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        loss = tf.reduce_mean(xent, axis=[0])
        train = tf1.train.AdamOptimizer(1e-4).minimize(loss)
        init = tf1.global_variables_initializer()
    sess = session(g)
    sess.run(init)
    i = np.arange(CONV_BATCH * 28 * 28)
    images = (((i * 7) % 17).astype(np.float32) / np.float32(16.0)).reshape(CONV_BATCH, 28, 28, 1)
    labels = (np.arange(CONV_BATCH) % 10).astype(np.int32)
    feed = {x: images, y: labels}
    return (lambda: measure(REPETITION_S, lambda: sess.run(train, feed)) * 1e3), sess.close


def lstm_step():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [LSTM_BATCH, LSTM_STEPS, LSTM_INPUT])
        cell = tf1.nn.rnn_cell.LSTMCell(LSTM_UNITS)
        out, _ = tf1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        loss = tf.reduce_mean(tf.square(out))
        train = tf1.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = tf1.global_variables_initializer()
    sess = session(g)
    sess.run(init)
    i = np.arange(LSTM_BATCH * LSTM_STEPS * LSTM_INPUT)
    inputs = (((i * 7) % 17).astype(np.float32) / np.float32(16.0) - np.float32(0.5)).reshape(
        LSTM_BATCH, LSTM_STEPS, LSTM_INPUT
    )
    return (lambda: measure(REPETITION_S, lambda: sess.run(train, {x: inputs})) * 1e3), sess.close


def csv_input_pipeline():
    tmp = tempfile.mkdtemp(prefix="actorflow_bench_csv_")
    files = []
    for f in range(CSV_PIPELINE_SHARDS):
        lines = []
        for r in range(CSV_PIPELINE_RECORDS):
            pixels = "".join("%d," % ((f * 7 + r * 13 + p * 3) % 17) for p in range(64))
            lines.append("%s%d\n" % (pixels, r % 10))
        path = os.path.join(tmp, "shard-%d.csv" % f)
        with open(path, "w") as fh:
            fh.write("".join(lines))
        files.append(path)
    g = tf.Graph()
    with g.as_default():
        queue = tf1.train.string_input_producer(
            files, num_epochs=None, shuffle=False, capacity=32
        )
        reader = tf1.TextLineReader()
        _, line = reader.read(queue)
        defaults = [tf.constant([], tf.float32)] * 64 + [tf.constant([], tf.int32)]
        cols = tf1.decode_csv(line, defaults)
        label = cols.pop()
        pixels = tf.stack(cols, 0)
        xb, yb = tf1.train.batch(
            [pixels, label],
            CSV_PIPELINE_BATCH,
            num_threads=2,
            capacity=4 * CSV_PIPELINE_BATCH,
        )
    sess = session(g)
    coord = tf1.train.Coordinator()
    threads = tf1.train.start_queue_runners(sess=sess, coord=coord)

    def rep():
        t = measure(REPETITION_S, lambda: sess.run([xb, yb]))
        return t * 1e6 / CSV_PIPELINE_BATCH

    def cleanup():
        coord.request_stop()
        try:
            coord.join(threads, stop_grace_period_secs=10)
        except Exception as e:  # a runner's error: report it, still clean up
            log("input pipeline ended with an error: %s" % e)
        sess.close()
        shutil.rmtree(tmp, ignore_errors=True)

    return rep, cleanup


def checkpointed(what):
    """8 float32 variables of 32 MiB (random values, initialised), a Saver of
    them, an op that zeroes the first, and a directory for the checkpoints
    (src/bench/checkpoint.rs). The Saver is used as a user calls it: save writes
    the bundle (temporary names, rename; TensorFlow does not fsync), the
    checkpoint state file and the .meta graph."""
    g = tf.Graph()
    elements = (CKPT_VARIABLE_MIB << 20) // 4
    with g.as_default():
        variables = [
            tf1.get_variable(
                "v%d" % i,
                shape=[elements],
                dtype=tf.float32,
                initializer=tf1.random_uniform_initializer(0.0, 1.0, seed=17 + i),
                use_resource=False,
            )
            for i in range(CKPT_VARIABLES)
        ]
        clobber = tf1.assign(variables[0], tf.zeros([elements], tf.float32))
        init = tf1.global_variables_initializer()
        saver = tf1.train.Saver()
    sess = session(g)
    sess.run(init)
    tmp = tempfile.mkdtemp(prefix="actorflow_bench_%s_" % what)

    def cleanup():
        sess.close()
        shutil.rmtree(tmp, ignore_errors=True)

    return sess, saver, variables[0], clobber, os.path.join(tmp, "model.ckpt"), cleanup


def ckpt_save():
    sess, saver, _, _, prefix, cleanup = checkpointed("ckpt_save")

    def rep():
        return CKPT_TOTAL_MIB / measure(REPETITION_S, lambda: saver.save(sess, prefix))

    return rep, cleanup


def ckpt_restore():
    sess, saver, first, clobber, prefix, cleanup = checkpointed("ckpt_restore")
    path = saver.save(sess, prefix)
    saved = sess.run(first)

    def rep():
        sess.run(clobber)
        t = measure(REPETITION_S, lambda: saver.restore(sess, path))
        if not np.array_equal(sess.run(first), saved):
            raise RuntimeError("ckpt_restore: a restored variable differs from its saved value")
        return CKPT_TOTAL_MIB / t

    return rep, cleanup


def serving_mlp():
    """The served MLP of src/bench/serving.rs in a session: its input placeholder,
    its softmax, and the session (weights initialised as version 1's)."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, MLP_INPUT])

        def weights(name, rows, cols, seed):
            dims = tf.constant([rows, cols], tf.int32)
            scale = tf.constant(np.float32(np.sqrt(1.0 / rows)))
            normal = tf.raw_ops.TruncatedNormal(
                shape=dims, dtype=tf.float32, seed=seed, seed2=0
            )
            return tf1.Variable(tf.multiply(normal, scale), name=name, use_resource=False)

        def bias(name, n):
            return tf1.Variable(
                tf.constant(np.zeros(n, np.float32)), name=name, use_resource=False
            )

        w1, b1 = weights("w1", MLP_INPUT, MLP_HIDDEN, 1), bias("b1", MLP_HIDDEN)
        w2, b2 = weights("w2", MLP_HIDDEN, MLP_CLASSES, 2), bias("b2", MLP_CLASSES)
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
        probabilities = tf.nn.softmax(tf.nn.bias_add(tf.matmul(h, w2), b2))
        inits = [v.initializer for v in (w1, b1, w2, b2)]
    sess = session(g)
    sess.run(inits)
    return x, probabilities, sess


def serve_images(rows):
    """`rows` rows of mlp_step's images (images() in serving.rs)."""
    i = np.arange(rows * MLP_INPUT)
    return (((i * 7) % 17).astype(np.float32) / np.float32(16.0)).reshape(rows, MLP_INPUT)


def serve_latencies(sess, probabilities, feed):
    """The duration of each single-example sess.run over a SERVE_WINDOW_S window
    (calibrated), each answer checked."""
    one = lambda: sess.run(probabilities, feed)  # noqa: E731
    n = calibrate(SERVE_WINDOW_S, one)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        p = one()
        out.append(time.perf_counter() - t)
        if p.shape != (1, MLP_CLASSES) or abs(float(p.sum()) - 1.0) > 1e-3:
            raise RuntimeError("serving: a wrong answer %r" % (p,))
    return out


def serve_mlp_rps():
    x, probabilities, sess = serving_mlp()
    feed = {x: serve_images(1)}

    def rep():
        lat = serve_latencies(sess, probabilities, feed)
        return len(lat) / sum(lat)

    return rep, sess.close


def serve_mlp_p99_ms():
    x, probabilities, sess = serving_mlp()
    feed = {x: serve_images(1)}

    def rep():
        lat = sorted(serve_latencies(sess, probabilities, feed))
        rank = min(max(int(np.ceil(0.99 * len(lat))), 1), len(lat))
        return lat[rank - 1] * 1e3

    return rep, sess.close


def serve_mlp_batch32_ms():
    x, probabilities, sess = serving_mlp()
    feed = {x: serve_images(SERVE_BATCH)}
    return (lambda: measure(REPETITION_S, lambda: sess.run(probabilities, feed)) * 1e3), sess.close


# Every workload, in report order (workloads::all()).
def proc_status_bytes(field):
    """A `VmRSS`/`VmHWM` line of /proc/self/status in bytes (proc_status_bytes in
    workloads.rs); None where there is no such file."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def compile_chain(n, figure):
    """compile_chain in workloads.rs: a chain of `n` scalar AddV2 of one shared
    Const 1.0 on a placeholder, built once as a GraphDef; each repetition imports
    it into a new graph, opens a session and runs it once (TensorFlow's import +
    first run, as actorflow's figure is Session::new + the first run). Bytes: the
    first repetition's peak RSS growth (the high-water mark reset through
    /proc/self/clear_refs), per node."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [], name="x")
        one = tf.constant(1.0, tf.float32)
        y = x
        for _ in range(n):
            y = tf.add(y, one)
    gd = g.as_graph_def()
    y_name = y.name
    del g
    first_bytes = []

    def rep():
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            reset = True
        except OSError:
            reset = False
        before = proc_status_bytes("VmRSS")
        t = time.perf_counter()
        graph = tf.Graph()
        with graph.as_default():
            tf1.import_graph_def(gd, name="")
        sess = session(graph)
        out = sess.run(y_name, {"x:0": np.float32(0.0)})
        elapsed = time.perf_counter() - t
        peak = proc_status_bytes("VmHWM")
        sess.close()
        if out != n:
            raise RuntimeError("the chain computed %r, not %d" % (out, n))
        if figure == "us":
            return elapsed * 1e6 / n
        if not first_bytes:
            ok = reset and before is not None and peak is not None
            first_bytes.append((peak - before) / n if ok else float("nan"))
        return first_bytes[0]

    return rep, lambda: None


WORKLOADS = [
    ("run_overhead_us", run_overhead),
    ("chain_ns_per_node", chain),
    ("wide_ns_per_node", wide),
    ("sendrecv_chain_ns_per_node", sendrecv_chain),
    ("while_ns_per_iter", while_loop_iterations),
    ("matmul1024_gflops", matmul),
    ("branches_speedup", branches),
    ("fifo_ns_per_elem_batched", fifo_batched),
    ("fifo_us_per_single_roundtrip", fifo_roundtrip),
    ("mlp_step_us", mlp_step),
    ("mlp_step_us_grappler", lambda: mlp_step(grappler=True)),
    ("lstm_step_ms", lstm_step),
    ("conv_mnist_step_ms", conv_mnist_step),
    ("mobilenet_infer_ms", mobilenet_infer),
    ("csv_pipeline_us_per_record", csv_input_pipeline),
    ("ckpt_save_mib_s", ckpt_save),
    ("ckpt_restore_mib_s", ckpt_restore),
    ("serve_mlp_rps", serve_mlp_rps),
    ("serve_mlp_p99_ms", serve_mlp_p99_ms),
    ("serve_mlp_batch32_ms", serve_mlp_batch32_ms),
    ("compile_us_per_node_10k", lambda: compile_chain(10_000, "us")),
    ("compile_bytes_per_node_10k", lambda: compile_chain(10_000, "bytes")),
    ("compile_us_per_node_100k", lambda: compile_chain(100_000, "us")),
    ("compile_bytes_per_node_100k", lambda: compile_chain(100_000, "bytes")),
    # Minutes per repetition in TensorFlow: run with --repetitions 1.
    ("compile_us_per_node_1m", lambda: compile_chain(1_000_000, "us")),
    ("compile_bytes_per_node_1m", lambda: compile_chain(1_000_000, "bytes")),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--filter", metavar="NAME", help="only figures whose name contains NAME")
    ap.add_argument(
        "--repetitions",
        type=int,
        default=5,
        metavar="N",
        help="measured repetitions per workload after one warm-up (median reported)",
    )
    args = ap.parse_args(argv)
    if not 1 <= args.repetitions <= 1000:
        ap.error("--repetitions must be in 1..=1000")
    chosen = [w for w in WORKLOADS if args.filter is None or args.filter in w[0]]
    if not chosen:
        ap.error(
            "no benchmark figure matches '%s'; the figures are: %s"
            % (args.filter, ", ".join(n for n, _ in WORKLOADS))
        )
    log("TensorFlow %s, %d repetitions" % (tf.__version__, args.repetitions))
    figures = {}
    for name, setup in chosen:
        t0 = time.perf_counter()
        rep, cleanup = setup()
        try:
            rep()  # warm-up
            samples = [rep() for _ in range(args.repetitions)]
        finally:
            cleanup()
        figures[name] = statistics.median_high(samples)
        log("%-32s %14.3f  (%.1f s)" % (name, figures[name], time.perf_counter() - t0))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
