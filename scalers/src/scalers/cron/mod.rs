//! `cron`: scale to `desiredReplicas` between `start` and `end`, in a time zone.

pub mod schedule;

use async_trait::async_trait;
use jiff::tz::TimeZone;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use self::schedule::Schedule;
use crate::context::{Clock, ScalerContext};
use crate::error::{ScalerError, TriggerId};
use crate::metadata::{Found, MetadataParser, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::scaler::{BuiltScaler, MetricValue, MetricsAndActivity, Scaler};

const TIMEZONE: Param = Param::required("timezone");
const START: Param = Param::required("start");
const END: Param = Param::required("end");
const DESIRED_REPLICAS: Param = Param::required("desiredReplicas");

/// The parameters of `cron`.
pub const PARAMS: &[Param] = &[TIMEZONE, START, END, DESIRED_REPLICAS];

/// KEDA's encoding of a cron expression in the metric name.
fn encode(expr: &str) -> String {
    expr.replace(' ', "")
        .replace('*', "x")
        .replace('/', "Sl")
        .replace('?', "Qm")
        .replace(',', "Cm")
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct CronConfig {
    /// The zone the expressions are read in.
    pub timezone: TimeZone,
    /// When the window opens.
    pub start: Schedule,
    /// When it closes.
    pub end: Schedule,
    /// The value reported inside the window.
    pub desired_replicas: i64,
    /// `s<i>-cron-<tz>-<start>-<end>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

fn schedule(
    p: &MetadataParser<'_>,
    param: &Param,
    found: Found<'_>,
) -> Result<Schedule, crate::MetadataError> {
    Schedule::parse(found.value)
        .map_err(|e| p.invalid(param, found, &format!("a valid cron expression ({e})")))
}

impl CronConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// Missing parameters, an unknown zone, invalid expressions, `start` equal to `end`,
    /// `desiredReplicas` of 0, `useCachedMetrics` set.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let missing = |param: &Param| {
                p.error(crate::MetadataErrorKind::Missing {
                    param: param.name.to_string(),
                })
            };
            let tz_found = p.find(&TIMEZONE)?.ok_or_else(|| missing(&TIMEZONE))?;
            let timezone = TimeZone::get(tz_found.value)
                .map_err(|_| p.invalid(&TIMEZONE, tz_found, "a known IANA time zone"))?;
            let start_found = p.find(&START)?.ok_or_else(|| missing(&START))?;
            let end_found = p.find(&END)?.ok_or_else(|| missing(&END))?;
            let start = schedule(p, &START, start_found)?;
            let end = schedule(p, &END, end_found)?;
            if start_found.value == end_found.value {
                return Err(p.rule("parameters \"start\" and \"end\" must differ"));
            }
            let desired_replicas: i64 = p.get(&DESIRED_REPLICAS)?;
            if desired_replicas == 0 {
                return Err(p.rule("parameter \"desiredReplicas\" must not be 0"));
            }
            if ctx.use_cached_metrics {
                return Err(p.rule("useCachedMetrics is not supported by the cron scaler"));
            }
            let name = format!(
                "cron-{}-{}-{}",
                tz_found.value,
                encode(start_found.value),
                encode(end_found.value)
            );
            Ok(Self {
                timezone,
                start,
                end,
                desired_replicas,
                metric_name: ctx.metric_name(&name),
                metric_type,
            })
        })?)
    }

    /// KEDA's rule: active unless the next start comes before the next end, i.e. active iff
    /// `now` lies inside a window `[start, end)`.
    ///
    /// # Errors
    /// A schedule that never fires.
    pub fn is_active(&self, now: jiff::Timestamp) -> Result<bool, String> {
        let next_start = self
            .start
            .next_after(now, &self.timezone)
            .ok_or("the start schedule never fires")?;
        let next_end = self
            .end
            .next_after(now, &self.timezone)
            .ok_or("the end schedule never fires")?;
        Ok(next_start >= next_end)
    }
}

/// The cron scaler. Reads the time from the context's [`Clock`].
pub struct CronScaler {
    config: CronConfig,
    clock: Clock,
    trigger: TriggerId,
}

impl CronScaler {
    /// Parses the trigger.
    ///
    /// # Errors
    /// See [`CronConfig::parse`].
    pub fn new(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        Ok(Self {
            config: CronConfig::parse(ctx)?,
            clock: ctx.clock.clone(),
            trigger: ctx.trigger_id(),
        })
    }
}

#[async_trait]
impl Scaler for CronScaler {
    /// Target 1, so the HPA's desired replica count equals the reported value.
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target(self.config.metric_type, 1),
        )]
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let active =
            self.config
                .is_active(self.clock.now())
                .map_err(|message| ScalerError::Unexpected {
                    trigger: self.trigger.clone(),
                    message,
                })?;
        let value = if active {
            self.config.desired_replicas as f64
        } else {
            0.0
        };
        Ok(MetricsAndActivity {
            values: vec![MetricValue::new(metric_name, value)],
            active,
        })
    }

    async fn close(&self) {}
}

