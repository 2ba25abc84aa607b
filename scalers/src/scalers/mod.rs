//! The built-in scalers, one module per source.

pub mod activemq;
pub mod arangodb;
pub mod artemis;
pub mod aws_cloudwatch;
pub mod aws_dynamodb;
pub mod aws_dynamodb_streams;
pub mod aws_kinesis_stream;
pub mod aws_sqs_queue;
pub mod azure_app_insights;
pub mod azure_blob;
pub mod azure_data_explorer;
pub mod azure_eventhub;
pub mod azure_log_analytics;
pub mod azure_monitor;
pub mod azure_pipelines;
pub mod azure_queue;
pub mod azure_servicebus;
pub mod beanstalkd;
pub mod clickhouse;
pub mod couchdb;
pub mod cron;
pub mod datadog;
pub mod dynatrace;
pub mod elastic_forecast;
pub mod elasticsearch;
pub mod etcd;
pub mod external;
pub mod forgejo_runner;
pub mod gcp_cloudtasks;
pub mod gcp_pubsub;
pub mod gcp_stackdriver;
pub mod gcp_storage;
pub mod github_runner;
pub mod graphite;
pub mod http;
pub mod huawei_cloudeye;
pub mod ibmmq;
pub mod influxdb;
pub mod kafka;
pub mod kubernetes_resource;
pub mod kubernetes_workload;
pub mod loki;
pub mod metrics_api;
pub mod mysql;
pub mod nats_jetstream;
pub mod new_relic;
pub mod nsq;
pub mod opensearch;
pub mod openstack_metric;
pub mod openstack_swift;
pub mod postgresql;
pub mod predictkube;
pub mod prometheus;
pub mod pulsar;
pub mod rabbitmq;
pub mod redis;
pub mod resource;
pub mod search;
pub mod selenium_grid;
pub mod solace;
pub mod solace_dm;
pub mod solarwinds;
pub mod solr;
pub mod splunk;
pub mod splunk_observability;
pub mod sql;
pub mod sumologic;

use self::sql::SqlDatabase;
use crate::aws::source::AwsSource;
use crate::pooled::Keyed;
use crate::registry::{Declared, Registry};

