//! The parameters of a trigger's `authenticationRef`: the (Cluster)TriggerAuthentication, its
//! Secrets, ConfigMaps, `filePath`, OAuth2 and Vault sources.

use super::*;

impl ResolveSession {
    /// The referenced spec, its name for messages, and the namespace its Secrets and ConfigMaps
    /// are read from.
    // A failed resolution builds one error; boxing its fields would only hide them from callers.
    #[allow(clippy::result_large_err)]
    pub(super) fn auth_spec(
        &mut self,
        id: &TriggerId,
        kind: AuthenticationKind,
        name: &str,
    ) -> Result<(AuthName, TriggerAuthenticationSpec, String), ResolveError> {
        let namespace = &self.source.scalable.namespace;
        let (auth, cache, key, dep, refs_namespace) = match kind {
            AuthenticationKind::TriggerAuthentication => {
                let key = ObjKey::new(namespace, name);
                (
                    AuthName {
                        kind: "TriggerAuthentication",
                        namespace: namespace.clone(),
                        name: name.to_string(),
                    },
                    &self.inner.auths,
                    key.clone(),
                    DepKey::TriggerAuthentication(key),
                    namespace.clone(),
                )
            }
            AuthenticationKind::ClusterTriggerAuthentication => {
                let key = ObjKey::new("", name);
                (
                    AuthName {
                        kind: "ClusterTriggerAuthentication",
                        namespace: String::new(),
                        name: name.to_string(),
                    },
                    &self.inner.cluster_auths,
                    key.clone(),
                    DepKey::ClusterTriggerAuthentication(key),
                    self.inner.config.cluster_object_namespace.clone(),
                )
            }
        };
        self.deps.insert(dep);
        let spec = cache.get(&key).ok_or_else(|| ResolveError::AuthNotFound {
            trigger: id.clone(),
            auth: auth.clone(),
        })?;
        match &spec.spec {
            Ok(spec) => Ok((auth, spec.clone(), refs_namespace)),
            Err(reason) => Err(ResolveError::AuthInvalid {
                trigger: id.clone(),
                auth,
                reason: reason.clone(),
            }),
        }
    }

    /// The parameters of a `filePath` file: a JSON object of parameter name to value, at a path
    /// relative to the operator's `--filepath-auth-root-path` (KEDA's `readAuthParamsFromFile`).
    pub(super) async fn file_params(
        &self,
        id: &TriggerId,
        auth: &AuthName,
        kind: AuthenticationKind,
        file: &str,
    ) -> Result<BTreeMap<String, Secret>, ResolveError> {
        if kind != AuthenticationKind::ClusterTriggerAuthentication {
            return Err(ResolveError::FilePathNotClusterScoped {
                trigger: id.clone(),
                auth: auth.clone(),
            });
        }
        let Some(root) = self.inner.config.file_path_auth_root.clone() else {
            return Err(ResolveError::FilePathRootNotConfigured {
                trigger: id.clone(),
                auth: auth.clone(),
            });
        };
        let relative = Path::new(file);
        let escapes = relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
        if escapes || file.contains("..") {
            return Err(ResolveError::FilePathOutsideRoot {
                trigger: id.clone(),
                auth: auth.clone(),
                path: file.to_string(),
            });
        }
        let path = root.join(relative);
        // Under the root after links are followed, a regular file, bounded, off the runtime.
        let text = keda_scalers::files::TriggerFiles::new(&root)
            .read(&path.to_string_lossy())
            .await
            .map_err(|problem| ResolveError::FileRead {
                trigger: id.clone(),
                auth: auth.clone(),
                path: path.clone(),
                source: std::io::Error::other(problem.to_string()),
            })?;
        let values: BTreeMap<String, String> =
            serde_json::from_str(&text).map_err(|e| ResolveError::FileParse {
                trigger: id.clone(),
                auth: auth.clone(),
                path: path.clone(),
                line: e.line(),
                column: e.column(),
            })?;
        Ok(values
            .into_iter()
            .map(|(k, v)| (k, Secret::new(v)))
            .collect())
    }

