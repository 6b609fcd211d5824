"""A TensorFlow task for tests/tf_interop.rs: `tf_server.py CLUSTER_JSON JOB TASK`.

Starts `tf.distribute.Server` for task TASK of job JOB in the cluster given as JSON
(job name -> list of host:port), prints `ready` and serves until killed.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

spec = tf.train.ClusterSpec(json.loads(sys.argv[1]))
server = tf.distribute.Server(spec, job_name=sys.argv[2], task_index=int(sys.argv[3]))
print("ready", flush=True)
server.join()
