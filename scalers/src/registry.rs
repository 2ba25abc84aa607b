//! The registry: trigger type -> factory, sorted, extensible by users.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use crate::context::ScalerContext;
use crate::error::ScalerError;
use crate::metadata::Param;
use crate::scaler::BuiltScaler;

/// Parses a trigger's metadata as the factory's `build` does, without connecting or leasing a
/// client: the check an admission webhook or a fuzzer can run on any input.
pub type CheckFn = fn(&ScalerContext) -> Result<(), ScalerError>;

/// Builds the scaler of one trigger type from a [`ScalerContext`].
///
/// Any `Fn(ScalerContext) -> impl Future<Output = Result<BuiltScaler, ScalerError>>` is a
/// factory, so an `async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError>` can
/// be registered directly.
#[async_trait]
pub trait ScalerFactory: Send + Sync {
    /// Parses the trigger's metadata and builds the scaler, connecting (or leasing a pooled
    /// client) if the scaler needs one. May block on the network.
    ///
    /// # Errors
    /// Invalid metadata ([`ScalerError::Metadata`]) or the source cannot be reached
    /// ([`ScalerError::Connect`]).
    async fn build(&self, ctx: ScalerContext) -> Result<BuiltScaler, ScalerError>;

    /// The parameters this type declares, for docs and checks. Empty when unknown.
    fn params(&self) -> &'static [Param] {
        &[]
    }

    /// Parses the trigger's metadata as [`ScalerFactory::build`] does, without connecting or
    /// building anything, so it never blocks. `None` when the factory declares no such check
    /// (every built-in type does; see [`Declared::with_check`]).
    fn check(&self, _ctx: &ScalerContext) -> Option<Result<(), ScalerError>> {
        None
    }
}

#[async_trait]
impl<F, Fut> ScalerFactory for F
where
    F: Fn(ScalerContext) -> Fut + Send + Sync,
    Fut: Future<Output = Result<BuiltScaler, ScalerError>> + Send,
{
    async fn build(&self, ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
        self(ctx).await
    }
}

/// A factory with its declared parameters and its parse-only check: how built-in scalers
/// register.
pub struct Declared<F> {
    factory: F,
    params: &'static [Param],
    check: Option<CheckFn>,
}

impl<F> Declared<F> {
    /// `factory`, declaring `params`.
    pub fn new(factory: F, params: &'static [Param]) -> Self {
        Self {
            factory,
            params,
            check: None,
        }
    }

    /// Declares `check`, which parses the metadata as `factory` does without connecting:
    /// typically `|ctx| MyConfig::parse(ctx).map(drop)`.
    #[must_use]
    pub fn with_check(mut self, check: CheckFn) -> Self {
        self.check = Some(check);
        self
    }
}

#[async_trait]
impl<F: ScalerFactory> ScalerFactory for Declared<F> {
    async fn build(&self, ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
        self.factory.build(ctx).await
    }
    fn params(&self) -> &'static [Param] {
        self.params
    }
    fn check(&self, ctx: &ScalerContext) -> Option<Result<(), ScalerError>> {
        self.check.map(|check| check(ctx))
    }
}

/// Trigger type -> factory, iterated in sorted order.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, Arc<dyn ScalerFactory>>,
}

impl Registry {
    /// A registry with no types.
    pub fn empty() -> Self {
        Self::default()
    }

    /// A registry with every built-in scaler.
    pub fn builtin() -> Self {
        let mut registry = Self::empty();
        crate::scalers::register_builtin(&mut registry);
        registry
    }

    /// Registers `factory` for `trigger_type`, replacing (and returning) any factory registered
    /// for it before, so a user may also override a built-in type.
    pub fn register(
        &mut self,
        trigger_type: impl Into<String>,
        factory: impl ScalerFactory + 'static,
    ) -> Option<Arc<dyn ScalerFactory>> {
        self.factories
            .insert(trigger_type.into(), Arc::new(factory))
    }

    /// The registered types, sorted.
    pub fn types(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }

    /// The factory of `trigger_type`.
    pub fn get(&self, trigger_type: &str) -> Option<&Arc<dyn ScalerFactory>> {
        self.factories.get(trigger_type)
    }

    /// Builds the scaler of `ctx.trigger_type`.
    ///
    /// # Errors
    /// [`ScalerError::UnknownType`] listing the known types, or the factory's error.
    pub async fn build(&self, ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
        let Some(factory) = self.factories.get(&ctx.trigger_type) else {
            return Err(ScalerError::UnknownType {
                trigger_type: ctx.trigger_type,
                known: self.types().map(str::to_string).collect(),
            });
        };
        factory.build(ctx).await
    }