    pub(super) async fn auth_params(
        &mut self,
        id: &TriggerId,
        auth: &AuthName,
        kind: AuthenticationKind,
        spec: &TriggerAuthenticationSpec,
        refs_namespace: &str,
    ) -> Result<BTreeMap<String, Secret>, ResolveError> {
        check_supported(id, auth, spec)?;
        if kind == AuthenticationKind::TriggerAuthentication
            && let Some(refusal) = keda_api::identity::namespaced_refusals(
                &auth.namespace,
                spec,
                &self.inner.config.identity,
            )
            .into_iter()
            .next()
        {
            return Err(ResolveError::IdentityRefused {
                trigger: id.clone(),
                auth: auth.clone(),
                refusal,
            });
        }
        let mut params = BTreeMap::new();

        if let Some(file) = spec.file_path.as_deref().filter(|f| !f.is_empty()) {
            // As in KEDA, filePath replaces every other source.
            return self.file_params(id, auth, kind, file).await;
        }

        for entry in spec.env.iter().flatten() {
            let used_by = EnvUse::Auth {
                auth: auth.clone(),
                parameter: entry.parameter.clone(),
            };
            let value = match self
                .variable(id, &used_by, entry.container_name.as_deref(), &entry.name)
                .await
            {
                Ok(value) => value,
                // KEDA's resolveAuthRef: `""` when the container's environment cannot be
                // resolved or does not define the variable.
                Err(error) => {
                    let (target, template) = self.template_holder();
                    let Some(found) = missing::tolerated_env(&error, target, template, &entry.name)
                    else {
                        return Err(error);
                    };
                    tracing::warn!(missing = %found.related, "{}", found.message);
                    self.missing.push(found);
                    String::new()
                }
            };
            params.insert(entry.parameter.clone(), Secret::new(value));
        }

        let mut refs = SessionRefs {
            inner: &self.inner,
            deps: &mut self.deps,
        };
        let ref_error = |entry: &AuthTargetRef, problem| ResolveError::AuthRef {
            trigger: id.clone(),
            auth: auth.clone(),
            parameter: entry.parameter.clone(),
            problem,
        };
        // KEDA's resolveAuthConfigMap and resolveAuthSecret: a missing object or key is an
        // empty value (`tolerate_into`); the parameter is still set, so it overrides an earlier
        // source of the same name, as in KEDA.
        for entry in spec.config_map_target_ref.iter().flatten() {
            let value = tolerate_into(
                &mut self.missing,
                config_map_key(&mut refs, refs_namespace, entry).map_err(|p| ref_error(entry, p)),
            )?;
            params.insert(
                entry.parameter.clone(),
                Secret::new(value.unwrap_or_default()),
            );
        }
        for entry in spec.secret_target_ref.iter().flatten() {
            let value = tolerate_into(
                &mut self.missing,
                secret_key(&mut refs, refs_namespace, entry).map_err(|p| ref_error(entry, p)),
            )?;
            params.insert(
                entry.parameter.clone(),
                Secret::new(value.unwrap_or_default()),
            );
        }
        // KEDA's order: the Secrets, Vault, (the cloud stores keda-rs does not read), the bound
        // service account tokens.
        if let Some(vault) = &spec.hashi_corp_vault {
            let values = self
                .vault_params(vault, refs_namespace)
                .await
                .map_err(|problem| ResolveError::Vault {
                    trigger: id.clone(),
                    auth: auth.clone(),
                    problem,
                })?;
            params.extend(values);
        }
        for entry in spec.bound_service_account_token.iter().flatten() {
            let token = super::super::token::request(
                &self.inner.client,
                refs_namespace,
                &entry.service_account_name,
                self.inner.config.bound_service_account_token_expiry,
                &[],
            )
            .await
            .map_err(|problem| ResolveError::BoundToken {
                trigger: id.clone(),
                auth: auth.clone(),
                parameter: entry.parameter.clone(),
                problem,
            });
            // KEDA's resolveBoundServiceAccountToken: `""` for a ServiceAccount it cannot get.
            // Only the API server's 404 counts as missing; ServiceAccounts are not watched, so
            // the object is rebuilt after MISSING_ACCOUNT_RETRY to pick one created since.
            let (value, refresh_after) = match tolerate_into(&mut self.missing, token)? {
                Some(token) => (token.value, token.refresh_after),
                None => (String::new(), MISSING_ACCOUNT_RETRY),
            };
            let at = tokio::time::Instant::now() + refresh_after;
            self.refresh_at = Some(self.refresh_at.map_or(at, |earlier| earlier.min(at)));
            params.insert(entry.parameter.clone(), Secret::new(value));
        }
        if let Some(oauth2) = &spec.oauth2 {
            let mut refs = SessionRefs {
                inner: &self.inner,
                deps: &mut self.deps,
            };
            let client_secret = |problem| ResolveError::AuthRef {
                trigger: id.clone(),
                auth: auth.clone(),
                parameter: OAUTH2_CLIENT_SECRET.to_string(),
                problem,
            };
            // A failed resolution builds one error; see `auth_spec`.
            #[allow(clippy::result_large_err)]
            let tolerate = |result: Result<String, RefProblem>| {
                tolerate_into(&mut self.missing, result.map_err(&client_secret))
            };
            let values = oauth2_params(&mut refs, refs_namespace, oauth2, tolerate)?;
            params.extend(values);
        }
        Ok(params)
    }
}

