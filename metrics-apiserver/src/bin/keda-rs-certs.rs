//! Prints the Secret holding the certificates of the mutual TLS between the keda-rs operator's
//! metric service and the metrics-apiserver: a fresh CA (`ca.crt`) and one certificate with its
//! key (`tls.crt`, `tls.key`) valid for the operator's Service names, as server and as client.
//!
//! ```text
//! keda-rs-certs --namespace keda | kubectl apply -f -
//! ```

use clap::Parser;
use keda_metrics_apiserver::pki::CertificateAuthority;

/// Generates the Secret `keda-rs-certs` for the operator <-> metrics-apiserver mutual TLS.
#[derive(Parser)]
#[command(name = "keda-rs-certs", version, about)]
struct Args {
    /// The namespace keda-rs is installed in.
    #[arg(long, default_value = "keda")]
    namespace: String,
    /// The name of the Secret.
    #[arg(long, default_value = "keda-rs-certs")]
    secret_name: String,
    /// The name of the operator's Service.
    #[arg(long, default_value = "keda-operator")]
    operator_service: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (ns, svc) = (&args.namespace, &args.operator_service);
    let hosts = [
        svc.clone(),
        format!("{svc}.{ns}"),
        format!("{svc}.{ns}.svc"),
        format!("{svc}.{ns}.svc.cluster.local"),
        "localhost".to_string(),
    ];
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let ca = CertificateAuthority::new("keda-rs-ca")?;
    let pair = ca.issue_peer(svc, &hosts)?;
    let secret = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": args.secret_name,
            "namespace": ns,
            "labels": {"app.kubernetes.io/part-of": "keda-rs"}
        },
        "stringData": {"ca.crt": ca.cert_pem(), "tls.crt": pair.cert, "tls.key": pair.key}
    });
    println!("{}", serde_json::to_string_pretty(&secret)?);
    Ok(())
}
