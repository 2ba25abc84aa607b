//! What a namespaced TriggerAuthentication may make keda-rs do with its own identity: the rules
//! the admission webhook and the operator both apply (the operator again, since a webhook can
//! be off). Pure: no IO.
//!
//! A TriggerAuthentication belongs to a tenant of its namespace; the operator's service
//! account and files belong to the cluster administrator. So, for a namespaced
//! TriggerAuthentication (a ClusterTriggerAuthentication is the administrator's and is not
//! checked here):
//! - `hashiCorpVault` with `authentication: kubernetes` and a `credential.serviceAccount` file,
//!   or with neither `credential.serviceAccount` nor `credential.serviceAccountName` (KEDA then
//!   sends the operator's own token), is refused unless the administrator allows it
//!   ([`IdentityPolicy::allow_namespace_vault_operator_identity`]);
//! - a token minted for a ServiceAccount (`boundServiceAccountToken[i].serviceAccountName`,
//!   `hashiCorpVault.credential.serviceAccountName`) is refused unless the administrator's
//!   allow-list ([`ServiceAccountAllowList`]) names that ServiceAccount of the namespace.

use crate::trigger_authentication::TriggerAuthenticationSpec;

/// The operator flag that lets namespaced TriggerAuthentications log in to Vault with the
/// operator's own token or files.
pub const ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY_FLAG: &str =
    "--allow-namespace-vault-operator-identity";
/// Its environment variable.
pub const ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY_ENV: &str =
    "KEDA_RS_ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY";
/// The operator flag that lets triggers of every namespace use the operator's own AWS
/// identity (`identityOwner: operator`, `awsRoleArn` of a namespaced TriggerAuthentication).
pub const ALLOW_NAMESPACE_AWS_OPERATOR_IDENTITY_FLAG: &str =
    "--allow-namespace-aws-operator-identity";
/// Its environment variable.
pub const ALLOW_NAMESPACE_AWS_OPERATOR_IDENTITY_ENV: &str =
    "KEDA_RS_ALLOW_NAMESPACE_AWS_OPERATOR_IDENTITY";
/// The operator flag listing the ServiceAccounts tokens may be minted for.
pub const BOUND_TOKEN_SERVICE_ACCOUNTS_FLAG: &str = "--bound-token-service-accounts";
/// Its environment variable.
pub const BOUND_TOKEN_SERVICE_ACCOUNTS_ENV: &str = "KEDA_RS_BOUND_TOKEN_SERVICE_ACCOUNTS";

/// `authentication: kubernetes`.
const VAULT_KUBERNETES: &str = "kubernetes";

/// The ServiceAccounts the administrator opted in for token minting: entries
/// `<namespace>/<name>`, either part `*` for any. Empty (the default): none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceAccountAllowList {
    entries: Vec<(String, String)>,
}

impl ServiceAccountAllowList {
    /// Parses a comma-separated list of `<namespace>/<name>` (spaces around entries ignored).
    ///
    /// # Errors
    /// An entry that is not `<namespace>/<name>` with both parts non-empty, naming it.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry.split_once('/') {
                Some((ns, name))
                    if !ns.trim().is_empty() && !name.trim().is_empty() && !name.contains('/') =>
                {
                    entries.push((ns.trim().to_string(), name.trim().to_string()));
                }
                _ => {
                    return Err(format!(
                        "\"{entry}\" is not <namespace>/<serviceaccount> (either may be *)"
                    ));
                }
            }
        }
        Ok(Self { entries })
    }

    /// Every ServiceAccount of every namespace (`*/*`): KEDA's behaviour.
    pub fn any() -> Self {
        Self {
            entries: vec![("*".to_string(), "*".to_string())],
        }
    }

    /// Whether ServiceAccount `namespace/name` is allowed.
    pub fn allows(&self, namespace: &str, name: &str) -> bool {
        self.entries
            .iter()
            .any(|(ns, n)| (ns == "*" || ns == namespace) && (n == "*" || n == name))
    }
}

