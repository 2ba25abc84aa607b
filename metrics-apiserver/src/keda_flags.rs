//! KEDA's metrics-apiserver (`keda-adapter`) flags: `cmd/adapter/main.go`, custom-metrics-
//! apiserver's `AdapterBase` (Kubernetes' generic API server options), controller-runtime's
//! zap and klog's, as KEDA's manifest (`config/metrics-server/deployment.yaml` at kedacore/keda
//! 8b4f083ca8c8c2baf8477e322bd4d16ac4dfa09a) and Helm chart (kedacore/charts
//! 1444d00d90d7668cf7f53f270777d039371d90d0) pass them: the one table saying what each does
//! here. See [`keda_cli::keda_flags`].

use keda_cli::keda_flags::{
    KLOG_FLAGS, KedaFlag, Meaning, OFF_ADDRESS, Takes, ZAP_FLAGS, klog_verbosity, logtostderr,
};

const CLIENT_CA: &str = "the aggregator is authenticated by its front-proxy certificate \
                         (--requestheader-client-ca-file or the extension-apiserver-authentication \
                         ConfigMap); a certificate signed by KEDA's own CA is no caller identity here, \
                         so an operator or webhook certificate cannot read metrics as a user";

const GENERIC: &str = "an option of Kubernetes' generic API server that keda-rs' metrics-apiserver \
                       does not have";

/// `--metrics-service-grpc-authority`: the name the operator's certificate must carry; empty
/// (KEDA's default) keeps the host of `--metrics-service-address`.
fn authority(value: &str) -> Result<Option<String>, String> {
    Ok(Some(value.trim().to_string()).filter(|v| !v.is_empty()))
}

/// Every flag of KEDA's metrics-apiserver, with its meaning in keda-rs.
pub fn table() -> Vec<KedaFlag> {
    let own = [
        KedaFlag::same("secure-port", Takes::Value),
        KedaFlag::same("bind-address", Takes::Value),
        KedaFlag::same("cert-dir", Takes::Value),
        KedaFlag::same("tls-cert-file", Takes::Value),
        KedaFlag::same("tls-private-key-file", Takes::Value),
        KedaFlag::same("tls-min-version", Takes::Value),
        KedaFlag::same("tls-cipher-suites", Takes::Value),
        KedaFlag::same("requestheader-client-ca-file", Takes::Value),
        KedaFlag::same("requestheader-allowed-names", Takes::Value),
        KedaFlag::same("requestheader-username-headers", Takes::Value),
        KedaFlag::same("requestheader-group-headers", Takes::Value),
        KedaFlag::same("requestheader-extra-headers-prefix", Takes::Value),
        KedaFlag::same("authentication-kubeconfig", Takes::Value),
        KedaFlag::same("authorization-kubeconfig", Takes::Value),
        KedaFlag::same("authorization-webhook-cache-authorized-ttl", Takes::Value),
        KedaFlag::same("authorization-webhook-cache-unauthorized-ttl", Takes::Value),
        KedaFlag::same("kubeconfig", Takes::Value),
        KedaFlag::ours("lister-kubeconfig", Takes::Value, "kubeconfig"),
        KedaFlag::same("metrics-service-address", Takes::Value),
        KedaFlag::mapped(
            "metrics-service-grpc-authority",
            Takes::Value,
            "metrics-service-server-name",
            authority,
        ),
        KedaFlag::ours("port", Takes::Value, "metrics-port"),
        KedaFlag::no_effect("client-ca-file", Takes::Value, CLIENT_CA, &[""]),
        KedaFlag::no_effect(
            "msg",
            Takes::Value,
            "keda-rs logs its own start-up line",
            &["starting adapter..."],
        ),
        KedaFlag::no_effect(
            "profiling-bind-address",
            Takes::Value,
            "Go's pprof profiles do not exist in a Rust process",
            OFF_ADDRESS,
        ),
        KedaFlag::no_effect(
            "kube-api-qps",
            Takes::Value,
            "the metrics-apiserver's only Kubernetes calls are cached TokenReviews and \
             SubjectAccessReviews and one ConfigMap watch",
            &["20"],
        ),
        KedaFlag::no_effect(
            "kube-api-burst",
            Takes::Value,
            "the metrics-apiserver's only Kubernetes calls are cached TokenReviews and \
             SubjectAccessReviews and one ConfigMap watch",
            &["30"],
        ),
        KedaFlag::no_effect(
            "disable-compression",
            Takes::Bool,
            "keda-rs' Kubernetes client never asks for compressed responses",
            &["true"],
        ),
        KedaFlag::no_effect("tls-sni-cert-key", Takes::Value, GENERIC, &[""]),
        KedaFlag::no_effect(
            "http2-max-streams-per-connection",
            Takes::Value,
            GENERIC,
            &["0"],
        ),
        KedaFlag::no_effect("permit-port-sharing", Takes::Bool, GENERIC, &["false"]),
        KedaFlag::no_effect("permit-address-sharing", Takes::Bool, GENERIC, &["false"]),
        KedaFlag::no_effect("requestheader-uid-headers", Takes::Value, GENERIC, &[""]),
        KedaFlag::no_effect(
            "authentication-skip-lookup",
            Takes::Bool,
            GENERIC,
            &["false"],
        ),
        KedaFlag::no_effect(
            "authentication-token-webhook-cache-ttl",
            Takes::Value,
            GENERIC,
            &[],
        ),
        KedaFlag::no_effect(
            "authentication-tolerate-lookup-failure",
            Takes::Bool,
            GENERIC,
            &["false"],
        ),
        KedaFlag::no_effect(
            "authorization-always-allow-paths",
            Takes::Value,
            "/healthz, /livez and /readyz are always answered without authorization; nothing else is",
            &["/healthz,/readyz,/livez", "/healthz", ""],
        ),
        KedaFlag::no_effect("audit-log-path", Takes::Value, GENERIC, &[""]),
        KedaFlag::no_effect("audit-policy-file", Takes::Value, GENERIC, &[""]),
        KedaFlag::no_effect("audit-webhook-config-file", Takes::Value, GENERIC, &[""]),
        KedaFlag::no_effect("profiling", Takes::Bool, GENERIC, &["false"]),
        KedaFlag::no_effect("contention-profiling", Takes::Bool, GENERIC, &["false"]),
        KedaFlag::no_effect("debug-socket-path", Takes::Value, GENERIC, &[""]),
        KedaFlag::no_effect(
            "enable-priority-and-fairness",
            Takes::Bool,
            GENERIC,
            &["false"],
        ),
        KedaFlag::no_effect(
            "shutdown-delay-duration",
            Takes::Value,
            GENERIC,
            &["0s", "0"],
        ),
        // The adapter applies these after the zap options (cmd/adapter/main.go).
        KedaFlag {
            name: "v",
            takes: Takes::Value,
            meaning: Meaning::Ours {
                to: "log-level",
                map: Some(klog_verbosity),
                overrides: true,
            },
        },
        KedaFlag {
            name: "logtostderr",
            takes: Takes::Bool,
            meaning: Meaning::Ours {
                to: "log-format",
                map: Some(logtostderr),
                overrides: true,
            },
        },
    ];
    let replaced = |f: &KedaFlag| !own.iter().any(|o| o.name == f.name);
    own.iter()
        .copied()
        .chain(KLOG_FLAGS.iter().filter(|f| replaced(f)).copied())
        .chain(ZAP_FLAGS.iter().copied())
        .collect()
}
