//! Trigger types that read a vendor's HTTP API with no server installable here, each against
//! the test's own fake on loopback that follows the vendor's published API reference: it checks
//! the request as the service would (path, query, headers, authentication) and answers the
//! documented shapes, errors, throttling and pagination included. Each module cites the
//! reference it follows. One binary for all of them, to link once.

#[allow(dead_code)]
mod common;
#[allow(dead_code)]
#[path = "common/http.rs"]
mod http_server;

#[path = "vendor_apis/arangodb.rs"]
mod arangodb;
#[path = "vendor_apis/artemis.rs"]
mod artemis;
#[path = "vendor_apis/azure_aad.rs"]
mod azure_aad;
#[path = "vendor_apis/azure_pipelines.rs"]
mod azure_pipelines;
#[path = "vendor_apis/azure_servicebus.rs"]
mod azure_servicebus;
#[path = "vendor_apis/couchdb.rs"]
mod couchdb;
#[path = "vendor_apis/datadog.rs"]
mod datadog;
#[path = "vendor_apis/datadog_cluster_agent.rs"]
mod datadog_cluster_agent;
#[path = "vendor_apis/dynatrace.rs"]
mod dynatrace;
#[path = "vendor_apis/elastic_forecast.rs"]
mod elastic_forecast;
#[path = "vendor_apis/gcp.rs"]
mod gcp;
#[path = "vendor_apis/github_runner.rs"]
mod github_runner;
#[path = "vendor_apis/huawei_cloudeye.rs"]
mod huawei_cloudeye;
#[path = "vendor_apis/ibmmq.rs"]
mod ibmmq;
#[path = "vendor_apis/new_relic.rs"]
mod new_relic;
#[path = "vendor_apis/nsq.rs"]
mod nsq;
#[path = "vendor_apis/openstack.rs"]
mod openstack;
#[path = "vendor_apis/pulsar.rs"]
mod pulsar;
#[path = "vendor_apis/selenium_grid.rs"]
mod selenium_grid;
#[path = "vendor_apis/solace_dm.rs"]
mod solace_dm;
#[path = "vendor_apis/solarwinds.rs"]
mod solarwinds;
#[path = "vendor_apis/solr.rs"]
mod solr;
#[path = "vendor_apis/splunk.rs"]
mod splunk;
#[path = "vendor_apis/splunk_observability.rs"]
mod splunk_observability;
#[path = "vendor_apis/sumologic.rs"]
mod sumologic;
#[path = "vendor_apis/with_headers.rs"]
mod with_headers;
