//! A cluster of in-process servers on free ports of 127.0.0.1, shared by the
//! test binaries of this directory.

#![allow(dead_code)]

use actorflow_distributed::{ClusterSpec, Server, ServerOptions};

/// Servers of `jobs` (name, tasks), each with `devices` CPUs; stopped on drop.
pub struct Cluster {
    pub servers: Vec<Server>,
    pub spec: ClusterSpec,
}

impl Cluster {
    pub fn start(jobs: &[(&str, usize)], devices: usize) -> Cluster {
        Cluster::start_with(jobs, |o| o.cpu_devices = devices)
    }

    /// [`Cluster::start`] with each task's options set by `configure`.
    pub fn start_with(jobs: &[(&str, usize)], configure: impl Fn(&mut ServerOptions)) -> Cluster {
        let mut listeners = Vec::new();
        let mut spec = ClusterSpec::new();
        for (job, n) in jobs {
            let mut addrs = Vec::new();
            for t in 0..*n {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                addrs.push(l.local_addr().unwrap().to_string());
                listeners.push((job.to_string(), t as u32, l));
            }
            spec = spec.with_job(job, &addrs).unwrap();
        }
        let servers = listeners
            .into_iter()
            .map(|(job, task, l)| {
                let mut o = ServerOptions::new(spec.clone(), &job, task);
                configure(&mut o);
                Server::start_with_listener(o, l).unwrap()
            })
            .collect();
        Cluster { servers, spec }
    }

    /// A runtime for a test's own gRPC calls, and a channel to server `i`.
    pub fn channel(&self, i: usize) -> (tokio::runtime::Runtime, tonic::transport::Channel) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let addr = self.servers[i].local_addr();
        let channel = rt
            .block_on(
                tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                    .unwrap()
                    .connect(),
            )
            .unwrap();
        (rt, channel)
    }

    pub fn target(&self, i: usize) -> String {
        self.servers[i].target()
    }
}