/// When an object whose `boundServiceAccountToken` named a missing ServiceAccount is rebuilt,
/// to get a token from one created since (ServiceAccounts are not watched).
const MISSING_ACCOUNT_RETRY: std::time::Duration = std::time::Duration::from_secs(60);

/// The trigger parameter `spec.oauth2.clientSecret` fills.
const OAUTH2_CLIENT_SECRET: &str = "clientSecret";

/// KEDA's `spec.oauth2` parameters (`resolveAuthRef`): `oauthTokenURI`, `clientID`,
/// `clientSecret` (read from the Secret `clientSecret.valueFrom.secretKeyRef` names, in the
/// namespace the other references are read from), `scopes` (comma-joined) and `endpointParams`
/// (`tokenUrlParams`, form-encoded, sorted by key as Go's `url.Values.Encode`). Set after every
/// other source, so they win over parameters of the same name, as in KEDA. The webhook and the
/// CRD validation check `type`, `clientId` and `tokenUrl`; the scaler checks that all three
/// parameters arrived.
///
/// `tolerate` turns the client secret's lookup into its value, `None` (a missing Secret or key:
/// empty, as KEDA's `resolveAuthSecret`) or an error.
#[allow(clippy::result_large_err)] // see `auth_spec`
fn oauth2_params(
    refs: &mut SessionRefs<'_>,
    namespace: &str,
    oauth2: &OAuth2,
    mut tolerate: impl FnMut(Result<String, RefProblem>) -> Result<Option<String>, ResolveError>,
) -> Result<BTreeMap<String, Secret>, ResolveError> {
    let mut params = BTreeMap::new();
    params.insert("oauthTokenURI".to_string(), Secret::new(&oauth2.token_url));
    params.insert("clientID".to_string(), Secret::new(&oauth2.client_id));
    if let Some(holder) = &oauth2.client_secret {
        let key_ref = &holder.value_from.secret_key_ref;
        let entry = AuthTargetRef {
            parameter: OAUTH2_CLIENT_SECRET.to_string(),
            name: key_ref.name.clone(),
            key: key_ref.key.clone(),
        };
        let value = tolerate(secret_key(refs, namespace, &entry))?;
        params.insert(
            OAUTH2_CLIENT_SECRET.to_string(),
            Secret::new(value.unwrap_or_default()),
        );
    }
    let scopes: Vec<&str> = oauth2.scopes.iter().flatten().map(String::as_str).collect();
    if !scopes.is_empty() {
        params.insert("scopes".to_string(), Secret::new(scopes.join(",")));
    }
    if let Some(extra) = oauth2.token_url_params.as_ref().filter(|p| !p.is_empty()) {
        let encoded = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(extra.iter())
            .finish();
        params.insert("endpointParams".to_string(), Secret::new(encoded));
    }
    Ok(params)
}

impl ResolveSession {
    /// The `hashiCorpVault` parameters: logs in (`token`, or `kubernetes` with a service
    /// account token of `namespace` or of the operator) and reads every secret.
    async fn vault_params(
        &self,
        spec: &keda_api::trigger_authentication::HashiCorpVault,
        namespace: &str,
    ) -> Result<BTreeMap<String, Secret>, VaultProblem> {
        use super::super::vault::{self, Jwt, Login};
        let plan = vault::plan(spec)?;
        let mut client = vault::Vault::new(&plan)?;
        if let Login::Kubernetes { mount, role, jwt } = &plan.login {
            let jwt = match jwt {
                Jwt::Requested(name) => {
                    let (expiry, audience) = vault::login_token_request();
                    super::super::token::request(
                        &self.inner.client,
                        namespace,
                        name,
                        expiry,
                        &[audience],
                    )
                    .await
                    .map(|t| Secret::new(t.value))
                    .map_err(VaultProblem::LoginToken)?
                }
                // Only the administrator's (a ClusterTriggerAuthentication, or the opt-in):
                // any path, but a regular file, bounded, off the runtime.
                Jwt::File(path) => keda_scalers::files::TriggerFiles::new("/")
                    .read(path)
                    .await
                    .map(|t| Secret::new(t.trim()))
                    .map_err(|_| VaultProblem::TokenFile { path: path.clone() })?,
            };
            client.login(mount, role, &jwt).await?;
        }
        client.read(&spec.secrets).await
    }
}