/// Factory of `cron`.
///
/// # Errors
/// See [`CronConfig::parse`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(CronScaler::new(&ctx)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(metadata: &[(&str, &str)]) -> ScalerContext {
        ScalerContext {
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ScalerContext::new("cron", 0)
        }
    }

    const WORK_HOURS: &[(&str, &str)] = &[
        ("timezone", "Europe/Berlin"),
        ("start", "0 8 * * *"),
        ("end", "30 17 * * *"),
        ("desiredReplicas", "10"),
    ];

    #[test]
    fn metric_name_uses_keda_encoding() {
        let c = CronConfig::parse(&ctx(&[
            ("timezone", "Etc/UTC"),
            ("start", "*/5 1,2 ? * *"),
            ("end", "0 3 * * *"),
            ("desiredReplicas", "2"),
        ]))
        .unwrap();
        assert_eq!(c.metric_name, "s0-cron-Etc-UTC-xSl51Cm2Qmxx-03xxx");
        let c = CronConfig::parse(&ctx(&[
            ("timezone", "Etc/UTC"),
            ("start", "15 * * * *"),
            ("end", "16 * * * *"),
            ("desiredReplicas", "2"),
        ]))
        .unwrap();
        assert_eq!(c.metric_name, "s0-cron-Etc-UTC-15xxxx-16xxxx");
    }

    #[test]
    fn activity_at_fixed_instants() {
        let c = CronConfig::parse(&ctx(WORK_HOURS)).unwrap();
        // (instant, active); Berlin is UTC+1 in January, UTC+2 in July
        for (at, active) in [
            ("2024-01-15T06:59:59Z", false), // 07:59:59 local
            ("2024-01-15T07:00:00Z", true),  // 08:00 local: the window opens
            ("2024-01-15T12:00:00Z", true),
            ("2024-01-15T16:29:59Z", true),
            ("2024-01-15T16:30:00Z", false), // 17:30 local: closed
            ("2024-07-15T06:00:00Z", true),  // 08:00 CEST
            ("2024-07-15T05:59:00Z", false),
            // the spring-forward day (2024-03-31 in Berlin) keeps the local window
            ("2024-03-31T06:00:00Z", true), // 08:00 CEST
            ("2024-03-31T05:59:00Z", false),
        ] {
            assert_eq!(c.is_active(at.parse().unwrap()), Ok(active), "{at}");
        }
    }

    #[tokio::test]
    async fn value_is_desired_replicas_when_active_else_zero() {
        let at: jiff::Timestamp = "2024-01-15T12:00:00Z".parse().unwrap();
        let scaler = CronScaler::new(&ScalerContext {
            clock: Clock::fixed(at),
            ..ctx(WORK_HOURS)
        })
        .unwrap();
        let r = scaler.metrics_and_activity("s0-cron").await.unwrap();
        assert_eq!((r.values[0].value, r.active), (10.0, true));
        let night: jiff::Timestamp = "2024-01-15T22:00:00Z".parse().unwrap();
        let scaler = CronScaler::new(&ScalerContext {
            clock: Clock::fixed(night),
            ..ctx(WORK_HOURS)
        })
        .unwrap();
        let r = scaler.metrics_and_activity("s0-cron").await.unwrap();
        assert_eq!((r.values[0].value, r.active), (0.0, false));
        let spec = &scaler.metric_specs()[0];
        let target = &spec.external.as_ref().unwrap().target;
        assert_eq!(target.average_value.as_ref().unwrap().0, "1");
    }

    #[test]
    fn parse_errors() {
        let with = |k: &str, v: &str| -> Vec<(String, String)> {
            let mut m: Vec<(String, String)> = WORK_HOURS
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .filter(|(a, _)| a != k)
                .collect();
            if !v.is_empty() {
                m.push((k.to_string(), v.to_string()));
            }
            m
        };
        for (key, value, expected) in [
            (
                "timezone",
                "",
                r#"trigger 0 (cron): missing required parameter "timezone""#,
            ),
            (
                "timezone",
                "Mars/Olympus",
                r#"trigger 0 (cron): parameter "timezone": "Mars/Olympus" is not a known IANA time zone"#,
            ),
            (
                "start",
                "61 * * * *",
                r#"trigger 0 (cron): parameter "start": "61 * * * *" is not a valid cron expression (minute: 61 is out of range 0-59)"#,
            ),
            (
                "end",
                "0 8 * * *",
                r#"trigger 0 (cron): parameters "start" and "end" must differ"#,
            ),
            (
                "desiredReplicas",
                "0",
                r#"trigger 0 (cron): parameter "desiredReplicas" must not be 0"#,
            ),
            (
                "desiredReplicas",
                "ten",
                r#"trigger 0 (cron): parameter "desiredReplicas": "ten" is not a valid integer"#,
            ),
        ] {
            let m = with(key, value);
            let refs: Vec<(&str, &str)> = m.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
            let err = CronConfig::parse(&ctx(&refs)).unwrap_err().to_string();
            assert_eq!(err, expected, "{key}={value}");
        }
        let cached = ScalerContext {
            use_cached_metrics: true,
            ..ctx(WORK_HOURS)
        };
        assert_eq!(
            CronConfig::parse(&cached).unwrap_err().to_string(),
            "trigger 0 (cron): useCachedMetrics is not supported by the cron scaler"
        );
    }
}