/// Registers every built-in trigger type, each with the parse-only check of its metadata. Keep
/// the list sorted by type.
pub(crate) fn register_builtin(registry: &mut Registry) {
    use self::redis::connection::Topology;
    use self::redis::list::RedisListConfig;
    use self::redis::streams::RedisStreamsConfig;
    use self::redis::{LIST_PARAMS, STREAMS_PARAMS, list, streams};
    use self::resource::ResourceName;
    registry.register(
        "activemq",
        crate::pooled::declare::<activemq::ActiveMq>(activemq::PARAMS),
    );
    registry.register(
        "apache-kafka",
        Declared::new(kafka::apache::build, kafka::apache::PARAMS)
            .with_check(|ctx| kafka::apache::parse(ctx).map(drop)),
    );
    registry.register(
        "arangodb",
        crate::pooled::declare::<arangodb::ArangoDbConfig>(arangodb::PARAMS),
    );
    registry.register(
        "artemis-queue",
        crate::pooled::declare::<artemis::ArtemisConfig>(artemis::PARAMS),
    );
    registry.register(
        "aws-cloudwatch",
        crate::pooled::declare::<AwsSource<aws_cloudwatch::CloudWatchConfig>>(
            aws_cloudwatch::PARAMS,
        ),
    );
    registry.register(
        "aws-dynamodb",
        crate::pooled::declare::<AwsSource<aws_dynamodb::DynamoDbConfig>>(aws_dynamodb::PARAMS),
    );
    registry.register(
        "aws-dynamodb-streams",
        crate::pooled::declare::<AwsSource<aws_dynamodb_streams::DynamoDbStreamsConfig>>(
            aws_dynamodb_streams::PARAMS,
        ),
    );
    registry.register(
        "aws-kinesis-stream",
        crate::pooled::declare::<AwsSource<aws_kinesis_stream::KinesisConfig>>(
            aws_kinesis_stream::PARAMS,
        ),
    );
    registry.register(
        "aws-sqs-queue",
        crate::pooled::declare::<AwsSource<aws_sqs_queue::SqsConfig>>(aws_sqs_queue::PARAMS),
    );
    registry.register(
        "azure-app-insights",
        crate::pooled::declare::<Keyed<azure_app_insights::AppInsightsConfig>>(
            azure_app_insights::PARAMS,
        ),
    );
    registry.register(
        "azure-blob",
        crate::pooled::declare::<Keyed<azure_blob::AzureBlobConfig>>(azure_blob::PARAMS),
    );
    registry.register(
        "azure-data-explorer",
        crate::pooled::declare::<Keyed<azure_data_explorer::DataExplorerConfig>>(
            azure_data_explorer::PARAMS,
        ),
    );
    registry.register(
        "azure-log-analytics",
        crate::pooled::declare::<Keyed<azure_log_analytics::LogAnalyticsConfig>>(
            azure_log_analytics::PARAMS,
        ),
    );
    registry.register(
        "azure-monitor",
        crate::pooled::declare::<Keyed<azure_monitor::AzureMonitorConfig>>(azure_monitor::PARAMS),
    );
    registry.register(
        "azure-eventhub",
        crate::pooled::declare::<azure_eventhub::EventHubConfig>(azure_eventhub::PARAMS),
    );
    registry.register(
        "azure-pipelines",
        crate::pooled::declare::<azure_pipelines::PipelinesConfig>(azure_pipelines::PARAMS),
    );
    registry.register(
        "azure-queue",
        crate::pooled::declare::<Keyed<azure_queue::AzureQueueConfig>>(azure_queue::PARAMS),
    );
    registry.register(
        "azure-servicebus",
        crate::pooled::declare::<azure_servicebus::ServiceBusConfig>(azure_servicebus::PARAMS),
    );
    registry.register(
        "beanstalkd",
        crate::pooled::declare::<beanstalkd::BeanstalkdConfig>(beanstalkd::PARAMS),
    );
    registry.register(
        "cpu",
        Declared::new(resource::build_cpu, resource::PARAMS)
            .with_check(|ctx| resource::ResourceScaler::parse(ctx, ResourceName::Cpu).map(drop)),
    );
    registry.register(
        "clickhouse",
        crate::pooled::declare::<clickhouse::ClickHouseConfig>(clickhouse::PARAMS),
    );
    registry.register(
        "couchdb",
        crate::pooled::declare::<couchdb::CouchDbConfig>(couchdb::PARAMS),
    );
    registry.register(
        "cron",
        Declared::new(cron::build, cron::PARAMS)
            .with_check(|ctx| cron::CronConfig::parse(ctx).map(drop)),
    );
    registry.register(
        "datadog",
        crate::pooled::declare::<datadog::DatadogConfig>(datadog::PARAMS),
    );
    registry.register(
        "dynatrace",
        crate::pooled::declare::<dynatrace::DynatraceConfig>(dynatrace::PARAMS),
    );
    registry.register(
        "elastic-forecast",
        crate::pooled::declare::<elastic_forecast::ElasticForecastConfig>(elastic_forecast::PARAMS),
    );
    registry.register(
        "elasticsearch",
        crate::pooled::declare::<elasticsearch::ElasticsearchConfig>(elasticsearch::PARAMS),
    );
    registry.register(
        "etcd",
        Declared::new(etcd::build, etcd::PARAMS)
            .with_check(|ctx| etcd::EtcdConfig::parse(ctx).map(drop)),
    );
    registry.register(
        "external",
        Declared::new(external::build_external, external::PARAMS)
            .with_check(|ctx| external::ExternalConfig::parse(ctx).map(drop)),
    );
    registry.register(
        "external-push",
        Declared::new(external::build_external_push, external::PARAMS)
            .with_check(|ctx| external::ExternalConfig::parse(ctx).map(drop)),
    );
    registry.register(
        "forgejo-runner",
        crate::pooled::declare::<forgejo_runner::ForgejoRunnerConfig>(forgejo_runner::PARAMS),
    );
    registry.register(
        "github-runner",
        crate::pooled::declare::<github_runner::GithubRunnerConfig>(github_runner::PARAMS),
    );
    registry.register(
        "gcp-cloudtasks",
        crate::pooled::declare::<Keyed<gcp_cloudtasks::CloudTasksConfig>>(gcp_cloudtasks::PARAMS),
    );
    registry.register(
        "gcp-pubsub",
        crate::pooled::declare::<Keyed<gcp_pubsub::PubSubConfig>>(gcp_pubsub::PARAMS),
    );
    registry.register(
        "gcp-stackdriver",
        crate::pooled::declare::<Keyed<gcp_stackdriver::StackdriverConfig>>(
            gcp_stackdriver::PARAMS,
        ),
    );
    registry.register(
        "gcp-storage",
        crate::pooled::declare::<Keyed<gcp_storage::StorageConfig>>(gcp_storage::PARAMS),
    );
    registry.register(
        "graphite",
        crate::pooled::declare::<graphite::GraphiteConfig>(graphite::PARAMS),
    );
    registry.register(
        "http",
        Declared::new(http::build, http::PARAMS).with_check(|ctx| {
            http::HttpTrigger::parse(ctx)?;
            ctx.external_metric_type().map(drop).map_err(Into::into)
        }),
    );
    registry.register(
        "huawei-cloudeye",
        crate::pooled::declare::<huawei_cloudeye::CloudeyeConfig>(huawei_cloudeye::PARAMS),
    );
    registry.register(
        "ibmmq",
        crate::pooled::declare::<ibmmq::IbmMqConfig>(ibmmq::PARAMS),
    );
    registry.register(
        "influxdb",
        crate::pooled::declare::<influxdb::InfluxDb>(influxdb::PARAMS),
    );
    registry.register(
        "kafka",
        Declared::new(kafka::build, kafka::PARAMS)
            .with_check(|ctx| kafka::KafkaConfig::parse(ctx).map(drop)),
    );
    registry.register(
        "solace-direct-messaging",
        crate::pooled::declare::<solace_dm::SolaceDmConfig>(solace_dm::PARAMS),
    );
    registry.register(
        "solace-event-queue",
        crate::pooled::declare::<solace::SolaceConfig>(solace::PARAMS),
    );
    registry.register(
        "kubernetes-resource",
        Declared::new(kubernetes_resource::build, kubernetes_resource::PARAMS)
            .with_check(|ctx| kubernetes_resource::KubernetesResourceConfig::parse(ctx).map(drop)),
    );
    registry.register(
        "kubernetes-workload",
        Declared::new(kubernetes_workload::build, kubernetes_workload::PARAMS)
            .with_check(|ctx| kubernetes_workload::KubernetesWorkloadConfig::parse(ctx).map(drop)),
    );
    registry.register(
        "loki",
        crate::pooled::declare::<loki::LokiConfig>(loki::PARAMS),
    );
    registry.register(
        "memory",
        Declared::new(resource::build_memory, resource::PARAMS)
            .with_check(|ctx| resource::ResourceScaler::parse(ctx, ResourceName::Memory).map(drop)),
    );
    registry.register(
        "metrics-api",
        crate::pooled::declare::<metrics_api::MetricsApi>(metrics_api::PARAMS),
    );
    registry.register(
        "mysql",
        Declared::new(mysql::build, mysql::PARAMS)
            .with_check(|ctx| mysql::MySqlSettings::parse(ctx).map(drop)),
    );
    registry.register(
        "nats-jetstream",
        Declared::new(nats_jetstream::build, nats_jetstream::PARAMS)
            .with_check(|ctx| nats_jetstream::NatsJetStreamConfig::parse(ctx).map(drop)),
    );
    registry.register(
        "new-relic",
        crate::pooled::declare::<new_relic::NewRelicConfig>(new_relic::PARAMS),
    );
    registry.register("nsq", crate::pooled::declare::<nsq::NsqConfig>(nsq::PARAMS));
    registry.register(
        "opensearch",
        crate::pooled::declare::<opensearch::OpenSearchConfig>(opensearch::PARAMS),
    );
    registry.register(
        "openstack-metric",
        crate::pooled::declare::<openstack_metric::MetricConfig>(openstack_metric::PARAMS),
    );
    registry.register(
        "openstack-swift",
        crate::pooled::declare::<openstack_swift::SwiftConfig>(openstack_swift::PARAMS),
    );
    registry.register(
        "postgresql",
        Declared::new(postgresql::build, postgresql::PARAMS)
            .with_check(|ctx| postgresql::PgSettings::parse(ctx).map(drop)),
    );
    registry.register(
        "predictkube",
        crate::pooled::declare::<predictkube::PredictKubeConfig>(predictkube::PARAMS),
    );
    registry.register(
        "prometheus",
        crate::pooled::declare::<prometheus::PrometheusConfig>(prometheus::PARAMS),
    );
    registry.register(
        "pulsar",
        crate::pooled::declare::<pulsar::PulsarConfig>(pulsar::PARAMS),
    );
    registry.register(
        "rabbitmq",
        Declared::new(rabbitmq::build, rabbitmq::PARAMS)
            .with_check(|ctx| rabbitmq::RabbitMqConfig::parse(ctx).map(drop)),
    );
    registry.register(
        "redis",
        Declared::new(list::build_redis, LIST_PARAMS)
            .with_check(|ctx| RedisListConfig::parse(ctx, Topology::Standalone).map(drop)),
    );
    registry.register(
        "redis-cluster",
        Declared::new(list::build_redis_cluster, LIST_PARAMS)
            .with_check(|ctx| RedisListConfig::parse(ctx, Topology::Cluster).map(drop)),
    );
    registry.register(
        "redis-cluster-streams",
        Declared::new(streams::build_redis_cluster_streams, STREAMS_PARAMS)
            .with_check(|ctx| RedisStreamsConfig::parse(ctx, Topology::Cluster).map(drop)),
    );
    registry.register(
        "redis-sentinel",
        Declared::new(list::build_redis_sentinel, LIST_PARAMS)
            .with_check(|ctx| RedisListConfig::parse(ctx, Topology::Sentinel).map(drop)),
    );
    registry.register(
        "redis-sentinel-streams",
        Declared::new(streams::build_redis_sentinel_streams, STREAMS_PARAMS)
            .with_check(|ctx| RedisStreamsConfig::parse(ctx, Topology::Sentinel).map(drop)),
    );
    registry.register(
        "redis-streams",
        Declared::new(streams::build_redis_streams, STREAMS_PARAMS)
            .with_check(|ctx| RedisStreamsConfig::parse(ctx, Topology::Standalone).map(drop)),
    );
    registry.register(
        "selenium-grid",
        crate::pooled::declare::<selenium_grid::SeleniumGridConfig>(selenium_grid::PARAMS),
    );
    registry.register(
        "solarwinds",
        crate::pooled::declare::<solarwinds::SolarWindsConfig>(solarwinds::PARAMS),
    );
    registry.register(
        "solr",
        crate::pooled::declare::<solr::SolrConfig>(solr::PARAMS),
    );
    registry.register(
        "splunk",
        crate::pooled::declare::<splunk::SplunkConfig>(splunk::PARAMS),
    );
    registry.register(
        "splunk-observability",
        crate::pooled::declare::<splunk_observability::SplunkObservabilityConfig>(
            splunk_observability::PARAMS,
        ),
    );
    registry.register(
        "sumologic",
        crate::pooled::declare::<sumologic::SumologicConfig>(sumologic::PARAMS),
    );
}