    /// The keys of a trigger's `metadata` that `trigger_type` does not read, in the order
    /// given: what KEDA's `KEDA_CHECK_UNEXPECTED_SCALERS_PARAMS` check reports as "Unmatched
    /// input property" (`pkg/scalers/scalersconfig/typed_config.go`). A `<name>FromEnv` key is
    /// read when `<name>` is; a parameter is read under its name and its aliases. Empty when
    /// the type is unknown or declares no parameters (nothing to compare against).
    pub fn unmatched_params<'k>(
        &self,
        trigger_type: &str,
        keys: impl IntoIterator<Item = &'k str>,
    ) -> Vec<&'k str> {
        let Some(params) = self
            .factories
            .get(trigger_type)
            .map(|f| f.params())
            .filter(|p| !p.is_empty())
        else {
            return Vec::new();
        };
        keys.into_iter()
            .filter(|key| {
                let name = key.strip_suffix("FromEnv").unwrap_or(key);
                !params.iter().any(|p| p.names().any(|n| n == name))
            })
            .collect()
    }

    /// Parses the metadata of `ctx.trigger_type` without connecting ([`ScalerFactory::check`]).
    /// `None` when its factory declares no check.
    ///
    /// # Errors
    /// [`ScalerError::UnknownType`] listing the known types, or the parse error.
    pub fn check(&self, ctx: &ScalerContext) -> Option<Result<(), ScalerError>> {
        let Some(factory) = self.factories.get(&ctx.trigger_type) else {
            return Some(Err(ScalerError::UnknownType {
                trigger_type: ctx.trigger_type.clone(),
                known: self.types().map(str::to_string).collect(),
            }));
        };
        factory.check(ctx)
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.types()).finish()
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use k8s_openapi::api::autoscaling::v2::MetricSpec;

    use super::*;
    use crate::scaler::{MetricsAndActivity, Scaler};

    struct Fixed;

    #[async_trait]
    impl Scaler for Fixed {
        fn metric_specs(&self) -> Vec<MetricSpec> {
            Vec::new()
        }
        async fn metrics_and_activity(
            &self,
            name: &str,
        ) -> Result<MetricsAndActivity, ScalerError> {
            Ok(MetricsAndActivity::single(name, 1.0, 0.0))
        }
        async fn close(&self) {}
    }

    async fn build_fixed(_: ScalerContext) -> Result<BuiltScaler, ScalerError> {
        Ok(BuiltScaler::Pull(Box::new(Fixed)))
    }

    #[tokio::test]
    async fn unknown_type_names_the_known_ones_sorted() {
        let mut r = Registry::empty();
        r.register("zeta", build_fixed);
        r.register("alpha", build_fixed);
        let err = r.build(ScalerContext::new("foo", 0)).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"unknown trigger type "foo"; known types: alpha, zeta"#
        );
    }

    #[test]
    fn unmatched_params_are_the_keys_the_type_does_not_read() {
        let registry = Registry::builtin();
        let keys = [
            "address",
            "listName",
            "passwordFromEnv",
            "listLenght",
            "hostFromEnv",
            "typoFromEnv",
            "metricType",
        ];
        assert_eq!(
            registry.unmatched_params("redis", keys),
            ["listLenght", "typoFromEnv", "metricType"]
        );
        // Every declared name and alias is read.
        let redis = registry.get("redis").expect("registered").params();
        let every_name: Vec<&str> = redis.iter().flat_map(|p| p.names()).collect();
        assert!(registry.unmatched_params("redis", every_name).is_empty());
        // Nothing to compare against: no report.
        assert!(registry.unmatched_params("reddis", ["x"]).is_empty());
        let mut r = Registry::empty();
        r.register("fixed", |_ctx: ScalerContext| async {
            Err::<BuiltScaler, _>(ScalerError::UnknownType {
                trigger_type: "fixed".into(),
                known: vec![],
            })
        });
        assert!(r.unmatched_params("fixed", ["x"]).is_empty());
    }

    #[test]
    fn every_builtin_type_checks_its_metadata_without_connecting() {
        let registry = Registry::builtin();
        for trigger_type in registry.types() {
            let ctx = ScalerContext::new(trigger_type, 0);
            // Empty metadata: parsed (every type has a required parameter or a rule that
            // fails), never connected, so no runtime is needed.
            assert!(
                registry.check(&ctx).is_some(),
                "trigger type {trigger_type:?} declares no parse-only check: register it with \
                 `Declared::new(..).with_check(|ctx| YourConfig::parse(ctx).map(drop))` in \
                 scalers/src/scalers/mod.rs (the fuzzer and admission use it)"
            );
        }
        let err = registry
            .check(&ScalerContext::new("reddis", 0))
            .expect("unknown types are checked too")
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with(r#"unknown trigger type "reddis""#),
            "{err}"
        );
        let mut redis = ScalerContext::new("redis", 0);
        redis
            .metadata
            .insert("address".into(), "127.0.0.1:1".into());
        redis.metadata.insert("listName".into(), "jobs".into());
        assert!(matches!(registry.check(&redis), Some(Ok(()))));
        // A user factory registered without a check has none.
        let mut r = Registry::empty();
        r.register("fixed", build_fixed);
        assert!(r.check(&ScalerContext::new("fixed", 0)).is_none());
    }

    #[tokio::test]
    async fn a_registered_async_fn_builds() {
        let mut r = Registry::empty();
        assert!(r.register("fixed", build_fixed).is_none());
        let built = r.build(ScalerContext::new("fixed", 0)).await.unwrap();
        let got = built.scaler().metrics_and_activity("s0-x").await.unwrap();
        assert!(got.active);
        assert!(built.push().is_none());
    }
}