/// The administrator's choices the rules depend on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdentityPolicy {
    /// `--allow-namespace-vault-operator-identity`: namespaced TriggerAuthentications may log
    /// in to Vault with the operator's own token or a file of the operator's (KEDA's
    /// behaviour). Off by default.
    pub allow_namespace_vault_operator_identity: bool,
    /// `--allow-namespace-aws-operator-identity`: triggers of any namespace may sign with the
    /// operator's own AWS credentials (`identityOwner: operator`), assume a role of a namespaced
    /// TriggerAuthentication with them, and send such requests to their `awsEndpoint` (KEDA's
    /// behaviour). Off by default: only a ClusterTriggerAuthentication's `awsRoleArn` is
    /// assumed, towards AWS's own endpoints. Checked by the scalers when they are built.
    pub allow_namespace_aws_operator_identity: bool,
    /// `--bound-token-service-accounts`: the ServiceAccounts tokens may be minted for on behalf
    /// of a namespaced TriggerAuthentication. Empty by default.
    pub bound_token_service_accounts: ServiceAccountAllowList,
}

/// A field of a namespaced TriggerAuthentication that would lend the operator's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentityRefusal {
    /// The field, e.g. `spec.hashiCorpVault.credential.serviceAccount`.
    pub field: String,
    /// What is refused and how to fix it (names the field and the flag; no value read).
    pub message: String,
}

