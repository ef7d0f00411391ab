"""mirrorflow's configuration: an MM2 `connect-mirror-maker.properties`, read unchanged.

    config = load_config("mm2.properties")          # raises ConfigError listing every error
    for flow in config.replication_flows:           # S->T with S->T.enabled=true
        flow.topic_filter, flow.policy, flow.replication_factor, flow.replicate_schedule
        flow.source_consumer_config()                # librdkafka properties for confluent-kafka

Keys, defaults and precedence are MM2's (see layers.py and keys.py); mirrorflow's own keys
start with `mirrorflow.` (mirrorflow_keys.py); Java client settings become librdkafka ones
(librdkafka.py); secrets never appear in reprs or `redacted()` views.
"""

from mirrorflow.config.airflow_connections import fetch_connection_extra, merge_connection_extra
from mirrorflow.config.flow import FlowConfig
from mirrorflow.config.librdkafka import mapping_markdown
from mirrorflow.config.loading import load_config
from mirrorflow.config.mirrorflow_keys import MIRRORFLOW_KEYS, MirrorflowKey, mirrorflow_keys_markdown
from mirrorflow.config.model import ClusterConfig, MirrorConfig, parse_config
from mirrorflow.config.problems import ConfigError, Problem, Severity
from mirrorflow.config.secrets import REDACTED, is_secret_key, redact_client_config
from mirrorflow.config.validation import validate

__all__ = [
    "MIRRORFLOW_KEYS",
    "REDACTED",
    "ClusterConfig",
    "ConfigError",
    "FlowConfig",
    "MirrorConfig",
    "MirrorflowKey",
    "Problem",
    "Severity",
    "fetch_connection_extra",
    "is_secret_key",
    "load_config",
    "mapping_markdown",
    "merge_connection_extra",
    "mirrorflow_keys_markdown",
    "parse_config",
    "redact_client_config",
    "validate",
]
