//! Mutual TLS between a cluster's servers and their clients, with certificates
//! made here by a CA of the test's own (rcgen): a cluster over TLS gives the
//! local answers (tensors crossing tasks included); plaintext clients, clients
//! of another CA and servers of another CA are refused with an error, never a
//! hang; bad certificate files are `InvalidArgument`/`NotFound` naming the file.

use std::time::{Duration, Instant};

use actorflow_distributed::{ClientOptions, ClusterSpec, Connect, Server, ServerOptions, Tls};
use actors::{Session, SessionOptions};
use graph::builder::Scope;
use graph::{ops, Code, DType, GraphDef, Shape, Tensor};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

mod common;
use common::Cluster;

/// A certificate authority that signs certificates for 127.0.0.1.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Ca { issuer }
    }

    /// A certificate for 127.0.0.1 and localhost signed by this CA, trusting
    /// `trust` (this CA unless told otherwise).
    fn tls(&self, trust: Option<&Ca>) -> Tls {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let ca = trust.unwrap_or(self).issuer.pem();
        Tls::from_pem(cert.pem(), key.serialize_pem(), ca).unwrap()
    }
}

/// Two worker tasks on free ports of 127.0.0.1, each with `tls(task)`.
fn cluster(tls: impl Fn(u32) -> Option<Tls>) -> Vec<Server> {
    Cluster::start_with(&[("worker", 2)], |o| o.peer_options.tls = tls(o.task)).servers
}

fn client(tls: Option<Tls>) -> ClientOptions {
    let mut c = ClientOptions {
        rpc_timeout: Duration::from_secs(10),
        ..Default::default()
    };
    c.peer.tls = tls;
    c
}

/// x (fed on task 0) doubled on task 1; a 1 MiB vector made on task 1 and summed
/// on task 0 (the raw `RecvTensor` path).
fn graph() -> (GraphDef, String, String, String) {
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::scalar()).unwrap();
    let t1 = s.with_device("/job:worker/task:1");
    let y = ops::add(&t1, &x, &x).unwrap();
    let big = ops::fill_to(&t1, &[256 * 1024], &y).unwrap();
    let sum = ops::sum_axes(&s.with_device("/job:worker/task:0"), &big, &[0], false).unwrap();
    (s.graph_def(), x.name(), y.name(), sum.name())
}

#[test]
fn a_cluster_over_mutual_tls_gives_the_local_answers() {
    let ca = Ca::new();
    let servers = cluster(|_| Some(ca.tls(None)));
    let (gd, x, y, sum) = graph();
    let sess = Session::connect_with(
        &servers[0].target(),
        &gd,
        SessionOptions::default(),
        client(Some(ca.tls(None))),
    )
    .unwrap();
    for v in [1.0f32, -2.5] {
        let out = sess
            .run(&[(&x, Tensor::scalar(v))], &[&y, &sum], &[])
            .unwrap();
        assert_eq!(out[0], Tensor::scalar(2.0 * v));
        assert_eq!(out[1], Tensor::scalar(2.0 * v * 256.0 * 1024.0));
    }
    assert!(servers[1].recv_tensor_calls() > 0 || servers[0].recv_tensor_calls() > 0);
    sess.close().unwrap();
}

/// `f` fails, with a code of a refused connection, within the client's bound.
fn refused(f: impl FnOnce() -> graph::Result<Session>) {
    let start = Instant::now();
    let e = f().err().expect("the connection should be refused");
    assert!(
        matches!(e.code(), Code::Unavailable | Code::DeadlineExceeded),
        "{e}"
    );
    assert!(start.elapsed() < Duration::from_secs(20), "{e}");
}

#[test]
fn plaintext_and_foreign_peers_are_refused_and_the_server_stays_usable() {
    let ca = Ca::new();
    let other = Ca::new();
    let servers = cluster(|_| Some(ca.tls(None)));
    let (gd, x, y, _) = graph();
    let target = servers[0].target();
    let opts = SessionOptions::default;
    // No TLS at all.
    refused(|| Session::connect_with(&target, &gd, opts(), client(None)));
    // A certificate of another CA (the server refuses the client).
    refused(|| Session::connect_with(&target, &gd, opts(), client(Some(other.tls(Some(&ca))))));
    // A client that trusts another CA (the client refuses the server).
    refused(|| Session::connect_with(&target, &gd, opts(), client(Some(ca.tls(Some(&other))))));
    // The server still serves its own.
    let sess = Session::connect_with(&target, &gd, opts(), client(Some(ca.tls(None)))).unwrap();
    let out = sess
        .run(&[(&x, Tensor::scalar(3.0f32))], &[&y], &[])
        .unwrap();
    assert_eq!(out[0], Tensor::scalar(6.0f32));
    sess.close().unwrap();
}

#[test]
fn a_task_of_another_ca_cannot_join_the_step() {
    // Task 1 holds a certificate the others do not trust: the master cannot
    // reach it, and opening the session (or, had it opened, the step) fails
    // within a bound, naming the task and the certificate.
    let ca = Ca::new();
    let other = Ca::new();
    let servers = cluster(|t| {
        Some(if t == 0 {
            ca.tls(None)
        } else {
            other.tls(None)
        })
    });
    let (gd, x, y, _) = graph();
    let start = Instant::now();
    let e = Session::connect_with(
        &servers[0].target(),
        &gd,
        SessionOptions::default(),
        client(Some(ca.tls(None))),
    )
    .and_then(|sess| sess.run(&[(&x, Tensor::scalar(1.0f32))], &[&y], &[]))
    .unwrap_err();
    assert!(matches!(e.code(), Code::Unavailable | Code::Aborted), "{e}");
    assert!(
        e.message().contains("task:1") && e.message().contains("certificate"),
        "{e}"
    );
    assert!(start.elapsed() < Duration::from_secs(30), "{e}");
}

#[test]
fn bad_certificate_files_are_clear_errors() {
    let e = Tls::from_pem("not pem", "not pem", "not pem").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("certificate"), "{e}");

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ca = Ca::new();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, ca.issuer.pem()).unwrap();
    std::fs::write(
        &key,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let missing = dir.join("missing.pem");
    let e = Tls::from_files(&missing, &cert, &cert).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("missing.pem"), "{e}");
    // A certificate where the key should be.
    let e = Tls::from_files(&cert, &key, &cert).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("key.pem"), "{e}");

    // Well-labelled garbage passes the file check and is refused when the
    // server starts, with an error and no panic.
    let garbage = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
    let tls = Tls::from_pem(ca.issuer.pem(), garbage, ca.issuer.pem()).unwrap();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let spec = ClusterSpec::new()
        .with_job("worker", &[l.local_addr().unwrap().to_string()])
        .unwrap();
    let mut o = ServerOptions::new(spec, "worker", 0);
    o.peer_options.tls = Some(tls);
    let e = Server::start_with_listener(o, l).err().expect("a bad key");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
}
