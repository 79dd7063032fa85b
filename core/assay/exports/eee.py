"""A bundle as Every Eval Ever records: the shared results schema of the EvalEval coalition.

One aggregate record per endpoint and condition, filed where the datastore wants it:
``data/<collection>/<developer>/<model>/<uuid>.json``. The collection is ``assay-<pack>-<condition>`` (a
condition changes what was measured, so the same model under two conditions is two records that must not
merge); the model's id is ``<developer>/<model>``: the endpoint's model name when it has a ``/`` (a
Hugging Face repository name, ``meta-llama/Llama-3.1-8B-Instruct``), else the backend as the developer
(``scripted``, ``local``, ``openai``) and the name flattened. Every rate metric of that endpoint and
condition (the same recomputed values ``assay report`` shows) is one evaluation result: the rate as the
score, its 95% Wilson interval and n as the uncertainty, k and the metric's description as details, and
``lower_is_better`` from the metric's headline role (a harm rate is better low).

The uuid in the file name is a UUID4-shaped digest of the bundle's run and the group, so the same bundle
gives the same files. Instance-level companions (``<uuid>_samples.jsonl``) are not written: the Inspect
export carries every work item.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from .. import __version__
from ..reports._load import ReportData

__all__ = ["EEE_SCHEMA_VERSION", "eee_records"]

#: The Every Eval Ever schema version these records follow.
EEE_SCHEMA_VERSION = "0.3.0"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _component(text: Any) -> str:
    """A portable datastore path component: anything but letters, digits, ``.``, ``_`` and ``-`` is ``-``."""
    cleaned = _UNSAFE.sub("-", str(text)).strip("-.") or "unnamed"
    return "assay-data" if cleaned == "data" else cleaned


def _uuid4(*parts: Any) -> str:
    """A UUID4-shaped id from a digest of the parts (version 4, RFC 4122 variant): stable for the same bundle."""
    digest = bytearray(hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x40
    digest[8] = (digest[8] & 0x3F) | 0x80
    text = digest.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _epoch(text: Any) -> str:
    """An RFC 3339 UTC time as Unix seconds (the schema's timestamps); 0 when the bundle recorded none."""
    import datetime

    if not text:
        return "0"
    moment = datetime.datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return str(int(moment.timestamp()))


def _model(endpoint: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(developer, model, model_info) of an endpoint entry of the run manifest."""
    model = endpoint.get("model") or {}
    name = str(model.get("name") or endpoint.get("id") or "unnamed")
    backend = str(endpoint.get("backend") or "unknown")
    if "/" in name and all(name.split("/")):
        developer, model_name = name.split("/", 1)
    else:
        developer, model_name = backend, name
    developer, model_name = _component(developer), _component(model_name.replace("/", "_"))
    details = {
        "deployment_type": "self_deployed" if backend in ("local", "scripted") else "unknown",
        "model_availability": "open_weights" if backend == "local" else "unknown",
        "assay_endpoint": str(endpoint.get("id")),
        "assay_backend": backend,
        "scripted": "true" if endpoint.get("scripted") else "false",
    }
    for field in ("revision", "weights_sha256", "quantization"):
        if model.get(field):
            details[field] = str(model[field])
    info = {
        "name": name,
        "id": f"{developer}/{model_name}",
        "developer": developer,
        "inference_platform": backend,
        "additional_details": details,
    }
    return developer, model_name, info


def eee_records(data: ReportData) -> list[tuple[str, dict[str, Any]]]:
    """(repository-relative path, record) per endpoint and condition that has rate values."""
    run = data.bundle.run
    pack = data.bundle.pack
    endpoints = {e.get("id"): e for e in run.get("endpoints", [])}
    groups: dict[tuple[str, str], list[Any]] = {}
    for value in data.values:
        group = value.group
        if set(group) == {"endpoint", "condition"} and value.ci_low is not None and value.value is not None:
            groups.setdefault((str(group["endpoint"]), str(group["condition"])), []).append(value)
    records = []
    for (endpoint, condition), values in groups.items():
        developer, model_name, info = _model(endpoints.get(endpoint, {"id": endpoint}))
        collection = _component(f"assay-{pack.get('name')}-{condition}")
        record_id = _uuid4("eee", run.get("run_id"), endpoint, condition)
        timestamp = _epoch(run.get("finished_at") or run.get("started_at"))
        source = {
            "dataset_name": f"assay pack {pack.get('name')} {pack.get('version')}",
            "source_type": "other",
            "additional_details": {"digest": str(pack.get("digest")), "condition": condition},
        }
        results = []
        for value in values:
            metric = data.metrics.get(value.metric)
            description = str(getattr(metric, "description", "") or value.metric)
            results.append(
                {
                    "evaluation_result_id": value.metric,
                    "evaluation_name": value.metric,
                    "source_data": source,
                    "metric_config": {
                        "evaluation_description": description,
                        "metric_id": f"assay.{value.metric}",
                        "metric_name": value.metric,
                        "metric_kind": "rate",
                        "metric_unit": "proportion",
                        "lower_is_better": getattr(metric, "headline", "") == "harm",
                        "score_type": "continuous",
                        "min_score": 0,
                        "max_score": 1,
                    },
                    "score_details": {
                        "score": float(value.value),
                        "details": {"k": str(value.numerator), "n": str(value.denominator)},
                        "uncertainty": {
                            "confidence_interval": {
                                "lower": float(value.ci_low),
                                "upper": float(value.ci_high),
                                "confidence_level": 0.95,
                                "method": "wilson",
                            },
                            "num_samples": int(value.denominator or 0),
                        },
                    },
                }
            )
        record = {
            "schema_version": EEE_SCHEMA_VERSION,
            "evaluation_id": f"{collection}/{info['id']}/{timestamp}",
            "evaluation_timestamp": timestamp,
            "retrieved_timestamp": timestamp,
            "source_metadata": {
                "source_name": f"assay {pack.get('name')} {pack.get('version')}, run {run.get('run_id')}",
                "source_type": "evaluation_run",
                "source_organization_name": "assay",
                "evaluator_relationship": "third_party",
                "additional_details": {"run_id": str(run.get("run_id")), "condition": condition},
            },
            "eval_library": {
                "name": "assay",
                "version": str(run.get("engine", {}).get("version", __version__)),
                "additional_details": {"spec_version": str(run.get("spec_version"))},
            },
            "model_info": info,
            "evaluation_results": results,
        }
        records.append((f"data/{collection}/{developer}/{model_name}/{record_id}.json", record))
    return records
