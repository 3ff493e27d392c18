//! The CRD schema of `spec.nodeSelector`: upstream's LabelSelector shape with the
//! checks the API server applies to a Deployment's selector (operators, values per
//! operator, key and value syntax) and size bounds, so a bad selector is refused
//! at admission instead of being ignored by the controller. `validate.rs`
//! (`node_selector_errors`) applies the same rules offline.

use schemars::{Schema, SchemaGenerator, json_schema};

use crate::validate::{MAX_SELECTOR_EXPRESSIONS, MAX_SELECTOR_LABELS, MAX_SELECTOR_VALUES};

/// `schema_with` for `GpuNodeProfileSpec::node_selector`.
pub fn node_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "Which nodes this profile governs (a label selector). A node matched by two profiles is reported as a Conflict and left as it is.",
        "properties": {
            "matchLabels": {
                "type": "object",
                "description": "Labels a node must carry, all of them.",
                "maxProperties": MAX_SELECTOR_LABELS,
                "additionalProperties": { "type": "string", "maxLength": 63 },
                "x-kubernetes-validations": [
                    {
                        "rule": "self.all(k, !format.qualifiedName().validate(k).hasValue())",
                        "message": "nodeSelector.matchLabels keys must be valid label keys, like example.com/gpu-pool"
                    },
                    {
                        "rule": "self.all(k, !format.labelValue().validate(self[k]).hasValue())",
                        "message": "nodeSelector.matchLabels values must be valid label values"
                    },
                    {
                        "rule": "self.all(k, !k.matches('^([^/]*\\\\.)?gpuready\\\\.io/'))",
                        "message": "nodeSelector must not read keys gpuready writes itself (gpuready.io/ and its subdomains): the selection would change with gpuready's own writes"
                    }
                ]
            },
            "matchExpressions": {
                "type": "array",
                "description": "Label requirements a node must meet, all of them.",
                "maxItems": MAX_SELECTOR_EXPRESSIONS,
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": {
                            "type": "string",
                            "description": "The label key the requirement applies to.",
                            "maxLength": 317,
                            "x-kubernetes-validations": [{
                                "rule": "!format.qualifiedName().validate(self).hasValue()",
                                "message": "nodeSelector.matchExpressions key must be a valid label key"
                            }, {
                                "rule": "!self.matches('^([^/]*\\\\.)?gpuready\\\\.io/')",
                                "message": "nodeSelector must not read keys gpuready writes itself (gpuready.io/ and its subdomains): the selection would change with gpuready's own writes"
                            }]
                        },
                        "operator": {
                            "type": "string",
                            "description": "In, NotIn, Exists or DoesNotExist.",
                            "enum": ["In", "NotIn", "Exists", "DoesNotExist"]
                        },
                        "values": {
                            "type": "array",
                            "description": "Label values: at least one for In and NotIn, none for Exists and DoesNotExist.",
                            "maxItems": MAX_SELECTOR_VALUES,
                            "items": { "type": "string", "maxLength": 63 },
                            "x-kubernetes-validations": [{
                                "rule": "self.all(v, !format.labelValue().validate(v).hasValue())",
                                "message": "nodeSelector.matchExpressions values must be valid label values"
                            }]
                        }
                    },
                    "x-kubernetes-validations": [{
                        "rule": "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)",
                        "message": "nodeSelector.matchExpressions: In and NotIn need at least one value, Exists and DoesNotExist take none"
                    }]
                }
            }
        }
    })
}
