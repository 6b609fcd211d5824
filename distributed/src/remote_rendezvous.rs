//! The rendezvous of a worker in a cluster (TensorFlow's `RpcRemoteRendezvous`):
//! a step's table in which sends always stay local, and a receive of a value
//! produced on **another task's** device is one `RecvTensor` call to that task's
//! worker, which answers when its `_Send` has run (or the step was aborted there).
//!
//! [`RpcTables`] gives each step its [`RemoteRendezvous`] (wrapping the step's
//! local table from the worker's [`RendezvousMgr`], the one peers' `RecvTensor`s
//! read), and ends it at `CleanupGraph`. Aborting a step's table fails every
//! receive still waiting in it, local or remote, and cancels the remote calls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use graph::tensor::memory::Charge;
use graph::{Result, Status};
use proto::tensorflow::RecvTensorRequest;
use rendezvous::{
    FrameIter, LocalRendezvous, ParsedKey, RecvCallback, Rendezvous, RendezvousMgr, StepTables,
    Value,
};

use crate::cluster::TaskName;
use crate::peers::Peers;
use crate::tensor_coding::{self, CallError};

type Slot = Arc<Mutex<Option<RecvCallback>>>;

#[derive(Default)]
struct Pending {
    aborted: Option<Status>,
    calls: HashMap<u64, (Slot, Option<tokio::task::AbortHandle>)>,
}

/// A step's table on a worker of a cluster; see the module docs.
pub struct RemoteRendezvous {
    step_id: u64,
    local: Arc<LocalRendezvous>,
    /// `/job:J/replica:0/task:T/`: keys whose source starts so are local.
    local_prefix: Arc<str>,
    peers: Arc<Peers>,
    pending: Mutex<Pending>,
    next_call: AtomicU64,
    me: Weak<RemoteRendezvous>,
}

fn take(slot: &Slot) -> Option<RecvCallback> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).take()
}

impl RemoteRendezvous {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn recv_remote(&self, key: &ParsedKey, fi: FrameIter, cb: RecvCallback) {
        let task = match TaskName::of_device(&key.src_device) {
            Ok(t) => t,
            Err(e) => return cb(Err(e)),
        };
        let channel = match self.peers.channel(&task) {
            Ok(c) => c,
            Err(e) => return cb(Err(e)),
        };
        let slot: Slot = Arc::new(Mutex::new(Some(cb)));
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        {
            let mut p = self.pending();
            if let Some(st) = &p.aborted {
                let st = st.clone();
                drop(p);
                if let Some(cb) = take(&slot) {
                    cb(Err(st));
                }
                return;
            }
            p.calls.insert(id, (Arc::clone(&slot), None));
        }
        let mut req = RecvTensorRequest {
            step_id: self.step_id as i64,
            rendezvous_key: key.full_key(fi),
            ..Default::default()
        };
        tensor_coding::accept_chunks(&mut req);
        let me = self.me.clone();
        let peers = Arc::clone(&self.peers);
        // The `_Recv` kernel asks on its device's thread: the tensor that arrives
        // is that device's memory.
        let charge = Charge::current();
        let handle = self.peers.runtime().spawn(async move {
            let peer = task.to_string();
            let r = match tensor_coding::recv_tensor(channel, &req, &peer, charge).await {
                Ok(v) => Ok(v),
                Err(CallError::Status(s)) => Err(s.context(format!("From {task}"))),
                Err(CallError::Transport(s)) => {
                    peers.forget(&task);
                    Err(s)
                }
            };
            if let Some(cb) = take(&slot) {
                cb(r);
            }
            if let Some(me) = me.upgrade() {
                me.pending().calls.remove(&id);
            }
        });
        if let Some(e) = self.pending().calls.get_mut(&id) {
            e.1 = Some(handle.abort_handle());
        }
    }
}

impl Rendezvous for RemoteRendezvous {
    fn send(&self, key: &ParsedKey, fi: FrameIter, value: Value) -> Result<()> {
        self.local.send(key, fi, value)
    }

    fn recv(
        &self,
        key: &ParsedKey,
        fi: FrameIter,
        make_callback: &mut dyn FnMut() -> RecvCallback,
    ) -> Option<Result<Value>> {
        if key.src_device.starts_with(&*self.local_prefix) {
            return self.local.recv(key, fi, make_callback);
        }
        if let Some(st) = self.abort_status() {
            return Some(Err(st));
        }
        self.recv_remote(key, fi, make_callback());
        None
    }

    fn abort(&self, status: Status) {
        self.local.abort(status.clone());
        let calls: Vec<(Slot, Option<tokio::task::AbortHandle>)> = {
            let mut p = self.pending();
            if p.aborted.is_none() {
                p.aborted = Some(status.clone());
            }
            p.calls.drain().map(|(_, c)| c).collect()
        };
        for (slot, handle) in calls {
            if let Some(h) = handle {
                h.abort();
            }
            if let Some(cb) = take(&slot) {
                cb(Err(status.clone()));
            }
        }
    }

    fn abort_status(&self) -> Option<Status> {
        self.local.abort_status()
    }
}

/// A worker's per-step tables in a cluster; see the module docs.
pub struct RpcTables {
    local: Arc<RendezvousMgr>,
    local_prefix: Arc<str>,
    peers: Arc<Peers>,
    steps: Mutex<HashMap<u64, Arc<RemoteRendezvous>>>,
}

impl RpcTables {
    /// The tables of the worker of `task`, whose local tables are `local`'s.
    pub fn new(local: Arc<RendezvousMgr>, task: &TaskName, peers: Arc<Peers>) -> RpcTables {
        RpcTables {
            local,
            local_prefix: Arc::from(format!("{}/", task.device_prefix())),
            peers,
            steps: Mutex::new(HashMap::new()),
        }
    }

    /// The local tables (what a peer's `RecvTensor` reads).
    pub fn local(&self) -> &Arc<RendezvousMgr> {
        &self.local
    }

    /// The number of steps with a table here.
    pub fn len(&self) -> usize {
        self.steps.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// True when no step has a table here.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Aborts every step's table (the server is stopping).
    pub fn abort_all(&self, status: Status) {
        let all: Vec<Arc<RemoteRendezvous>> = self
            .steps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, r)| r)
            .collect();
        for r in all {
            r.abort(status.clone());
        }
        self.local.abort_all(status);
    }
}

impl StepTables for RpcTables {
    fn find_or_create(&self, step_id: u64) -> Result<Arc<dyn Rendezvous>> {
        let local = self.local.find_or_create(step_id)?;
        let mut steps = self.steps.lock().unwrap_or_else(|p| p.into_inner());
        let r = steps.entry(step_id).or_insert_with(|| {
            Arc::new_cyclic(|me| RemoteRendezvous {
                step_id,
                local,
                local_prefix: Arc::clone(&self.local_prefix),
                peers: Arc::clone(&self.peers),
                pending: Mutex::new(Pending::default()),
                next_call: AtomicU64::new(0),
                me: me.clone(),
            })
        });
        Ok(Arc::clone(r) as Arc<dyn Rendezvous>)
    }

    fn cleanup(&self, step_id: u64) {
        let r = self
            .steps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&step_id);
        self.local.cleanup(step_id);
        if let Some(r) = r {
            r.abort(Status::aborted(format!("Cleanup {step_id}")));
        }
    }
}
