"""Records the gRPC traffic of a TensorFlow 2.21 client and cluster, for the core
tests that never need TensorFlow (distributed/tests/recorded_traffic.rs):
`record_traffic.py OUT.json`.

A two-task TensorFlow cluster (`worker` tasks 0 and 1) runs behind two recording
proxies: one between the client and task 0's master, one between task 0 and
task 1's worker (task 1 binds another port; the cluster names the proxy). The
client runs a few scenarios: a session created, extended, run and closed;
a feed its kernel refuses (an error); a partial run; a callable made, run and
released. Every call is written, in order, as
`{"service", "method", "request", "response", "code", "message"}` with the
messages' bytes in base64 (`response` null for a failed call), plus the values
the client saw (`"client"`), so a test can check what actorflow produces for
the same requests against what TensorFlow answered.

Regenerate with the interpreter of ACTORFLOW_TF_PYTHON:
    $ACTORFLOW_TF_PYTHON tests/tf_interop/record_traffic.py \
        distributed/tests/fixtures/tf_traffic.json
"""

import base64
import json
import os
import socket
import sys
import threading
from concurrent import futures

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import grpc  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import config_pb2  # noqa: E402
from tensorflow.core.protobuf import tensorflow_server_pb2  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
tf1.disable_control_flow_v2()
tf1.disable_resource_variables()

MAX = 64 << 20
OPTIONS = [("grpc.max_send_message_length", MAX), ("grpc.max_receive_message_length", MAX)]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Recorder(grpc.GenericRpcHandler):
    """Forwards every unary call to `upstream` as raw bytes and logs it."""

    def __init__(self, upstream, log, lock):
        self.channel = grpc.insecure_channel(upstream, options=OPTIONS)
        self.log = log
        self.lock = lock

    def service(self, details):
        method = details.method
        call = self.channel.unary_unary(method)

        def handle(request, context):
            remaining = context.time_remaining()
            if remaining is not None and remaining > 3600:
                remaining = None  # no deadline (gRPC reports one centuries away)
            entry = {
                "service": method.split("/")[1],
                "method": method.split("/")[2],
                "request": base64.b64encode(request).decode(),
            }
            try:
                response = call(request, timeout=remaining)
            except grpc.RpcError as e:
                entry.update(response=None, code=e.code().value[0], message=e.details())
                with self.lock:
                    self.log.append(entry)
                context.abort(e.code(), e.details())
            entry.update(response=base64.b64encode(response).decode(), code=0, message="")
            with self.lock:
                self.log.append(entry)
            return response

        return grpc.unary_unary_rpc_method_handler(handle)


def proxy(port, upstream, log, lock):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=OPTIONS)
    server.add_generic_rpc_handlers((Recorder(upstream, log, lock),))
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    return server


def scenarios(target):
    seen = {}
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [2, 2], name="x")
        with tf.device("/job:worker/task:1"):
            v = tf1.Variable([[1.0, 2.0], [3.0, 4.0]], name="v")
            y = tf.matmul(x, v, name="y")
        z = tf.reduce_sum(y, name="z")
        loose = tf1.placeholder(tf.float32, None, name="loose")
        with tf.device("/job:worker/task:1"):
            square = tf.reshape(loose, [2, 2], name="square")
        init = tf1.global_variables_initializer()
    with tf1.Session(target, graph=g) as s:
        s.run(init)
        seen["run"] = [
            s.run([y, z], {x: [[1.0, 0.0], [0.0, 1.0]]}),
            s.run(z, {x: [[0.5, 0.5], [2.0, -1.0]]}),
        ]
        # A new node after the first run: ExtendSession carries it alone.
        with g.as_default():
            w = tf.add(z, 100.0, name="w")
        seen["extended"] = s.run(w, {x: [[1.0, 1.0], [1.0, 1.0]]})
        try:
            s.run(square, {loose: np.ones([3], np.float32)})
        except tf.errors.OpError as e:
            seen["error"] = type(e).__name__
        h = s.partial_run_setup([y, w], [x])
        seen["partial"] = [
            s.partial_run(h, y, feed_dict={x: [[2.0, 0.0], [0.0, 2.0]]}),
            s.partial_run(h, w),
        ]
        opts = config_pb2.CallableOptions()
        opts.feed.append(x.name)
        opts.fetch.append(z.name)
        f = s._make_callable_from_options(opts)
        seen["callable"] = [f(np.full([2, 2], 1.5, np.float32)), f(np.eye(2, dtype=np.float32))]
        del f
    return seen


def to_json(v):
    if isinstance(v, dict):
        return {k: to_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


def main():
    out = sys.argv[1]
    master_port, task0, proxy1, task1 = (free_port() for _ in range(4))
    cluster = tf.train.ClusterSpec(
        {"worker": ["127.0.0.1:%d" % task0, "127.0.0.1:%d" % proxy1]}
    )
    servers = [tf.distribute.Server(cluster, job_name="worker", task_index=0)]
    task1_def = tensorflow_server_pb2.ServerDef(
        cluster=cluster.as_cluster_def(), job_name="worker", task_index=1, protocol="grpc"
    )
    task1_def.port = task1
    servers.append(tf.distribute.Server(task1_def))
    log, lock = [], threading.Lock()
    proxies = [
        proxy(master_port, "127.0.0.1:%d" % task0, log, lock),
        proxy(proxy1, "127.0.0.1:%d" % task1, log, lock),
    ]
    seen = scenarios("grpc://127.0.0.1:%d" % master_port)
    # Let the master's last calls (CleanupGraph, DeleteWorkerSession) land.
    threading.Event().wait(1.0)
    for p in proxies:
        p.stop(None)
    with lock:
        calls = list(log)
    with open(out, "w") as f:
        json.dump({"tensorflow": tf.__version__, "calls": calls, "client": to_json(seen)}, f, indent=1)
        f.write("\n")
    print("recorded %d calls to %s" % (len(calls), out))


if __name__ == "__main__":
    main()
