//! Runtime lifecycle and leaks: run alone (one test per binary) so that thread and
//! table counts are not disturbed by other tests.

use actorflow::{
    ops, DType, Runtime, RuntimeOptions, Scope, Session, SessionOptions, Shape, Tensor,
};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn runtimes_shut_down_cleanly_and_steps_leave_no_rendezvous_behind() {
    let before = threads();
    {
        let rt = Runtime::new(RuntimeOptions::default().with_cpu_devices(3)).unwrap();
        assert!(threads() > before, "the runtime started threads");
        let s = Scope::new();
        let x =
            ops::placeholder(&s.with_device("/device:CPU:0"), DType::F32, Shape::scalar()).unwrap();
        let mut y = x.clone();
        for i in 0..6 {
            let d = s.with_device(&format!("/device:CPU:{}", i % 3));
            y = ops::add(&d, &y, &y).unwrap();
        }
        let sess = Session::in_runtime(&rt, &s.graph_def(), SessionOptions::default()).unwrap();
        let tables = actorflow::rendezvous::local::live_tables();
        for i in 0..10_000 {
            let out = sess
                .run(&[(&x.name(), Tensor::scalar(i as f32))], &[&y.name()], &[])
                .unwrap();
            assert_eq!(out[0], Tensor::scalar(i as f32 * 64.0));
        }
        assert_eq!(
            actorflow::rendezvous::local::live_tables(),
            tables,
            "every step's rendezvous is gone"
        );
        rt.shutdown();
        assert!(rt.is_shut_down());
        assert!(sess
            .run(&[(&x.name(), Tensor::scalar(1.0f32))], &[&y.name()], &[])
            .is_err());
    }
    // dropping the last handles of a session's private runtime also shuts it down
    {
        let s = Scope::new();
        let c = ops::scalar(&s, 1i32).unwrap();
        let sess = Session::new(
            &s.graph_def(),
            SessionOptions::default().with_cpu_devices(2),
        )
        .unwrap();
        sess.run(&[], &[&c.name()], &[]).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(threads(), before, "no thread outlives its runtime");
}
