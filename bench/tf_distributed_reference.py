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
- ``dist_recv_mib_s``: a 64 MiB float32 variable on task 1, read and summed on task 0
  every step (one ``RecvTensor`` of 64 MiB).

Both servers run in processes of their own (``python -c`` with
``tf.distribute.Server(...).join()``), started on free ports of 127.0.0.1 and killed at
the end. actorflow's bench runs its two servers inside the bench process (tensors still
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

tf1 = tf.compat.v1
tf1.disable_eager_execution()
tf1.disable_control_flow_v2()

REPETITION_S = 0.3
RECV_ELEMENTS = 16 << 20

SERVER = """
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
cluster = tf.train.ClusterSpec({"worker": sys.argv[1].split(",")})
server = tf.distribute.Server(cluster, job_name="worker", task_index=int(sys.argv[2]))
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


class Cluster:
    """Two tf.distribute.Server processes of job worker; killed by close()."""

    def __init__(self, tasks=2):
        ports = free_ports(tasks)
        addrs = ",".join("127.0.0.1:%d" % p for p in ports)
        self.procs = []
        for t in range(tasks):
            p = subprocess.Popen(
                [sys.executable, "-c", SERVER, addrs, str(t)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            self.procs.append(p)
            if p.stdout.readline().strip() != "ready":
                self.close()
                raise RuntimeError("a TensorFlow server did not start")
        self.target = "grpc://127.0.0.1:%d" % ports[0]

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()


def time_per_call(iters, f):
    t = time.perf_counter()
    for _ in range(iters):
        f()
    return (time.perf_counter() - t) / max(iters, 1)


def calibrate(target_s, f):
    t = time.perf_counter()
    f()
    once = max(time.perf_counter() - t, 1e-9)
    return min(max(int(target_s / once), 1), 1_000_000)


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


def dist_recv():
    cluster = Cluster()
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:worker/task:1"):
            v = tf1.Variable(tf.fill([RECV_ELEMENTS], 1.0), use_resource=False, name="big")
        with tf.device("/job:worker/task:0"):
            total = tf.reduce_sum(v)
        init = tf1.global_variables_initializer()
    sess = tf1.Session(cluster.target, graph=g)
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


WORKLOADS = [("dist_step_us", dist_step), ("dist_recv_mib_s", dist_recv)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--filter", metavar="NAME", help="only figures whose name contains NAME")
    ap.add_argument("--repetitions", type=int, default=5, metavar="N")
    args = ap.parse_args(argv)
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
