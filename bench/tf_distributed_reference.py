"""TensorFlow reference figures for actorflow's distributed benchmarks.

Builds the distributed workloads of ``src/bench/workloads.rs`` -- a cluster of two
``worker`` tasks on 127.0.0.1, the same graphs, feeds and fetches -- with TensorFlow's
own ``tf.distribute.Server`` processes and a ``tf.compat.v1.Session`` on task 0's
master, and times them as ``src/bench/mod.rs`` does (each repetition calibrated to
about 300 ms, one warm-up, ``--repetitions`` measured, median reported). It prints ONE
JSON object keyed by the figure names of ``actorflow bench`` on stdout::

    pip install tensorflow-cpu          # TensorFlow 2.21
    python bench/tf_distributed_reference.py > tf_dist.json
    actorflow bench --filter dist --compare tf_dist.json

- ``dist_step_us``: a fed scalar, doubled on ``/job:worker/task:1``, fetched on task 0
  (``RunStep`` -> ``RunGraph`` on both tasks -> two ``RecvTensor``s).
- ``dist_recv_bf16_mib_s``: the same with ``enable_bfloat16_sendrecv`` (the variable
  crosses as bfloat16; float32 MiB per second).
- ``dist_recv_mib_s``: a 64 MiB float32 variable on task 1, read and summed on task 0
  every step (one ``RecvTensor`` of 64 MiB).
- ``recv_sched_step_ms`` / ``recv_sched_step_ms_unscheduled``: eight 4 MiB float32
  variables on task 1 (``w0``..``w7``), read one per stage by a chain on task 0 that
  starts from a 4 MiB variable of its own (stage ``i``: four ``Tanh``, then ``+ w_i``),
  summed; with ``GraphOptions.enable_recv_scheduling`` on and off. Milliseconds per
  step. ``recv_sched_peak_mib[_unscheduled]``: the largest ``peak_bytes`` task 0's
  CPU allocator reports in a traced step's ``StepStats`` (0 when TensorFlow's CPU
  allocator keeps no statistics).
- ``dist_mlp_sync_step_us``: the ``mlp_step_us`` MLP (784-256-10, batch 64, SGD 0.01)
  with its variables on a ``ps`` task and two ``worker`` replicas, between-graph (each
  worker's own graph under ``replica_device_setter`` and its own client thread and
  session on its task), synchronised by ``SyncReplicasOptimizer``; the chief's queue
  runner thread runs the sync op. Microseconds per global step over 100 steps.

Both servers run in processes of their own (``python -c`` with
``tf.distribute.Server(...).join()``), started on free ports of 127.0.0.1 and killed at
the end. With ``--actorflow target/release/actorflow`` the servers are ``actorflow
server`` processes instead, driven by the same TensorFlow clients: a TensorFlow client
against an actorflow cluster versus against a TensorFlow cluster, same workloads. actorflow's bench runs its two servers inside the bench process (tensors still
cross gRPC connections on 127.0.0.1). Never run by CI: it needs TensorFlow.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

# The same timing rules as the single-process reference (and src/bench/mod.rs).
from tf_reference import calibrate, time_per_call  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
tf1.disable_control_flow_v2()

REPETITION_S = 0.3
RECV_ELEMENTS = 16 << 20

SERVER = """
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
server = tf.distribute.Server(cluster, job_name=sys.argv[2], task_index=int(sys.argv[3]))
print("ready", flush=True)
server.join()
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


ACTORFLOW = None  # --actorflow: the actorflow binary whose servers make the cluster


def server_command(spec, job, task):
    """The command that starts task ``task`` of ``job``, and its ready line."""
    if ACTORFLOW:
        flags = []
        for j, addrs in spec.items():
            flags += ["--cluster", "%s=%s" % (j, ",".join(addrs))]
        cmd = [ACTORFLOW, "server", *flags, "--job", job, "--task", str(task)]
        return cmd, "listening on"
    return [sys.executable, "-c", SERVER, json.dumps(spec), job, str(task)], "ready"


class Cluster:
    """Server processes (``jobs``: name -> task count) -- TensorFlow's, or actorflow's
    with ``--actorflow`` -- killed by close()."""

    def __init__(self, jobs=None):
        jobs = jobs or {"worker": 2}
        ports = free_ports(sum(jobs.values()))
        spec, i = {}, 0
        for job, n in jobs.items():
            spec[job] = ["127.0.0.1:%d" % p for p in ports[i : i + n]]
            i += n
        self.procs = []
        self.targets = {}
        for job, addrs in spec.items():
            for t, addr in enumerate(addrs):
                cmd, ready = server_command(spec, job, t)
                p = subprocess.Popen(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
                )
                self.procs.append(p)
                if not p.stdout.readline().startswith(ready):
                    self.close()
                    raise RuntimeError("a server did not start: %r" % cmd)
                self.targets[(job, t)] = "grpc://" + addr
        first = next(iter(spec))
        self.target = self.targets[(first, 0)]

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()


