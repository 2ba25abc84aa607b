//! The built-in scalers, one module per source.

pub mod cron;
pub mod http;
pub mod kafka;
pub mod nats_jetstream;
pub mod prometheus;
pub mod rabbitmq;
pub mod redis;
pub mod resource;

use crate::registry::{Declared, Registry};

/// Registers every built-in trigger type. Keep the list sorted by type.
pub(crate) fn register_builtin(registry: &mut Registry) {
    use self::redis::{LIST_PARAMS, STREAMS_PARAMS, list, streams};
    registry.register("cpu", Declared::new(resource::build_cpu, resource::PARAMS));
    registry.register("cron", Declared::new(cron::build, cron::PARAMS));
    registry.register("http", Declared::new(http::build, http::PARAMS));
    registry.register("kafka", Declared::new(kafka::build, kafka::PARAMS));
    registry.register(
        "memory",
        Declared::new(resource::build_memory, resource::PARAMS),
    );
    registry.register(
        "nats-jetstream",
        Declared::new(nats_jetstream::build, nats_jetstream::PARAMS),
    );
    registry.register(
        "prometheus",
        Declared::new(prometheus::build, prometheus::PARAMS),
    );
    registry.register("rabbitmq", Declared::new(rabbitmq::build, rabbitmq::PARAMS));
    registry.register("redis", Declared::new(list::build_redis, LIST_PARAMS));
    registry.register(
        "redis-cluster",
        Declared::new(list::build_redis_cluster, LIST_PARAMS),
    );
    registry.register(
        "redis-cluster-streams",
        Declared::new(streams::build_redis_cluster_streams, STREAMS_PARAMS),
    );
    registry.register(
        "redis-sentinel",
        Declared::new(list::build_redis_sentinel, LIST_PARAMS),
    );
    registry.register(
        "redis-sentinel-streams",
        Declared::new(streams::build_redis_sentinel_streams, STREAMS_PARAMS),
    );
    registry.register(
        "redis-streams",
        Declared::new(streams::build_redis_streams, STREAMS_PARAMS),
    );
}
