"""A TensorFlow 1.x-style client for tests/tf_interop.rs: `tf_client.py TARGET`.

Builds a graph with a 4 MiB variable and a fed product on /job:worker/task:1 and
their sum on task 0, runs it through the master at TARGET and prints
`result=<value>` (2 * 2**20 + 3 * 2 = 2097158), then runs it again as a partial
run (y first, then the sum: `is_partial` RunGraphs on both tasks) and prints
`partial=<y>,<sum>`.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()

g = tf.Graph()
with g.as_default():
    with tf.device("/job:worker/task:1"):
        v = tf1.Variable(tf.fill([1 << 20], 2.0), use_resource=False, name="big")
        x = tf1.placeholder(tf.float32, [])
        y = x * 3.0
    with tf.device("/job:worker/task:0"):
        total = tf.reduce_sum(v) + y
    init = tf1.global_variables_initializer()
with tf1.Session(sys.argv[1], graph=g) as s:
    s.run(init)
    print("result=%r" % float(s.run(total, {x: 2.0})), flush=True)
    h = s.partial_run_setup([y, total], [x])
    first = float(s.partial_run(h, y, feed_dict={x: 2.0}))
    print("partial=%r,%r" % (first, float(s.partial_run(h, total))), flush=True)
