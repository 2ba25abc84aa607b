//! What the API client and the metric service record (`keda_rate_limiter_*`,
//! `keda_internal_metricsservice_*`).

use super::*;

impl Metrics {
    /// `rest_client_rate_limiter_duration_seconds`: a Kubernetes API request with HTTP method
    /// `verb` waited `waited` for the client side rate limiter (zero when a token was free);
    /// a positive wait also counts in `rest_client_rate_limiter_throttled_requests_total`.
    pub fn rate_limiter_wait(&self, verb: &str, waited: Duration) {
        let labels = VerbLabels {
            verb: verb.to_string(),
        };
        let f = self.families();
        f.rate_limiter_wait
            .get_or_create(&labels)
            .observe(waited.as_secs_f64());
        if !waited.is_zero() {
            f.rate_limiter_throttled.get_or_create(&labels).inc();
        }
    }

    /// A metric read of the metric service began: KEDA's `GetMetrics` call started and its
    /// request received (`keda_internal_metricsservice_grpc_server_started_total`,
    /// `..._msg_received_total`).
    pub fn metric_service_call_started(&self) {
        let labels = GrpcLabels {
            grpc_method: METRIC_SERVICE_GRPC_METHOD,
        };
        let f = self.families();
        f.grpc_started.get_or_create(&labels).inc();
        f.grpc_msg_received.get_or_create(&labels).inc();
    }

    /// A metric read of the metric service was answered after `elapsed`, with values (`ok`) or
    /// an error: `..._msg_sent_total`, `..._handled_total` with `grpc_code` `OK`, or `Unknown`
    /// as KEDA's server reports the plain errors of its handler, and
    /// `..._handling_seconds`.
    pub fn metric_service_call_handled(&self, ok: bool, elapsed: Duration) {
        let labels = GrpcLabels {
            grpc_method: METRIC_SERVICE_GRPC_METHOD,
        };
        let f = self.families();
        f.grpc_msg_sent.get_or_create(&labels).inc();
        f.grpc_handled
            .get_or_create(&GrpcCodeLabels {
                grpc_method: METRIC_SERVICE_GRPC_METHOD,
                grpc_code: if ok { "OK" } else { "Unknown" },
            })
            .inc();
        f.grpc_handling
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }
}
