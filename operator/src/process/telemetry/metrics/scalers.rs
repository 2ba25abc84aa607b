//! What the scalers' reads record: values, activity, latency, errors, and the HTTP requests of
//! HTTP-based scalers (`keda_scaler_*`).

use super::*;

impl Metrics {
    /// `--enable-high-cardinality-metrics-labels`: from now on the HTTP request duration
    /// histogram carries the object, trigger and metric labels too (set it before recording).
    pub fn enable_high_cardinality_labels(&self) {
        self.inner.high_cardinality.store(true, Ordering::Relaxed);
    }

    /// `keda_scaler_http_requests_total` and `keda_scaler_http_request_duration_seconds`: one
    /// outbound HTTP request of a scaler, made while reading the metric `read` names.
    pub fn scaler_http_request(
        &self,
        read: &RequestLabels,
        outcome: RequestOutcome,
        elapsed: Duration,
    ) {
        let mut labels = HttpRequestLabels {
            read: RequestLabels {
                // Not a label of these families: one series per request target.
                resource_type: String::new(),
                ..read.clone()
            },
            status_code: outcome.label(),
            full: true,
        };
        self.families().http_requests.get_or_create(&labels).inc();
        if !self.inner.high_cardinality.load(Ordering::Relaxed) {
            labels = HttpRequestLabels {
                read: RequestLabels {
                    scaler: labels.read.scaler,
                    ..RequestLabels::default()
                },
                status_code: labels.status_code,
                full: false,
            };
        }
        self.families()
            .http_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// `keda_scaler_empty_upstream_responses_total`: the event source answered the read `read`
    /// names with nothing (KEDA's `RecordEmptyUpstreamResponse`). As in KEDA, these series stay
    /// when their object is deleted.
    pub fn scaler_empty_upstream_response(&self, read: &RequestLabels, ignore_null_values: bool) {
        let labels = EmptyUpstreamLabels {
            read: read.clone(),
            ignore_null_values,
        };
        self.families().empty_upstream.get_or_create(&labels).inc();
    }

    /// `keda_scaler_metrics_value`: the metric value the HPA would use.
    pub fn scaler_value<'a>(&self, labels: impl Into<TriggerKey<'a>>, value: f64) {
        self.families()
            .per_object
            .scaler_value(labels.into(), value);
    }

    /// `keda_scaler_active`: 1 when the scaler is active, else 0.
    pub fn scaler_active<'a>(&self, labels: impl Into<TriggerKey<'a>>, active: bool) {
        self.families()
            .per_object
            .scaler_active(labels.into(), active);
    }

    /// `keda_scaler_metrics_latency_seconds`: how long reading the scaler's metric took.
    pub fn scaler_latency<'a>(&self, labels: impl Into<TriggerKey<'a>>, latency: Duration) {
        self.families()
            .per_object
            .scaler_latency(labels.into(), latency.as_secs_f64());
    }

    /// A failed scaler read: increments `keda_scaler_detail_errors_total` for the scaler and
    /// the owner's `keda_scaled_object_errors_total` (or `keda_scaled_job_errors_total`), as
    /// KEDA does.
    pub fn scaler_error<'a>(&self, labels: impl Into<TriggerKey<'a>>) {
        let key = labels.into();
        let per_object = &self.families().per_object;
        per_object.scaler_errors(key, 1);
        per_object.object_errors(key.kind, key.namespace, key.scaled_resource, 1);
    }

    /// A successful scaler read: makes sure the error counters exist at 0 so `rate()` works
    /// from the first error on, as KEDA does.
    pub fn scaler_ok<'a>(&self, labels: impl Into<TriggerKey<'a>>) {
        let key = labels.into();
        let per_object = &self.families().per_object;
        per_object.scaler_errors(key, 0);
        per_object.object_errors(key.kind, key.namespace, key.scaled_resource, 0);
    }
}

impl RequestObserver for Metrics {
    fn request(&self, labels: &RequestLabels, outcome: RequestOutcome, elapsed: Duration) {
        self.scaler_http_request(labels, outcome, elapsed);
    }

    fn empty_upstream_response(&self, labels: &RequestLabels, ignore_null_values: bool) {
        self.scaler_empty_upstream_response(labels, ignore_null_values);
    }
}
