//! The server's Prometheus metrics, served at `/monitoring/prometheus/metrics`
//! on the REST port (TensorFlow Serving's path) in the OpenMetrics text format,
//! under TensorFlow Serving's metric names:
//!
//! - `:tensorflow:serving:request_count{model_name,API,entrypoint,status}`:
//!   requests by API (`predict`, `classify`, `regress`, `metadata`, `status`),
//!   entry point (`REST`, `GRPC`) and canonical status (`OK`, `NOT_FOUND`, …);
//! - `:tensorflow:serving:request_latency{model_name,API,entrypoint}`:
//!   a histogram of request latencies in microseconds;
//! - `:tensorflow:serving:batching_session:processed_batch_size{model_name,signature}`
//!   and `…:padding_size`: a histogram of the sizes of the batches run, and of the
//!   rows added to reach an allowed batch size;
//! - `:tensorflow:serving:batching_session:queue_depth{model_name,signature}`:
//!   requests waiting to join a batch;
//! - `:tensorflow:serving:model_load_events{model_name,event}`: `load`,
//!   `load_failure`, `unload`;
//! - `:tensorflow:serving:model_load_latency{model_name}`: load plus warmup time in
//!   microseconds;
//! - `:tensorflow:serving:available_versions{model_name}`: versions serving.
//!
//! Recording is a few atomic operations behind a read lock of the label map;
//! nothing on the request path allocates once a label set has been seen.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels2 = [(&'static str, String); 2];
type Labels3 = [(&'static str, String); 3];
type Labels4 = [(&'static str, String); 4];
type Labels1 = [(&'static str, String); 1];

fn latency_histogram() -> Histogram {
    // 10 µs to ~84 s.
    Histogram::new(exponential_buckets(10.0, 2.0, 24))
}

fn batch_histogram() -> Histogram {
    // 1, 2, 4, … 4096 rows.
    Histogram::new(exponential_buckets(1.0, 2.0, 13))
}

/// Where a request came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entrypoint {
    /// The REST API.
    Rest,
    /// The gRPC API.
    Grpc,
}

impl Entrypoint {
    fn label(self) -> &'static str {
        match self {
            Entrypoint::Rest => "REST",
            Entrypoint::Grpc => "GRPC",
        }
    }
}

/// Every metric of one server; see the module docs.
pub struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<Labels4, Counter>,
    latency: Family<Labels3, Histogram, fn() -> Histogram>,
    batch_size: Family<Labels2, Histogram, fn() -> Histogram>,
    padding: Family<Labels2, Histogram, fn() -> Histogram>,
    queue_depth: Family<Labels2, Gauge>,
    load_events: Family<Labels2, Counter>,
    load_latency: Family<Labels1, Histogram, fn() -> Histogram>,
    available: Family<Labels1, Gauge>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every metric, all at zero.
    pub fn new() -> Metrics {
        let m = Metrics {
            registry: Mutex::new(Registry::default()),
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            batch_size: Family::new_with_constructor(batch_histogram),
            padding: Family::new_with_constructor(batch_histogram),
            queue_depth: Family::default(),
            load_events: Family::default(),
            load_latency: Family::new_with_constructor(latency_histogram),
            available: Family::default(),
        };
        {
            let mut r = m.registry.lock().unwrap_or_else(|e| e.into_inner());
            r.register(
                ":tensorflow:serving:request_count",
                "Requests by model, API, entry point and status",
                m.requests.clone(),
            );
            r.register(
                ":tensorflow:serving:request_latency",
                "Request latency in microseconds",
                m.latency.clone(),
            );
            r.register(
                ":tensorflow:serving:batching_session:processed_batch_size",
                "Sizes of the batches run",
                m.batch_size.clone(),
            );
            r.register(
                ":tensorflow:serving:batching_session:padding_size",
                "Rows of padding added to reach an allowed batch size",
                m.padding.clone(),
            );
            r.register(
                ":tensorflow:serving:batching_session:queue_depth",
                "Requests waiting to join a batch",
                m.queue_depth.clone(),
            );
            r.register(
                ":tensorflow:serving:model_load_events",
                "Model version loads, load failures and unloads",
                m.load_events.clone(),
            );
            r.register(
                ":tensorflow:serving:model_load_latency",
                "Time to load and warm up a model version, in microseconds",
                m.load_latency.clone(),
            );
            r.register(
                ":tensorflow:serving:available_versions",
                "Versions of a model serving",
                m.available.clone(),
            );
        }
        m
    }

    /// Records one request: its model (empty when the request named none it
    /// could find), API, entry point, outcome and latency.
    pub fn request(
        &self,
        model: &str,
        api: &'static str,
        entrypoint: Entrypoint,
        code: Option<graph::Code>,
        latency: Duration,
    ) {
        let status = match code {
            None => "OK".to_owned(),
            Some(c) => c.name().to_owned(),
        };
        self.requests
            .get_or_create(&[
                ("model_name", model.to_owned()),
                ("API", api.to_owned()),
                ("entrypoint", entrypoint.label().to_owned()),
                ("status", status),
            ])
            .inc();
        self.latency
            .get_or_create(&[
                ("model_name", model.to_owned()),
                ("API", api.to_owned()),
                ("entrypoint", entrypoint.label().to_owned()),
            ])
            .observe(latency.as_secs_f64() * 1e6);
    }

    /// The batch metrics of one signature of a model, for its batcher.
    pub fn batch_hook(&self, model: &str, signature: &str) -> BatchMetrics {
        let labels: Labels2 = [
            ("model_name", model.to_owned()),
            ("signature", signature.to_owned()),
        ];
        BatchMetrics {
            batch_size: self.batch_size.get_or_create(&labels).clone(),
            padding: self.padding.get_or_create(&labels).clone(),
            queue_depth: self.queue_depth.get_or_create(&labels).clone(),
        }
    }

    /// Records a load (`ok`) or a failed load of a version of `model`, and the
    /// time it took.
    pub fn load(&self, model: &str, ok: bool, took: Duration) {
        let event = if ok { "load" } else { "load_failure" };
        self.load_events
            .get_or_create(&[
                ("model_name", model.to_owned()),
                ("event", event.to_owned()),
            ])
            .inc();
        if ok {
            self.load_latency
                .get_or_create(&[("model_name", model.to_owned())])
                .observe(took.as_secs_f64() * 1e6);
        }
    }

    /// Records the unload of a version of `model`.
    pub fn unload(&self, model: &str) {
        self.load_events
            .get_or_create(&[
                ("model_name", model.to_owned()),
                ("event", "unload".to_owned()),
            ])
            .inc();
    }

    /// Sets how many versions of `model` serve.
    pub fn set_available(&self, model: &str, versions: usize) {
        self.available
            .get_or_create(&[("model_name", model.to_owned())])
            .set(versions as i64);
    }

    /// Every metric in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let r = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &r);
        out
    }
}

/// The metrics a batcher records (cheap handles into the server's families).
#[derive(Clone, Debug)]
pub struct BatchMetrics {
    batch_size: Histogram,
    padding: Histogram,
    queue_depth: Gauge,
}

impl BatchMetrics {
    /// A batch of `rows` rows ran, `padding` of them padding.
    pub fn batch(&self, rows: usize, padding: usize) {
        self.batch_size.observe(rows as f64);
        self.padding.observe(padding as f64);
    }

    /// `n` requests wait to join a batch.
    pub fn queue_depth(&self, n: usize) {
        self.queue_depth.set(n as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_appear_in_the_exposition() {
        let m = Metrics::new();
        m.request(
            "mlp",
            "predict",
            Entrypoint::Rest,
            None,
            Duration::from_micros(50),
        );
        m.request(
            "mlp",
            "predict",
            Entrypoint::Rest,
            None,
            Duration::from_micros(70),
        );
        m.request(
            "mlp",
            "predict",
            Entrypoint::Grpc,
            Some(graph::Code::InvalidArgument),
            Duration::from_micros(5),
        );
        m.batch_hook("mlp", "serving_default").batch(8, 3);
        m.load("mlp", true, Duration::from_millis(12));
        m.set_available("mlp", 1);
        let text = m.encode();
        assert!(
            text.contains(
                ":tensorflow:serving:request_count_total{model_name=\"mlp\",API=\"predict\",entrypoint=\"REST\",status=\"OK\"} 2"
            ),
            "{text}"
        );
        assert!(text.contains("status=\"INVALID_ARGUMENT\"} 1"), "{text}");
        assert!(
            text.contains(
                ":tensorflow:serving:batching_session:processed_batch_size_sum{model_name=\"mlp\",signature=\"serving_default\"} 8.0"
            ),
            "{text}"
        );
        assert!(
            text.contains(":tensorflow:serving:available_versions{model_name=\"mlp\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
