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

/// A factory with its declared parameters: how built-in scalers register.
pub struct Declared<F> {
    factory: F,
    params: &'static [Param],
}

impl<F> Declared<F> {
    /// `factory`, declaring `params`.
    pub fn new(factory: F, params: &'static [Param]) -> Self {
        Self { factory, params }
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
