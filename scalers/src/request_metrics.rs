//! Who an outbound HTTP request of a scaler is made for, so the operator can count it in KEDA's
//! `keda_scaler_http_requests_total` and `keda_scaler_http_request_duration_seconds`.
//!
//! KEDA puts the scaler type, trigger name, metric name, namespace and object name into the Go
//! context of a metric read (`metricscollector.BuildScalerRequestCtx`) and its instrumented HTTP
//! transport records every request made under that context. keda-rs does the same with a
//! task-local: the operator runs each read inside [`scope`], and the HTTP-based scalers' clients
//! call [`observe`] once the answer's head has arrived (or the request failed). Pooled clients
//! are shared by many triggers, so the labels cannot live on the client: they travel with the
//! read. A request made outside a scope (a test, a background task) is not recorded, as in
//! KEDA, whose transport skips requests without the context.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The labels of one metric read: KEDA's `namespace`, `scaled_resource`, `scaler`,
/// `trigger_name` and `metric_name`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestLabels {
    /// Namespace of the ScaledObject or ScaledJob.
    pub namespace: String,
    /// Its name.
    pub scaled_resource: String,
    /// The trigger's `type` (`prometheus`, `metrics-api`, ...).
    pub scaler: String,
    /// The trigger's `name` (empty when it has none).
    pub trigger_name: String,
    /// The External metric being read (`s0-prometheus`).
    pub metric_name: String,
    /// `ScaledObject` or `ScaledJob`: KEDA's `resourceType` of
    /// `keda_scaler_empty_upstream_responses_total` (not a label of the HTTP families).
    pub resource_type: String,
}

/// How a request ended: the answer's status, or no answer at all (KEDA's `status_code="error"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestOutcome {
    /// The server answered with this status.
    Status(u16),
    /// The request could not be sent, or no answer came in time.
    Error,
}

impl RequestOutcome {
    /// The `status_code` label: the status as digits, or `error`.
    pub fn label(self) -> String {
        match self {
            Self::Status(code) => code.to_string(),
            Self::Error => "error".to_string(),
        }
    }
}

/// Where requests are recorded (the operator's metrics registry).
pub trait RequestObserver: Send + Sync {
    /// One request of a read labelled `labels` ended with `outcome` after `elapsed` (from
    /// sending to the answer's head).
    fn request(&self, labels: &RequestLabels, outcome: RequestOutcome, elapsed: Duration);

    /// The event source of a read labelled `labels` answered with nothing: KEDA's
    /// `RecordEmptyUpstreamResponse`, which its prometheus scaler calls for a query whose
    /// result (or value list) is empty, whether `ignoreNullValues` then makes it 0 or an
    /// error. The default records nothing.
    fn empty_upstream_response(&self, labels: &RequestLabels, ignore_null_values: bool) {
        let _ = (labels, ignore_null_values);
    }
}

#[derive(Clone)]
struct Current {
    observer: Arc<dyn RequestObserver>,
    labels: Arc<RequestLabels>,
}

tokio::task_local! {
    static CURRENT: Current;
}

/// Runs `read` with `labels`: every request an HTTP-based scaler sends while `read` runs, in
/// the same task, is reported to `observer`.
pub async fn scope<F: Future>(
    observer: Arc<dyn RequestObserver>,
    labels: RequestLabels,
    read: F,
) -> F::Output {
    let current = Current {
        observer,
        labels: Arc::new(labels),
    };
    CURRENT.scope(current, read).await
}

/// Reports one request that started at `started` to the scope's observer, if any.
pub fn observe(outcome: RequestOutcome, started: Instant) {
    let elapsed = started.elapsed();
    // Outside a scope there is nobody to tell.
    let _ = CURRENT.try_with(|c| c.observer.request(&c.labels, outcome, elapsed));
}

/// Reports that the event source answered the current read with nothing (see
/// [`RequestObserver::empty_upstream_response`]) to the scope's observer, if any.
pub fn empty_upstream_response(ignore_null_values: bool) {
    // Outside a scope there is nobody to tell.
    let _ = CURRENT.try_with(|c| {
        c.observer
            .empty_upstream_response(&c.labels, ignore_null_values);
    });
}

/// Sends `request` and reports it (see [`observe`]).
///
/// # Errors
/// As [`reqwest::RequestBuilder::send`].
pub async fn send(request: reqwest::RequestBuilder) -> reqwest::Result<reqwest::Response> {
    let started = Instant::now();
    let sent = request.send().await;
    let outcome = match &sent {
        Ok(response) => RequestOutcome::Status(response.status().as_u16()),
        Err(_) => RequestOutcome::Error,
    };
    observe(outcome, started);
    sent
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Seen(
        Mutex<Vec<(RequestLabels, RequestOutcome)>>,
        Mutex<Vec<(String, bool)>>,
    );

    impl RequestObserver for Seen {
        fn request(&self, labels: &RequestLabels, outcome: RequestOutcome, _: Duration) {
            self.0.lock().unwrap().push((labels.clone(), outcome));
        }

        fn empty_upstream_response(&self, labels: &RequestLabels, ignore_null_values: bool) {
            self.1
                .lock()
                .unwrap()
                .push((labels.metric_name.clone(), ignore_null_values));
        }
    }

    fn labels(metric: &str) -> RequestLabels {
        RequestLabels {
            namespace: "shop".into(),
            scaled_resource: "orders".into(),
            scaler: "prometheus".into(),
            trigger_name: "rps".into(),
            metric_name: metric.into(),
            resource_type: "ScaledObject".into(),
        }
    }

    #[tokio::test]
    async fn empty_upstream_responses_in_a_scope_are_reported_and_others_are_not() {
        let seen = Arc::new(Seen::default());
        empty_upstream_response(true);
        scope(seen.clone(), labels("s0-prometheus"), async {
            empty_upstream_response(false);
        })
        .await;
        scope(seen.clone(), labels("s1-prometheus"), async {
            empty_upstream_response(true);
        })
        .await;
        assert_eq!(
            *seen.1.lock().unwrap(),
            vec![
                ("s0-prometheus".to_string(), false),
                ("s1-prometheus".to_string(), true)
            ]
        );
        assert!(seen.0.lock().unwrap().is_empty(), "no request was made");
    }

    #[tokio::test]
    async fn requests_in_a_scope_are_reported_with_its_labels_and_others_are_not() {
        let seen = Arc::new(Seen::default());
        observe(RequestOutcome::Status(200), Instant::now());
        scope(seen.clone(), labels("s0-prometheus"), async {
            observe(RequestOutcome::Status(503), Instant::now());
            scope(seen.clone(), labels("s1-prometheus"), async {
                observe(RequestOutcome::Error, Instant::now());
            })
            .await;
        })
        .await;
        // A task spawned from a scope is outside it.
        scope(seen.clone(), labels("s2-prometheus"), async {
            tokio::spawn(async { observe(RequestOutcome::Status(200), Instant::now()) })
                .await
                .unwrap();
        })
        .await;
        let seen = seen.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                (labels("s0-prometheus"), RequestOutcome::Status(503)),
                (labels("s1-prometheus"), RequestOutcome::Error),
            ]
        );
    }

    #[test]
    fn status_labels_are_the_digits_or_error() {
        assert_eq!(RequestOutcome::Status(404).label(), "404");
        assert_eq!(RequestOutcome::Error.label(), "error");
    }
}