def dist_step():
    cluster = Cluster()
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [])
        with tf.device("/job:worker/task:1"):
            y = x * tf.constant(2.0, tf.float32)
    sess = tf1.Session(cluster.target, graph=g)

    def call():
        sess.run(y, {x: np.float32(1.5)})

    def rep():
        return time_per_call(calibrate(REPETITION_S, call), call) * 1e6

    def cleanup():
        sess.close()
        cluster.close()

    return rep, cleanup


def dist_recv(bfloat16=False):
    cluster = Cluster()
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:worker/task:1"):
            v = tf1.Variable(tf.fill([RECV_ELEMENTS], 1.0), use_resource=False, name="big")
        with tf.device("/job:worker/task:0"):
            total = tf.reduce_sum(v)
        init = tf1.global_variables_initializer()
    config = tf1.ConfigProto(graph_options=tf1.GraphOptions(enable_bfloat16_sendrecv=bfloat16))
    sess = tf1.Session(cluster.target, graph=g, config=config)
    sess.run(init)

    def call():
        sess.run(total)

    def rep():
        n = max(calibrate(REPETITION_S, call), 2)
        return RECV_ELEMENTS * 4 / (1 << 20) / time_per_call(n, call)

    def cleanup():
        sess.close()
        cluster.close()

    return rep, cleanup


STAGES, STAGE_ELEMENTS, TANH_PER_STAGE = 8, 1 << 20, 4


def recv_sched(scheduled, what):
    cluster = Cluster()
    g = tf.Graph()
    with g.as_default():
        weights = []
        with tf.device("/job:worker/task:1"):
            for i in range(STAGES):
                init = tf.fill([STAGE_ELEMENTS], np.float32(0.01 * (i + 1)))
                weights.append(tf1.Variable(init, use_resource=False, name="w%d" % i))
        with tf.device("/job:worker/task:0"):
            h = tf1.Variable(
                tf.fill([STAGE_ELEMENTS], np.float32(0.5)), use_resource=False, name="start"
            )
            for w in weights:
                for _ in range(TANH_PER_STAGE):
                    h = tf.tanh(h)
                h = h + w
            total = tf.reduce_sum(h)
        init = tf1.global_variables_initializer()
    config = tf1.ConfigProto(graph_options=tf1.GraphOptions(enable_recv_scheduling=scheduled))
    sess = tf1.Session(cluster.target, graph=g, config=config)
    sess.run(init)

    def call():
        sess.run(total)

    def step_ms():
        return time_per_call(max(calibrate(REPETITION_S, call), 2), call) * 1e3

    def peak_mib():
        md = tf1.RunMetadata()
        sess.run(
            total,
            options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
            run_metadata=md,
        )
        peak = 0
        for dev in md.step_stats.dev_stats:
            if "/task:0/" in dev.device:
                for ns in dev.node_stats:
                    for m in ns.memory:
                        peak = max(peak, m.peak_bytes)
        return peak / (1 << 20)

    def cleanup():
        sess.close()
        cluster.close()

    return (step_ms if what == "step" else peak_mib), cleanup


MLP_BATCH, MLP_INPUT, MLP_HIDDEN, MLP_CLASSES = 64, 784, 256, 10
SYNC_STEPS = 100


def mlp_loss(x, y):
    def weights(name, rows, cols, seed):
        init = tf1.truncated_normal([rows, cols], seed=seed) * np.float32((1.0 / rows) ** 0.5)
        return tf1.Variable(init, name=name, use_resource=False)

    def bias(name, n):
        return tf1.Variable(tf.zeros([n]), name=name, use_resource=False)

    w1, b1 = weights("w1", MLP_INPUT, MLP_HIDDEN, 1), bias("b1", MLP_HIDDEN)
    w2, b2 = weights("w2", MLP_HIDDEN, MLP_CLASSES, 2), bias("b2", MLP_CLASSES)
    h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
    logits = tf.nn.bias_add(tf.matmul(h, w2), b2)
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
    return tf.reduce_mean(xent)


def dist_mlp_sync():
    cluster = Cluster({"ps": 1, "worker": 2})
    try:
        return _dist_mlp_sync(cluster)
    except BaseException:
        cluster.close()
        raise