/// Sources keda-rs does not read: a clear error instead of silently missing parameters.
#[allow(clippy::result_large_err)] // see `auth_spec`
fn check_supported(
    id: &TriggerId,
    auth: &AuthName,
    spec: &TriggerAuthenticationSpec,
) -> Result<(), ResolveError> {
    let unsupported = |field| ResolveError::SourceUnsupported {
        trigger: id.clone(),
        auth: auth.clone(),
        field,
    };
    if spec.azure_key_vault.is_some() {
        return Err(unsupported("azureKeyVault"));
    }
    if spec.gcp_secret_manager.is_some() {
        return Err(unsupported("gcpSecretManager"));
    }
    if spec.aws_secret_manager.is_some() {
        return Err(unsupported("awsSecretManager"));
    }
    match spec.pod_identity.as_ref().map(|p| p.provider.trim()) {
        None | Some("") => Ok(()),
        Some(provider) if provider == POD_IDENTITY_NONE => Ok(()),
        Some(provider) => Err(ResolveError::PodIdentityUnsupported {
            trigger: id.clone(),
            auth: auth.clone(),
            provider: provider.to_string(),
        }),
    }
}

fn secret_key(
    refs: &mut SessionRefs<'_>,
    namespace: &str,
    entry: &AuthTargetRef,
) -> Result<String, RefProblem> {
    if entry.name.is_empty() || entry.key.is_empty() {
        return Err(RefProblem::Incomplete {
            kind: "secretTargetRef",
        });
    }
    let data = match refs.secret(namespace, &entry.name) {
        Lookup::Found(data) => data,
        Lookup::NotFound => return Err(not_found("Secret", namespace, entry)),
        Lookup::NotWatched => return Err(not_watched(namespace)),
        Lookup::Restricted { allowed } => {
            return Err(RefProblem::SecretAccessRestricted {
                namespace: namespace.to_string(),
                name: entry.name.clone(),
                allowed,
            });
        }
    };
    let bytes = data
        .0
        .get(&entry.key)
        .ok_or_else(|| key_not_found("Secret", namespace, entry))?;
    String::from_utf8(bytes.clone()).map_err(|_| RefProblem::NotUtf8 {
        kind: "Secret",
        namespace: namespace.to_string(),
        name: entry.name.clone(),
        key: entry.key.clone(),
    })
}

fn config_map_key(
    refs: &mut SessionRefs<'_>,
    namespace: &str,
    entry: &AuthTargetRef,
) -> Result<String, RefProblem> {
    if entry.name.is_empty() || entry.key.is_empty() {
        return Err(RefProblem::Incomplete {
            kind: "configMapTargetRef",
        });
    }
    let data = match refs.config_map(namespace, &entry.name) {
        Lookup::Found(data) => data,
        Lookup::NotFound => return Err(not_found("ConfigMap", namespace, entry)),
        // Only Secrets are ever restricted.
        Lookup::NotWatched | Lookup::Restricted { .. } => return Err(not_watched(namespace)),
    };
    data.0
        .get(&entry.key)
        .cloned()
        .ok_or_else(|| key_not_found("ConfigMap", namespace, entry))
}

fn not_found(kind: &'static str, namespace: &str, entry: &AuthTargetRef) -> RefProblem {
    RefProblem::NotFound {
        kind,
        namespace: namespace.to_string(),
        name: entry.name.clone(),
    }
}

fn key_not_found(kind: &'static str, namespace: &str, entry: &AuthTargetRef) -> RefProblem {
    RefProblem::KeyNotFound {
        kind,
        namespace: namespace.to_string(),
        name: entry.name.clone(),
        key: entry.key.clone(),
    }
}

fn not_watched(namespace: &str) -> RefProblem {
    RefProblem::NamespaceNotWatched {
        namespace: namespace.to_string(),
    }
}

/// Cache reads that record what they read (found or not) as dependencies.
pub(super) struct SessionRefs<'a> {
    pub(super) inner: &'a Inner,
    pub(super) deps: &'a mut HashSet<DepKey>,
}

impl Refs for SessionRefs<'_> {
    fn secret(&mut self, namespace: &str, name: &str) -> Lookup<Arc<SecretData>> {
        let config = &self.inner.config;
        if config.restrict_secret_access && namespace != config.cluster_object_namespace {
            return Lookup::Restricted {
                allowed: config.cluster_object_namespace.clone(),
            };
        }
        if !self.inner.secrets.covers(namespace) {
            return Lookup::NotWatched;
        }
        let key = ObjKey::new(namespace, name);
        self.deps.insert(DepKey::Secret(key.clone()));
        self.inner
            .secrets
            .get(&key)
            .map_or(Lookup::NotFound, Lookup::Found)
    }

    fn config_map(&mut self, namespace: &str, name: &str) -> Lookup<Arc<ConfigMapData>> {
        if !self.inner.config_maps.covers(namespace) {
            return Lookup::NotWatched;
        }
        let key = ObjKey::new(namespace, name);
        self.deps.insert(DepKey::ConfigMap(key.clone()));
        self.inner
            .config_maps
            .get(&key)
            .map_or(Lookup::NotFound, Lookup::Found)
    }
}
