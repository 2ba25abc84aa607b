//! `keda-rs explain so/NAME`: asks the operator's explain endpoint for one object's live state
//! and prints it (docs/explain.md). The endpoint, its authentication and the rendering live in
//! `keda_operator::explain`; this is the command line around them.

use clap::{Args, ValueEnum};
use keda_cli::ProcessLookup;
use keda_operator::explain::client::{Endpoint, FetchError, fetch, kubeconfig_token};
use keda_operator::explain::render;
use keda_operator::explain::server::ObjectKind;

/// `keda-rs explain`'s flags.
#[derive(Debug, Args)]
#[command(after_long_help = "\
Environment:
  KUBECONFIG                  Kubeconfig path; else ~/.kube/config, else the in-cluster service account
  KEDA_RS_OPERATOR_NAMESPACE  The operator's namespace (--operator-namespace) [default: keda]
  KEDA_RS_OPERATOR_URL        Ask the operator directly (--operator-url), e.g. http://127.0.0.1:8082
  KEDA_RS_TOKEN               The bearer token to send (--token)

In a cluster the operator is asked through the API server's service proxy with your kubeconfig:
you need `get` on services/proxy of the operator's Service and `get` on the object. See docs/explain.md.")]
pub struct ExplainArgs {
    /// The object: `so/NAME` or `scaledobject/NAME` (`sj/NAME`, `scaledjob/NAME` for ScaledJobs).
    #[arg(value_name = "KIND/NAME")]
    object: String,
    /// The object's namespace [default: the kubeconfig context's namespace].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Output: `text` (like `kubectl describe`) or `json` (docs/explain.md lists the fields).
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// The operator's namespace.
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "KEDA_RS_OPERATOR_NAMESPACE",
        default_value = "keda"
    )]
    operator_namespace: String,
    /// The operator's Service.
    #[arg(long, value_name = "NAME", default_value = "keda-operator")]
    operator_service: String,
    /// The Service port of the explain endpoint (name or number).
    #[arg(long, value_name = "PORT", default_value = "explain")]
    operator_port: String,
    /// Ask the operator at this URL instead of through the API server (a port-forward, a
    /// local operator).
    #[arg(long, value_name = "URL", env = "KEDA_RS_OPERATOR_URL")]
    operator_url: Option<String>,
    /// The bearer token to send [default: the kubeconfig user's].
    #[arg(
        long,
        value_name = "TOKEN",
        env = "KEDA_RS_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
}

/// `-o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

/// Why `keda-rs explain` failed.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error(
        "{0:?} is not an object: write so/NAME (or scaledobject/NAME, sj/NAME, scaledjob/NAME)"
    )]
    Object(String),
    #[error(transparent)]
    Cluster(#[from] keda_cli::ClusterError),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The kind and name of `so/NAME`.
fn parse_object(text: &str) -> Result<(ObjectKind, String), ExplainError> {
    let bad = || ExplainError::Object(text.to_string());
    let (kind, name) = text.split_once('/').ok_or_else(bad)?;
    let kind = match kind.to_ascii_lowercase().as_str() {
        "so"
        | "scaledobject"
        | "scaledobjects"
        | "scaledobject.keda.sh"
        | "scaledobjects.keda.sh" => ObjectKind::ScaledObject,
        "sj" | "scaledjob" | "scaledjobs" | "scaledjob.keda.sh" | "scaledjobs.keda.sh" => {
            ObjectKind::ScaledJob
        }
        _ => return Err(bad()),
    };
    if name.is_empty() || name.contains('/') {
        return Err(bad());
    }
    Ok((kind, name.to_string()))
}

/// Runs `keda-rs explain`.
///
/// # Errors
/// See [`ExplainError`]; each prints as one line.
pub async fn run(args: ExplainArgs) -> Result<(), ExplainError> {
    let (kind, name) = parse_object(&args.object)?;
    let config = keda_cli::infer_config(&ProcessLookup).await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let token = match args.token.clone().filter(|t| !t.is_empty()) {
        Some(token) => token,
        None => kubeconfig_token(&config)
            .await?
            .ok_or(FetchError::NoToken)?,
    };
    let url = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(|e| keda_cli::ClusterError::Client {
        url,
        reason: keda_cli::one_line(&e),
    })?;
    let endpoint = match args.operator_url {
        Some(url) => Endpoint::Direct(url),
        None => Endpoint::ServiceProxy {
            namespace: args.operator_namespace,
            service: args.operator_service,
            port: args.operator_port,
        },
    };
    let explanation = fetch(Some(&client), &endpoint, &token, kind, &namespace, &name).await?;
    match args.output {
        Output::Text => print!("{}", render::text(&explanation)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&explanation)?),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_written_as_kubectl_writes_them() {
        assert_eq!(
            parse_object("so/orders").expect("so"),
            (ObjectKind::ScaledObject, "orders".to_string())
        );
        assert_eq!(
            parse_object("scaledobject.keda.sh/orders").expect("long").0,
            ObjectKind::ScaledObject
        );
        assert_eq!(
            parse_object("sj/batch").expect("sj").0,
            ObjectKind::ScaledJob
        );
        for bad in ["orders", "deploy/orders", "so/", "so/a/b"] {
            assert!(parse_object(bad).is_err(), "{bad}");
        }
    }
}