def _dist_mlp_sync(cluster):
    import threading

    images = (np.arange(MLP_BATCH * MLP_INPUT).reshape(MLP_BATCH, MLP_INPUT) * 7 % 17).astype(
        np.float32
    ) / 16.0
    labels = (np.arange(MLP_BATCH) % MLP_CLASSES).astype(np.int32)
    stop = threading.Event()
    syncs = [0]
    lock = threading.Lock()
    threads, sessions = [], []
    opts = tf1.RunOptions(timeout_in_ms=2000)
    for task in range(2):
        g = tf.Graph()
        with g.as_default():
            with tf1.device(
                tf1.train.replica_device_setter(
                    ps_tasks=1, worker_device="/job:worker/task:%d" % task
                )
            ):
                step = tf1.train.get_or_create_global_step()
                x = tf1.placeholder(tf.float32, [MLP_BATCH, MLP_INPUT])
                y = tf1.placeholder(tf.int32, [MLP_BATCH])
                loss = mlp_loss(x, y)
                opt = tf1.train.SyncReplicasOptimizer(
                    tf1.train.GradientDescentOptimizer(0.01),
                    replicas_to_aggregate=2,
                    total_num_replicas=2,
                )
                train = opt.minimize(loss, global_step=step)
                if task == 0:
                    inits = [
                        tf1.global_variables_initializer(),
                        opt.chief_init_op,
                        opt.get_init_tokens_op(-1),
                    ]
                    sync_op = opt.get_chief_queue_runner().enqueue_ops[0]
                else:
                    inits = [opt.local_step_init_op]
        sess = tf1.Session(cluster.targets[("worker", task)], graph=g)
        sessions.append(sess)
        for op in inits:
            sess.run(op)

        if task == 0:

            def chief(sess=sess, sync_op=sync_op):
                while not stop.is_set():
                    try:
                        sess.run(sync_op, options=opts)
                        with lock:
                            syncs[0] += 1
                    except tf.errors.OpError:
                        pass

            threads.append(threading.Thread(target=chief, daemon=True))

        def worker(sess=sess, train=train, x=x, y=y):
            while not stop.is_set():
                try:
                    sess.run(train, {x: images, y: labels}, options=opts)
                except tf.errors.OpError:
                    pass

        threads.append(threading.Thread(target=worker, daemon=True))
    for t in threads:
        t.start()

    def rep():
        with lock:
            c0 = syncs[0]
        t0 = time.perf_counter()
        while True:
            with lock:
                done = syncs[0] - c0
            if done >= SYNC_STEPS:
                return (time.perf_counter() - t0) * 1e6 / done
            if time.perf_counter() - t0 > 60:
                raise RuntimeError("dist_mlp_sync_step_us: no progress")
            time.sleep(0.001)

    def cleanup():
        stop.set()
        for t in threads:
            t.join(timeout=5)
        for sess in sessions:
            sess.close()
        cluster.close()

    return rep, cleanup


WORKLOADS = [
    ("dist_step_us", dist_step),
    ("dist_recv_mib_s", dist_recv),
    ("dist_recv_bf16_mib_s", lambda: dist_recv(bfloat16=True)),
    ("dist_mlp_sync_step_us", dist_mlp_sync),
    ("recv_sched_peak_mib", lambda: recv_sched(True, "peak")),
    ("recv_sched_peak_mib_unscheduled", lambda: recv_sched(False, "peak")),
    ("recv_sched_step_ms", lambda: recv_sched(True, "step")),
    ("recv_sched_step_ms_unscheduled", lambda: recv_sched(False, "step")),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--filter", metavar="NAME", help="only figures whose name contains NAME")
    ap.add_argument("--repetitions", type=int, default=5, metavar="N")
    ap.add_argument(
        "--actorflow",
        metavar="BINARY",
        help="run the same TensorFlow clients against a cluster of this actorflow "
        "binary's servers instead of TensorFlow's (issue 15's comparison)",
    )
    args = ap.parse_args(argv)
    global ACTORFLOW
    ACTORFLOW = args.actorflow
    if not 1 <= args.repetitions <= 1000:
        ap.error("--repetitions must be in 1..=1000")
    figures = {}
    for name, setup in WORKLOADS:
        if args.filter is not None and args.filter not in name:
            continue
        rep, cleanup = setup()
        try:
            rep()
            samples = [rep() for _ in range(args.repetitions)]
        finally:
            cleanup()
        figures[name] = statistics.median_high(samples)
        log("%-24s %14.3f" % (name, figures[name]))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