impl std::fmt::Display for IdentityRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The refusals of the spec of TriggerAuthentication in `namespace` under `policy`, in field
/// order; empty when it may be used.
pub fn namespaced_refusals(
    namespace: &str,
    spec: &TriggerAuthenticationSpec,
    policy: &IdentityPolicy,
) -> Vec<IdentityRefusal> {
    let mut refusals = Vec::new();
    let non_empty = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let token_refusal = |field: String, account: &str| IdentityRefusal {
        field,
        message: format!(
            "keda-rs mints tokens only for ServiceAccounts the administrator opted in, and \
             ServiceAccount {namespace}/{account} is not in {BOUND_TOKEN_SERVICE_ACCOUNTS_FLAG} \
             (ask them to add it, and to grant the operator `create` on serviceaccounts/token \
             for it in this namespace)"
        ),
    };
    if let Some(vault) = &spec.hashi_corp_vault
        && vault.authentication.trim() == VAULT_KUBERNETES
    {
        let credential = vault.credential.clone().unwrap_or_default();
        match (
            non_empty(&credential.service_account_name),
            non_empty(&credential.service_account),
        ) {
            (Some(account), _) => {
                if !policy
                    .bound_token_service_accounts
                    .allows(namespace, &account)
                {
                    refusals.push(token_refusal(
                        "spec.hashiCorpVault.credential.serviceAccountName".to_string(),
                        &account,
                    ));
                }
            }
            (None, file) if !policy.allow_namespace_vault_operator_identity => {
                let what = match file {
                    Some(_) => "names a file of the operator's to send to Vault",
                    None => {
                        "is unset, so the operator's own service-account token would be sent \
                         to Vault"
                    }
                };
                refusals.push(IdentityRefusal {
                    field: "spec.hashiCorpVault.credential.serviceAccount".to_string(),
                    message: format!(
                        "{what}; a namespaced TriggerAuthentication may not use the operator's \
                         identity or files: set credential.serviceAccountName (a ServiceAccount \
                         of this namespace the administrator opted in) or use \
                         authentication: token, or use a ClusterTriggerAuthentication \
                         (the administrator may allow this with \
                         {ALLOW_NAMESPACE_VAULT_OPERATOR_IDENTITY_FLAG})"
                    ),
                });
            }
            (None, _) => {}
        }
    }
    for (i, entry) in spec
        .bound_service_account_token
        .iter()
        .flatten()
        .enumerate()
    {
        let account = entry.service_account_name.trim();
        if !account.is_empty()
            && !policy
                .bound_token_service_accounts
                .allows(namespace, account)
        {
            refusals.push(token_refusal(
                format!("spec.boundServiceAccountToken[{i}].serviceAccountName"),
                account,
            ));
        }
    }
    refusals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> TriggerAuthenticationSpec {
        serde_yaml::from_str(yaml).expect("spec")
    }

    fn fields(yaml: &str, policy: &IdentityPolicy) -> Vec<String> {
        namespaced_refusals("team", &spec(yaml), policy)
            .into_iter()
            .map(|r| r.field)
            .collect()
    }

    const VAULT: &str = "hashiCorpVault: {address: 'http://v', authentication: kubernetes, mount: k, role: r, secrets: []";

    #[test]
    fn a_namespaced_vault_login_with_the_operators_token_or_files_is_refused_by_default() {
        let safe = IdentityPolicy::default();
        // (spec, refused fields): a comment per row.
        for (yaml, want) in [
            // no credential: the operator's own token
            (format!("{VAULT}}}"), vec!["spec.hashiCorpVault.credential.serviceAccount"]),
            // a file of the operator's
            (
                format!("{VAULT}, credential: {{serviceAccount: /etc/passwd}}}}"),
                vec!["spec.hashiCorpVault.credential.serviceAccount"],
            ),
            // a ServiceAccount not opted in
            (
                format!("{VAULT}, credential: {{serviceAccountName: reader}}}}"),
                vec!["spec.hashiCorpVault.credential.serviceAccountName"],
            ),
            // a token of the TriggerAuthentication's own
            (
                "hashiCorpVault: {address: 'http://v', authentication: token, credential: {token: t}, secrets: []}".to_string(),
                vec![],
            ),
            // bound tokens not opted in, each named
            (
                "boundServiceAccountToken: [{parameter: a, serviceAccountName: x}, {parameter: b, serviceAccountName: y}]".to_string(),
                vec![
                    "spec.boundServiceAccountToken[0].serviceAccountName",
                    "spec.boundServiceAccountToken[1].serviceAccountName",
                ],
            ),
        ] {
            assert_eq!(fields(&yaml, &safe), want, "{yaml}");
        }
        let message =
            namespaced_refusals("team", &spec(&format!("{VAULT}}}")), &safe)[0].to_string();
        assert!(
            message.starts_with("spec.hashiCorpVault.credential.serviceAccount: is unset")
                && message.contains("--allow-namespace-vault-operator-identity"),
            "{message}"
        );
    }

    #[test]
    fn the_administrators_opt_ins_allow_what_they_name_and_nothing_else() {
        let policy = IdentityPolicy {
            allow_namespace_vault_operator_identity: true,
            allow_namespace_aws_operator_identity: true,
            bound_token_service_accounts: ServiceAccountAllowList::parse(" team/reader, ops/*")
                .expect("list"),
        };
        assert!(fields(&format!("{VAULT}}}"), &policy).is_empty());
        assert!(
            fields(
                &format!("{VAULT}, credential: {{serviceAccount: /var/run/t}}}}"),
                &policy
            )
            .is_empty()
        );
        assert!(
            fields(
                &format!("{VAULT}, credential: {{serviceAccountName: reader}}}}"),
                &policy
            )
            .is_empty()
        );
        assert_eq!(
            fields(
                "boundServiceAccountToken: [{parameter: a, serviceAccountName: reader}, {parameter: b, serviceAccountName: admin}]",
                &policy
            ),
            vec!["spec.boundServiceAccountToken[1].serviceAccountName"]
        );
        assert!(
            policy
                .bound_token_service_accounts
                .allows("ops", "anything")
        );
        assert!(
            !policy
                .bound_token_service_accounts
                .allows("other", "reader")
        );
        assert!(ServiceAccountAllowList::any().allows("a", "b"));
        assert!(!ServiceAccountAllowList::default().allows("a", "b"));
        assert!(ServiceAccountAllowList::parse("team").is_err());
        assert!(ServiceAccountAllowList::parse("team/").is_err());
        assert!(ServiceAccountAllowList::parse("a/b/c").is_err());
        assert_eq!(
            ServiceAccountAllowList::parse(" , ").expect("empty"),
            ServiceAccountAllowList::default()
        );
    }
}
